"""core.digest on text beyond ASCII: the ASCII twins of the patterns, and costing every line by its length,
give exactly the digests of the forms they replace.

The reference is the digest as it was before: the twins only on an all-ASCII text, and a line's cost
estimated by :func:`~ctxlifed.core.model.estimate_tokens` whenever the text is not ASCII. It is the same
function with the two decisions put back (``_twins_exact`` and ``_costed_by_length`` true only for nothing
beyond ASCII). The texts: every output of both corpora, the same with characters beyond ASCII mixed in, and
random mixes of corpus lines and such characters (hypothesis, derandomized): quotes, bullets and box
drawing (the twins apply), letters, digits, white space and CJK characters (they do not; a CJK character
or a full-width form makes the costs estimated), and a lone surrogate.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import digest as D

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "digest_corpus"

# Not word, digit or space characters: the twins apply to a text holding only these beyond ASCII.
SYMBOLS = ["‘", "’", "…", "●", "✕", "✖", "✓", "▶", "─", "│", "╰", "—", "–", "·", "⋈", "×", "→", "❯", "¶"]
# Each makes the twins unsafe: letters (one folds to an ASCII letter; node's ℹ is a letter too), digits, white space, CJK (a word
# character, and counted as a whole token), a CJK punctuation and a full-width form (not word characters,
# but CJK in the estimate), superscripts, a lone surrogate (not a word character).
OTHERS = ["é", "ℹ", "ß", "\u212a", "ſ", "²", "٣", "\u00a0", "\u3000", "\u2028", "\u0085", "中", "文", "・", "！", "ｱ", "\ud800"]


def _cases(where: Path) -> list[tuple[str, str | None, str]]:
    return [(m.stem, json.loads(m.read_text()).get("command"), m.with_suffix(".txt").read_text())
            for m in sorted(where.glob("*.json"))]


CASES = _cases(CORPUS) + _cases(CORPUS / "large")
# lines dense in CJK characters: their cost estimate is above (len + 7) >> 2, so they decide what fits
CJK_LINES = ["E       AssertionError: 期望值为 3，实际为 4（折扣计算错误）", "FAILED tests/test_价格.py::test_批量折扣 - 断言失败：金额不一致",
             "错误: 找不到配置文件 设置.toml", "src/计算.c:3:1: error: 未声明的标识符 ‘数据’", "ERROR 数据库连接失败，正在重试",
             "警告：已弃用的接口将在下一版本中删除", "ＦＡＩＬＥＤ ｔｅｓｔ・全角"]
LINES = sorted({line for _n, _c, text in CASES for line in text.split("\n")[:400]}) + CJK_LINES


def reference(text: str, command: str | None, monkeypatch: pytest.MonkeyPatch, **kw: object) -> D.Digest:
    with monkeypatch.context() as m:
        m.setattr(D, "_twins_exact", lambda beyond: not beyond)
        m.setattr(D, "_costed_by_length", lambda beyond: not beyond)
        return D.digest(text, command=command, archive_id=7, full_path="/tmp/x/out.txt", **kw)  # type: ignore[arg-type]


def this(text: str, command: str | None, **kw: object) -> D.Digest:
    return D.digest(text, command=command, archive_id=7, full_path="/tmp/x/out.txt", **kw)  # type: ignore[arg-type]


def sprinkle(text: str, chars: list[str], seed: int, every: int = 97) -> str:
    """``text`` with one of ``chars`` put in at about every ``every``-th character (at the same places each run)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        step = rng.randrange(1, 2 * every)
        out.append(text[i: i + step])
        out.append(rng.choice(chars))
        i += step
    return "".join(out)


def test_the_twins_apply_to_symbols_only() -> None:
    assert all(D._twins_exact(D._beyond_ascii("a" + c + "b")) for c in SYMBOLS)
    assert not any(D._twins_exact(D._beyond_ascii("a" + c + "b")) for c in OTHERS if c not in ("\ud800", "・", "！"))
    assert D._twins_exact(D._beyond_ascii("x\ud800y"))  # a lone surrogate is kept, and is no word character
    assert D._beyond_ascii("a‘b’c中\ud800d") == "‘’中\ud800"
    assert D._beyond_ascii("plain") == ""


@pytest.mark.parametrize("name,command,text", CASES, ids=[c[0] for c in CASES])
def test_corpus_outputs_give_the_reference_digest(name: str, command: str | None, text: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert this(text, command) == reference(text, command, monkeypatch), name
    for seed, chars in enumerate((SYMBOLS, SYMBOLS + OTHERS[-6:], SYMBOLS + OTHERS)):
        mixed = sprinkle(text, chars, seed)
        assert this(mixed, command) == reference(mixed, command, monkeypatch), (name, seed)


@pytest.mark.parametrize("command", ["pytest -q", "make", None])
def test_lines_dense_in_cjk_are_costed_as_estimated(command: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """More failure lines than fit: which of them fit depends on each line's estimate."""
    text = "\n".join(f"{CJK_LINES[i % len(CJK_LINES)]} {i}" for i in range(400)) + "\n===== 400 failed in 1.00s =====\n"
    for kw in ({}, {"max_tokens": 200, "budget_tokens": 100}):
        got = this(text, command, **kw)
        assert got == reference(text, command, monkeypatch, **kw)
    assert got.must_omitted > 0  # the small budget binds


_COMMANDS = st.one_of(st.none(), st.sampled_from(["pytest -q", "make", "cargo test", "npx tsc", "git log", "grep -rn x .",
                                                   "tail app.log", "npm test", "echo"]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(st.one_of(st.sampled_from(LINES), st.sampled_from(SYMBOLS + OTHERS)), max_size=80),
       joins=st.lists(st.sampled_from(["\n", "", " "]), min_size=80, max_size=80), command=_COMMANDS,
       small=st.booleans())
def test_mixes_give_the_reference_digest(parts: list[str], joins: list[str], command: str | None, small: bool) -> None:
    text = "".join(p + j for p, j in zip(parts, joins))
    kw = {"max_tokens": 120, "budget_tokens": 60} if small else {}  # a small budget: lines skipped for their cost
    with pytest.MonkeyPatch.context() as mp:
        assert this(text, command, **kw) == reference(text, command, mp, **kw)
