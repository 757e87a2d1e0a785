"""Tests for ctxlifed.core.mustsurvive: the must-survive set, its diff against a compact summary, re-injection."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ctxlifed.core import accounting as A
from ctxlifed.core.model import estimate_tokens
from ctxlifed.core.mustsurvive import (
    LEAD,
    MAX_ITEMS,
    PER_KIND,
    THRESHOLD,
    CompactionReport,
    Item,
    ReAttached,
    build,
    carried,
    compaction_report,
    coverage,
    diff,
    item_id,
    plan_reinjection,
    render_reinjection,
    render_report,
    suppressed,
)
from ctxlifed.core.survival import simulate
from ctxlifed.core.transcript import TranscriptCursor, feed

RUNS = Path(__file__).resolve().parent / "fixtures" / "claude-code" / "runs"
ROOT = "/home/u/proj"
T0 = 1_767_000_000.0

pytestmark = pytest.mark.filterwarnings("error")

# A summary in Claude Code's format. It carries some planted items and omits the others (marked below).
SUMMARY_EN = """<analysis>
Going through the conversation: argon2id was mentioned once, a nightly cleanup job too, and the
30-day TTL; Node 18 compatibility came up; 0042_refresh.sql was created.
</analysis>
<summary>
1. Primary Request and Intent:
   The user asked to add refresh-token support to the auth module (src/api/auth.ts) while keeping the
   login response unchanged.

2. Key Technical Concepts:
   - JWT access tokens that live 15 minutes
   - Refresh tokens stored in Postgres rather than Redis (the deployment has no Redis)
   - bcrypt password hashing (unchanged)

3. Files and Code Sections:
   - src/api/auth.ts: issueRefreshToken() and rotateRefreshToken()
   - tests/test_refresh.py: new tests for rotation

4. Errors and fixes:
   - test_refresh_reuse_detected fails with "token reused"; not fixed yet.

6. All user messages:
   - "Add refresh tokens to auth"
   - "Don't change the login response shape, mobile clients depend on it"
   - "Never log raw tokens"

7. Pending Tasks:
   - Write the migration for the refresh_tokens table
   - Update the API docs

8. Current Work:
   Implementing rotation in rotateRefreshToken().
