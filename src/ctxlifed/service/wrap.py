"""The PreToolUse wrapper for test and build commands (issue 17 item 4): the answer that reroutes a command
through ``ctxlifectl run``, and ``wrap.store``, where the wrapper hands over the output it kept.

Rules:
- Opt-in: ``wrap_failing_commands`` (global or the project's, ``Config.wrap_mode``); off, PreToolUse is
  answered as before (nothing).
- A PreToolUse(Bash) call is wrapped only when ``core.wrap_policy.decide`` says the ORIGINAL command would
  have run without a prompt anyway (the session's permission mode and the rules of every settings file
  ``runtime.claude_settings`` reads). The answer is ``permissionDecision: "allow"`` with ``updatedInput``
  = the call's input with ``command`` = ``<ctl> run --session <id> -- <original verbatim>``; the other
  input fields are kept. Not wrapped: a tool input with any field but ``command``, ``description`` and
  ``timeout`` (``run_in_background``, ``dangerouslyDisableSandbox``), a command or description the
  daemon's redaction changed (the daemon holds only the redacted text, which must not be run), a
  transcript path outside the transcript roots, any error or a timeout (:data:`DECIDE_TIMEOUT_S`).
  The cheap checks (``wrap_policy.precheck``) come first: only a candidate reads settings and ``/proc``
  (``CTXLIFED_PROC_ROOT`` points the scan at a fake ``/proc``: a test seam).
- ``wrap.store``: the output is redacted, then decided like a PostToolUse output of that command
  (``core.compress_policy``; a failing command is digested from 10,000 characters on, where Claude Code
  would cut its middle); kept: ``replace`` False and the wrapper prints the output itself. Replaced:
  the full output is archived first (its id exists when the digest names it), written to the session's
  file of full outputs (``compress.outputs_dir``: readable by the model without a prompt), and the
  digest names both. The saving counts in ``status`` like live compression's.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import structlog

from ..core import wrap_policy as WP
from ..core.hook_events import PostToolUse, PreToolUse
from ..core.paths import validate_session_id
from ..core.redact import redact
from ..protocol import _errors as E
from ..protocol import _methods as M
from ..runtime import claude_settings
from ..runtime.ctl import ctl_command
from ..store import outputs
from . import compress, files
from . import cost as COST

if TYPE_CHECKING:
    from ..runtime.config import Config
    from ..store.db import Writer
    from .state import SessionState

log = structlog.get_logger("ctxlifed.wrap")

DECIDE_TIMEOUT_S = 0.5
WRAPPABLE_INPUT_KEYS = frozenset({"command", "description", "timeout"})
FAILING_CUT_CHARS = 10_000  # a failing command's output past this: Claude Code shows only its first and last 5,000
REDACTION_MARK = "[REDACTED"


async def pre_tool_use(cfg: Config, event: PreToolUse) -> dict[str, Any] | None:
    """PreToolUse's hookSpecificOutput fields that wrap this call, or None (see the module rules). Never raises."""
    try:
        if event.tool_name != "Bash":
            return None
        cwd = event.cwd
        if not cwd or not cfg.wrap_mode(files.project_root(cwd)):
            return None
        with anyio.move_on_after(DECIDE_TIMEOUT_S):
            return await _pre_tool_use(cfg, event, cwd)
        log.warning("wrap_decide_timeout")
    except Exception:  # noqa: BLE001 - fail safe: the call goes on as Claude Code decides
        log.exception("wrap_decide_failed")
    return None


async def _pre_tool_use(cfg: Config, event: PreToolUse, cwd: str) -> dict[str, Any] | None:
    ti = event.tool_input
    if not set(ti) <= WRAPPABLE_INPUT_KEYS:
        return None
    command = ti.get("command")
    if not isinstance(command, str) or any(isinstance(v, str) and REDACTION_MARK in v for v in ti.values()):
        return None
    try:
        sid = validate_session_id(event.session_id)
    except ValueError:
        return None
    if WP.precheck(command, event.permission_mode, cwd):
        return None  # not a candidate: no settings file read
    tpath = event.transcript_path
    if files.transcript_allowed(tpath, cfg.allowed_transcript_roots()) is None:
        return None
    proc = os.environ.get("CTXLIFED_PROC_ROOT") or claude_settings.PROC  # a test seam: a fake /proc
    rules = await anyio.to_thread.run_sync(partial(claude_settings.read_rules, cwd, tpath, proc=proc),
                                           abandon_on_cancel=True)
    verdict = WP.decide(command, event.permission_mode, rules, cwd)
    log.info("wrap_decision", session=sid, wrap=verdict.wrap, reason=verdict.reason)
    if not verdict.wrap:
        return None
    new_input = {**ti, "command": WP.wrapped_command(ctl_command(), sid, command)}
    return {"permissionDecision": "allow",
            "permissionDecisionReason": f"ctxlifed wraps this test/build run to keep its full output ({verdict.reason})",
            "updatedInput": new_input}


async def store(p: M.WrapStoreParams, *, cfg: Config, sessions: Mapping[str, SessionState], writer: Writer,
                clock: Callable[[], float]) -> M.WrapStoreResult:
    """``wrap.store``: archive and digest a wrapped command's output (module rules). ``sessions``: the
    live sessions (the wrapped call's session is live: its PreToolUse was just answered)."""
    try:
        sid = validate_session_id(p.session)
    except ValueError as exc:
        raise E.InvalidParams(str(exc)) from None
    st = sessions.get(sid)
    cwd = p.cwd if os.path.isabs(p.cwd) else (st.cwd if st is not None else "")
    project = st.project if st is not None else files.project_root(cwd)
    text = p.output
    if cfg.redact:
        text, _n = redact(text)
    event = PostToolUse(session_id=sid, cwd=cwd, tool_name="Bash", tool_use_id=f"ctxlifed-wrap-{uuid.uuid4().hex}",
                        tool_input={"command": p.command},
                        tool_response={"stdout": text, "stderr": "", "interrupted": False, "isImage": False,
                                       "noOutputExpected": False})
    pending = await compress.prepare_event(
        cfg, event, project=project, level=st.level if st is not None else 0,
        phase=st.phase.phase if st is not None else "planning",
        edited_paths=st.files_touched if st is not None else [],
        transcript_path=st.transcript_path if st is not None else None, session=sid,
        cut_chars=FAILING_CUT_CHARS if p.exit_code != 0 else None)  # failing: Claude Code would cut its middle
    if pending is None:
        return M.WrapStoreResult(replace=False, reason="kept as it is (small, or wanted verbatim)")
    row = dataclasses.replace(pending.row, ts=clock())
    aid = await writer.run(partial(outputs.archive_output, row))
    replaced = await compress.finish(pending, aid, ctl=ctl_command(), max_dir_bytes=cfg.compress_files_mb << 20)
    if replaced is None:
        return M.WrapStoreResult(replace=False, archive_id=aid, reason="the digest would not save enough")
    out = replaced.fields.get("updatedToolOutput")
    dg = out.get("stdout") if isinstance(out, Mapping) else None
    if not isinstance(dg, str) or not dg:
        return M.WrapStoreResult(replace=False, archive_id=aid, reason="no digest")
    if st is not None:
        st.note_compressed(replaced.kind, replaced.original_tokens, replaced.digest_tokens)
        COST.note_live_compression(st, max(0, replaced.original_tokens - replaced.digest_tokens), cfg)
    path = os.path.join(pending.out_dir, f"{aid}.txt") if pending.out_dir else ""
    return M.WrapStoreResult(replace=True, digest=dg, archive_id=aid, path=path if path and os.path.exists(path) else "")

