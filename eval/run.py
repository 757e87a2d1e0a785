"""The evaluation suite: replay labelled sessions through the real shim and daemon, score the judgment.

    python eval/run.py [--json out.json] [--only NAME ...] [--verbose] [--dump]

Rules:
- The corpus is data (``eval/corpus/*.json``); the rules that turn a session file into hook events and
  the matching rules that score what the daemon did are described in ``eval/README.md`` and below.
- Every hook event goes through the real hook shim (a subprocess, exactly as Claude Code runs it) to a
  real daemon (``python -m ctxlifed``) in a private temp folder. What is judged is read where a user or
  the model would see it: the answers (``additionalContext``, ``systemMessage``, PostCompact stdout),
  ``status`` after every event (phase, level), and the must-survive set the daemon records at a
  PreCompact probe sent after the session's last event (read from the daemon's own session state).
- Deterministic: one daemon, one project folder per session file, no sleeps (``status`` waits until
  every acknowledged event is derived). Scores depend only on the corpus and the daemon's code.
- Nothing here changes the daemon; a session file never reaches outside its temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "eval" / "corpus"
SHIM = ROOT / "src" / "ctxlifed" / "_shim" / "ctxlifed_hook.py"
sys.path.insert(0, str(ROOT / "src"))

from ctxlifed.cli.client import call  # noqa: E402
from ctxlifed.core.model import estimate_tokens  # noqa: E402
from ctxlifed.service.state import load as load_state  # noqa: E402
from ctxlifed.testing import daemon_env, start_daemon  # noqa: E402

FACT_KINDS = ("decision", "constraint", "pending", "failing_test")
ADVICE_KINDS = ("compact", "clear", "rewind", "subagent")
ADVICE_RE = {
    "compact": re.compile(r"/compact\b"),
    "clear": re.compile(r"/clear\b"),
    "rewind": re.compile(r"/rewind\b"),
    "subagent": re.compile(r"\bsub-?agents?\b", re.I),
}
ADVICE_WINDOW = 4  # hook events after the labelled one that may still carry the advice
DEFAULT_MODEL = "claude-sonnet-4-5"
HOOK_STEPS = frozenset({"start", "resume", "prompt", "tool", "fail", "bash", "stop", "compact", "end"})


# --------------------------------------------------------------------------- matching
def norm(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed (the form both labels and extracted texts are compared in)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def matches(keys: list[Any], text: str) -> bool:
    """A label's ``keys`` match a text when every key is contained in it (normalised). ``keys`` may
    instead be a list of alternatives (lists): any one alternative whose keys are all contained."""
    t = norm(text)
    if keys and all(isinstance(k, list) for k in keys):
        return any(all(norm(k) in t for k in alt) for alt in keys)
    return bool(keys) and all(norm(str(k)) in t for k in keys)


def advice_kinds(message: str) -> set[str]:
    return {k for k, rx in ADVICE_RE.items() if rx.search(message)}


# --------------------------------------------------------------------------- replay
@dataclass
class Seen:
    """What one hook event produced."""

    step: int  # index of the step in the session file
    event: str
    sid: str
    phase: str  # status after the event
    level: int  # status level before the event
    expected_phase: str | None
    context: str = ""
    message: str = ""
    stdout_text: str = ""  # plain-text answers (PostCompact)


@dataclass
class Replay:
    name: str
    seen: list[Seen] = field(default_factory=list)
    must_survive: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # sid -> items
    items_table: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sid -> items rows
    step_index: dict[str, int] = field(default_factory=dict)  # step id -> seen index of its first event


class Runner:
    """One daemon for the whole corpus; each session file gets its own project folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.env = daemon_env(base, CTXLIFED_HOOK_DEADLINE="4.0")
        self.proc, _ = start_daemon(base, self.env, base / "daemon.log", timeout=30.0)
        self.socket = self.env["CTXLIFED_SOCKET"]
        self.db = Path(self.env["CTXLIFED_DATA_DIR"]) / "ctxlifed.db"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return call(self.socket, method, params)

    def shim(self, payload: dict[str, Any]) -> str:
        r = subprocess.run([sys.executable, "-I", "-S", str(SHIM)], input=json.dumps(payload).encode(),
                           env=self.env, capture_output=True, timeout=30, check=False)
        return r.stdout.decode("utf-8", "replace")

    def replay(self, spec: dict[str, Any]) -> Replay:
        name = spec["name"]
        project = self.base / "p" / name
        (project / ".git").mkdir(parents=True, exist_ok=True)
        tdir = self.base / "projects" / f"-p-{name}"
        tdir.mkdir(parents=True, exist_ok=True)
        model = spec.get("model", DEFAULT_MODEL)
        out = Replay(name=name)
        sids: dict[str, str] = {}
        ctx: dict[str, int] = {}
        n = 0
        phase_label: dict[str, str | None] = {}
        cur = "a"

        def sid_of(alias: str) -> str:
            if alias not in sids:
                sids[alias] = f"eval-{name}-{alias}"[:64]
                (tdir / f"{sids[alias]}.jsonl").touch()
            return sids[alias]

        def transcript(alias: str) -> Path:
            return tdir / f"{sid_of(alias)}.jsonl"

        def usage(alias: str, tokens: int, text: str) -> None:
            nonlocal n
            n += 1
            rec = {"type": "assistant", "uuid": f"a{n}", "parentUuid": None, "isSidechain": False,
                   "timestamp": "2026-11-29T10:00:00.000Z", "sessionId": sid_of(alias),
                   "message": {"id": f"msg_{n}", "model": model, "role": "assistant",
                               "content": [{"type": "text", "text": text}],
                               "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": max(0, tokens - 10), "output_tokens": 60}}}
            with open(transcript(alias), "a") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            ctx[alias] = tokens

        def status(alias: str) -> dict[str, Any]:
            r = self.call("status", {"session": sid_of(alias)})
            return r["sessions"][0] if r["sessions"] else {"phase": "planning", "level": 0}

        def send(alias: str, step_no: int, event: str, **kw: Any) -> None:
            nonlocal n
            level_before = status(alias).get("level", 0) if out.seen else 0
            payload = {"session_id": sid_of(alias), "transcript_path": str(transcript(alias)), "cwd": str(project),
                       "hook_event_name": event, **kw}
            raw = self.shim(payload)
            context = message = text = ""
            if raw.strip():
                try:
                    ans = json.loads(raw)
                except ValueError:
                    ans = None
                if isinstance(ans, dict):
                    context = (ans.get("hookSpecificOutput") or {}).get("additionalContext", "") or ""
                    message = ans.get("systemMessage", "") or ""
                else:
                    text = raw
            st = status(alias)
            out.seen.append(Seen(step=step_no, event=event, sid=alias, phase=st.get("phase", ""), level=level_before,
                                 expected_phase=phase_label.get(alias), context=context, message=message,
                                 stdout_text=text))

        def tool_id() -> str:
            nonlocal n
            n += 1
            return f"toolu_{n:05d}"

        for i, step in enumerate(spec["steps"]):
            step = _subst(step, str(project))
            do = step["do"]
            cur = step.get("session", cur)
            if "phase" in step:
                phase_label[cur] = step["phase"]
            if "id" in step:
                out.step_index[step["id"]] = len(out.seen)
            if "ctx" in step and do != "say":
                usage(cur, int(step["ctx"]), "…")
            if do == "say":
                usage(cur, int(step.get("ctx", ctx.get(cur, 20_000) + 1_500)), step["text"])
                continue
            if do in ("start", "resume"):
                if cur not in ctx:
                    usage(cur, int(step.get("ctx", 20_000)), "Ready.")
                send(cur, i, "SessionStart", source="startup" if do == "start" else "resume", model=model)
            elif do == "prompt":
                send(cur, i, "UserPromptSubmit", prompt=step["text"])
            elif do == "tool":
                send(cur, i, "PostToolUse", tool_name=step["name"], tool_input=step.get("input", {}),
                     tool_response=step.get("response", {}), tool_use_id=tool_id())
            elif do == "bash":
                cmd, output = step["command"], step.get("output", "")
                if step.get("exit", 0):
                    send(cur, i, "PostToolUseFailure", tool_name="Bash", tool_input={"command": cmd},
                         error=f"Exit code {step['exit']}\n{output}", tool_use_id=tool_id())
                else:
                    send(cur, i, "PostToolUse", tool_name="Bash", tool_input={"command": cmd},
                         tool_response={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
                         tool_use_id=tool_id())
            elif do == "fail":
                send(cur, i, "PostToolUseFailure", tool_name=step["name"], tool_input=step.get("input", {}),
                     error=step.get("error", "failed"), tool_use_id=tool_id())
            elif do == "stop":
                send(cur, i, "Stop", stop_hook_active=False)
            elif do == "compact":
                send(cur, i, "PreCompact", trigger=step.get("trigger", "manual"), custom_instructions="")
                send(cur, i, "PostCompact", trigger=step.get("trigger", "manual"),
                     compact_summary=step.get("summary", ""))
                usage(cur, int(step.get("after", 30_000)), "Continuing after the summary.")
                send(cur, i, "SessionStart", source="compact", model=model)
            elif do == "end":
                send(cur, i, "SessionEnd", reason="other")
            else:
                raise ValueError(f"{name}: step {i}: unknown step {do!r}")

        # The probe: what the daemon would keep across a compaction now, per session of the file.
        for alias, sid in sids.items():
            self.shim({"session_id": sid, "transcript_path": str(transcript(alias)), "cwd": str(project),
                       "hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": ""})
            self.call("status", {"session": sid})
            out.must_survive[alias] = self._must_survive(sid)
            out.items_table[alias] = self._items(sid)
        return out

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def _must_survive(self, sid: str) -> list[dict[str, str]]:
        rows = self._read("SELECT state FROM sessions WHERE session = ?", (sid,))
        st = load(rows[0][0]) if rows else None
        return [{"kind": it.kind, "text": it.text} for it in (st.must_survive if st else [])]

    def _items(self, sid: str) -> list[dict[str, Any]]:
        rows = self._read("SELECT kind, text, status FROM items WHERE session = ? ORDER BY id", (sid,))
        return [{"kind": k, "text": t, "status": s} for k, t, s in rows]


def _subst(obj: Any, project: str) -> Any:
    """``$P`` in any string of a step stands for the project folder (tool inputs use absolute paths)."""
    if isinstance(obj, str):
        return obj.replace("$P", project)
    if isinstance(obj, list):
        return [_subst(x, project) for x in obj]
    if isinstance(obj, dict):
        return {k: _subst(v, project) for k, v in obj.items()}
    return obj


def load(blob: bytes | None) -> Any:
    return load_state(blob)


# --------------------------------------------------------------------------- scoring
@dataclass
class Score:
    name: str
    lang: str
    events: int = 0
    phase_ok: int = 0
    tp: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACT_KINDS, 0))
    fp: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACT_KINDS, 0))
    truth: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACT_KINDS, 0))
    found: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACT_KINDS, 0))
    goals: int = 0
    goals_ok: int = 0
    stale_injected: int = 0
    closed_kept: int = 0
    advice_unwanted: int = 0
    advice_missed: int = 0
    advice_expected: int = 0
    compact_below_l1: int = 0
    tokens: int = 0
    notes: list[str] = field(default_factory=list)