</summary>"""

CARRIED_EN = {
    "goal": ["Add refresh-token support to the auth module without changing the login response"],
    "decisions": ["Store refresh tokens in Postgres, not Redis", "Access tokens live 15 minutes"],
    "constraints": ["Never log raw tokens", "Keep the login response shape unchanged: mobile clients depend on it"],
    "failing_tests": ["tests/test_refresh.py::test_refresh_reuse_detected"],
    "pending": ["Write the migration for the refresh_tokens table", "Update the API docs"],
    "active_files": [f"{ROOT}/src/api/auth.ts", f"{ROOT}/src/lib/tokens.ts"],  # the second: re-attached file
}
OMITTED_EN = {
    "decisions": ["Use argon2id instead of bcrypt for new password hashes", "Refresh token TTL is 30 days"],
    "constraints": ["Backend must remain compatible with Node 18"],
    "failing_tests": ["tests/test_refresh.py::test_refresh_expired_rejected"],
    "pending": ["Add a nightly cleanup job that deletes expired refresh tokens"],
    "active_files": [f"{ROOT}/src/db/migrations/0042_refresh.sql"],
}
REATTACHED_EN = ReAttached(
    instructions_text="# Project rules\nUse pnpm.",
    files=(f"{ROOT}/src/lib/tokens.ts",),
    skills=("code-review",),
    injected_text="ctxlifed: context of project proj was compacted. Current phase: implementation (since 2026-01-01T10:00Z, 2h 05m).",
)


def _interleaved(carried_: dict[str, list[str]], omitted: dict[str, list[str]], phase: str | None) -> list[Item]:
    def both(k: str) -> list[str]:
        a, b = carried_.get(k, []), omitted.get(k, [])
        return [x for pair in zip(a, b) for x in pair] + a[len(b) :] + b[len(a) :]

    return build(
        phase=phase,
        goal=(carried_.get("goal") or omitted.get("goal") or [None])[0],
        decisions=both("decisions"),
        constraints=both("constraints"),
        failing_tests=both("failing_tests"),
        pending=both("pending"),
        active_files=both("active_files"),
    )


def _ids(kind_texts: dict[str, list[str]]) -> set[str]:
    kinds = {"decisions": "decision", "constraints": "constraint", "failing_tests": "failing_test",
             "pending": "pending", "active_files": "active_file", "goal": "goal"}  # fmt: skip
    return {item_id(kinds[k], t) for k, texts in kind_texts.items() for t in texts}


# --------------------------------------------------------------------------- build / ids


def test_build_orders_by_importance_and_bounds() -> None:
    """Most important kind first; at most 8 per kind and 40 in all; duplicates dropped."""
    items = build(
        phase="testing",
        goal="Ship it",
        decisions=[f"decision {i}" for i in range(20)] + ["decision 0"],
        constraints=["never push to main"],
        failing_tests=["t::test_a"],
        pending=["p1", "P1 "],
        active_files=["/a/b.py", "/a/./b.py"],
    )
    assert [i.kind for i in items] == ["phase", "goal", "failing_test", "constraint"] + ["decision"] * PER_KIND + [
        "pending",
        "active_file",
    ]
    assert [i.weight for i in items] == sorted((i.weight for i in items), reverse=True)
    many = build(decisions=[f"d{i}" for i in range(9)], constraints=[f"c{i}" for i in range(9)],
                 failing_tests=[f"f{i}" for i in range(9)], pending=[f"p{i}" for i in range(9)],
                 active_files=[f"/x{i}" for i in range(9)], phase="design", goal="g")  # fmt: skip
    assert len(many) == MAX_ITEMS == 40
    assert build(decisions=["x" * 1000])[0].text == "x" * 239 + "…"


def test_ids_are_stable_and_normalised() -> None:
    """The same item gets the same id whatever its case, spacing or trailing punctuation; paths normalise."""
    assert item_id("decision", "Use  msgspec.") == item_id("decision", "use msgspec") == "decision:" + item_id(
        "decision", "USE MSGSPEC"
    ).split(":")[1]
    assert item_id("active_file", "/a/./b/../c.py") == item_id("active_file", "/a/c.py")
    assert item_id("decision", "x") != item_id("pending", "x")
    assert len(item_id("goal", "g").split(":")[1]) == 10
    assert item_id("decision", "采用 msgspec。") == item_id("decision", "采用 msgspec")


# --------------------------------------------------------------------------- the planted-summary diff


def test_scripted_summary_exactly_the_omitted_items_are_lost() -> None:
    """A summary that keeps some planted decisions, constraints, pending items, files and a failing test
    and omits the others: exactly the omitted ones are reported lost (phase carried by ctxlifed's own
    SessionStart(compact) context, tokens.ts by Claude Code's file re-attachment)."""
    items = _interleaved(CARRIED_EN, OMITTED_EN, "implementation")
    kept, lost = diff(items, SUMMARY_EN, REATTACHED_EN, already_delivered=set())
    assert {i.id for i in lost} == _ids(OMITTED_EN)
    assert {i.id for i in kept} == _ids(CARRIED_EN) | {item_id("phase", "implementation")}
    assert [i.kind for i in lost] == ["failing_test", "constraint", "decision", "decision", "pending", "active_file"]


def test_analysis_block_does_not_carry_anything() -> None:
    """Words only in <analysis> (dropped by Claude Code) do not make an item carried."""
    item = build(decisions=["Use argon2id instead of bcrypt for new password hashes"])[0]
    assert carried(item, SUMMARY_EN) is False
    assert carried(item, SUMMARY_EN.replace("<analysis>", "").replace("</analysis>", "")) is True


def test_without_reattachments_phase_and_reattached_file_are_lost() -> None:
    """The same diff with nothing re-attached also loses the phase and the re-attached file."""
    items = _interleaved(CARRIED_EN, OMITTED_EN, "implementation")
    _, lost = diff(items, SUMMARY_EN)
    extra = {item_id("phase", "implementation"), item_id("active_file", f"{ROOT}/src/lib/tokens.ts")}
    assert {i.id for i in lost} == _ids(OMITTED_EN) | extra


def test_instructions_text_carries_a_constraint() -> None:
    """A constraint stated in the re-read root CLAUDE.md is carried even if the summary drops it."""
    item = build(constraints=["Never commit generated protobuf files"])[0]
    assert carried(item, "<summary>nothing</summary>") is False
    assert carried(item, "", ReAttached(instructions_text="- Never commit generated protobuf files.")) is True


def test_already_delivered_ids_are_never_reported_again() -> None:
    """An item delivered after an earlier compaction is not lost again; suppressed() lists it."""
    items = _interleaved(CARRIED_EN, OMITTED_EN, "implementation")
    first_kept, first_lost = diff(items, SUMMARY_EN, REATTACHED_EN, set())
    delivered = set(plan_reinjection(first_lost, cap_tokens=10_000, ctl="ctxlifectl").ids)
    assert delivered == {i.id for i in first_lost}
    kept, lost = diff(items, SUMMARY_EN, REATTACHED_EN, delivered)
    assert lost == [] and kept == first_kept
    assert suppressed(items, kept, lost) == first_lost
    partly = {first_lost[0].id}
    _, lost2 = diff(items, SUMMARY_EN, REATTACHED_EN, partly)
    assert [i.id for i in lost2] == [i.id for i in first_lost[1:]]


# --------------------------------------------------------------------------- Chinese

SUMMARY_ZH = """<summary>
1. 主要请求与意图：用户要求给鉴权模块加上 refresh token，并保持登录接口的返回结构不变。
2. 关键技术：状态存储采用 msgspec 序列化；访问令牌有效期 15 分钟。
3. 文件：src/api/auth.ts 新增 rotateRefreshToken()。
4. 错误与修复：test_refresh_reuse_detected 仍然失败。
5. 用户消息：
   - "日志里不要打印原始令牌"
7. 待办：编写 refresh_tokens 表的迁移脚本；更新接口文档。
</summary>"""
CARRIED_ZH = {
    "decisions": ["决定使用 msgspec 作为状态存储", "访问令牌有效期为 15 分钟"],
    "constraints": ["不要在日志中打印原始令牌", "登录接口的返回结构保持不变"],
    "failing_tests": ["tests/test_refresh.py::test_refresh_reuse_detected"],
    "pending": ["待办：编写 refresh_tokens 表的迁移脚本", "更新接口文档"],
}
OMITTED_ZH = {
    "decisions": ["密码哈希改用 argon2id", "决定：刷新令牌有效期 30 天"],
    "constraints": ["必须兼容 Node 18", "不能把令牌存到浏览器本地存储"],
    "pending": ["待办：增加每晚清理过期令牌的定时任务"],
}


def test_chinese_items_exactly_the_omitted_ones_are_lost() -> None:
    """Chinese decisions, constraints and pending items: CJK bigrams find the carried ones (paraphrased
    word order included) and exactly the omitted ones are lost."""
    items = _interleaved(CARRIED_ZH, OMITTED_ZH, None)
    kept, lost = diff(items, SUMMARY_ZH, ReAttached(), set())
    assert {i.id for i in lost} == _ids(OMITTED_ZH)
    assert {i.id for i in kept} == _ids(CARRIED_ZH)


def test_chinese_phase_line_carries_the_phase() -> None:
    """A Chinese phase statement ("当前阶段：实现" / "实现阶段") carries the phase; "实现了" alone does not."""
    phase = build(phase="implementation")[0]
    assert carried(phase, "目前处于实现阶段。") is True
    assert carried(phase, "当前阶段：实现") is True
    assert carried(phase, "已经实现了登录接口。") is False


# --------------------------------------------------------------------------- per-kind rules


@pytest.mark.parametrize(
    ("text", "summary", "expected"),
    [
        ("tests/test_auth.py::test_login_expired", "test_login_expired still fails", True),
        ("tests/test_auth.py::test_login_expired", "tests/test_auth.py has 3 failures", False),
        ("tests/test_auth.py::test_login_expired[param-1]", "see test_login_expired", True),
        ("FAIL pytest tests/test_auth.py -q", "tests/test_auth.py fails", True),
        ("FAIL pytest tests/test_auth.py -q", "all tests pass", False),
        ("--- FAIL: TestLogin (0.00s)", "TestLogin fails on expiry", True),
        ("login spec is red", "the login spec is red again", True),
    ],
)
def test_failing_test_rule(text: str, summary: str, expected: bool) -> None:
    """Failing tests are carried by their function names, else their file, else by the prose rule."""
    assert carried(build(failing_tests=[text])[0], summary) is expected


@pytest.mark.parametrize(
    ("path", "summary", "files", "expected"),
    [
        ("/p/src/api/auth.ts", "edited src/api/auth.ts", (), True),
        ("/p/src/api/auth.ts", "edited auth.ts", (), True),
        ("/p/src/api/auth.ts", "edited oauth.ts and the author field", (), False),
        ("/p/src/pkg/__init__.py", "touched __init__.py", (), False),
        ("/p/src/pkg/__init__.py", "touched pkg/__init__.py", (), True),
        ("/p/src/api/auth.ts", "nothing", ("/p/src/api/auth.ts",), True),
        ("/p/src/api/auth.ts", "nothing", ("src/api/auth.ts",), True),
        ("/p/src/api/auth.ts", "nothing", ("/p/src/api/other.ts",), False),
    ],
)
def test_active_file_rule(path: str, summary: str, files: tuple[str, ...], expected: bool) -> None:
    """Files: re-attached, or the path / last two components / a non-generic basename is mentioned."""
    assert carried(build(active_files=[path])[0], summary, ReAttached(files=files)) is expected


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("We are in the design phase.", True),
        ("Current phase: design.", True),
        ("The design of the token store was discussed.", False),
        ("", False),
    ],
)
def test_phase_rule(summary: str, expected: bool) -> None:
    """The phase is carried only when a source states it as a phase, not by incidental use of the word."""
    assert carried(build(phase="design")[0], summary) is expected


