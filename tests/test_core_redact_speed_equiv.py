"""ctxlifed.core.redact's fast paths give exactly the results of their reference forms.

The reference forms below are the implementations the fast ones replaced, copied verbatim (only the
names of their own regexes are prefixed ``_REF_``): the long-token-run scan looked at every run of
a text afresh and matched each vendor branch inside a named group; the .pgpass scan matched each line
holding a ``:port:`` from its start; the assignment keywords' matches were merged by sorting the
next match of each keyword after every match taken. ``_reference_redact`` is ``redact`` with all
three put back.
"""

from __future__ import annotations

import base64
import contextlib
import random
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_core_redact import make_values, rule_values

from ctxlifed.core import redact as R
from ctxlifed.core.redact import (
    _ASSIGN,
    _ASSIGN_BY_KW,
    _B64_SEG,
    _DISCORD,
    _RARE_TYPE,
    _RARE_VENDOR,
    _RUN_SEP,
    _SHORT,
    _TOKCH,
    _b64_secret_end,
    _is_discord_token,
    _is_reference,
    _Lazy,
    _long_runs,
)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted(
    [*(ROOT / "bench" / "digest_corpus").glob("*.txt"), *(ROOT / "bench" / "digest_corpus" / "large").glob("*.txt"),
     *(ROOT / "tests" / "data" / "secrets").glob("*.txt")]
)

# ---- the reference forms (verbatim but for the _REF_ names) -------------------------------------

_REF_RARE_RE = _Lazy(  # one look-behind, then a branch per vendor (most start with a literal)
    f"(?<![{_TOKCH}])(?:"
    + "|".join(f"(?P<v{i}>{body})" for i, (_t, body) in enumerate(_RARE_VENDOR))
    + f")(?![{_TOKCH}])"
)
_REF_PGPASS_PORT = _Lazy(r":(?:[0-9]{1,5}|\*):")
_REF_PGPASS = _Lazy(  # host:port:database:user:password (database and user are names; "*" is any)
    r"([a-z0-9_.\-*]*[a-z.*][a-z0-9_.\-*]*):(?:[0-9]{1,5}|\*):"
    r"([a-z0-9_.\-*$]+):([a-z0-9_.\-*@$]+):([^\s]{3,})[ \t]*\r?$",
    re.M,
)


def _reference_long_token_spans(text: str, decode: bool) -> list[tuple[int, int, str]]:
    """Rare vendor tokens and base64-hidden secrets inside the long token runs of ``text``."""
    spans: list[tuple[int, int, str]] = []
    for a, b in _long_runs(text):
        run = text[a:b]
        found = False
        pos = 0
        while pos >= 0:  # a token starts the run or follows one of . + / = ~ $ (tried there only)
            m = _REF_RARE_RE.match(run, pos)
            if m is not None and (m.lastgroup != _DISCORD or _is_discord_token(m.group())):
                spans.append((a + m.start(), a + m.end(), f"[REDACTED:{_RARE_TYPE[m.lastgroup or '']}]"))
                found = True
            nxt = _RUN_SEP.search(run, m.end() if m is not None else pos)
            pos = nxt.end() if nxt is not None else -1
        if found or not decode:
            continue
        for m in _B64_SEG.finditer(run):
            if a + m.start() >= 6 and text[a + m.start() - 6 : a + m.start()].lower() == "basic ":
                continue  # "Authorization: Basic …" is the header family's
            end = _b64_secret_end(text, a + m.start(), a + m.end())
            if end:
                spans.append((a + m.start(), end, "[REDACTED:base64]"))
    return spans


