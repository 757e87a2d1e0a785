"""Secret redaction applied to every text before ctxlifed stores or indexes it.

Rules:
- Pure: no I/O, no clock, no logging. ``redact(text)`` returns ``(new_text, count)``.
- A secret is replaced by ``[REDACTED:<type>]``; a ``<private>…</private>`` span (case-insensitive,
  multi-line; an unclosed ``<private>`` runs to the end of the text) is replaced by ``[PRIVATE]``.
- Families, applied in this order (specific before generic): private spans, PEM private-key blocks,
  runs holding written-out ``\\uXXXX`` escapes (decoded, redacted, replaced by their redacted
  decoding), vendor tokens by prefix (Anthropic ``sk-ant-``, OpenAI ``sk-``/``sk-proj-``, GitHub
  ``ghp_ gho_ ghu_ ghs_ ghr_ github_pat_``, GitLab ``glpat- gldt- glrt- …``, Slack ``xox[abeoprs]-``
  and webhooks, Stripe ``sk_/rk_`` live/test/prod and ``whsec_``, Google ``AIza``, npm ``npm_``, AWS
  ``AKIA ASIA ABIA ACCA A3T`` key ids, JWTs), then inside long token runs the rarer vendor tokens
  (``_RARE_VENDOR``: the prefixed rules of gitleaks' default config and trufflehog's common
  detectors: DigitalOcean, Vault ``hvs.``, SendGrid ``SG.``, Shopify, Atlassian, Hugging Face, …) and
  base64 runs hiding a secret (decoded when printable, <= 8 KB: a base64 PEM private key takes the
  wrapped lines after it), AWS secret keys in assignments, the password of ``scheme://user:pass@host``
  (the user is kept), the credential of an ``Authorization:`` header or of ``Bearer <token>``,
  ``.env``/code/YAML/JSON/XML/.netrc assignments to secret-named keys, command-line credentials
  (``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``docker login -p X``, ``redis-cli -a X``,
  ``--password X``), ``"auth"`` values that are base64 ``user:password`` (Docker's config), Telegram
  bot tokens, Azure SAS ``sig=``, and ``.pgpass`` lines (``host:port:database:user:password``).
- Vendor tokens must stand alone: the character before the prefix and the one after the token may not
  be a token character, so base64 blobs, hex SHAs and UUIDs are never cut open.
- Secret-named keys (assignment family). The key's LAST word decides, so ``secret_name``,
  ``token_type``, ``PASSWORD_MIN_LENGTH``, ``password_hash``, ``max_tokens`` are not secret names:
    strong: password, passwd, passphrase, passcode, secret, token, credential(s), authorization; pass
      and pwd only alone or after a credential-ish word (DB_PASS, mysql_pwd; not bypass, OLDPWD);
      key only after api/secret/private/access/auth/signing/encryption/master/client/… (API_KEY,
      apiKey, X-Api-Key, SECRET_KEY);
    weak: any other UPPER_CASE ``…_KEY`` env name (STRIPE_KEY);
    neither: everything else (``key``, ``cache_key``, ``eos_token``, ``next_page_token``).
- A value is redacted only when it looks like a literal secret:
    strong + quoted: any non-empty literal (``"password": "x"``) except references and placeholders
      (``"$VAR"``, ``"${X}"``, ``"{{ x }}"``, ``"<token>"``, ``"%(pw)s"``, ``"%s:%s"``, ``"***"``, paths,
      values without any letter or digit, hex colours ``"#ccc"``, bare scheme words ``"Bearer"``, and
      raw-string literals holding a backslash (regexes), ``"_PrivateTypeName"`` forward references);
    strong + bare: a token of >= 8 characters with >= 2 character classes (lower/upper/digit/symbol)
      that is not an identifier without digits, a dotted name, a number, a path, a reference, a
      YAML tag/anchor, a URL, a ``k=v`` pair, a function call or a subscript; trailing ``.,:`` is
      sentence punctuation, not part of the value. So ``password = getpass()``,
      ``token = request.headers.get(...)``, ``api_key: str``, ``password = os.environ["PW"]`` stay;
    strong + bare on an .env line (UPPER_CASE name, ``=`` or ``: `` with no space before, nothing
      after the value but a comment or a command): any literal of >= 3 characters but a reference,
      ``true``/``none``…, or an UPPER_CASE name (``DB_PASSWORD=abc1234`` goes, ``API_KEY=API_KEY``
      stays);
    weak: quoted or bare, >= 16 characters, no whitespace/``:``/``.``, >= 2 of lower/upper/digit.
  A PEM block needs key material (16+ base64 characters) — a header-only constant is not a key;
  ``.netrc`` needs ``machine <host>|default`` … ``login <u>`` … ``password <p>``.
  Only the value is replaced; the name, separator and quotes are kept.
- Idempotent: a replacement never matches any family, and values holding ``[REDACTED:`` or
  ``[PRIVATE]`` are left alone, so ``redact(redact(x)[0]) == redact(x)``.
- Fast: regexes are precompiled and start with a literal (boundary checks come after it), which the
  regex engine scans for as fast as ``str.find``; a vendor pattern is searched directly, a family
  that does not start with a literal runs only when one of its trigger substrings is present; the
  assignment family of a long text runs one pattern per keyword (a literal start) instead of one
  alternation tried at every letter, their next matches kept in the order they start; the
  case-insensitive families run on a lower-cased copy (same length) rather than with
  ``re.IGNORECASE``. The rarer vendors and base64 are looked for only in the token runs around 16+
  letters/digits in a row, found with one ``bytes.find`` on a byte copy of character classes
  (``_long_runs``), and matched only where a run or a ``.+/=~$`` part of it starts with room left
  for the shortest such token (each vendor's branch starts with its own first character, so the
  regex engine passes over the branches that cannot start there); a run that yielded nothing
  without looking outside itself is not looked at again in the same text (a backtrace repeats its
  paths in every frame). Command-line flags are found by a literal first, then their line is
  looked at; a ``.pgpass`` line by its port, database and user fields (a literal ``:`` first: a
  clock time or a ``file:12:`` fails inside the regex engine), then the line is matched once from
  its start, without backtracking (linear in the text however many colons a line holds).
  Decoding is bounded (a base64 run is decoded once, its decoding is not decoded again) and
  skipped where the first two characters give a byte >= 0x80 (most hex SHAs). Costs are measured
  in bench/, not here.
- ``redact_obj`` walks dicts/lists/tuples iteratively (any depth; no recursion limit): a key goes
  through ``redact`` like any string (two keys redacted alike stay two: ``#2``); a non-empty string
  under a secret-named key is replaced wholesale (unless it is a reference/placeholder), under
  ``auth`` when it is base64 ``user:password``; every other string goes through ``redact``.
- Stdlib only: the hook shim loads this file by path on its spool path.
"""

from __future__ import annotations

import binascii
import functools
import re
from typing import Any

__all__ = ["redact", "redact_obj", "is_secret_key"]

_TOKCH = "A-Za-z0-9_\\-"  # characters a token is made of (regex class body)
_MARK = "[REDACTED:"
_PRIVATE = "[PRIVATE]"



class _Lazy:
    """A regex compiled the first time it is used. The hook shim loads this module only to redact a
    spool line, where most rules never run: compiling every rule up front cost more than the rest of
    its start. After its first use each method is stored on the instance, so nothing is left between
    a caller and the compiled pattern."""

    def __init__(self, pattern: Any, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self._flags)
        value = getattr(compiled, name)
        self.__dict__[name] = value
        return value


def compile_all() -> int:
    """Compile every rule now; returns how many. The daemon calls it before READY (it redacts every
    event, so each rule is used sooner or later, and the first hook should not pay for it); the shim
    never does (it redacts one spool line, where most rules never run)."""
    seen: set[int] = set()
    n = 0

    def visit(obj: Any) -> None:
        nonlocal n
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, _Lazy):
            if obj._compiled is None:
                obj._compiled = re.compile(obj.pattern, obj._flags)
                n += 1
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for x in obj:
                visit(x)
        elif isinstance(obj, dict):
            for x in obj.values():
                visit(x)

    for value in list(globals().values()):
        visit(value)
    return n