def test_prose_threshold_and_short_items() -> None:
    """Coverage >= 0.6 carries; items of weight < 3 need every token; stopword-only items need the text."""
    src = "We store sessions in Postgres and log nothing sensitive."
    assert coverage("Store sessions in Postgres", src) == (1.0, 3)
    cov, total = coverage("Store sessions in Redis with TTL 300", src)
    assert (total, cov) == (6, 2 / 6) and cov < THRESHOLD
    assert carried(build(decisions=["Postgres sessions"])[0], src) is True
    assert carried(build(decisions=["Redis sessions"])[0], src) is False  # 1 of 2, short item
    assert carried(build(pending=["do it now"])[0], src) is False
    assert carried(build(pending=["do it now"])[0], "ok, do it now!") is True


def test_negation_is_a_known_false_positive() -> None:
    """Documented failure mode: negation is ignored, so "did not adopt X" carries "adopt X"."""
    assert carried(build(decisions=["Adopt GraphQL for the public API"])[0], "We did not adopt GraphQL for the public API.")


# --------------------------------------------------------------------------- re-injection


def test_render_reinjection_most_important_first_under_cap() -> None:
    """Factual lead, one line per lost item by weight, within the token cap; ids match the lines."""
    items = _interleaved(CARRIED_EN, OMITTED_EN, "implementation")
    _, lost = diff(items, SUMMARY_EN, REATTACHED_EN, set())
    plan = plan_reinjection(lost, cap_tokens=600, ctl="ctxlifectl")
    assert plan.text == "\n".join(
        [
            LEAD,
            "- Failing test: tests/test_refresh.py::test_refresh_expired_rejected",
            "- Constraint: Backend must remain compatible with Node 18",
            "- Decision: Use argon2id instead of bcrypt for new password hashes",
            "- Decision: Refresh token TTL is 30 days",
            "- Pending: Add a nightly cleanup job that deletes expired refresh tokens",
            f"- Active file: {ROOT}/src/db/migrations/0042_refresh.sql",
        ]
    )
    assert plan.ids == [i.id for i in lost]
    assert estimate_tokens(plan.text) <= 600
    assert render_reinjection(lost, ctl="ctxlifectl") == plan.text
    assert A.is_ours_default(plan.text)


