"""End-to-end harness: the real Claude Code CLI, headless, against tests/fakeapi.py and a real daemon.

Rules:
- The CLI comes from ``CTXLIFED_CLAUDE_BIN`` or ``.cache/claude-code`` (``.ci/run`` installs the
  pinned version there); without it, or with another version, every e2e test skips and says why.
- Each test gets a private HOME / XDG dirs / project (a ``git init`` repo) under a short temp dir,
  the daemon of the root conftest (READY=1 on NOTIFY_SOCKET, no sleeps) and hooks installed the way
  a user does it: ``ctxlifectl install`` with that HOME.
- Claude Code runs with a clean environment (like ``env -i``): no real key, no proxy, non-essential
  traffic off; its only network peer is the fake API on 127.0.0.1. ``IS_SANDBOX=1`` lets
  ``--dangerously-skip-permissions`` run as root.
- The shim's auto-start is pointed at ``/bin/true`` so a test that stops the daemon keeps it stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fakeapi import FakeAnthropic  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PINNED = "2.1.328"
RUN_TIMEOUT = 90


def find_claude() -> tuple[str | None, str]:
    cand = os.environ.get("CTXLIFED_CLAUDE_BIN") or str(ROOT / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude")
    if not os.path.exists(cand):
        return None, (f"Claude Code CLI not found at {cand}: run .ci/run (npm install --prefix .cache/claude-code "
                      f"@anthropic-ai/claude-code@{PINNED}) or set CTXLIFED_CLAUDE_BIN")
    try:
        out = subprocess.run([cand, "--version"], capture_output=True, text=True, timeout=30, check=False,
                             env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "DISABLE_AUTOUPDATER": "1"}).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"Claude Code CLI at {cand} does not run: {exc}"
    if PINNED not in out:
        return None, f"Claude Code CLI at {cand} is {out.strip()!r}; the e2e tests pin {PINNED}"
    return cand, ""


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    api: FakeAnthropic
    elapsed: float
    events: list[dict[str, Any]] = field(default_factory=list)
    fired: list[tuple[str, str]] = field(default_factory=list)  # (event, session) from the logger hook

    @property
    def session_id(self) -> str:
        for e in self.events:
            if e.get("type") == "result" and e.get("session_id"):
                return str(e["session_id"])
        for e in self.events:
            if e.get("session_id"):
                return str(e["session_id"])
        raise AssertionError(f"no session id in the stream:\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}")

    @property
    def result(self) -> dict[str, Any]:
        for e in self.events:
            if e.get("type") == "result":
                return e
        raise AssertionError(f"no result event:\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}")

    def hooks(self, subtype: str = "hook_response") -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == "system" and e.get("subtype") == subtype]

    def hook_context(self, hook_name: str) -> str:
        """additionalContext printed by the hook ``hook_name`` (e.g. "SessionStart:compact")."""
        texts = []
        for e in self.hooks():
            if e.get("hook_name") == hook_name and (e.get("stdout") or "").strip().startswith("{"):
                out = json.loads(e["stdout"])
                texts.append(out.get("hookSpecificOutput", {}).get("additionalContext", ""))
        return "\n".join(t for t in texts if t)

    def reset_session_id(self) -> str | None:
        for e in self.events:
            if e.get("type") == "conversation_reset":
                return str(e.get("new_conversation_id"))
        return None


LOGGER = """import json, os, sys
d = json.loads(sys.stdin.buffer.read() or b"{}")
line = "%s\\t%s\\n" % (d.get("hook_event_name", "?"), d.get("session_id", ""))
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.write(fd, line.encode())
"""


def logger_settings(logger: Path, log: Path) -> str:
    from ctxlifed.cli import install as I

    hooks: dict[str, Any] = {}
    for spec in I.HOOKS:
        g = I.hook_group(spec, sys.executable, str(logger))
        g["hooks"][0]["args"] = ["-I", "-S", str(logger), str(log)]
        hooks[spec.event] = [g]
    return json.dumps({"hooks": hooks})


class ClaudeEnv:
    """One private world: HOME, project, daemon, and a way to run Claude Code in it."""

    def __init__(self, claude: str, base: Path, daemon: Any) -> None:
        self.claude = claude
        self.base = base
        self.daemon = daemon
        self.home = Path(daemon.env["HOME"])
        self.project = base / "proj"
        self.project.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(self.project)], check=True, capture_output=True)
        self.extra_env: dict[str, str] = {}
        # Ground truth of what Claude Code fired: a logger hook next to ctxlifed's, same events and
        # modes, passed with --settings (hook arrays from several sources merge).
        self.hook_log = base / "fired.log"
        self.logger = base / "hooklog.py"
        self.logger.write_text(LOGGER)

    # -- environments ------------------------------------------------------------------------------
    def ctxlifed_env(self) -> dict[str, str]:
        keep = ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
        env = {k: v for k, v in self.daemon.env.items() if k in keep or k.startswith("CTXLIFED_")}
        env["CTXLIFED_DAEMON_CMD"] = "/bin/true"
        return env

    def claude_env(self, api: FakeAnthropic, **extra: str) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
            **self.ctxlifed_env(),
            **self.extra_env,
        }
        env.update(extra)
        return env

    # -- ctxlifectl --------------------------------------------------------------------------------
    def ctl(self, *args: str, check: bool = True, exe: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = (exe or [sys.executable, "-m", "ctxlifed.cli.main"]) + list(args)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **self.ctxlifed_env()}
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=self.project, timeout=60, check=False)
        if check and r.returncode != 0:
            raise AssertionError(f"ctxlifectl {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def install(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.ctl("install", *args)

    def status(self, session: str) -> dict[str, Any]:
        r = json.loads(self.ctl("status", "--json", "--session", session).stdout)
        assert r["sessions"], f"daemon knows no session {session}: {r}"
        return dict(r["sessions"][0])

    # -- store ---------------------------------------------------------------------------------------
    def db(self) -> sqlite3.Connection:
        path = self.daemon.data_dir / "ctxlifed.db"
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)

    def stored_events(self, session: str) -> list[tuple[str, str]]:
        """(event, source) of every stored event of a session, in id order."""
        with self.db() as c:
            return [(e, s) for e, s in c.execute("SELECT event, source FROM events WHERE session = ? ORDER BY id", (session,))]

    def wait_for(self, what: str, pred: Any, timeout: float = 15.0) -> Any:
        """Poll a condition that the daemon reaches asynchronously (ingest, ledger write)."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}:\n{self.daemon.log.read_text()[-3000:]}")
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    # -- Claude Code ---------------------------------------------------------------------------------
    def fired_lines(self) -> list[tuple[str, str]]:
        if not self.hook_log.exists():
            return []
        return [tuple(x.split("\t", 1)) for x in self.hook_log.read_text().splitlines() if x]  # type: ignore[misc]

    def run(self, prompt: str, script: dict[str, Any] | None = None, *, resume: str | None = None,
            args: tuple[str, ...] = (), env: dict[str, str] | None = None, observe: bool = True,
            skip_permissions: bool = True) -> Run:
        """One ``claude -p`` run; ``skip_permissions=False`` keeps Claude Code's default permission mode
        (pass ``--allowedTools`` in ``args`` for what the script needs)."""
        api = FakeAnthropic(script or {}, vars={"PROJECT": str(self.project), "HOME": str(self.home)}).start()
        argv = [self.claude, "-p", prompt, "--output-format", "stream-json", "--verbose", "--include-hook-events"]
        if skip_permissions:
            argv.append("--dangerously-skip-permissions")
        if resume:
            argv += ["--resume", resume]
        argv += list(args)
        if observe:
            argv += ["--settings", logger_settings(self.logger, self.hook_log)]
        seen = len(self.fired_lines())
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, cwd=self.project, env=self.claude_env(api, **(env or {})), capture_output=True,
                               text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
        finally:
            api.stop()
        run = Run(p.returncode, p.stdout, p.stderr, api, time.monotonic() - t0)
        run.fired = self.fired_lines()[seen:]
        for line in p.stdout.splitlines():
            try:
                run.events.append(json.loads(line))
            except ValueError:
                pass
        return run




def no_hook_errors(run: Run) -> None:
    """No hook failure reached the model, and Claude Code saw every hook succeed."""
    bad = ("hook error", "hook blocking error", "non-blocking status", "Hook cancelled", "hook_non_blocking_error")
    for r in run.api.requests:
        t = r.text()
        for b in bad:
            assert b not in t, f"{b!r} reached the model in request {r.seq} ({r.kind})"
    failed = [e for e in run.hooks() if e.get("outcome") not in (None, "success")]
    assert not failed, f"hooks did not succeed: {failed}"


def git_available() -> bool:
    return shutil.which("git") is not None
