"""Every word ctxlifed says, checked: a scripted multi-phase session (English and Chinese) through the
real shim and a real daemon; every text it returns (additionalContext, systemMessage, PostCompact stdout, and the
``status`` output) is collected and checked against its sources:

- every percentage and token figure equals the one ``status --json`` holds at that moment;
- every ``#N`` resolves with ``recall --id N``;
- every ``ctxlifectl`` command named starts with ``ctl_command()``'s absolute path, which exists;
- no line of a briefing repeats in a later one while the context still holds the first
  (a compaction or /clear starts the context afresh);
- the timeline keeps the first phase; a new session's briefing gives the decisions' text and the
  previous session's timeline; ``phase:<p>`` answers with that phase's hand-off page first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from ctxlifed.core import figures as F
from ctxlifed.runtime.ctl import ctl_command
from conftest import run_shim
from test_engine import Session, eventually, ledgers

SID_A = "aaaa0000-1111-2222-3333-444444444444"
SID_B = "bbbb0000-1111-2222-3333-444444444444"

SCRIPTS = {
    "en": {
        "plan": "Plan the CSV importer. We decided to use a streaming parser for large files. "
                "TODO: handle quoted newlines. The importer must never drop rows.",
        "implement": "Looks good, let's implement it.",
        "decision_words": "streaming parser",
        "more": "continue with the error handling",
    },
    "zh": {
        "plan": "规划一下 CSV 导入器。我们决定采用流式解析器处理大文件。待办：处理带引号的换行。导入器必须不丢行。",
        "implement": "好的，开始实现吧。",
        "decision_words": "流式解析器",
        "more": "继续处理错误",
    },
}

PCT = re.compile(r"(?<![\w.])(\d{1,4}(?:\.\d)?)%")
TOKENS_AWAY = re.compile(r"([\d,]+) tokens away")
IDS = re.compile(r"(?<![\w/])#(\d+)\b")
CTL = re.compile(r"([^\s(`]*)ctxlifectl\b")


@dataclass
class Said:
    """One text ctxlifed returned, with the status it must agree with."""

    where: str
    text: str
    status: dict[str, Any]
    epoch: int  # which context it entered: a compaction or /clear starts a new one
    briefing: bool = False


@dataclass
class Transcript:
    session: Session
    said: list[Said] = field(default_factory=list)
    epoch: int = 0

    def status(self) -> dict[str, Any]:
        return self.session.status()

    def shim(self, event: str, **kw: Any) -> str:
        """One hook event through the real shim, as Claude Code runs it; its stdout."""
        env = dict(self.session.d.env, CTXLIFED_DAEMON_CMD="/bin/true", CTXLIFED_HOOK_DEADLINE="4")
        r = run_shim(self.session.base(event, **kw), env)
        assert r.returncode == 0 and not r.stderr, (event, r.returncode, r.stderr)
        return r.stdout.decode()

    def hook(self, event: str, **kw: Any) -> dict[str, Any]:
        stdout = self.shim(event, **kw)
        out = json.loads(stdout) if stdout else {}
        self.note(event, out)
        return out

    def note(self, event: str, out: dict[str, Any]) -> None:
        st = self.status()
        ctx = (out.get("hookSpecificOutput") or {}).get("additionalContext", "")
        if ctx:
            self.said.append(Said(f"{event}.additionalContext", ctx, st, self.epoch, briefing=event == "SessionStart"))
        if out.get("systemMessage"):
            self.said.append(Said(f"{event}.systemMessage", out["systemMessage"], st, self.epoch))

    def post_compact(self, summary: str) -> str:
        stdout = self.shim("PostCompact", trigger="manual", compact_summary=summary)
        if stdout:
            self.said.append(Said("PostCompact.stdout", stdout, self.status(), self.epoch))
        return stdout

    def cli(self, where: str, *args: str, stdin: str | None = None, module: str = "ctxlifed.cli.main") -> str:
        """A ctxlifectl command's output, as the user (or the /ctxlifed:recall command) gets it."""
        env = dict(os.environ, CTXLIFED_SOCKET=self.session.d.socket)
        out = subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True,
                             check=True, timeout=30, input=stdin, cwd=self.session.project).stdout
        self.said.append(Said(where, out, self.status(), self.epoch))
        return out

    def cli_status(self) -> str:
        return self.cli("status", "status", "--session", self.session.sid)

    def cli_reads(self, words: str) -> None:
        """recall, lessons, compactions and the status line: the other texts ctxlifed shows."""
        self.cli("recall", "recall", words)
        self.cli("lessons", "lessons")
        self.cli("compactions", "compactions", "--session", self.session.sid)
        self.cli("statusline", stdin=json.dumps({"session_id": self.session.sid}), module="ctxlifed.cli.statusline")