def test_render_reinjection_cut_with_a_count() -> None:
    """A small cap keeps the first whole lines and says how many were left out; ids follow the lines."""
    lost = build(decisions=[f"decision number {i} about the storage layer" for i in range(8)])
    plan = plan_reinjection(lost, cap_tokens=60, ctl="ctxlifectl")
    lines = plan.text.splitlines()
    assert lines[0] == LEAD and lines[-1] == f"- … {8 - len(plan.ids)} more: ctxlifectl compactions"
    assert len(plan.ids) == len(lines) - 2 >= 1 and plan.ids == [i.id for i in lost[: len(plan.ids)]]
    assert estimate_tokens(plan.text) <= 60


def test_render_reinjection_edge_cases() -> None:
    """Nothing lost -> ''; a cap too small for the lead -> ''; one huge item is cut with '…'."""
    assert plan_reinjection([], 600, ctl="ctxlifectl").text == "" and plan_reinjection([], 600, ctl="ctxlifectl").ids == []
    assert render_reinjection(build(pending=["x"]), cap_tokens=5, ctl="ctxlifectl") == ""
    huge = build(goal="word " * 2000)
    plan = plan_reinjection(huge, cap_tokens=100, ctl="ctxlifectl")
    assert plan.ids == [huge[0].id] and plan.text.endswith("…") and estimate_tokens(plan.text) <= 100