def score(spec: dict[str, Any], rp: Replay) -> Score:
    sc = Score(name=spec["name"], lang=spec.get("lang", "en"))
    steps = spec["steps"]
    # Phase accuracy: every hook event with a labelled phase (labels carry forward).
    for s in rp.seen:
        if s.event in ("PreCompact", "PostCompact") or s.expected_phase is None:
            continue
        sc.events += 1
        if s.phase == s.expected_phase:
            sc.phase_ok += 1
        else:
            sc.notes.append(f"phase @{s.step} {s.event}: got {s.phase}, want {s.expected_phase}")

    def seen_at(step_id: str | None) -> int:
        if step_id is None:
            return len(rp.seen)
        if step_id not in rp.step_index:
            raise ValueError(f"{spec['name']}: unknown step id {step_id!r}")
        return rp.step_index[step_id]

    facts = spec.get("facts", [])
    # Must-survive precision/recall at the end, per session alias.
    for alias, items in rp.must_survive.items():
        mine = [f for f in facts if f.get("session", "a") == alias]
        for kind in FACT_KINDS:
            labels = [f for f in mine if f["kind"] == kind]
            open_labels = [f for f in labels if f.get("closes_at") is None and not f.get("optional")]
            got = [it for it in items if it["kind"] == kind]
            sc.truth[kind] += len(open_labels)
            for lab in open_labels:
                if any(matches(lab["keys"], it["text"]) for it in got):
                    sc.tp[kind] += 1
                else:
                    sc.notes.append(f"missed {kind} [{alias}]: {lab['keys']}")
            for it in got:
                hit = [lab for lab in labels if matches(lab["keys"], it["text"])]
                if any(lab.get("optional") and lab.get("closes_at") is None for lab in hit):
                    continue  # neutral: neither right nor wrong
                sc.found[kind] += 1
                if not any(lab.get("closes_at") is None for lab in hit):
                    sc.fp[kind] += 1
                    if hit:
                        sc.closed_kept += 1
                        sc.notes.append(f"closed {kind} kept [{alias}]: {it['text'][:90]}")
                    else:
                        sc.notes.append(f"extra {kind} [{alias}]: {it['text'][:90]}")
        goal = spec.get("goals", {}).get(alias)
        if goal:
            sc.goals += 1
            got_goal = [it["text"] for it in items if it["kind"] == "goal"]
            if any(matches(goal, g) for g in got_goal):
                sc.goals_ok += 1
            else:
                sc.notes.append(f"goal [{alias}]: got {got_goal[:1]!r}, want {goal}")
    # Closed items presented as current: any injection after the item closed that names it.
    for f in facts:
        if f.get("closes_at") is None:
            continue
        start = seen_at(f["closes_at"])
        for s in rp.seen[start + 1:]:
            text = "\n".join(x for x in (s.context, s.message, s.stdout_text) if x)
            if text and _names(f, text):
                sc.stale_injected += 1
                sc.notes.append(f"stale {f['kind']} injected @{s.step} {s.event}: {f['keys']}")
    # Advice: labelled windows, unwanted and missed.
    windows: list[tuple[str, int, int]] = []
    for i, step in enumerate(steps):
        for kind in step.get("advise", []):
            start = next((k for k, s in enumerate(rp.seen) if s.step >= i), len(rp.seen))
            windows.append((kind, start, start + ADVICE_WINDOW))
    for kind, lo, hi in windows:
        sc.advice_expected += 1
        if not any(kind in advice_kinds(s.message) for s in rp.seen[lo:hi + 1]):
            sc.advice_missed += 1
            sc.notes.append(f"missed {kind} advice after step {rp.seen[lo].step if lo < len(rp.seen) else 'end'}")
    for k, s in enumerate(rp.seen):
        for kind in advice_kinds(s.message):
            if any(w == kind and lo <= k <= hi for w, lo, hi in windows):
                continue
            sc.advice_unwanted += 1
            if kind == "compact" and s.level < 1:
                sc.compact_below_l1 += 1
            sc.notes.append(f"unwanted {kind} advice @{s.step} {s.event} (level {s.level}): {s.message[:100]!r}")
    sc.tokens = sum(estimate_tokens(x) for s in rp.seen for x in (s.context, s.message, s.stdout_text) if x)
    return sc