def boundary(s: Session, pre: int, post: int) -> None:
    """Claude Code's compact boundary and summary, as they land in the transcript."""
    s.n += 1
    recs = [
        {"type": "system", "subtype": "compact_boundary", "uuid": f"b{s.n}", "timestamp": "2026-11-29T11:00:00.000Z",
         "compactMetadata": {"trigger": "manual", "preTokens": pre, "postTokens": post}},
        {"type": "user", "uuid": f"s{s.n}", "timestamp": "2026-11-29T11:00:01.000Z", "isCompactSummary": True,
         "message": {"role": "user", "content": "Summary: the CSV importer is being implemented."}},
    ]
    with open(s.transcript, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)


def started(daemon: Any, sid: str) -> Transcript:
    """A session that started with 30,000 tokens in its window (the fixed part and a first exchange)."""
    a = Transcript(Session(daemon, sid=sid))
    a.session.usage(30_000)
    a.hook("SessionStart", source="startup")
    return a


def compact(a: Transcript, pre: int, post: int, trigger: str = "manual") -> None:
    """A compaction as Claude Code runs it: PreCompact, the boundary in the transcript, SessionStart(compact),
    PostCompact."""
    a.hook("PreCompact", trigger=trigger, custom_instructions="")
    boundary(a.session, pre=pre, post=post)
    a.epoch += 1
    a.hook("SessionStart", source="compact")
    a.post_compact("Summary: the CSV importer is being implemented.")