# --------------------------------------------------------------------------- reports


def test_compaction_report_and_render() -> None:
    """A per-compaction report keeps ids and display lines, round-trips through msgspec, and renders
    newest first."""
    items = _interleaved(CARRIED_EN, OMITTED_EN, "implementation")
    kept, lost = diff(items, SUMMARY_EN, REATTACHED_EN, set())
    plan = plan_reinjection(lost, cap_tokens=80, ctl="ctxlifectl")
    r1 = compaction_report(ts=T0, trigger="auto", pre_tokens=195_047, post_tokens=2_670, archived=12, kept=kept,
                           lost=lost, reinjected=plan.ids, dropped_skills=["s0", "s1"])  # fmt: skip
    assert (len(r1.kept), len(r1.lost), r1.reinjected) == (len(kept), len(lost), plan.ids)
    assert r1.lost_lines[0] == "Failing test: tests/test_refresh.py::test_refresh_expired_rejected (re-injected)"
    assert r1.lost_lines[-1].endswith("(not re-injected)")
    assert msgspec.json.decode(msgspec.json.encode(r1), type=CompactionReport) == r1
    r2 = compaction_report(ts=T0 + 3600, trigger="manual", pre_tokens=None, post_tokens=None, archived=0,
                           kept=kept, lost=[], reinjected=[], suppressed_items=lost)  # fmt: skip
    text = render_report([r1, r2])
    lines = text.splitlines()
    assert lines[0] == (
        f"2025-12-29T10:20Z  manual  ? -> ? tokens  archived 0  kept {len(kept)}  lost 0  re-injected 0"
        f"  delivered before {len(lost)}"
    )
    assert lines[1] == (
        f"2025-12-29T09:20Z  auto  195,047 -> 2,670 tokens  archived 12  kept {len(kept)}  lost {len(lost)}"
        f"  re-injected {len(plan.ids)}"
    )
    assert lines[2] == "  lost: Failing test: tests/test_refresh.py::test_refresh_expired_rejected (re-injected)"
    assert lines[-1] == "  skills dropped by Claude Code: s0, s1"
    assert render_report([]) == "No compactions recorded."


# --------------------------------------------------------------------------- real fixture


def test_fixture_postcompact_summary_with_claude_code_reattachments() -> None:
    """runs/interactive: the PostCompact compact_summary ("... worked on auth changes. Pending Tasks:
    none.") plus the file Claude Code re-attached (auth.py, from the transcript): the active file is
    kept, the planted decision and pending item are lost."""
    hooks = RUNS / "interactive" / "hooks.jsonl"
    files = sorted(RUNS.glob("interactive/transcripts/*/*.jsonl"), key=lambda p: p.stat().st_size)
    if not hooks.exists() or not files:
        pytest.skip("fixtures not available")
    summaries = [
        json.loads(ln)["payload"]["compact_summary"]
        for ln in hooks.read_text().splitlines()
        if '"PostCompact"' in ln and json.loads(ln).get("payload", {}).get("hook_event_name") == "PostCompact"
    ]
    assert len(summaries) == 1 and "FAKE-COMPACT-SUMMARY-MARKER" in summaries[0]
    lines = files[-1].read_bytes().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if b'"compact_boundary"' in ln)
    _, before = feed(TranscriptCursor(), b"".join(lines[:at]))
    survival = simulate(**A.survival_inputs(A.fold(A.Accounting(), before)))
    re = ReAttached(files=tuple(survival.files_back()))
    items = build(
        decisions=["Login accepts admin and root only"],
        pending=["Add rate limiting to login()"],
        active_files=["/home/dev/exp/interactive/project/auth.py"],
        goal="the user worked on auth changes",
    )
    kept, lost = diff(items, summaries[0], re, set())
    assert [i.kind for i in kept] == ["goal", "active_file"]
    assert [i.text for i in lost] == ["Login accepts admin and root only", "Add rate limiting to login()"]