_FAILURE_WORDS = re.compile(r"fail|error|red\b|broken|失败|报错", re.I)


def _names(fact: dict[str, Any], text: str) -> bool:
    """Does an injected text present this item as current? Each line is checked on its own (one line,
    one item). A failing test is presented as current only by a line that says it fails: a line naming
    the test function as code that was written or read does not."""
    lines = (ln for ln in text.splitlines() if matches(fact["keys"], ln))
    if fact.get("kind") == "failing_test":
        return any(_FAILURE_WORDS.search(ln) for ln in lines)
    return any(True for _ in lines)


# --------------------------------------------------------------------------- table
def ratio(a: int, b: int) -> float | None:
    return None if b == 0 else a / b


def totals(scores: list[Score]) -> dict[str, Any]:
    t: dict[str, Any] = {"sessions": len(scores)}
    t["phase_accuracy"] = ratio(sum(s.phase_ok for s in scores), sum(s.events for s in scores))
    for k in FACT_KINDS:
        tp = sum(s.tp[k] for s in scores)
        t[f"{k}_precision"] = ratio(sum(s.found[k] - s.fp[k] for s in scores), sum(s.found[k] for s in scores))
        t[f"{k}_recall"] = ratio(tp, sum(s.truth[k] for s in scores))
    t["goal_match"] = ratio(sum(s.goals_ok for s in scores), sum(s.goals for s in scores))
    t["stale_injected"] = sum(s.stale_injected for s in scores)
    t["closed_kept"] = sum(s.closed_kept for s in scores)
    t["advice_unwanted"] = sum(s.advice_unwanted for s in scores)
    t["advice_missed"] = sum(s.advice_missed for s in scores)
    t["advice_expected"] = sum(s.advice_expected for s in scores)
    t["compact_below_l1"] = sum(s.compact_below_l1 for s in scores)
    t["tokens_injected"] = sum(s.tokens for s in scores)
    t["tokens_per_session"] = round(t["tokens_injected"] / max(1, len(scores)))
    return t


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def table(scores: list[Score]) -> str:
    head = ("session", "lang", "phase", "dec P/R", "con P/R", "pend P/R", "test P/R", "goal", "stale",
            "adv +/-", "tokens")
    rows = []
    for s in scores:
        pr = []
        for k in FACT_KINDS:
            pr.append(f"{_f(ratio(s.found[k] - s.fp[k], s.found[k]))}/{_f(ratio(s.tp[k], s.truth[k]))}")
        rows.append((s.name, s.lang, _f(ratio(s.phase_ok, s.events)), *pr, f"{s.goals_ok}/{s.goals}",
                     str(s.stale_injected + s.closed_kept), f"{s.advice_unwanted}/{s.advice_missed}", str(s.tokens)))
    t = totals(scores)
    rows.append(("ALL", "", _f(t["phase_accuracy"]),
                 *[f"{_f(t[f'{k}_precision'])}/{_f(t[f'{k}_recall'])}" for k in FACT_KINDS],
                 _f(t["goal_match"]), str(t["stale_injected"] + t["closed_kept"]),
                 f"{t['advice_unwanted']}/{t['advice_missed']}", f"{t['tokens_per_session']}/s"))
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    out.append("")
    out.append(f"stale = closed items injected after they closed ({t['stale_injected']}) + closed items kept in the "
               f"must-survive set ({t['closed_kept']}); adv +/- = advice given where it should not be / missed where "
               f"it should be ({t['advice_expected']} expected); /compact below level 1 outside a labelled boundary: "
               f"{t['compact_below_l1']}")
    return "\n".join(out)