def figures(st: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The percentages and token counts ``status --json`` holds, as ctxlifed formats them."""
    pcts = {F.percent(st["working_pct"])} | {F.percent(z["pct"]) for z in st.get("zones") or []}
    toks = {F.tokens(st[k]) for k in ("tokens_to_autocompact", "autocompact_at", "context_tokens", "window")
            if st.get(k) is not None}
    toks |= {F.tokens(z[k]) for z in st.get("zones") or [] for k in ("used", "capacity")}
    return pcts, toks


def run_script(daemon: Any, lang: str) -> tuple[Transcript, Transcript]:
    sc = SCRIPTS[lang]
    a = Transcript(Session(daemon, sid=SID_A))
    s = a.session
    s.usage(30_000)
    a.hook("SessionStart", source="startup")
    a.hook("UserPromptSubmit", prompt=sc["plan"])
    for f in ("reader.py", "schema.py"):
        a.hook("PostToolUse", tool_name="Read", tool_input={"file_path": str(s.project / f)},
               tool_response={"file": {"content": "x = 1"}}, tool_use_id=f"toolu_r{f}")
    a.hook("UserPromptSubmit", prompt=sc["implement"])
    a.hook("PostToolUse", tool_name="Edit", tool_input={"file_path": str(s.project / "importer.py"),
           "old_string": "a", "new_string": "parser = StreamingParser()"}, tool_response={}, tool_use_id="toolu_e1")
    a.hook("PostToolUseFailure", tool_name="Bash", tool_input={"command": "pytest -q tests/test_importer.py"},
           error="Exit code 1\nFAILED tests/test_importer.py::test_quoted_newline - AssertionError\n1 failed",
           tool_use_id="toolu_t1")
    s.usage(30_000 + 100_000)  # Working ≈ 77 % of 130,000: level L1→L2
    a.hook("UserPromptSubmit", prompt=sc["more"])
    s.status()  # reads wait for the derivation: the advice is queued
    a.hook("Stop", stop_hook_active=False)
    a.cli_status()
    compact(a, pre=130_050, post=12_000)  # a manual compaction
    a.cli_status()
    # Two resumes: the context still holds the compact briefing.
    a.hook("SessionStart", source="resume")
    a.hook("SessionStart", source="resume")
    a.hook("SessionEnd", reason="other")
    eventually(lambda: len(ledgers(s.project, SID_A)) >= 2)
    # A new session of the same project.
    b = Transcript(Session(daemon, sid=SID_B))
    b.session.usage(30_000)
    b.hook("SessionStart", source="startup")
    a.cli_reads(sc["decision_words"])
    return a, b


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_rendered_word_is_right(daemon: Any, lang: str) -> None:
    a, b = run_script(daemon, lang)
    said = a.said + b.said
    assert {x.where for x in said} >= {"SessionStart.additionalContext", "Stop.systemMessage", "status"}
    ctl = ctl_command()
    assert os.path.isabs(ctl) and os.access(ctl, os.X_OK)
    for x in said:
        pcts, toks = figures(x.status)
        for m in PCT.finditer(x.text):
            assert f"{m.group(1)}%" in pcts, (x.where, m.group(0), sorted(pcts), x.text)
        for m in TOKENS_AWAY.finditer(x.text):
            assert m.group(1) in toks, (x.where, m.group(0), x.text)
        for m in CTL.finditer(x.text):
            if x.where in ("status", "lessons", "compactions", "statusline"):
                continue  # for the user at their own shell (the bare name is right there)
            assert m.group(1) + "ctxlifectl" == ctl, (x.where, m.group(0), x.text)
        if x.where not in ("status", "statusline"):
            for m in IDS.finditer(x.text):
                assert a.session.recall("", id=int(m.group(1)))["text"], (x.where, m.group(0))


def test_status_figures_equal_status_json(daemon: Any) -> None:
    """``ctxlifectl status`` prints each figure of ``status --json`` through the same formatting."""
    a, _b = run_script(daemon, "en")
    for x in (y for y in a.said if y.where == "status"):
        st = x.status
        assert f"(Working {F.percent(st['working_pct'])})" in x.text
        assert f"{F.tokens(st['tokens_to_autocompact'])} tokens away" in x.text
        for z in st["zones"]:
            assert f"{F.tokens(z['used'])} / " in x.text and F.percent(z["pct"]) in x.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_briefings_never_repeat_within_a_context(daemon: Any, lang: str) -> None:
    a, _b = run_script(daemon, lang)
    briefs = [x for x in a.said if x.briefing]
    seen: dict[int, set[str]] = {}
    for x in briefs:
        held = seen.setdefault(x.epoch, set())
        lines = {ln for ln in x.text.splitlines() if len(ln) > 12}
        assert not (lines & held), (x.where, sorted(lines & held))
        held |= lines
    resumes = [x for x in briefs if x.epoch == 1 and "resumed" in x.text or "changed since" in x.text]
    assert len(resumes) <= 1  # the second resume had nothing new to say


def test_compact_briefing_lists_window_content_with_figures_after_the_boundary(daemon: Any) -> None:
    a, _b = run_script(daemon, "en")
    compact = next(x for x in a.said if x.where == "SessionStart.additionalContext" and "was compacted" in x.text)
    listed = [ln for ln in compact.text.splitlines() if re.match(r"- #\d+", ln)]
    assert listed
    for ln in listed:
        item = a.session.recall("", id=int(re.match(r"- #(\d+)", ln).group(1)))["hits"][0]
        assert item["kind"] in ("prompt", "assistant", "thinking", "tool", "code_change", "error", "test_result")
        assert "(see recall --id)" not in ln and ln.split("] ", 1)[-1].strip()
    # After the boundary the context is the summary plus the fixed part (system prompt, tools).
    st = compact.status
    ledger = next(z["used"] for z in st["zones"] if z["name"] == "Ledger")  # the briefing itself
    assert st["context_tokens"] - ledger == 12_000 + 30_000
    # No Working-zone figure in the compact briefing: Claude Code writes the boundary to the transcript
    # only after PostCompact, so at SessionStart(compact) any figure would be the pre-compaction one.
    assert "Working zone" not in compact.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_new_session_gets_decisions_and_the_whole_timeline(daemon: Any, lang: str) -> None:
    _a, b = run_script(daemon, lang)
    ctx = next(x.text for x in b.said if x.briefing)
    assert SCRIPTS[lang]["decision_words"] in ctx
    tl = next(ln for ln in ctx.splitlines() if ln.startswith("Phase timeline"))
    assert "planning" in tl and "implementation" in tl and tl.index("planning") < tl.index("implementation")
    md = b.session.recall("timeline", session=SID_A)["markdown"]
    assert "1. planning" in md and "implementation" in md


def test_phase_recall_gives_the_hand_off_page_first(daemon: Any) -> None:
    a, _b = run_script(daemon, "en")
    r = a.session.recall("phase:planning")
    first = r["markdown"].splitlines()[0]
    assert first.startswith("**Hand-off page** #") and "phase-1-planning.md" in first
    assert "# Phase 1 — planning" in r["markdown"]
    assert r["hits"][0]["kind"] == "ledger" and a.session.recall("", id=r["hits"][0]["id"])["text"]


RUNNABLE = re.compile(r"([^\s(`]*ctxlifectl(?: [^`\n;)]*)?)")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_command_named_runs_as_written(daemon: Any, lang: str) -> None:
    """Each concrete ``ctxlifectl …`` command the model is shown runs, exit 0, from a shell whose PATH
    holds no ctxlifectl (Claude Code's environment after ``make run`` + ``.venv/bin/ctxlifectl install``)."""
    a, b = run_script(daemon, lang)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8",
           "CTXLIFED_SOCKET": a.session.d.socket}
    ran = 0
    for x in a.said + b.said:
        if x.where == "status":
            continue
        for m in RUNNABLE.finditer(x.text):
            cmd = m.group(1).rstrip(".,:")
            if any(c in cmd for c in "<>…|"):
                continue  # a pattern with placeholders (`recall --id <id>`), not a command
            r = subprocess.run(cmd, shell=True, env=env, cwd=a.session.project, capture_output=True, text=True,
                               timeout=60, check=False)
            assert r.returncode == 0, (x.where, cmd, r.stdout[-500:], r.stderr[-500:])
            assert "command not found" not in r.stderr and "No archived context matches" not in r.stdout, (cmd, r.stdout)
            ran += 1
    assert ran >= 1


def test_a_resume_after_resume_then_compact_repeats_nothing_the_context_holds(daemon: Any) -> None:
    """``claude -p '/compact' --resume S`` then ``claude -p … --resume S`` (model_view's runs 2 and 3): the
    first resume's briefing is given before the compaction with no prompt between, so Claude Code keeps
    it after the summary, next to the compact briefing and PostCompact's re-injected facts. The next
    resume says none of their lines again."""
    sc = SCRIPTS["en"]
    a = started(daemon, "cccc0000-1111-2222-3333-444444444444")
    s = a.session
    a.hook("UserPromptSubmit", prompt=sc["plan"])
    a.hook("UserPromptSubmit", prompt=sc["implement"])
    a.hook("Stop", stop_hook_active=False)
    s.usage(30_000 + 100_000)
    a.hook("SessionStart", source="resume")
    compact(a, pre=130_050, post=12_000)
    before = len(a.said)
    a.hook("SessionStart", source="resume")
    held = {ln for x in a.said[:before] if x.where != "status" and x.where.startswith(("SessionStart", "PostCompact"))
            for ln in x.text.splitlines() if len(ln) > 12}
    assert any("streaming parser" in ln for ln in held)  # the decision was said before the compaction
    for x in a.said[before:]:
        lines = {ln for ln in x.text.splitlines() if len(ln) > 12}
        assert not lines & held, sorted(lines & held)
        assert not any("streaming parser" in ln for ln in lines)


def test_a_working_zone_figure_estimated_since_the_boundary_says_so(daemon: Any) -> None:
    """After a compaction the context figure is ctxlifed's estimate (the boundary's post-compaction figure and
    the fixed part) until a response reports the usage: a resume that names the Working zone then says "≈"
    (status says "(estimate)"); once a response reports it, the figure is plain."""
    sc = SCRIPTS["en"]
    a = started(daemon, "dddd0000-1111-2222-3333-444444444444")
    s = a.session
    a.hook("UserPromptSubmit", prompt=sc["implement"])
    s.usage(30_000 + 110_000)
    compact(a, pre=140_050, post=100_000, trigger="auto")  # a summary this long keeps the Working zone past 60 %
    a.hook("SessionStart", source="resume")
    st = a.said[-1].status
    assert st["estimated"] and st["level"] >= 1
    working = [ln for ln in a.said[-1].text.splitlines() if ln.startswith("Working zone: ")]
    assert working == [f"Working zone: ≈{F.percent(st['working_pct'])} used (level {F.level_name(st['level'])})."]
    s.usage(30_000 + 100_000)  # a response reports the usage
    a.hook("UserPromptSubmit", prompt=sc["more"])
    a.hook("SessionStart", source="resume")
    last = a.said[-1]
    assert last.where == "SessionStart.additionalContext"
    working = [ln for ln in last.text.splitlines() if ln.startswith("Working zone: ")]
    assert len(working) == 1 and re.fullmatch(r"Working zone: \d+(?:\.\d)?% used \(level L1→L2\)\.", working[0])