def _prefixed(prefix: str, body: str, *, end: str = f"(?![{_TOKCH}])") -> re.Pattern[str]:
    """A token regex that starts with a literal ``prefix`` (fast scan), then asserts nothing
    token-like precedes it, then ``body``, then asserts nothing token-like follows."""
    lit = re.escape(prefix)
    return _Lazy(f"{lit}(?<![{_TOKCH}]{lit}){body}{end}")


# ---- vendor tokens: (type, pattern, triggers) --------------------------------------------------
_VENDOR: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = [
    ("anthropic", _prefixed("sk-ant-", f"[{_TOKCH}]{{20,}}"), ("sk-ant-",)),
    (
        "openai",
        # digit lookahead: hyphenated prose ("sk-learn-is-a-library") is not a key
        _prefixed("sk-", f"(?!ant-)(?=[{_TOKCH}]*[0-9])(?:proj-|svcacct-|admin-)?[{_TOKCH}]{{20,}}"),
        ("sk-",),
    ),
    (
        "github",
        _Lazy(f"gh[pousr]_(?<![{_TOKCH}]gh[pousr]_)[A-Za-z0-9]{{30,255}}(?![{_TOKCH}])"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    ("github", _prefixed("github_pat_", "[A-Za-z0-9_]{22,255}"), ("github_pat_",)),
    (
        "gitlab",
        # personal, deploy, feed, runner, SCIM, mail, feature-flag, agent, OAuth-app, trigger, CI job
        _Lazy(
            f"gl(?<![{_TOKCH}]gl)(?:pat-|dt-|ft-|rt-|soat-|imt-|ffct-|agent-|oas-|ptt-|cbt-[0-9a-zA-Z]{{1,5}}_)"
            f"[{_TOKCH}]{{20,}}(?![{_TOKCH}])"
        ),
        ("glpat-", "gldt-", "glft-", "glrt-", "glsoat-", "glimt-", "glffct-", "glagent-", "gloas-", "glptt-", "glcbt-"),
    ),
    (
        "slack",
        _Lazy(f"xox[abeoprs]-(?<![{_TOKCH}]xox[abeoprs]-)[A-Za-z0-9\\-]{{10,}}(?![{_TOKCH}])"),
        ("xox",),
    ),
    ("slack", _prefixed("xapp-", "[0-9]-[A-Za-z0-9\\-]{10,}"), ("xapp-",)),
    # the host stays readable; the path after /services/ is the secret
    (
        "slack_webhook",
_Lazy("(?<=hooks\\.slack\\.com/(?:services|triggers)/)[A-Za-z0-9_/]{20,}"),
        ("hooks.slack.com",),
    ),
    (
        "stripe",
        _Lazy(
            f"(?:sk|rk)_(?:live|test|prod)_(?<![{_TOKCH}].._(?:live|test|prod)_)[A-Za-z0-9]{{16,}}(?![{_TOKCH}])"
        ),
        ("k_live_", "k_test_", "k_prod_"),
    ),
    ("stripe", _prefixed("whsec_", "[A-Za-z0-9]{24,}"), ("whsec_",)),
    ("google_api_key", _prefixed("AIza", f"[{_TOKCH}]{{35}}"), ("AIza",)),
    ("npm", _prefixed("npm_", "[A-Za-z0-9]{36}"), ("npm_",)),
    (
        "aws_access_key_id",
        # AKIA = long-term access key id, ASIA = temporary (STS); AIDA/AROA… are mere user/role ids
        _Lazy("A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9]A...)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    ("jwt", _prefixed("eyJ", f"[{_TOKCH}]{{8,}}\\.[{_TOKCH}]{{8,}}\\.[{_TOKCH}]{{8,}}"), ("eyJ",)),
]

# How each family is looked for. A pattern that starts with a literal (``_prefixed`` and the like) is
# searched directly: the regex engine's literal-prefix scan is as fast as ``in`` and covers all of
# the family's triggers in one pass (github has five). A pattern that starts with a look-behind or
# a character class (the Slack webhook path, Stripe's sk_/rk_) has no such scan: its triggers go first.
_VENDOR_PROBES: list[tuple[str, re.Pattern[str], tuple[str, ...], bool]] = [
    (typ, pat, triggers, pat.pattern[:1].isalnum()) for typ, pat, triggers in _VENDOR
]

# ---- rarer vendor tokens, looked for only inside long token runs --------------------------------
# A pattern per vendor searched over the whole text costs a pass each; these ~70 would double
# the cost of a text (bench/RESULTS.md). Every one of them holds a run of >= 16 letters/digits, so they
# are searched only inside the token runs around such a stretch (``_long_runs``), which are found
# with one ``bytes.find`` scan. Same boundaries as above: nothing token-like before or after.
_RARE_VENDOR: list[tuple[str, str]] = [
    ("1password", "ops_eyJ[A-Za-z0-9+/]{250,}={0,3}"),
    ("adobe", "p8e-[A-Za-z0-9]{32}"),
    ("age", "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("airtable", "pat[A-Za-z0-9]{14}\\.[a-f0-9]{64}"),
    ("alibaba", "LTAI[A-Za-z0-9]{20}"),
    ("artifactory", "AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59}"),
    ("atlassian", "ATATT3[A-Za-z0-9_\\-=]{186}"),
    ("azure_ad_client_secret", "[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\\-]{31,34}"),
    ("braintree", "access_token\\$(?:production|sandbox)\\$[a-z0-9]{16}\\$[a-f0-9]{32}"),
    ("clickhouse", "4b1d[A-Za-z0-9]{38}"),
    ("clojars", "CLOJARS_[A-Za-z0-9]{60}"),
    ("cloudflare", "v1\\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("contentful", "CFPAT-[A-Za-z0-9_\\-]{43}"),
    ("databricks", "dapi[a-f0-9]{32}(?:-[0-9])?"),
    ("digitalocean", "do[opr]_v1_[a-f0-9]{64}"),
    ("discord", "[MNO][A-Za-z0-9_\\-]{23,25}\\.[A-Za-z0-9_\\-]{6}\\.[A-Za-z0-9_\\-]{27,38}"),
    ("docker", "dckr_(?:pat|oat)_[A-Za-z0-9_\\-]{27,}"),
    ("doppler", "dp\\.(?:pt|st|ct|sa|scim|audit)\\.[A-Za-z0-9]{40,44}"),
    ("duffel", "duffel_(?:test|live)_[A-Za-z0-9_\\-=]{43}"),
    ("dynatrace", "dt0c01\\.[A-Za-z0-9]{24}\\.[A-Za-z0-9]{64}"),
    ("easypost", "EZ[AT]K[A-Za-z0-9]{54}"),
    ("facebook", "EAA[MC][A-Za-z0-9]{100,}"),
    ("flutterwave", "FLW(?:SECK|PUBK)(?:_TEST)?-[a-hA-H0-9]{12,32}(?:-X)?"),
    ("flyio", "fo1_[A-Za-z0-9_\\-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}"),
    ("frameio", "fio-u-[A-Za-z0-9_\\-=]{64}"),
    ("gitlab", "GR1348941[A-Za-z0-9_\\-]{20}|_gitlab_session=[0-9a-z]{32}"),
    ("google_oauth", "GOCSPX-[A-Za-z0-9_\\-]{28}|ya29\\.[A-Za-z0-9_\\-]{30,}|1//0[A-Za-z0-9_\\-]{40,}"),
    (
        "grafana",
        "eyJrIjoi[A-Za-z0-9]{70,400}={0,3}|glc_[A-Za-z0-9+/]{32,400}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    ),
    ("groq", "gsk_[A-Za-z0-9]{48,52}"),
    ("harness", "(?:pat|sat)\\.[A-Za-z0-9_\\-]{22}\\.[A-Za-z0-9]{24}\\.[A-Za-z0-9]{20}"),
    ("heroku", "HRKU-AA[0-9a-zA-Z_\\-]{58}"),
    ("huggingface", "(?:hf_|api_org_)[A-Za-z]{34}"),
    ("infracost", "ico-[A-Za-z0-9]{32}"),
    ("intra42", "s-s4t2(?:ud|af)-[a-f0-9]{64}"),
    ("langsmith", "lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    ("linear", "lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    ("mailchimp", "[a-f0-9]{32}-us[0-9]{1,2}"),
    ("mailgun", "(?:pub)?key-[a-f0-9]{32}"),
    ("mapbox", "sk\\.eyJ[A-Za-z0-9_\\-]{50,}\\.[A-Za-z0-9_\\-]{20,}"),
    ("maxmind", "[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    ("new_relic", "NR(?:AK|II|JS)-[A-Za-z0-9]{19,32}"),
    ("notion", "ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}"),
    ("octopus", "API-[A-Z0-9]{26}"),
    ("openshift", "sha256~[A-Za-z0-9_\\-]{43}"),
    ("perplexity", "pplx-[A-Za-z0-9]{48}"),
    ("pinecone", "pcsk_[A-Za-z0-9_]{40,}"),
    ("planetscale", "pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.\\-]{32,64}"),
    ("postman", "PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ("prefect", "pnu_[A-Za-z0-9]{36}"),
    ("pulumi", "pul-[a-f0-9]{40}"),
    ("pypi", "pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\\-]{50,1000}"),
    ("readme", "rdme_[a-z0-9]{70}"),
    ("replicate", "r8_[A-Za-z0-9]{37}"),
    ("rubygems", "rubygems_[a-f0-9]{48}"),
    ("scalingo", "tk-us-[A-Za-z0-9_\\-]{48}"),
    ("sendgrid", "SG\\.[A-Za-z0-9_\\-]{22}\\.[A-Za-z0-9_\\-]{43}"),
    ("sendinblue", "xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("sentry", "sntryu_[a-f0-9]{64}|sntrys_eyJ[A-Za-z0-9+/=_]{50,}"),
    ("settlemint", "sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}"),
    ("shippo", "shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    ("shopify", "shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("sourcegraph", "sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"),
    ("square", "EAAA[A-Za-z0-9_\\-]{22,60}|sq0(?:atp|csp)-[A-Za-z0-9_\\-]{22,43}"),
    ("supabase", "sbp_[a-f0-9]{40}"),
    ("terraform", "[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_\\-=]{60,70}"),
    ("twilio", "SK[0-9a-fA-F]{32}"),
    ("twitter", "A{22}[A-Za-z0-9]{80,100}"),
    ("typeform", "tfp_[A-Za-z0-9_\\-.=]{59}"),
    ("vault", "hv[sbr]\\.[A-Za-z0-9_\\-]{24,300}"),
    ("xai", "xai-[A-Za-z0-9]{80}"),
    ("yandex", "AQVN[A-Za-z0-9_\\-]{35,38}|t1\\.[A-Za-z0-9_\\-]+={0,2}\\.[A-Za-z0-9_\\-]{86}={0,2}"),
]
# One look-behind, then a branch per vendor; a branch ends with an empty group that names its
# vendor (``lastgroup``), so a branch starts with its own first item: the regex engine skips a branch
# whose first literal is not the next character without entering it (a group around the whole
# branch would be entered first, at every branch).
_RARE_RE = _Lazy(
    f"(?<![{_TOKCH}])(?:"
    + "|".join(f"(?:{body})(?P<v{i}>)" for i, (_t, body) in enumerate(_RARE_VENDOR))
    + f")(?![{_TOKCH}])"
)
_RARE_MIN = 20  # the fewest characters a branch of _RARE_RE matches (flutterwave's); tests check it
_RARE_TYPE = {f"v{i}": typ for i, (typ, _b) in enumerate(_RARE_VENDOR)}
_DISCORD = next(f"v{i}" for i, (typ, _b) in enumerate(_RARE_VENDOR) if typ == "discord")


def _is_discord_token(tok: str) -> bool:
    """A Discord bot token starts with the base64 of the bot's numeric id (not a dotted name)."""
    decoded = _b64_decoded(tok.split(".", 1)[0])
    return decoded is not None and decoded.isdigit()

# What a token run is made of: token characters plus what the formats above and base64 put in
# between (``. + / = ~ $``). A run is bounded by anything else (space, quote, ``:``, ``,``, …).
_RUN_CHARS = "A-Za-z0-9_\\-.+/=~$"
_RUN_SEP = _Lazy("[.+/=~$]")  # where a token inside a run can start
_RUN_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/=~$")
_RUN_RIGHT = _Lazy(f"[{_RUN_CHARS}]{{0,{1 << 16}}}")
_ALNUM_BYTES = bytes(97 if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
_CORE = b"a" * 16  # 16 letters/digits in a row: a token's body or base64, never a word

# ---- base64 that hides a secret: a plausible base64 run is decoded (bounded) and the decoded
# text is redacted; if anything is found, or it is ``user:password`` (Docker's "auth", Basic), the
# whole run goes. A long run (a file, an image) is only checked for a base64 PEM private key.
_B64_SEG = _Lazy("[A-Za-z0-9+/\\-_]{16,}={0,2}")
_B64_MAX = 8192
_B64_PEM = "LS0tLS1CRUdJTi"  # base64 of "-----BEGIN"
_B64_WRAPPED = _Lazy("(?:\\r?\\n[ \\t]*[A-Za-z0-9+/]{16,}={0,2})+")  # the lines that follow
_PRINTABLE = _Lazy(b"[\\t\\n\\r\\x20-\\x7e]+\\Z")
# A segment's first two characters give its first decoded byte's top six bits and its second's
# top two and low four: both bytes are below 0x80 (printable ones are) only when the first is
# worth 0-31 (A-Z a-f) and the second's low four bits are below 8 (A-H Q-X g-n w-z 0-3; the
# URL-safe "-" and "_" are worth 62 and 63). A segment starting otherwise is not decoded.
_B64_ASCII_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef")
_B64_ASCII_SECOND = frozenset("ABCDEFGHQRSTUVWXghijklmnwxyz0123")
_USERPASS = _Lazy("[^\\s:/@]{1,64}:(?!//)[^\\s]{3,}\\Z")

# ---- PEM private keys: BEGIN line, body (base64, headers, escaped newlines), optional END line -----
_PEM = _Lazy(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[A-Za-z0-9+/=\s:,.\\]|-(?!----)){0,65536}"
    r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)

_PEM_BODY = _Lazy(r"[A-Za-z0-9+/]{16}")  # a block without key material is just a marker

# ---- AWS secret access key in an assignment (lower-cased copy) -------------------------------
_Q = r"(?:\\?[\"'])?"  # an optional (JSON-escaped) quote
_AWS_SECRET = _Lazy(
    r"(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)"
    + _Q
    + r"[ \t]*(?:=>|:=|[:=])[ \t]*"
    + _Q
    + r"([a-z0-9/+]{40})(?![a-z0-9/+])"
)

# ---- URL userinfo password: scheme://user:pass@host --------------------------------------------
_URL_PASS = _Lazy(r"://([^\s:/@\[\]\"'<>\\]*):([^\s@/\[\]\"'<>\\]+)@")

# ---- Authorization header / Bearer token (lower-cased copy) ------------------------------------
_AUTH_HDR = _Lazy(
    r"authorization"
    + _Q
    + r"[ \t]*[:=][ \t]*"
    + _Q
    + r"[ \t]*(?:(bearer|basic|token|bot|digest|negotiate)[ \t]+)?"
    r"([a-z0-9\-._~+/]{8,}=*)(?![a-z0-9\-._~+/=\[])"
)
_SCHEME = _Lazy(r"(?i)(?:bearer|basic|token|bot|digest|negotiate)[ \t]")
_BEARER = _Lazy(r"bearer(?<![a-z0-9_]bearer)[ \t]+([a-z0-9\-._~+/]{16,}=*)(?![a-z0-9\-._~+/=\[])")

# ---- secret-named assignments (lower-cased copy) -------------------------------------------------
_END = r"(?:[\s\"'`,;()\[\]{}<>\\]|\Z)"  # what ends a bare value
_KWS = (r"pass(?:w(?:or)?d|phrase|code)?", "pwd", "secret", "token", "credentials?", "authorization", "key")
_KW = "(" + "|".join(_KWS) + ")"
_ASSIGN_REST = (
    _Q
    + r"(?:"
    r"[ \t]*:[ \t]*[a-z_][\w.]{0,40}(?:\[[^\]\n]{0,60}\])?(?:[ \t]*\|[ \t]*none)?[ \t]*=(?!=)"  # annotated
    r"|[ \t]*(?:=>|:=|[:=](?!=))"
    r")[ \t]*"
    r"(?:"
    r"\\\"(?P<ev>[^\\\n]*+(?:\\[^\"\n][^\\\n]*+)*+)\\\""  # JSON-escaped "…"
    r"|(?P<pfx>[rbu]{0,2})(?:"
    r"\"(?P<qv>[^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+)\""  # "…" (unrolled, possessive: linear time)
    r"|'(?P<qv1>[^'\\\n]*+(?:\\.[^'\\\n]*+)*+)'"  # '…'
    r")"
    # bare: >= 8 chars; not a call/subscript, not a plain or dotted identifier without digits
    r"|(?![a-z_]++" + _END + r")(?![a-z_$][\w$]*+(?:\.[a-z_$][\w$]*+)++" + _END + r")"
    r"(?P<bv>[^\s\"'`,;()\[\]{}<>\\]{3,}+)(?![(\[])"
    r")"
)
_ASSIGN = _Lazy(_KW + _ASSIGN_REST)
# The same, one pattern per keyword: each starts with its keyword, a literal the regex engine scans
# for fast. ``_ASSIGN`` starts with an alternation, tried at every p/s/t/c/a/k of the text (and
# "pass" is in every "PASSED" of a test run): ~10 ns a byte. ``_assign_matches`` merges them.
_ASSIGN_BY_KW = [_Lazy(f"({kw})" + _ASSIGN_REST) for kw in _KWS]
_XML = _Lazy(
    r"<([a-z0-9_.:\-]{0,60}?(?:passw(?:or)?d|passphrase|secret|token|api[_\-]?key|credentials?))>"
    r"([^<\n]{1,512})</\1>"
)  # <password>…</password> (maven settings.xml and the like)
_NETRC = _Lazy(r"(?:machine[ \t]+\S+|default)\s+login[ \t]+\S+\s+password[ \t]+([^\s\"'<>]+)")  # .netrc
_KEY_NAME = _Lazy(
    r"(pass(?:w(?:or)?d|phrase|code)?|pwd|secret|token|credentials?|authorization|cookie|key)[\"']?\Z",
    re.I,
)

_PASS_PREFIXES = frozenset(
    "db database user admin root smtp mail email ftp sftp ssh redis mysql postgres pg psql mongo "
    "ldap proxy app api login http basic sudo vnc wifi keystore store ssl tls bind".split()
)
_KEY_PREFIXES = frozenset(
    "api apis secret private access auth signing encryption encrypt master client app service "
    "webhook deploy admin consumer session license subscription account shared hmac jwt "
    "storage openai anthropic stripe google gemini mistral groq cohere sendgrid mailgun twilio "
    "github gitlab slack azure aws gcp firebase algolia pusher".split()
)
_WEAK_KEY_EXCLUDED = frozenset(
    "public primary foreign sort partition cache lookup dict map hash index unique cursor group "
    "routing pagination object bucket row column field env config setting settings i18n "
    "translation message cookie hot short long kv idempotency dedup dedupe redis s3 ssh".split()
)
_TOKEN_EXCLUDED = frozenset(
    "page next prev previous pagination continuation cursor sync max min num total input output "
    "cache stop eos bos pad unk sep cls mask special start end new prompt completion reasoning "
    "thinking count counts".split()
)

_IDENT = _Lazy(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOTTED = _Lazy(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+\Z")
_NUMBER = _Lazy(r"[+-]?[0-9][0-9_.,eE+-]*\Z")
_LAST_WORD = _Lazy(r"([A-Z]?[a-z]+|[A-Z]+|[0-9]+)\Z")
_ENV_REF = _Lazy(r"\$(?:\{|\(|[A-Za-z_])")
_DRIVE = _Lazy(r"[A-Za-z]:\\")
_PLACEHOLDER = _Lazy(r"%[-#0-9.]*[sdrifx]|\{[^{}]*\}")
_ALNUM = _Lazy(r"[^\W_]")
_CLASS_RES = (_Lazy("[a-z]"), _Lazy("[A-Z]"), _Lazy("[0-9]"), _Lazy("[^A-Za-z0-9]"))
_NON_NAME = _Lazy(r"[^A-Za-z0-9_.\-]")
_HEX_COLOUR = _Lazy(r"#[0-9A-Fa-f]{3,8}\Z")
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "oauth", "negotiate"})
_PRIVATE_RE = _Lazy(r"<private>.*?(?:</private>|\Z)", re.S)  # lower-cased copy
_PRIVATE_OPEN = _Lazy(r"<private>", re.I)  # starts with a literal "<": a fast scan
_WORDS = frozenset({"true", "false", "null", "none", "nil", "undefined", "yes", "no"})
_ASSIGN_TRIGGERS = ("pass", "pwd", "secret", "token", "credential", "authorization", "key")
_CLI_FLAG_RE = r" -(?:[pua]|-(?:pass|user|proxy-user|token|api-key|secret))"  # a flag that takes a credential


def _lower(text: str) -> str:
    """Lower-case without changing the length, so offsets found in the copy apply to ``text``."""
    low = text.lower()
    if len(low) == len(text):
        return low
    # U+0130 (İ) is the only code point whose lower case is two characters long
    return text.replace("\u0130", "i").lower()


def _classes(v: str) -> int:
    """How many of lower / upper / digit / other characters ``v`` holds (0-4)."""
    return sum(1 for r in _CLASS_RES if r.search(v))


def _is_reference(v: str) -> bool:
    """References and placeholders that name a secret without being one (quoted or bare)."""
    s = v.strip()
    if not s:
        return True
    c0 = s[0]
    if "[" in s and (_MARK in s or _PRIVATE in s):
        return True
    if (c0 == "$" and _ENV_REF.match(s)) or "{{" in s or "${" in s or "%(" in s:
        return True
    if (c0 == "<" and s[-1] == ">") or (c0 == "{" and s[-1] == "}"):
        return True
    if len(s) >= 3 and s.count(c0) == len(s):  # "***", "xxxxxxxx", "........"
        return True
    if not _ALNUM.search(_PLACEHOLDER.sub("", s) if ("%" in s or "{" in s) else s):
        return True  # "'", "%s:%s", "{user}:{pw}", "-"
    if (c0 == "#" and _HEX_COLOUR.match(s)) or s.lower() in _SCHEMES:
        return True  # Token: "#cccccc" (Pygments styles); default_token="Bearer"
    if c0 in "/~." and s.startswith(("/", "~/", "./", "../")):
        return True
    return len(s) > 2 and s[1] == ":" and bool(_DRIVE.match(s))


def _looks_secret_bare(v: str) -> bool:
    """A bare (unquoted) value that looks like a literal secret rather than code or prose."""
    if len(v) < 8 or _is_reference(v) or v.lower() in _WORDS:
        return False
    if v[0] in "$%@&*!|>#:" or "://" in v or "=" in v.rstrip("="):
        return False  # YAML tags/anchors/blocks, URLs, key=value pairs
    if _IDENT.match(v) and not any(c.isdigit() for c in v):
        return False  # an identifier or type name: getpass, Optional, SECRET_FROM_ENV
    if _DOTTED.match(v) or _NUMBER.match(v):
        return False  # request.headers.get, settings.SECRET_KEY, 12345678
    return _classes(v) >= 2


def _looks_secret_weak(v: str) -> bool:
    """Stricter test for values under weak names (UPPER_CASE ``…_KEY``)."""
    if len(v) < 16 or _is_reference(v) or any(c.isspace() or c in ":.=" for c in v.rstrip("=")):
        return False
    if _IDENT.match(v) and not any(c.isdigit() for c in v):
        return False
    lower = any("a" <= c <= "z" for c in v)
    upper = any("A" <= c <= "Z" for c in v)
    digit = any("0" <= c <= "9" for c in v)
    return lower + upper + digit >= 2


def _last_word(prefix: str) -> str:
    """The last word of a name prefix: 'SECRET_ACCESS_' -> 'ACCESS', 'secretAccess' -> 'Access'."""
    m = _LAST_WORD.search(prefix.rstrip("_-."))
    return m.group(1) if m else ""


@functools.lru_cache(maxsize=4096)
def _name_strength(name: str, kw_start: int) -> int:
    """0 = not a secret name, 1 = weak (UPPER_CASE ``…_KEY``), 2 = strong.

    ``name`` is the whole key name ending with the keyword; ``kw_start`` is where the keyword
    starts inside it; what precedes the keyword decides (see the module rules)."""
    kw = name[kw_start:].lower()
    prefix = name[:kw_start]
    glued = bool(prefix) and prefix[-1].isalpha()
    camel = glued and prefix[-1].islower() and name[kw_start].isupper()
    word = _last_word(prefix).lower()
    plow = prefix.lower()
    if kw in ("pass", "pwd", "passcode"):
        if word in _PASS_PREFIXES or (glued and not camel and any(plow.endswith(w) for w in _PASS_PREFIXES)):
            return 2
        return 2 if not word and not glued else 0  # "pass: …", "--pass=…"
    if kw == "key":
        if word in _KEY_PREFIXES or (glued and not camel and any(plow.endswith(w) for w in _KEY_PREFIXES)):
            return 2
        letters = [c for c in name if c.isalpha()]
        if len(letters) > 3 and all(c.isupper() for c in letters) and word not in _WEAK_KEY_EXCLUDED:
            return 1
        return 0
    if kw == "token" and word in _TOKEN_EXCLUDED:
        return 0
    return 2


def _key_strength(name: object) -> int:
    """Strength of a mapping key as a secret name (0, 1 weak, 2 strong)."""
    if not isinstance(name, str) or not name or len(name) > 200:
        return 0
    return _key_strength_str(name)


@functools.lru_cache(maxsize=4096)  # pure; payload keys repeat on every event
def _key_strength_str(name: str) -> int:
    m = _KEY_NAME.search(name)
    if not m:
        return 0
    kw = m.group(1).lower()
    if kw == "cookie":
        return 2
    prefix = name[: m.start(1)]
    if kw in ("pass", "pwd") and not prefix.strip("_-."):
        return 0  # {"pass": "yes"} in test results is not a password
    return _name_strength(name[: m.end(1)], m.start(1))


def is_secret_key(name: object) -> bool:
    """True when a mapping key names a secret strongly enough to redact its value wholesale."""
    return _key_strength(name) == 2


def redact(text: str) -> tuple[str, int]:
    """Return ``(text with secrets replaced, number of replacements)``. See the module rules.

    Redaction must be idempotent, and a replacement can, rarely, turn its neighbourhood into a new
    match. So after the first pass, the lines that hold a replacement marker are passed through the
    pipeline again until nothing changes (at most ``_MAX_ROUNDS`` passes in all). Only those lines
    can change: markers hold no trigger, and the families that span lines (PEM, <private>, .netrc)
    cannot be created by a marker.
    """
    if not isinstance(text, str) or not text:
        return text, 0
    text, total = _redact_once(text)
    rounds = 1
    n = total
    while n and rounds < _MAX_ROUNDS:
        text, n = _recheck_marked_lines(text)
        total += n
        rounds += 1
    return text, total


_MAX_ROUNDS = 4
_MARKER_RE = _Lazy(r"REDACTED:|\[PRIVATE\]")


def _recheck_marked_lines(text: str) -> tuple[str, int]:
    """Run the pipeline again on every line that holds a marker (merged line ranges)."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    for m in _MARKER_RE.finditer(text):
        if m.start() < pos:
            continue
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        ranges.append((start, end))
        pos = end
    if not ranges:
        return text, 0
    # one pipeline run over all marked lines, joined by a separator no family can cross
    joined, total = _redact_once(_LINE_SEP.join(text[a:b] for a, b in ranges))
    if not total:
        return text, 0
    parts = joined.split(_LINE_SEP)
    if len(parts) != len(ranges):  # cannot happen; stay correct anyway, line by line
        parts = [_redact_once(text[a:b])[0] for a, b in ranges]
    spans = [(a, b, new) for (a, b), new in zip(ranges, parts) if new != text[a:b]]
    return _splice(text, spans)[0], total


_LINE_SEP = "\n\x00\n"


# Secrets known by a literal next to them: a Telegram bot token's ``:AA``, an Azure SAS
# signature's ``sig=``, Docker's ``"auth"`` (base64 ``user:password``, too short for the runs).
_KEYED_LITERALS = [
    (":AA", _Lazy(r":(?<=[0-9]{8}:)(AA[A-Za-z0-9_\-]{33})(?![A-Za-z0-9_\-])"), "telegram"),
    ("sig=", _Lazy(r"sig=(?<=[?&]sig=)([A-Za-z0-9%+/=]{16,})"), "azure_sas"),
    ('"auth"', _Lazy(r'"auth"[ \t]*:[ \t]*"([A-Za-z0-9+/=]{8,1024})"'), "basic_auth"),
]


# Every family needs one of these substrings (vendor triggers as written; the rest in any case,
# a superset of ``_lower``'s folding). For a short string (most of a payload: ids, paths, names)
# one scan for all of them is cheaper than the families' own checks; a long one pays ~8 ns/byte
# per regex pass, so it goes straight to those checks.
_SHORT = 1024
_ANY_TRIGGER_RE = _Lazy(
    "|".join(re.escape(t) for _typ, _pat, ts in _VENDOR for t in ts)
    + "|(?i:<private>|private key|://|bearer|"
    + "|".join(re.escape(t) for t in (*_ASSIGN_TRIGGERS, "secret", "authorization"))
    + ")"
    + "|[A-Za-z0-9]{16}|\\\\u[0-9a-fA-F]{4}|:(?:[0-9]{1,5}|\\*):"  # long runs, escapes, .pgpass
    + "|" + "|".join(re.escape(lit) for lit, _p, _t in _KEYED_LITERALS)
    + "|" + _CLI_FLAG_RE  # command-line flags
)


def _redact_once(text: str, decode: bool = True) -> tuple[str, int]:
    if len(text) <= _SHORT and _ANY_TRIGGER_RE.search(text) is None:
        return text, 0
    count = 0

    # 1. <private> spans (found on the lower-cased copy, applied to the original by offsets)
    if _PRIVATE_OPEN.search(text):
        low = _lower(text)
        text, n = _splice(text, [(m.start(), m.end(), _PRIVATE) for m in _PRIVATE_RE.finditer(low)])
        count += n

    # 2. PEM private-key blocks
    if "PRIVATE KEY" in text:
        spans = [
            (m.start(), m.end(), "[REDACTED:private_key]") for m in _PEM.finditer(text) if _PEM_BODY.search(m.group())
        ]
        if spans:
            text, n = _splice(text, spans)
            count += n

    # 3. \uXXXX escapes written out: runs holding them are decoded and redacted
    if "\\u" in text:
        spans = _escaped_spans(text)
        if spans:
            text, n = _splice(text, spans)
            count += n

    # 4. vendor tokens, then the rarer ones and base64-hidden secrets inside long token runs
    for typ, pat, triggers, probe in _VENDOR_PROBES:
        if (pat.search(text) is not None) if probe else any(t in text for t in triggers):
            text, n = pat.subn(f"[REDACTED:{typ}]", text)
            count += n
    spans = _long_token_spans(text, decode)
    if spans:
        spans.sort()
        text, n = _splice(text, spans)
        count += n

    low = _lower(text)  # once per pass, for the case-insensitive families below
    # 4.-7. families found on the lower-cased copy; spans are collected, then spliced once
    spans3: list[tuple[int, int, str]] = []
    if "secret" in low and ("aws" in low or "access" in low):
        spans3 += [(m.start(1), m.end(1), "[REDACTED:aws_secret_key]") for m in _AWS_SECRET.finditer(low)]
    if "://" in text:
        for m in _URL_PASS.finditer(text):
            if not _is_reference(m.group(2)):
                spans3.append((m.start(2), m.end(2), "[REDACTED:url_password]"))
    if "authorization" in low:
        for m in _AUTH_HDR.finditer(low):
            val = text[m.start(2) : m.end(2)]
            scheme = m.group(1)
            if _IDENT.match(val) and not any(c.isdigit() for c in val):
                continue  # "Bearer YOUR_TOKEN", "Authorization: required"
            if scheme is None and not _looks_secret_bare(val):
                continue
            typ = "basic_auth" if scheme == "basic" else "bearer" if scheme in (None, "bearer") else "authorization"
            spans3.append((m.start(2), m.end(2), f"[REDACTED:{typ}]"))
    if "bearer" in low:
        for m in _BEARER.finditer(low):
            val = text[m.start(1) : m.end(1)]
            if any("0" <= c <= "9" for c in val) and _classes(val) >= 2 and not _DOTTED.match(val):
                spans3.append((m.start(1), m.end(1), "[REDACTED:bearer]"))
    if len(low) > _SHORT or any(t in low for t in _ASSIGN_TRIGGERS):  # long: each keyword's search is its check
        spans3 += _assignment_spans(text, low)
    if " -" in text:
        spans3 += _cli_spans(text)
    for literal, pat, typ in _KEYED_LITERALS:
        if literal in text:
            for m in pat.finditer(text):
                val = m.group(1)
                if typ != "basic_auth" or _is_basic_credential(val):
                    spans3.append((m.start(1), m.end(1), f"[REDACTED:{typ}]"))
    if ":" in text:
        spans3 += _pgpass_spans(text, low)
    if spans3:
        spans3.sort()
        text, n = _splice(text, spans3)
        count += n
    return text, count


def _long_runs(text: str) -> list[tuple[int, int]]:
    """The token runs (``_RUN_CHARS``) that hold 16+ letters/digits in a row, as ``(start, end)``.

    The stretches are found on a byte copy where every letter/digit is ``a`` and anything else a
    space (``encode`` with ``replace`` keeps one byte per character), by ``bytes.find`` of 16
    ``a``: a C scan, not a regex tried at every position. Each stretch is then widened to its run."""
    classes = text.encode("ascii", "replace").translate(_ALNUM_BYTES)
    pos = classes.find(_CORE)
    if pos < 0:
        return []
    runs: list[tuple[int, int]] = []
    end = 0
    while pos >= 0:
        if pos >= end:  # a stretch inside the run found last is that run
            start, lo = pos, max(0, pos - 400)
            while start > lo and text[start - 1] in _RUN_SET:
                start -= 1
            end = _RUN_RIGHT.match(text, pos).end()
            runs.append((start, end))
        stop = classes.find(b" ", pos)
        pos = classes.find(_CORE, stop) if stop >= 0 else -1
    return runs


def _long_token_spans(text: str, decode: bool) -> list[tuple[int, int, str]]:
    """Rare vendor tokens and base64-hidden secrets inside the long token runs of ``text``.

    A run that yields nothing, and whose result did not look outside the run, yields nothing
    wherever the same characters stand in the text, so a repeated run (a path in every frame of a
    backtrace) is looked at once per call. Only the base64 family looks outside a run: a segment
    at the run's start is skipped after ``basic `` (such a run is not remembered), and a PEM key
    takes the lines after it (a run with a span is not remembered)."""
    spans: list[tuple[int, int, str]] = []
    clean: set[str] = set()  # runs seen to yield nothing whatever surrounds them
    for a, b in _long_runs(text):
        run = text[a:b]
        if run in clean:
            continue
        found = False
        pos = 0
        last = len(run) - _RARE_MIN  # no token starts after this
        while 0 <= pos <= last:  # a token starts the run or follows one of . + / = ~ $ (tried there only)
            m = _RARE_RE.match(run, pos)
            if m is not None and (m.lastgroup != _DISCORD or _is_discord_token(m.group())):
                spans.append((a + m.start(), a + m.end(), f"[REDACTED:{_RARE_TYPE[m.lastgroup or '']}]"))
                found = True
            nxt = _RUN_SEP.search(run, m.end() if m is not None else pos)
            pos = nxt.end() if nxt is not None else -1
        if found:
            continue
        if not decode:
            clean.add(run)
            continue
        context = False
        before = len(spans)
        for m in _B64_SEG.finditer(run):
            s = m.start()
            # "basic " ends with a space, which no run holds: only a segment at the run's start
            # can follow it
            if s == 0 and a >= 6 and text[a - 6 : a].lower() == "basic ":
                context = True
                continue  # "Authorization: Basic …" is the header family's
            if run[s] not in _B64_ASCII_FIRST or run[s + 1] not in _B64_ASCII_SECOND:
                continue  # it decodes to a byte >= 0x80 first: not printable (a hex SHA, mostly)
            end = _b64_secret_end(text, a + s, a + m.end())
            if end:
                spans.append((a + s, end, "[REDACTED:base64]"))
        if not context and len(spans) == before:
            clean.add(run)
    return spans


def _b64_decoded(seg: str) -> str | None:
    """``seg`` decoded as (standard or URL-safe) base64 when that gives printable ASCII, else None."""
    body = seg.rstrip("=")
    if len(body) % 4 == 1:
        return None
    if "-" in body or "_" in body:
        if "+" in body or "/" in body:
            return None
        body = body.replace("-", "+").replace("_", "/")
    try:
        raw = binascii.a2b_base64(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 8 or _PRINTABLE.match(raw) is None:
        return None
    return raw.decode("ascii")


def _b64_secret_end(text: str, start: int, end: int) -> int:
    """Where the base64 run ``text[start:end]`` that hides a secret ends (0: it hides none). A run
    that decodes to the start of a PEM private key takes the base64 lines that follow with it."""
    seg = text[start:end]
    if len(seg) > _B64_MAX:
        seg = seg[: 64 if seg.startswith(_B64_PEM) else 0]
    decoded = _b64_decoded(seg[: len(seg) - len(seg) % 4] if len(seg) != end - start else seg)
    if decoded is None:
        return 0
    if "PRIVATE KEY" in decoded:
        wrapped = _B64_WRAPPED.match(text, end)
        return wrapped.end() if wrapped else end
    if _redact_once(decoded, decode=False)[1]:
        return end
    return 0


# ---- \uXXXX escapes written out in a text (a JSON file, a Python literal): the runs holding them
# are decoded and redacted; a run that hides a secret is replaced by its redacted decoding.
_ESCAPE = _Lazy(r"\\u[0-9a-fA-F]{4}")
_ESC_RUN_RIGHT = _Lazy(r"(?:[A-Za-z0-9_\-+/=.~]|\\u[0-9a-fA-F]{4}){0,4096}")


def _escaped_spans(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    end = 0
    for m in _ESCAPE.finditer(text):
        if m.start() < end:
            continue
        start, lo = m.start(), max(0, m.start() - 2400)
        while start > lo:  # back over token characters and whole escapes
            if text[start - 1] in _RUN_SET and text[start - 1] not in "$":
                start -= 1
            elif start - 6 >= lo and _ESCAPE.match(text, start - 6, start):
                start -= 6
            else:
                break
        end = _ESC_RUN_RIGHT.match(text, m.start()).end()
        run = text[start:end]
        decoded = _ESCAPE.sub(lambda e: chr(int(e.group()[2:], 16)), run)
        red, n = _redact_once(decoded)
        if n:
            spans.append((start, end, red))
    return spans


# ---- credentials on command lines and in .pgpass lines (lower-cased copy) -------------------------
_CLI = [
    # mysql -pSECRET (attached: "-p SECRET" would name a database)
    _Lazy(
        r"(?:mysql\w*|mariadb\w*)(?:[ \t]+(?:-[-\w]+(?:=\S+)?|'[^'\n]*'|\"[^\"\n]*\"|\w\S*))*?"  # args before
        r"[ \t]+-p([^\s'\"-][^\s'\"]*)"
    ),
    # curl/wget -u user:SECRET, --user=user:SECRET, --proxy-user …
    _Lazy(r"(?:curl|wget)\b[^\n|;&]*?[ \t](?:-u|--user|--proxy-user|-U)(?:=|[ \t]+)['\"]?[^\s:'\"]+:([^\s'\"@]+)"),
    # sshpass -p SECRET, docker/podman login -p SECRET, redis-cli -a SECRET
    _Lazy(
        r"(?:sshpass|(?:docker|podman)[ \t]+login|redis-cli)\b[^\n|;&]*?[ \t]-[pa][ \t]+['\"]?([^\s'\"-][^\s'\"]*)"
    ),
    # --password SECRET / --password=SECRET / --token SECRET (any tool)
    _Lazy(r"--(?:password|passwd|pass|token|api-key|secret)(?:=|[ \t]+)['\"]?([^\s'\"-][^\s'\"]*)"),
]
_CLI_FLAG = _Lazy(_CLI_FLAG_RE)
# host:port:database:user:password (database and user are names; "*" is any). A line is found by
# its port, database and user fields (a literal ":" first; a clock time or a "file:12:" fails inside
# the regex engine), then matched from its start without backtracking: a host is host characters
# with a letter, "." or "*" among them; no field holds a ":", so each runs to the next one; the
# password is all of the non-space characters after the user (a shorter one would be followed by
# one of them, not by the line's end), then only spaces, tabs, a "\r" before the line's end.
_PGPASS_FIELDS = _Lazy(r":(?:[0-9]{1,5}|\*):[a-z0-9_.\-*$]+:[a-z0-9_.\-*@$]+:")
_PGPASS_LINE = _Lazy(
    r"[0-9_\-]*+[a-z.*][a-z0-9_.\-*]*+:(?:[0-9]{1,5}|\*):"
    r"[a-z0-9_.\-*$]++:[a-z0-9_.\-*@$]++:([^\s]{3,}+)[ \t]*+\r?$",
    re.M,
)


def _cli_spans(text: str) -> list[tuple[int, int, str]]:
    """The secret of ``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``--password X``. A value
    set off by a space (not ``=``) must hold two character classes: ``--password to set`` is prose.
    Only the lines holding such a flag (``_CLI_FLAG``, a literal first) are looked at."""
    spans: list[tuple[int, int, str]] = []
    lines: list[tuple[int, int]] = []
    for f in _CLI_FLAG.finditer(text):
        if lines and f.start() < lines[-1][1]:
            continue
        ls = text.rfind("\n", 0, f.start()) + 1
        le = text.find("\n", f.end())
        lines.append((ls, len(text) if le < 0 else le))
    for (ls, le), pat in ((ln, p) for ln in lines for p in _CLI):
        for m in pat.finditer(text, ls, le):
            s, e = m.span(1)
            val = text[s:e].rstrip(".,;:)")
            if not val or _is_reference(val) or (val.isalpha() and val.isupper()) or val.lower() in _FLAG_WORDS:
                continue
            spaced = text[m.end(0) - len(m.group(1)) - 1] in " \t'\""
            if pat is _CLI[3] and spaced and (len(val) < 4 or _classes(val) < 2):
                continue
            spans.append((s, s + len(val), "[REDACTED:password]"))
    return spans


def _pgpass_spans(text: str, low: str) -> list[tuple[int, int, str]]:
    """``host:port:database:user:password`` lines (.pgpass): the password goes. The fields from the
    port to the user are found first (``_PGPASS_FIELDS``); the line of the first of them on a line
    is matched from its start (``_PGPASS_LINE``): a host holds no ``:``, so on a .pgpass line that
    first one follows the line's first ``:``. Each line is matched once, and each character is
    looked at a bounded number of times (back to the fields found before, on to the line's end)."""
    out = []
    prev = -1  # where the fields found last start
    for m in _PGPASS_FIELDS.finditer(low):
        start = low.rfind("\n", max(prev, 0), m.start()) + 1
        if prev >= 0 and start == 0:
            continue  # on the line of the fields found last: that line is matched already
        prev = m.start()
        line = _PGPASS_LINE.match(low, start)
        if line is None:
            continue
        s, e = line.span(1)
        if not _is_reference(text[s:e]) and not line.group(1).isdigit():
            out.append((s, e, "[REDACTED:password]"))
    return out


_FLAG_WORDS = frozenset({"stdin", "file", "prompt", "none", "true", "false", "flag", "option", "env"})


def _is_env_line(text: str, name: str, after_kw: int, value_end: int) -> bool:
    """``NAME=value`` or ``NAME: value`` with an UPPER_CASE name and nothing after the value on its
    line but space or a comment: an .env / compose / shell assignment, not code."""
    if not name.isupper() or text.startswith((" ", "\t"), after_kw):
        return False
    if not (text.startswith("=", after_kw) or text.startswith(": ", after_kw)):
        return False
    nl = text.find("\n", value_end)
    rest = text[value_end : len(text) if nl < 0 else nl].strip()
    # PGPASSWORD=x psql …, DB_PASS=x && …, a comment
    return not rest or rest[0] == "#" or rest[0].isalpha() or rest.startswith(("&&", "||", ";", "\\"))


def _looks_secret_env(v: str) -> bool:
    """A bare .env value: any literal of 3+ characters but a reference, a word such as ``true``,
    or an UPPER_CASE name (``API_KEY=API_KEY``, a pass-through)."""
    if len(v) < 3 or _is_reference(v) or v.lower() in _WORDS or v[0] in "$%@&*!|>#:":
        return False
    return not (_IDENT.match(v) and v.upper() == v and not any(c.isdigit() for c in v))


def _assignment_spans(text: str, low: str) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for m in _assign_matches(low):
        kw_start = m.start(1)
        stop = max(0, kw_start - 80)
        nn = _NON_NAME.search(text[stop:kw_start][::-1])  # nearest non-name character before the kw
        i = kw_start - nn.start() if nn else stop
        name = text[i : m.end(1)]
        strength = _name_strength(name, kw_start - i)
        if not strength:
            continue
        if m.group("bv") is not None:
            s, e = m.span("bv")
            val = text[s:e].rstrip(".,:")  # "…the token: REQUIRED." ends a sentence
            e = s + len(val)
            if strength == 1:
                ok = _looks_secret_weak(val)
            elif _is_env_line(text, name, m.end(1), e):
                ok = _looks_secret_env(val)  # DB_PASSWORD=abc1234: an .env file's literal, however short
            else:
                ok = _looks_secret_bare(val)
        else:
            grp = "qv" if m.group("qv") is not None else "qv1" if m.group("qv1") is not None else "ev"
            s, e = m.span(grp)
            val = text[s:e]
            if kw_start - i == 0 and name.lower() == "authorization" and _SCHEME.match(val):
                continue  # "Authorization": "Bearer …" is the header family's job (keeps its type)
            if "r" in (m.group("pfx") or "") and "\\" in val:
                continue  # a raw-string literal with a backslash is a regex, not a secret
            if val[:1] == "_" and _IDENT.match(val) and not any("0" <= c <= "9" for c in val):
                continue  # private_key: "_RSAPrivateKey" is a forward-referenced type name
            ok = _looks_secret_weak(val) if strength == 1 else not _is_reference(val)
        if ok:
            typ = "password" if name[kw_start - i :].lower().startswith(("pass", "pwd")) else "secret"
            out.append((s, e, f"[REDACTED:{typ}]"))
    if "</" in low:
        for m in _XML.finditer(low):
            name = text[m.start(1) : m.end(1)]
            kw = _KEY_NAME.search(name)
            val = text[m.start(2) : m.end(2)]
            if kw and _name_strength(name, kw.start(1)) == 2 and not _is_reference(val):
                typ = "password" if "pass" in name.lower() else "secret"
                out.append((m.start(2), m.end(2), f"[REDACTED:{typ}]"))
    if "login" in low and ("machine" in low or "default" in low):
        for m in _NETRC.finditer(low):
            if not _is_reference(text[m.start(1) : m.end(1)]):
                out.append((m.start(1), m.end(1), "[REDACTED:password]"))
    return out


def _assign_matches(low: str) -> Any:
    """Exactly ``_ASSIGN.finditer(low)``, faster on a long text: the next match of each keyword's
    own pattern, earliest first, each searched again from the end of the last match taken when it
    began before it (so overlaps resolve as a single left-to-right scan would). At one position
    at most one keyword can start (they differ in their first two letters), so the match there
    is the one the alternation finds. The next matches wait in a list kept in the order they start
    (never equal): the ones searched again are at its front, each put back where it now starts."""
    if len(low) <= _SHORT:
        yield from _ASSIGN.finditer(low)
        return
    heads: list[tuple[int, int, re.Match[str]]] = []
    for i, pat in enumerate(_ASSIGN_BY_KW):
        m = pat.search(low)
        if m is not None:
            heads.append((m.start(), i, m))
    heads.sort(key=lambda h: h[0])  # never compares match objects
    while heads:
        m = heads[0][2]
        yield m
        pos = m.end()
        while heads and heads[0][0] < pos:  # the match taken, and any that began inside it
            i = heads.pop(0)[1]
            found = _ASSIGN_BY_KW[i].search(low, pos)
            if found is not None:
                start = found.start()
                k = len(heads)
                while k and heads[k - 1][0] > start:
                    k -= 1
                heads.insert(k, (start, i, found))


def _splice(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, int]:
    """Replace ascending ``(start, end, replacement)`` spans; a span overlapping an earlier one is
    skipped. Returns the new text and the number of spans applied."""
    out: list[str] = []
    pos = 0
    applied = 0
    for s, e, rep in spans:
        if s < pos:
            continue
        out.append(text[pos:s])
        out.append(rep)
        pos = e
        applied += 1
    out.append(text[pos:])
    return "".join(out), applied


# Values no family can match, common in hook payloads (event and tool names, modes, session and
# tool-use ids): letters only in word case, or a lower-case UUID, or a tool-use id. No digits but
# the UUID's and id's, no separator an assignment or URL needs, no vendor prefix.
_PLAIN = _Lazy(r"[A-Z]?[a-z]+(?:[A-Z][a-z]+)*|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|toolu_[A-Za-z0-9]{8,64}")


def redact_obj(obj: Any) -> tuple[Any, int]:
    """Redact every string in a JSON-like structure; returns ``(new_obj, count)``.

    A key goes through :func:`redact` like any string (a secret used as a key is a secret; two keys
    redacted alike stay two: the second gets ``#2``). A non-empty string under a strongly
    secret-named key (:func:`is_secret_key`: password, token, secret, api_key, authorization,
    cookie, …) is replaced wholesale; under a weak name (UPPER_CASE ``…_KEY``) only when it looks
    like a secret; under ``auth`` (Docker's config) when it is base64 of ``user:password``. Values
    that are a reference or a placeholder (``"<redacted>"``, ``"${TOKEN}"``, ``"***"``, a path, a
    redaction marker) are left alone, as in text. Every other string goes through :func:`redact`.
    Dicts and lists are rebuilt, tuples stay tuples, other values are returned as they are. The
    walk is iterative: any depth is redacted, none can exhaust the stack.
    """
    total = 0

    def text(o: str) -> str:
        nonlocal total
        if len(o) <= 80 and _PLAIN.fullmatch(o):
            return o
        new, n = redact(o)
        total += n
        return new

    if not isinstance(obj, (dict, list, tuple)):
        return (text(obj) if isinstance(obj, str) else obj), total
    root: list[Any] = [None]
    tuples: list[tuple[Any, Any, list[Any]]] = []  # (parent, slot, list) to freeze, innermost last
    stack: list[tuple[Any, Any, Any]] = [(obj, root, 0)]  # (source, parent, slot in parent)
    while stack:
        o, parent, slot = stack.pop()
        if isinstance(o, str):
            parent[slot] = text(o)
        elif isinstance(o, dict):
            out: dict[Any, Any] = {}
            parent[slot] = out
            for k, v in o.items():
                nk = _redacted_key(k)
                if nk is not k:
                    total += 1
                    base, i = nk, 2
                    while nk in out or nk in o:
                        nk, i = f"{base}#{i}", i + 1
                strength = _key_strength(k) if isinstance(v, str) and v.strip() else 0
                if strength and not _is_reference(v) and (strength == 2 or _looks_secret_weak(v)):
                    kwl = str(k).lower()
                    out[nk] = "[REDACTED:password]" if ("pass" in kwl or "pwd" in kwl) else "[REDACTED:secret]"
                    total += 1
                elif k == "auth" and isinstance(v, str) and _is_basic_credential(v):
                    out[nk] = "[REDACTED:basic_auth]"
                    total += 1
                elif isinstance(v, (str, dict, list, tuple)):
                    out[nk] = None
                    stack.append((v, out, nk))
                else:
                    out[nk] = v
        elif isinstance(o, (list, tuple)):
            lst: list[Any] = [None] * len(o)
            parent[slot] = lst
            if isinstance(o, tuple):
                tuples.append((parent, slot, lst))
            for j, v in enumerate(o):
                if isinstance(v, (str, dict, list, tuple)):
                    stack.append((v, lst, j))
                else:
                    lst[j] = v
        else:
            parent[slot] = o
    for parent, slot, lst in reversed(tuples):  # inner tuples are frozen before the lists holding them
        parent[slot] = tuple(lst)
    return root[0], total


_CLEAN_KEYS: set[str] = set()  # keys seen to need no redaction (payload keys repeat on every event)


def _redacted_key(k: Any) -> Any:
    """``k`` itself when it needs no redaction, else its redacted form (a new string)."""
    if not isinstance(k, str) or k in _CLEAN_KEYS:
        return k
    new, n = redact(k)
    if not n:
        if len(_CLEAN_KEYS) < 4096 and len(k) <= 64:
            _CLEAN_KEYS.add(k)
        return k
    return new


def _is_basic_credential(v: str) -> bool:
    """A base64 ``user:password`` (Docker's ``auth``, HTTP Basic)."""
    s = v.strip()
    if len(s) < 8 or len(s) > 1024:
        return False
    decoded = _b64_decoded(s)
    return decoded is not None and _USERPASS.match(decoded) is not None