def _reference_pgpass_spans(text: str, low: str) -> list[tuple[int, int, str]]:
    """``host:port:database:user:password`` lines (.pgpass): the password goes. The port field
    (``:5432:``, ``:*:``, a literal ``:`` first) is looked for before the line is."""
    out = []
    pos = 0
    for probe in _REF_PGPASS_PORT.finditer(low):
        if probe.start() < pos:
            continue
        start = low.rfind("\n", 0, probe.start()) + 1
        m = _REF_PGPASS.match(low, start)
        pos = probe.end()
        if m and not _is_reference(text[m.start(4) : m.end(4)]) and not m.group(4).isdigit():
            out.append((m.start(4), m.end(4), "[REDACTED:password]"))
            pos = m.end()
    return out


def _reference_assign_matches(low: str) -> Any:
    """Exactly ``_ASSIGN.finditer(low)``, faster on a long text: the next match of each keyword's
    own pattern, earliest first, each searched again from the end of the last match taken when it
    began before it (so overlaps resolve as a single left-to-right scan would). At one position
    at most one keyword can start (they differ in their first two letters), so the match there
    is the one the alternation finds."""
    if len(low) <= _SHORT:
        yield from _ASSIGN.finditer(low)
        return
    heads: list[tuple[int, int, re.Match[str]]] = []
    for i, pat in enumerate(_ASSIGN_BY_KW):
        m = pat.search(low)
        if m is not None:
            heads.append((m.start(), i, m))
    pos = 0
    while heads:
        heads.sort(key=lambda h: (h[0], h[1]))  # never compares match objects
        _start, _i, m = heads[0]
        yield m
        pos = m.end()
        nxt: list[tuple[int, int, re.Match[str]]] = []
        for start, i, mm in heads:
            if start < pos:
                found = _ASSIGN_BY_KW[i].search(low, pos)
                if found is None:
                    continue
                start, mm = found.start(), found
            nxt.append((start, i, mm))
        heads = nxt


_REFERENCES = {
    "_long_token_spans": _reference_long_token_spans,
    "_pgpass_spans": _reference_pgpass_spans,
    "_assign_matches": _reference_assign_matches,
}


@contextlib.contextmanager
def _references() -> Iterator[None]:
    """The module with its reference forms in place (base64 decodings redacted inside use them too)."""
    saved = {name: getattr(R, name) for name in _REFERENCES}
    for name, ref in _REFERENCES.items():
        setattr(R, name, ref)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(R, name, fn)


def _reference_redact(text: str) -> tuple[str, int]:
    with _references():
        return R.redact(text)


def _assert_same(text: str) -> None:
    low = R._lower(text)
    for decode in (True, False):
        assert _reference_long_token_spans(text, decode) == R._long_token_spans(text, decode)
    assert _reference_pgpass_spans(text, low) == R._pgpass_spans(text, low)
    assert _matches(_reference_assign_matches(low)) == _matches(R._assign_matches(low))
    assert _reference_redact(text) == R.redact(text)


def _matches(ms: Any) -> list[tuple[Any, ...]]:
    return [(m.span(), m.span(1), m.groupdict()) for m in ms]


# ---- pieces of generated texts ------------------------------------------------------------------

_RNG = random.Random(41)
_ALNUM = string.ascii_letters + string.digits


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


_VALUES, _ = make_values()
_RULES, _ = rule_values()
_HASH = _r(40, "0123456789abcdef")
_B64_GH = base64.b64encode(("gh" + "p_" + _r(36)).encode()).decode()  # decodes to a secret
_B64_PLAIN = base64.b64encode(b"just some ordinary words here").decode()  # decodes to nothing secret
_B64_PEM_KEY = _VALUES["PEM_RSA"].encode()
_B64_PEM_ONE = base64.b64encode(_B64_PEM_KEY).decode()  # one line
_B64_PEM_WRAPPED = base64.encodebytes(_B64_PEM_KEY).decode().rstrip("\n")  # 76-column lines
_B64_PEM_HEAD = _B64_PEM_WRAPPED.split("\n", 1)[0]  # its first line alone (takes the lines after it)

