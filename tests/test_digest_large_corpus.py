"""core.digest on the large corpus (bench/digest_corpus/large/, ``make_corpus.py --large``): real tool outputs
of 100 KB, as the tools printed them, each digested the way the policy replaces an output Claude Code
persisted (``decide`` with the whole text, then ``digest`` with the settings' budgets and the decision's kind).

The must-keep test mirrors the small corpus's, on the outputs whose must-keep lines fit in a digest; on the
others (``NOT_KEPT``) what is not shown is counted in the digest's header (more than ``digest_max_tokens``), or
is a label the digest does not keep verbatim by design (a search's head line over MAX_LINE_CHARS, shown cut; a
line that only quotes an error phrase)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxlifed.core.compress_policy import CompressSettings, decide
from ctxlifed.core.digest import MAX_LINE_CHARS, Digest, digest, kept_verbatim
from ctxlifed.core.hook_events import PostToolUse

LARGE = Path(__file__).resolve().parent.parent / "bench" / "digest_corpus" / "large"
LARGE_CHARS = 100 * 1024  # make_corpus.LARGE_CHARS
SETTINGS = CompressSettings()

# More must-keep lines (every failing test's id and assertion, every error with its location) than the
# digest shows within ``digest_max_tokens``: the rest are counted in its header (``must_omitted``), not shown.
OVER_MAX_TOKENS = {"cargo_build_errors", "cargo_test", "mypy_errors", "node_test", "pytest_default_failures",
                   "pytest_verbose_failures", "ruff_check", "tsc_errors", "unittest_verbose"}
# ``label_first(5)`` keeps a search's first five lines and any line naming "no such file"/"permission denied":
# here the first commit message line (432 characters: a head line over MAX_LINE_CHARS is cut, "… [+N chars]")
# and a commit message line that quotes "No such file" (not an error of the search tool, so not in tier 1).
LABEL_NOT_IN_DIGEST_TIERS = {"git_log"}
NOT_KEPT = OVER_MAX_TOKENS | LABEL_NOT_IN_DIGEST_TIERS


def large_corpus() -> list[tuple[str, dict, str]]:
    return [(m.stem, json.loads(m.read_text()), m.with_suffix(".txt").read_text())
            for m in sorted(LARGE.glob("*.json"))]


def as_policy_digests(meta: dict, text: str) -> Digest:
    """Claude Code persists a Bash output this long (a 30,000-character payload and the file); the service
    reads the file and the policy decides on the whole text; the digest is made as service.compress makes it."""
    resp = {"stdout": text[:30_000], "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False,
            "persistedOutputPath": "/tmp/t/tool-results/x.txt", "persistedOutputSize": len(text)}
    event = PostToolUse(tool_name="Bash", tool_input={"command": meta["command"]}, tool_response=resp)
    dec = decide(event, level=1, phase=None, settings=SETTINGS, full_text=text)
    assert dec is not None and dec.text == text
    return digest(dec.text, command=meta["command"], kind=dec.kind, archive_id=12, full_path="/tmp/t/out.txt",
                  budget_tokens=SETTINGS.digest_budget_tokens, max_tokens=SETTINGS.digest_max_tokens,
                  original_tokens=dec.original_tokens)


def test_large_corpus_is_there_labelled_and_100_kb() -> None:
    cases = large_corpus()
    assert len(cases) >= 15
    assert {meta["kind"] for _n, meta, _t in cases} >= {"test", "build", "search", "diff", "log", "other"}
    assert {n for n, _m, _t in cases} >= NOT_KEPT
    for name, meta, text in cases:
        lines = text.split("\n")
        assert meta["must_keep"], name
        assert all(x in set(lines) for x in meta["must_keep"]), name  # labels are lines of the output
        # At least 100 KB as the tool printed it, cut at the last line end at or before 100 KB: at most one
        # line (no longer than the longest line kept) short of it.
        assert text.endswith("\n"), name
        assert len(text) <= LARGE_CHARS, name
        assert LARGE_CHARS - len(text) <= max(map(len, lines)) + 1, (name, len(text))
        assert as_policy_digests(meta, text).kind == meta["kind"], name


@pytest.mark.parametrize("name,meta,text", [c for c in large_corpus() if c[0] not in NOT_KEPT],
                         ids=lambda x: x if isinstance(x, str) and len(x) < 40 else "")
def test_every_must_keep_line_of_a_real_100_kb_output_is_kept_verbatim(name: str, meta: dict, text: str) -> None:
    d = as_policy_digests(meta, text)
    missing = [x for x in meta["must_keep"] if x not in kept_verbatim(meta["must_keep"], d.text)]
    assert missing == [], (name, len(missing), missing[:3])
    assert d.must_omitted == 0


@pytest.mark.parametrize("name,meta,text", [c for c in large_corpus() if c[0] in LABEL_NOT_IN_DIGEST_TIERS],
                         ids=lambda x: x if isinstance(x, str) and len(x) < 40 else "")
def test_a_search_s_labels_not_kept_are_a_head_line_shown_cut_or_a_quoted_error_phrase(name: str, meta: dict,
                                                                                      text: str) -> None:
    """The labels a digest of a search cannot keep verbatim by design: a head line over MAX_LINE_CHARS is shown
    cut ("… [+N chars]"), and a line that only quotes "No such file" (a commit message) is not an error of the
    tool (the label rule takes any line naming it)."""
    d = as_policy_digests(meta, text)
    missing = [x for x in meta["must_keep"] if x not in kept_verbatim(meta["must_keep"], d.text)]
    assert missing
    for line in missing:
        cut = len(line) > MAX_LINE_CHARS and f"{line[:MAX_LINE_CHARS]}… [+{len(line) - MAX_LINE_CHARS} chars]" in d.text
        quoted = re.search(r"no such file|permission denied", line, re.I) is not None and line[:1].isspace()
        assert cut or quoted, line


@pytest.mark.parametrize("name,meta,text", [c for c in large_corpus() if c[0] in OVER_MAX_TOKENS],
                         ids=lambda x: x if isinstance(x, str) and len(x) < 40 else "")
def test_must_keep_lines_past_max_tokens_are_counted_not_dropped_silently(name: str, meta: dict, text: str) -> None:
    """Where the must-keep lines do not fit, each one not shown is one of those the header counts."""
    d = as_policy_digests(meta, text)
    missing = [x for x in meta["must_keep"] if x not in kept_verbatim(meta["must_keep"], d.text)]
    assert 0 < len(missing) <= d.must_omitted, (name, len(missing), d.must_omitted)
    assert "not shown (too many): see the full output]" in d.text