def load_corpus(only: list[str] | None = None) -> list[dict[str, Any]]:
    specs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CORPUS.glob("*.json"))]
    return [s for s in specs if not only or s["name"] in only]


def dump(rp: Replay) -> str:
    """Everything the daemon did in one session file: per event the phase and the answers, then the
    items it stored and the must-survive set of the probe (``--dump``, for finding why a point was lost)."""
    out = [f"== {rp.name}"]
    for k, s in enumerate(rp.seen):
        want = "" if s.expected_phase in (None, s.phase) else f" (want {s.expected_phase})"
        out.append(f"@{s.step} #{k} [{s.sid}] {s.event}: {s.phase}{want} L{s.level}")
        for label, text in (("ctx", s.context), ("msg", s.message), ("out", s.stdout_text)):
            if text:
                out += [f"    {label}| {line}" for line in text.splitlines()]
    for alias in rp.items_table:
        out.append(f"-- items [{alias}]")
        out += [f"    {r['kind']:<10} {r['status']:<8} {r['text']}" for r in rp.items_table[alias]]
        out.append(f"-- must-survive [{alias}]")
        out += [f"    {r['kind']:<12} {r['text']}" for r in rp.must_survive.get(alias, [])]
    return "\n".join(out)


def run(only: list[str] | None = None, dump_to: Any = None) -> tuple[list[Score], dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="ev-", dir="/tmp"))
    os.chmod(base, 0o700)
    runner = Runner(base)
    try:
        scores = []
        for spec in load_corpus(only):
            rp = runner.replay(spec)
            if dump_to is not None:
                print(dump(rp), file=dump_to)
            scores.append(score(spec, rp))
    finally:
        runner.close()
        shutil.rmtree(base, ignore_errors=True)
    return scores, totals(scores)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the scores to this file")
    ap.add_argument("--only", nargs="*", help="session names to run")
    ap.add_argument("--verbose", "-v", action="store_true", help="print why each point was lost")
    ap.add_argument("--dump", action="store_true", help="print every event's phase and answers, the stored items"
                                                        " and the must-survive set of each session")
    a = ap.parse_args(argv)
    scores, t = run(a.only, dump_to=sys.stdout if a.dump else None)
    print(table(scores))
    if a.verbose:
        for s in scores:
            for note in s.notes:
                print(f"  {s.name}: {note}")
    if a.json:
        Path(a.json).write_text(json.dumps({"totals": t, "sessions": [s.__dict__ for s in scores]}, indent=2,
                                           ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