# Long token runs: the same run in many places (a backtrace's paths), tokens after separators,
# base64 that hides a secret (whose result depends on "basic " before it, or on the lines after it).
_RUNS = [
    f"/rustc/{_HASH}/library/core/src/panicking.rs",
    f"/rustc/{_HASH}/library/std/src/rt.rs",
    "Test.processPendingSubtests",
    "node:internal/test_runner/harness",
    _HASH,
    _HASH[:16],
    _HASH + ".." + _HASH[::-1],
    "a0c4" * 6,  # hex whose base64 decoding is printable
    _B64_GH,
    _B64_GH.rstrip("="),
    base64.urlsafe_b64encode(("sk" + "_live_" + _r(30)).encode()).decode(),
    _B64_PLAIN,
    _B64_PEM_ONE,
    _B64_PEM_HEAD,
    "x" * 15 + "/" + _B64_GH,
    _B64_GH + "/" + _HASH,
    "ABCDEFGHIJKLMNOP" * 3,
    "=" + _HASH + "=",
    "$" + _r(20) + "$" + _r(20),
    *(v for k, v in sorted(_RULES.items()) if k.startswith("R_") and "\n" not in v),
    "path/" + _RULES["R_VAULT_BATCH"],
    _RULES["R_SENDGRID"] + "~" + _RULES["R_DOPPLER"],
    _RULES["R_DISCORD_BOT"],
    "M" + _r(24) + "." + _r(6) + "." + _r(30),  # discord's shape, not a bot id
    "FLW" + "SECK-" + _r(12, "abcdef0123"),  # the shortest rare token
    "FLW" + "SECK-" + _r(11, "abcdef0123"),
    _r(19),
    _r(20),
    _r(16) + "é" + _r(16),
]
_BEFORE = ["", " ", "\n", "Basic ", "basic ", "Authorization: Basic ", "xbasic ", "basic", "auth=", '"', "'", "(", "\t"]
_AFTER = [
    "", " ", "\n", "\r\n", ")", '"', ".", ":12:5",
    "\n" + "\n".join(_B64_PEM_WRAPPED.split("\n")[1:3]),  # the rest of a wrapped base64 PEM key
    "\n  QUJDREVGR0hJSktMTU5PUA==",
]

# .pgpass lines, their near misses, and what looks like a port: clock times, file:line: locations
_PG_PARTS = [
    "localhost", "db.example.com", "*", "10.0.0.1", "HOST", "my_host-1", "h@st", "", "1234", "a:b",
    ":", ":5432:", ":*:", ":123456:", ":12:", ":0:", ":99999:",
    "mydb", "*", "$db", "my db", "user", "u@corp", "*", "postgres",
    "hunter2Secret", "pw", "12345", "$PGPASS", "${X}", "p:a:s:s", "pass word", "é-secret", "[REDACTED:x]",
    " ", "\t", "\r", "\n", "12:34:56", "src/app.py:12:", "main.c:3:14: error: x", "x:1:y:z:abc",
]


# Assignments to secret-named keys and their near misses, overlapping ones ("tokenkey=…")
_ASSIGN_PARTS = [
    "password = 'Zz9zZz9z'", "PASSED", "db_pass=hunter2x", "token: abc12345XY", "api_key=\"k\"", "tokenkey=Ab3dEf9hIj",
    "password=\"token: abc12345\"", "key: password = 'Zz9zZz9z'", "secret_key = x.y.z", "pwd", "credentials:",
    "Authorization: Bearer abc123DEF456ghi789", "max_tokens=4096", "PASSWORD_MIN_LENGTH = 8", "passphrase => 'a b c'",
]


