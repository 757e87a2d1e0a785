"""Hooks as Claude Code times them: real ``claude -p`` sessions against the fake Messages API, with
ctxlifed installed the way a user installs it, timed by Claude Code's own debug log.

Each cycle is six real CLI runs in one private HOME and project: a new session that works (reads,
a failing and a passing test run, edits, a write), ``/compact`` of it (``--resume``), a resume that
runs one more command, a second new session in the same project (which now has memory), and a
session made with every hook disabled (one from before the install) that is then resumed: the
daemon's first sight of a transcript (``SessionStart:resume (first sight)``). Every
run writes ``--debug-file``; Claude Code logs each hook it waits for as
``Hooks: <Event>[:<matcher>] [<command>] finished with status N (<ms>ms)``, the time from spawning
the hook to having its output, measured by Claude Code itself. That is the figure reported, per
hook event and per SessionStart source (p50/p95), with the target: every hook ≤ 50 ms p95.

Rules:
- Same-run comparisons, interleaved cycle by cycle so machine noise hits every variant alike:
  ``ctxlifed`` (this source tree: its daemon, its ``ctxlifectl install``) and ``no-op`` (the same
  hook events and modes, but the command is an ``-I -S`` Python script that reads stdin and exits:
  what Claude Code's spawn and a bare interpreter cost at that moment of the session, e.g. while
  Claude Code itself starts up). ``--compare DIR`` adds another source tree (a checkout's ``src``)
  as a third variant, for before/after figures.
- The daemon runs at ``--log-level debug``: its per-request time (``request`` lines) is matched to
  the stored event (by start time), so each hook's row also says how much of it the daemon spent.
- Claude Code does not time every hook: PreCompact, PostCompact and SessionEnd run on another path
  that logs ``completed with status N`` without a duration. They are counted (``untimed``) and their
  daemon time is reported; they cannot count against the target.
- The CLI comes from ``CTXLIFED_CLAUDE_BIN`` or ``.cache/claude-code`` (``.ci/run`` installs it);
  without it the benchmark says so and reports nothing (no failure).
- Claude Code runs with a clean environment (no real key, no proxy, non-essential traffic off);
  its only network peer is tests/fakeapi.py on 127.0.0.1.

    bench/run.py cli_hooks [--quick]
    bench/bench_cli_hooks.py [--cycles N] [--compare SRC_DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, SRC, daemon_env, dist, rmtree, short_tmp, start_daemon, target  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from fakeapi import FakeAnthropic  # noqa: E402

TARGET_MS = 50.0
RUN_TIMEOUT = 120
SHIM_NAME = "ctxlifed_hook.py"
NOOP_NAME = "noop_hook.py"
NOOP = "import sys\nsys.stdin.buffer.read()\n"
# "Hooks: SessionStart:resume [cmd] finished with status 0 (44ms)"; "... moved to the background (1ms)"
TIMED = re.compile(r"Hooks: (?P<hook>\S+) \[(?P<cmd>[^\]]*)\](?: \(plugin [^)]*\))? "
                   r"(?P<how>finished with status (?P<rc>-?\d+)|moved to the background|timed out after \d+ms|"
                   r"cancelled|not run|failed to start) \((?P<ms>\d+(?:\.\d+)?)ms\)")
UNTIMED = re.compile(r"\] (?P<hook>[A-Z][A-Za-z]+(?::\S+)?) \[(?P<cmd>[^\]]*)\] completed with status (?P<rc>-?\d+)")

FILES = {
    "pricing.py": "def subtotal(items):\n    return sum(q * c for _n, q, c in items)\n\n\n"
                  "def total(items):\n    return subtotal(items)\n",
    "test_pricing.py": "import unittest\n\nfrom pricing import total\n\n\n"
                       "class T(unittest.TestCase):\n"
                       "    def test_small(self):\n        self.assertEqual(total([('pen', 2, 150)]), 300)\n\n"
                       "    def test_bulk(self):\n        self.assertEqual(total([('pen', 10, 150)]), 1350)\n",
    "README.md": "# shop\n",
}
OLD = "def total(items):\n    return subtotal(items)\n"
NEW = ("def total(items):\n    cents = subtotal(items)\n    if sum(q for _n, q, _c in items) >= 10:\n"
       "        cents -= cents // 10\n    return cents\n")

WORK = {"turns": [
    {"text": "Reading the code first.",
     "tool_uses": [{"name": "Read", "input": {"file_path": "{{PROJECT}}/pricing.py"}},
                   {"name": "Read", "input": {"file_path": "{{PROJECT}}/test_pricing.py"}}]},
    {"text": "We decided to put the discount in pricing.total(). Amounts must stay integer cents. "
             "TODO: document the rule in README.md.",
     "tool_use": {"name": "Bash", "input": {"command": "python3 -m unittest test_pricing 2>&1 || true",
                                            "description": "Run the tests"}}},
    {"tool_use": {"name": "Edit", "input": {"file_path": "{{PROJECT}}/pricing.py", "old_string": OLD,
                                            "new_string": NEW}}},
    {"tool_use": {"name": "Bash", "input": {"command": "python3 -m unittest test_pricing 2>&1",
                                            "description": "Re-run the tests"}}},
    {"tool_use": {"name": "Write", "input": {"file_path": "{{PROJECT}}/NOTES.md",
                                             "content": "Bulk discount: 10% from 10 items.\n"}}},
    {"tool_use": {"name": "Bash", "input": {"command": "git status --short", "description": "Status"}}},
    {"text": "Done: the discount is in and the tests pass."},
], "default_text": "OK."}
COMPACT = {"compact_summary": "<summary>1. Add a bulk discount to pricing.total(); tests pass.</summary>",
           "default_text": "OK."}
RESUME = {"turns": [
    {"tool_use": {"name": "Bash", "input": {"command": "python3 -m unittest test_pricing 2>&1",
                                            "description": "Check the tests"}}},
    {"text": "Still green."}], "default_text": "OK."}
AGAIN = {"turns": [
    {"tool_use": {"name": "Read", "input": {"file_path": "{{PROJECT}}/NOTES.md"}}},
    {"tool_use": {"name": "Bash", "input": {"command": "python3 -m unittest test_pricing 2>&1",
                                            "description": "Run the tests"}}},
    {"text": "All good."}], "default_text": "OK."}


def find_claude() -> tuple[str | None, str]:
    cand = os.environ.get("CTXLIFED_CLAUDE_BIN") or str(ROOT / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude")
    if not os.path.exists(cand):
        return None, (f"Claude Code CLI not found at {cand}: run .ci/run (it installs the pinned CLI into "
                      ".cache/claude-code) or set CTXLIFED_CLAUDE_BIN")
    try:
        out = subprocess.run([cand, "--version"], capture_output=True, text=True, timeout=60, check=False,
                             env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "DISABLE_AUTOUPDATER": "1"}).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"Claude Code CLI at {cand} does not run: {exc}"
    return cand, out.strip()


def hook_key(name: str) -> str:
    """``SessionStart:resume`` stays itself; ``PostToolUse:Bash`` -> ``PostToolUse``."""
    event, _, sub = name.partition(":")
    return name if event == "SessionStart" and sub else event


def parse_debug_log(text: str, marker: str) -> tuple[list[tuple[str, float, str]], list[str]]:
    """(hook key, ms, how) of every hook whose command contains ``marker`` that Claude Code timed, and
    the keys of those it ran without timing them."""
    timed, untimed = [], []
    for line in text.splitlines():
        m = TIMED.search(line)
        if m and marker in m.group("cmd"):
            how = "sync" if m.group("rc") is not None else m.group("how")
            timed.append((hook_key(m.group("hook")), float(m.group("ms")), how))
            continue
        m = UNTIMED.search(line)
        if m and marker in m.group("cmd"):
            untimed.append(hook_key(m.group("hook")))
    return timed, untimed


def _iso_ts(s: str) -> float:
    return _dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def daemon_times(log_path: Path, db_path: Path) -> list[tuple[str, float]]:
    """(hook key, daemon ms) per stored hook event: the daemon's ``request`` lines (method hook, logged
    at the end with their duration) matched to the stored event whose receipt time is their start."""
    reqs: list[tuple[float, float]] = []
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("event") == "request" and r.get("method") == "hook" and "ms" in r:
            ms = float(r["ms"])
            reqs.append((_iso_ts(str(r["timestamp"])) - ms / 1000, ms))
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10) as c:
            rows = c.execute("SELECT event, ts, payload FROM events WHERE source = 'hook' ORDER BY ts").fetchall()
    except sqlite3.Error:
        return []
    evs = []
    for event, ts, payload in rows:
        try:
            p = json.loads(payload)
        except (ValueError, TypeError):
            p = {}
        name = f"{event}:{p.get('source')}" if event == "SessionStart" and isinstance(p, dict) and p.get("source") else event
        evs.append((float(ts), hook_key(name)))
    out = []
    used: set[int] = set()
    j = 0
    for start, ms in sorted(reqs):
        best, best_d = None, 0.05  # the event's receipt is within the request (a few ms after its start)
        for i in range(max(0, j - 8), min(len(evs), j + 64)):
            if i in used:
                continue
            dlt = abs(evs[i][0] - start)
            if dlt < best_d:
                best, best_d = i, dlt
        if best is not None:
            used.add(best)
            j = best
            out.append((evs[best][1], ms))
    return out


class Variant:
    """One way of hooking Claude Code: ctxlifed from a source tree, or the no-op hook."""

    def __init__(self, label: str, base: Path, claude: str, src: Path | None) -> None:
        self.label = label
        self.base = base
        self.claude = claude
        self.src = src  # None: the no-op hook
        self.env = daemon_env(base)
        if src is not None:
            self.env["PYTHONPATH"] = str(src)
        self.env.pop("CTXLIFED_TRANSCRIPT_ROOTS", None)  # Claude Code's own ~/.claude/projects is the default root
        self.home = Path(self.env["HOME"])
        self.project = base / "proj"
        self.project.mkdir()
        subprocess.run(["git", "init", "-q", str(self.project)], check=True, capture_output=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "daemon.log"
        self.runs = 0
        self.timed: list[tuple[str, float, str]] = []
        self.untimed: list[str] = []
        self.failures: list[str] = []

    @property
    def marker(self) -> str:
        return NOOP_NAME if self.src is None else SHIM_NAME

    def setup(self) -> None:
        if self.src is None:
            noop = self.base / NOOP_NAME
            noop.write_text(NOOP)
            sys.path.insert(0, str(SRC))
            from ctxlifed.cli import install as I

            hooks = {spec.event: [I.hook_group(spec, PY, str(noop))] for spec in I.HOOKS}
            settings = self.home / ".claude" / "settings.json"
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps({"hooks": hooks}))
            return
        self.proc, _ = start_daemon(self.base, self.env, self.log, python=PY,
                                    args=("--log-level", "debug", "--log-json"), start_new_session=True)
        env = {**self.env, "CTXLIFED_DAEMON_CMD": "/bin/true"}
        r = subprocess.run([PY, "-m", "ctxlifed.cli.main", "install", "--scope", "user"], env=env, cwd=self.project,
                           capture_output=True, text=True, timeout=120, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"ctxlifectl install ({self.label}) failed: {r.stdout}{r.stderr}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def claude_env(self, api: FakeAnthropic) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb", "LANG": "C.UTF-8", "ANTHROPIC_BASE_URL": api.url,
               "ANTHROPIC_API_KEY": "test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": "1",
               "CTXLIFED_DAEMON_CMD": "/bin/true"}
        for k in ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
            env[k] = self.env[k]
        env.update({k: v for k, v in self.env.items() if k.startswith("CTXLIFED_") and k != "CTXLIFED_DAEMON_CMD"})
        return env

    def run(self, prompt: str, script: dict[str, Any], resume: str | None = None, *, hooks: bool = True,
            tag: str = "") -> str | None:
        """One ``claude -p`` run; ``hooks=False``: with every hook disabled (a session ctxlifed never
        sees); ``tag``: appended to the SessionStart keys of this run."""
        self.runs += 1
        dbg = self.base / f"debug-{self.runs:03d}.log"
        api = FakeAnthropic(script, vars={"PROJECT": str(self.project), "HOME": str(self.home)}).start()
        argv = [self.claude, "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", "claude-sonnet-4-5", "--debug-file", str(dbg)]
        if resume:
            argv += ["--resume", resume]
        if not hooks:
            argv += ["--settings", json.dumps({"disableAllHooks": True})]
        try:
            p = subprocess.run(argv, cwd=self.project, env=self.claude_env(api), capture_output=True, text=True,
                               timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            self.failures.append(f"run {self.runs} timed out")
            return None
        finally:
            api.stop()
        sid = None
        for line in p.stdout.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("type") == "result" and e.get("session_id"):
                sid = str(e["session_id"])
                break
        if p.returncode != 0 or sid is None:
            self.failures.append(f"run {self.runs} rc={p.returncode}: {p.stderr[-300:]}")
        try:
            timed, untimed = parse_debug_log(dbg.read_text(errors="replace"), self.marker)
        except OSError:
            timed, untimed = [], []
        if tag:
            timed = [(f"{k} {tag}" if k.startswith("SessionStart") else k, ms, how) for k, ms, how in timed]
        self.timed += timed
        self.untimed += untimed
        for key, _ms, how in timed:
            if how not in ("sync", "moved to the background"):
                self.failures.append(f"run {self.runs}: {key} {how}")
        return sid

    def cycle(self) -> None:
        for name, text in FILES.items():
            (self.project / name).write_text(text)
        (self.project / "NOTES.md").unlink(missing_ok=True)
        sid = self.run("Add a 10% bulk discount from 10 items to pricing.total() and make the tests pass.", WORK)
        if sid is None:
            return
        self.run("/compact keep the discount work", COMPACT, resume=sid)
        self.run("continue", RESUME, resume=sid)
        self.run("Check that the tests still pass.", AGAIN)
        # A session ctxlifed never saw (made with hooks off, like one from before the install), resumed:
        # the daemon's first sight of its transcript (~300 KB of Claude Code's records).
        for name, text in FILES.items():
            (self.project / name).write_text(text)
        (self.project / "NOTES.md").unlink(missing_ok=True)
        unseen = self.run("Add a 10% bulk discount from 10 items to pricing.total().", WORK, hooks=False)
        if unseen is not None:
            self.run("continue", RESUME, resume=unseen, tag="(first sight)")

    def daemon_ms(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        if self.src is None:
            return out
        for key, ms in daemon_times(self.log, Path(self.env["CTXLIFED_DATA_DIR"]) / "ctxlifed.db"):
            out.setdefault(key, []).append(ms)
        return out


def _order(key: str) -> tuple[int, str]:
    first = ["SessionStart:startup", "SessionStart:resume", "SessionStart:resume (first sight)", "SessionStart:compact",
             "SessionStart:clear",
             "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "Stop", "PreCompact", "PostCompact", "SessionEnd"]
    return (first.index(key) if key in first else len(first), key)


def run(quick: bool, log: Any = print, *, cycles: int | None = None, compare: Path | None = None,
        keep: Path | None = None) -> dict[str, Any]:
    claude, version = find_claude()
    if claude is None:
        log(f"   skipped: {version}")
        return {"rows": [], "targets": [], "skipped": version}
    n = cycles or (1 if quick else 4)
    log(f"   Claude Code {version}; {n} cycle(s) of 6 runs per variant, interleaved")
    base = keep if keep is not None else short_tmp("clcli-")
    base.mkdir(parents=True, exist_ok=True)
    variants: list[Variant] = []
    try:
        specs: list[tuple[str, Path | None]] = [("ctxlifed", SRC)]
        if compare is not None:
            specs.append(("compare", compare.resolve()))
        specs.append(("no-op", None))
        for i, (label, src) in enumerate(specs):
            d = base / f"v{i}"
            d.mkdir(mode=0o700)
            v = Variant(label, d, claude, src)
            v.setup()
            variants.append(v)
        for c in range(n):
            for v in variants:
                t0 = time.perf_counter()
                v.cycle()
                log(f"   cycle {c + 1}/{n} {v.label}: {time.perf_counter() - t0:.1f}s")
    finally:
        for v in variants:
            v.stop()
    rows: list[tuple[str, Any, str, str]] = []
    targets = []
    per: dict[str, dict[str, list[float]]] = {}
    for v in variants:
        d: dict[str, list[float]] = {}
        for key, ms, how in v.timed:
            if how == "sync":
                d.setdefault(key, []).append(ms)
        per[v.label] = d
    noop = per.get("no-op", {})
    report: dict[str, Any] = {"variants": {}}
    for v in variants:
        dms = v.daemon_ms()
        keys = sorted(set(per[v.label]) | set(dms) | set(v.untimed), key=_order)
        vrep: dict[str, Any] = {}
        for key in keys:
            cc = per[v.label].get(key, [])
            dd = dist(dms.get(key, []), 1)
            nn = dist(noop.get(key, []), 1)
            vrep[key] = {"claude_ms": dist(cc, 1), "daemon_ms": dd, "untimed": v.untimed.count(key)}
            if v.label == "no-op":
                if cc:
                    rows.append((f"cli no-op {key}", dist(cc, 1), "ms", "a bare -I -S interpreter, same event"))
                continue
            note_parts = []
            if nn.get("n"):
                note_parts.append(f"no-op p50/p95 {nn['p50']}/{nn['p95']}")
            if dd.get("n"):
                note_parts.append(f"daemon p50/p95 {dd['p50']}/{dd['p95']}")
            if not cc:
                background = sum(1 for k, _ms, how in v.timed if k == key and how == "moved to the background")
                note_parts.insert(0, f"async: Claude Code does not wait for it ({background} runs)" if background
                                  else f"not timed by Claude Code ({v.untimed.count(key)} runs)")
                rows.append((f"cli {v.label} {key}", dd if dd.get("n") else "-", "ms", "; ".join(note_parts)))
                continue
            rows.append((f"cli {v.label} {key}", dist(cc, 1), "ms", "; ".join(note_parts)))
            if v.label == "ctxlifed":
                targets.append(target(f"Claude Code times {key} (p95)", dist(cc, 1)["p95"], TARGET_MS, unit=" ms",
                                      note=f"N={len(cc)}"))
        report["variants"][v.label] = {"hooks": vrep, "runs": v.runs, "failures": v.failures}
        for f in v.failures:
            log(f"   {v.label}: {f}")
    if keep is None:
        rmtree(base)
    else:
        log(f"   kept: {base}")
    return {"rows": rows, "targets": targets, "claude": version, "cycles": n, **report}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--compare", type=Path, help="another source tree (its src/ folder) as a third variant")
    ap.add_argument("--keep", type=Path, help="keep the sandbox (debug logs, daemon logs) in this new folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(False, cycles=args.cycles, compare=args.compare, keep=args.keep,
              log=lambda *a: print(*a, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    if res.get("skipped"):
        return 0
    w = max((len(r[0]) for r in res["rows"]), default=10)
    print(f"\n{'hook':<{w}}  {'N':>3}  {'p50':>6}  {'p95':>6}  {'max':>6}  note")
    for metric, d, _unit, note in res["rows"]:
        if isinstance(d, dict):
            print(f"{metric:<{w}}  {d['n']:>3}  {d['p50']:>6}  {d['p95']:>6}  {d['max']:>6}  {note}")
        else:
            print(f"{metric:<{w}}  {'':>3}  {'-':>6}  {'':>6}  {'':>6}  {note}")
    for t in res["targets"]:
        print(f"  [{'PASS' if t['pass'] else 'MISS'}] {t['target']}: {t['value']} ms (≤ {t['limit']}) {t['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