@st.composite
def _texts(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 5))
        if kind <= 1:
            parts.append(draw(st.sampled_from(_BEFORE)) + draw(st.sampled_from(_RUNS)) + draw(st.sampled_from(_AFTER)))
        elif kind == 2:
            fields = draw(st.lists(st.sampled_from(_PG_PARTS), min_size=1, max_size=9))
            parts.append("".join(fields))
        elif kind == 3:
            host = draw(st.sampled_from(["localhost", "*", "db.internal", "10.1.2.3", "h_1"]))
            port = draw(st.sampled_from(["5432", "*", "1", "65535", "123456", "x"]))
            pw = draw(st.sampled_from(["hunter2Secret", "ab", "12345678", "$PW", "a:b:c", "pw with space", "x" * 300]))
            tail = draw(st.sampled_from(["", " ", "\t ", "\r", " #", " x"]))
            parts.append(f"{host}:{port}:mydb:alice:{pw}{tail}")
        elif kind == 4:
            parts.append(draw(st.sampled_from(["\n", "\n\n", " ", "    ", "\t", "\r\n", "é", "≈", "İ"])))
            parts.append(draw(st.sampled_from(_ASSIGN_PARTS)))
        else:
            parts.append(draw(st.text(alphabet="ab:1* \n./=_-Q~", max_size=30)))
    return "".join(parts)


# ---- tests --------------------------------------------------------------------------------------


def test_rare_min_is_the_shortest_rare_token() -> None:
    """``_RARE_MIN`` is the fewest characters any branch of ``_RARE_RE`` matches: where fewer are
    left in a run, no token can start."""
    from re import _parser  # type: ignore[attr-defined]

    assert R._RARE_MIN == _parser.parse(R._RARE_RE.pattern).getwidth()[0]
    assert R._RARE_MIN == _parser.parse(_REF_RARE_RE.pattern).getwidth()[0]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([*_RUNS, ".", "/", "=", "~", "$", "+", "-", "_", "A", "é"]), min_size=1, max_size=8))
def test_rare_re_matches_like_reference(parts: list[str]) -> None:
    """The rare-vendor regex with each vendor's group at the end of its branch matches what the one
    with the group around the branch matches, at every position: same span, same vendor."""
    run = "".join(parts)
    for pos in range(len(run) + 1):
        want, got = _REF_RARE_RE.match(run, pos), R._RARE_RE.match(run, pos)
        assert (want and (want.span(), want.lastgroup)) == (got and (got.span(), got.lastgroup))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_like_reference(path: Path) -> None:
    """Every corpus text (the digest's small and large tool outputs, the secrets corpora): the same
    run spans, .pgpass spans and redaction as the reference forms."""
    _assert_same(path.read_text(encoding="utf-8", errors="replace"))


@settings(max_examples=120, deadline=None, derandomize=True)
@given(_texts(), st.booleans())
def test_random_texts_like_reference(text: str, long: bool) -> None:
    """Mixes of token runs (repeated, in changing surroundings: after ``Basic ``, before wrapped
    base64 lines), rare vendor tokens, .pgpass lines and their near misses, clock times and
    ``file:line:`` locations, assignments, blank lines, ``\\r``, non-ASCII, short and padded
    past ``_SHORT`` (the long path): the same results as the reference."""
    _assert_same(text + "\n" + "x = 1\n" * (_SHORT // 6 + 1) + text if long else text)


def test_repeated_run_in_changing_surroundings() -> None:
    """A run that hides a secret only where no ``Basic `` precedes it, or that takes the wrapped lines
    after it only where they follow, is looked at again each time it recurs."""
    for run in (_B64_GH, _B64_PEM_HEAD, _B64_PEM_ONE, _B64_PLAIN):
        for first, second in [("Basic ", " "), (" ", "Basic "), ("basic ", "\n"), ("\n", "authorization: basic ")]:
            text = f"{first}{run}\n{second}{run}\n{first}{run}\n"
            _assert_same(text)
    tail = "\n" + "\n".join(_B64_PEM_WRAPPED.split("\n")[1:])
    _assert_same(f"{_B64_PEM_HEAD} x\n{_B64_PEM_HEAD}{tail}\nend {_B64_PEM_HEAD}\n")
    _assert_same(f"{_B64_PEM_HEAD}{tail}\n{_B64_PEM_HEAD} x\n")


def test_capped_runs_like_reference() -> None:
    """Runs cut by the caps of ``_long_runs`` (65,536 characters on the right, 400 on the left: runs
    that overlap), base64 over 8 KB, and a run at the very start or end of the text."""
    piece = "abcdefghijklmnop0123/"
    _assert_same(piece * 4000)
    _assert_same(" " + piece * 4000 + _B64_GH + " " + _B64_GH)
    _assert_same("x." * 300 + _HASH + "/" + _HASH)
    _assert_same(_B64_PEM_ONE * 3 + "\n" + _B64_PEM_ONE)
    _assert_same(base64.b64encode(b"A" * 9000).decode() + " " + _B64_GH)
    _assert_same(_HASH)
    _assert_same("Basic " + _B64_GH)


def test_pgpass_lines_like_reference() -> None:
    """.pgpass shapes one by one: the host is what precedes the line's first colon, a password may
    hold colons, a line is found once however many port-like fields it holds."""
    lines = [
        "localhost:5432:mydb:alice:hunter2Secret", "*:*:*:*:hunter2Secret", "h:1:d:u:abc", "h:1:d:u:ab",
        "h:1:d:u:12345", "h:1:d:u:$PW", "h:1:d:u:a:1:b:c:ddd", "a:b:1:d:u:pass1234", ":1:d:u:pass1234",
        "9:1:d:u:pass1234", "h:123456:d:u:pass1234", "h:1:d:u:pass1234 ", "h:1:d:u:pass1234\r",
        "h:1:d:u:pass1234 x", "12:34:56 x:1:d:u:pass1234", "H.Example:5432:DB:U@X:Secret99", "h:1:d:u:" + "x" * 5000,
        "h:1:1:1:1:1:1:1", "x:1:" * 50 + "y", "é:1:d:u:pass1234", "İ:1:d:u:pass1234",
        "h:1:d:u:" * 200 + " x", "a" * 1500 + " :1:d:u:pass1234", "a" * 1500 + " x.py:12:", "1:" * 700 + " x",
        "a" * 1500 + ":1:d:u:pass1234 x", ":1" * 700, "h:1:d:u:pass1234\n" + "x:1:" * 300,
    ]
    for line in lines:
        for text in (line, line + "\n", "a\n" + line + "\nb", line + "\n" + line):
            _assert_same(text)


def test_pgpass_scan_is_linear_on_long_lines() -> None:
    """Lines of 400,000 characters full of colons and port-like fields: the host and the password are
    looked at once per line, not once per field (the reference form backtracks over the whole line
    at each one, which would take hours here)."""
    n = 400_000
    for text, want in [
        (("h:1:d:u:" * n)[:n] + " x", 0),
        ("a" * n + " :1:d:u:pass1234", 0),
        ("a" * n + ":1:d:u:pass1234", 1),
        ("a" * n + " x.py:12:", 0),
        (("1:" * n)[:n] + " x", 0),
        ("h:1:d:u:" + "p1" * (n // 2) + "\n", 1),
    ]:
        assert want == len(R._pgpass_spans(text, R._lower(text)))


def test_b64_ascii_start_sets_are_exact() -> None:
    """A base64 segment is decoded only when its first two characters can give two bytes below 0x80:
    the sets hold exactly the characters (standard and URL-safe alphabets) for which they do."""
    import binascii

    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/-_"
    for c0 in alphabet:
        for c1 in alphabet:
            raw = binascii.a2b_base64((c0 + c1 + "AA").replace("-", "+").replace("_", "/"))
            ascii_start = raw[0] < 0x80 and raw[1] < 0x80
            assert ascii_start == (c0 in R._B64_ASCII_FIRST and c1 in R._B64_ASCII_SECOND), c0 + c1
