"""Live compression on PostToolUse: the L1 digest replaces a bulky tool output in the window, its full
original archived in L2 first (issue 17). The pure parts are ``core/compress_policy.py`` (keep or
replace, and the answer's shape) and ``core/digest.py`` (the digest); this module does their I/O.

Rules:
- Only on the acknowledgement path of a live hook (``source == "hook"``, a session in memory): the
  answer is read by Claude Code only then. A replayed or spooled event, an event answered inline
  (the daemon just started), an error, a timeout (:data:`PREPARE_TIMEOUT_S`) or an unknown shape:
  the original stays (no ``updatedToolOutput``). Nothing here raises into the hook path.
- Order: :func:`prepare_event` (decide from the typed PostToolUse; read Claude Code's persisted file
  when the event holds only the first 30,000 characters, and redact it, unless ``readahead.py`` did both,
  and made the digest's body, when the file appeared) -> ONE writer job
  (``store.outputs.store_ack``) commits the event AND the archive row of the full original, so the
  id the digest names exists when the answer is sent -> :func:`finish` writes the full original to a
  file the model can ``Read`` and builds the digest (named by that id and that file) and the answer.
  The archive row has the derivation's uid (the tool_use_id): the derivation finds it and does not
  archive the call again.
- Only outputs past the policy's threshold pay a digest (``decide`` returns None cheaply for the rest).
- Persisted output files are read only when their real path lies under the transcript roots (Claude
  Code's ``projects`` folders, ``Config.allowed_transcript_roots``), are regular files and at most
  :data:`MAX_PERSISTED_BYTES`; otherwise the original stays (Claude Code's own preview). The text is
  redacted like everything stored (the payload itself was redacted on arrival).
- The file of full outputs: ``<folder of the session's transcript>/<session id>/ctxlifed-outputs/
  <archive id>.txt``, i.e. under ``~/.claude/projects/<project>/``, the one folder outside the project
  that Claude Code's default permissions let ``Read`` without a prompt (checked with the real CLI in
  ``-p`` default mode: the project's own folder there and the project dir are readable, another
  project's folder, ``/tmp`` and the XDG data dir are not; docs/claude-code.md). Written only when the
  transcript path lies under the transcript roots; files 0600, folder 0700; a session's folder is
  bounded by ``compress_files_mb`` (oldest files removed first; the folder is scanned when first seen
  and when its running total passes the bound). Without it the digest names the
  archive id only.
- A failing call (PostToolUseFailure) cannot be replaced: :func:`failure_note` says what Claude Code's
  cut removed (the middle of the output) and which failing tests the visible part names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import structlog

from ..core import classify, summarize as SUM
from ..core.compress_policy import (CompressSettings, Decision, decide, post_tool_use_answer, saved_output,
                                    worth_replacing)
from ..core.digest import DigestBody, digest_body, with_footer
from ..core.events import elements_from_event
from ..core.hook_events import PostToolUse, PostToolUseFailure, as_text
from ..core.redact import redact
from ..protocol import _methods as M
from ..runtime.config import Config
from ..store import ops
from . import files
from .readahead import Ahead

log = structlog.get_logger("ctxlifed.compress")

PREPARE_TIMEOUT_S = 0.5  # deciding + reading a persisted file; past it the original stays
MAX_PERSISTED_BYTES = 16 << 20  # a persisted output larger than this stays as Claude Code shows it
INLINE_IO_BYTES = 1 << 20  # file reads/writes up to this size run on the event loop, larger in a thread
OUTPUTS_DIR = "ctxlifed-outputs"
SHIM_CUT_MARK = "characters cut by the ctxlifed shim"


@dataclass(frozen=True, slots=True)
class Pending:
    """A decision to replace an output, with the archive row of its full original."""

    decision: Decision
    settings: CompressSettings
    tool_name: str
    tool_response: Any
    command: str
    row: ops.ArchiveRow
    out_dir: str | None
    body: DigestBody | None = None  # the digest's body made ahead (readahead.py), checked before use


@dataclass(frozen=True, slots=True)
class Replacement:
    """What :func:`finish` made: the answer's hookSpecificOutput fields and the measured saving."""

    fields: dict[str, Any]  # updatedToolOutput or updatedMCPToolOutput
    kind: str
    original_tokens: int
    digest_tokens: int


def settings_for(cfg: Config, project: str) -> CompressSettings:
    """The policy's settings for ``project``: its ``compress_outputs`` and the configured thresholds."""
    mt = cfg.compress_min_tokens
    return CompressSettings(compress_outputs=cfg.compress_mode(project),  # type: ignore[arg-type]
                            min_tokens=mt,
                            aggressive_min_tokens=(min(2000, mt[0]), max(1, mt[1] // 2), max(1, mt[2] // 2),
                                                   max(1, mt[3] // 2)))


def read_persisted(path: str, roots: tuple[str, ...], max_bytes: int = MAX_PERSISTED_BYTES) -> str | None:
    """The text of Claude Code's persisted output file, or None (outside ``roots``, not a regular file,
    larger than ``max_bytes``, unreadable)."""
    real = files.under_roots(path, roots)
    got = files.persisted_text(real, max_bytes) if real is not None else None
    return got[0] if got is not None else None


def outputs_dir(transcript_path: str | None, session: str, roots: tuple[str, ...]) -> str | None:
    """Where a session's full outputs go (see the module rules), or None."""
    real = files.transcript_allowed(transcript_path or "", roots)
    if real is None or not session or "/" in session or session.startswith("."):
        return None
    return os.path.join(os.path.dirname(real), session, OUTPUTS_DIR)


def write_output(folder: str, name: str, text: str, max_bytes: int) -> str | None:
    """Write ``text`` to ``folder/name`` (0600; folder 0700), keep the folder within ``max_bytes`` by
    removing its oldest other files; the path, or None when it cannot be written."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, name)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            data = text.encode("utf-8", "surrogatepass")
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        os.replace(tmp, path)
        # The folder is scanned when first seen and when its running total passes the bound, not at
        # every write (a session may hold thousands of outputs).
        total = _folder_bytes.pop(folder, None)
        total = _prune(folder, keep=name, max_bytes=max_bytes) if total is None else total + len(data)
        if total > max_bytes:
            total = _prune(folder, keep=name, max_bytes=max_bytes)
        _folder_bytes[folder] = total
        while len(_folder_bytes) > MAX_FOLDERS_TRACKED:
            del _folder_bytes[next(iter(_folder_bytes))]
        return path
    except OSError as exc:
        log.warning("compress_file_failed", folder=folder, error=str(exc))
        return None


MAX_FOLDERS_TRACKED = 256
_folder_bytes: dict[str, int] = {}  # folder -> bytes in it (running total since its last scan), LRU order


def _prune(folder: str, *, keep: str, max_bytes: int) -> int:
    """Remove the oldest files of ``folder`` (never ``keep``) until it holds at most ``max_bytes``;
    the bytes left."""
    entries: list[tuple[float, int, str]] = []
    total = 0
    with os.scandir(folder) as it:
        for e in it:
            if not e.is_file(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
            total += st.st_size
            if e.name != keep:
                entries.append((st.st_mtime, st.st_size, e.path))
    entries.sort()
    for _mtime, size, path in entries:
        if total <= max_bytes:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
    return total


async def _io(fn: Any, *args: Any, size: int) -> Any:
    if size <= INLINE_IO_BYTES:
        return fn(*args)
    return await anyio.to_thread.run_sync(lambda: fn(*args), abandon_on_cancel=True)


async def prepare_event(cfg: Config, event: PostToolUse, *, project: str, level: int, phase: str,
                        edited_paths: list[str], transcript_path: str | None, session: str,
                        cut_chars: int | None = None,
                        ahead: Callable[[str], Ahead | None] | None = None) -> Pending | None:
    """Decide whether this PostToolUse output is replaced; None keeps it. Never raises. ``cut_chars``:
    the length from which Claude Code would not show an output whole (``wrap.py``: a failing command's);
    ``ahead``: the persisted output's file read ahead (``readahead.py``), by its path, or None."""
    tool_name = event.tool_name
    if tool_name != "Bash" and not tool_name.startswith("mcp__"):
        return None
    try:
        with anyio.move_on_after(PREPARE_TIMEOUT_S):
            return await _prepare(cfg, event, project=project, level=level, phase=phase,
                                  edited_paths=edited_paths, transcript_path=transcript_path, session=session,
                                  cut_chars=cut_chars, ahead=ahead)
        log.warning("compress_timeout", tool=tool_name)
    except Exception:  # noqa: BLE001 - fail safe: the original stays
        log.exception("compress_prepare_failed", tool=tool_name)
    return None


async def _prepare(cfg: Config, event: PostToolUse, *, project: str, level: int,
                   phase: str, edited_paths: list[str], transcript_path: str | None, session: str,
                   cut_chars: int | None = None, ahead: Callable[[str], Ahead | None] | None = None) -> Pending | None:
    settings = settings_for(cfg, project)
    if cut_chars:
        settings = msgspec.structs.replace(settings, cut_chars=cut_chars)
    if settings.compress_outputs == "off":
        return None
    dec = decide(event, level=level, phase=phase, settings=settings, edited_paths=edited_paths)
    if dec is None:
        return None
    roots = cfg.allowed_transcript_roots()
    body = None
    if not dec.complete:
        path, size = saved_output(event)
        early = ahead(path) if ahead is not None else None
        if early is not None:  # read and redacted from the same file, with the same setting
            full, body = early.text, early.body
        else:
            full = await _io(read_persisted, path, roots, size=size if size is not None else MAX_PERSISTED_BYTES)
            if not full:
                return None
            if cfg.redact:
                full, _n = redact(full)
        dec = decide(event, level=level, phase=phase, settings=settings, edited_paths=edited_paths, full_text=full)
        if dec is None or not dec.complete:
            return None
    if SHIM_CUT_MARK in dec.text:
        return None  # the shim cut this payload: the daemon does not hold the original
    tool_name, tr = event.tool_name, event.tool_response
    # The archive row the derivation would write, with the full original as its output.
    whole = msgspec.structs.replace(event, tool_response={"stdout": dec.text, "stderr": ""} if tool_name == "Bash"
                                    else dec.text)
    els = elements_from_event(whole, ts=0.0, max_chars=cfg.archive_max_chars)
    if not els:
        return None
    el = els[0]
    row = ops.ArchiveRow(session=session, project=project, ts=0.0, kind=str(el.kind), text=el.text,
                         summary=SUM.summarize(el), phase=phase, tool=el.tool, file_path=el.file_path, uid=el.uid,
                         priority=classify.priority(el, phase), level=0,
                         truncated="characters cut by ctxlifed" in el.text)
    return Pending(decision=dec, settings=settings, tool_name=tool_name, tool_response=tr,
                   command=event.input_text("command"), row=row, out_dir=outputs_dir(transcript_path, session, roots),
                   body=body)


def full_event(event: PostToolUse, p: Pending) -> PostToolUse:
    """``event`` with the whole original as its Bash output (Claude Code sends only the first 30,000
    characters of a persisted one): what the lesson classifier reads, so a failure at the end counts."""
    tr = event.tool_response
    if p.tool_name == "Bash" and isinstance(tr, dict) and len(p.decision.text) > len(as_text(tr.get("stdout"))):
        return msgspec.structs.replace(event, tool_response={**tr, "stdout": p.decision.text, "stderr": ""})
    return event


async def finish(p: Pending, archive_id: int, *, ctl: str, max_dir_bytes: int) -> Replacement | None:
    """After the commit: the file, the digest and the answer's fields; None keeps the original."""
    try:
        dec = p.decision
        path = None
        if p.out_dir is not None:
            path = await _io(write_output, p.out_dir, f"{archive_id}.txt", dec.text, max_dir_bytes,
                             size=len(dec.text))
        s = p.settings
        body = p.body
        if body is None or not body.made_for(dec.kind, s.digest_budget_tokens, s.digest_max_tokens, dec.original_tokens):
            body = digest_body(dec.text, command=p.command or None, kind=dec.kind, budget_tokens=s.digest_budget_tokens,
                               max_tokens=s.digest_max_tokens, original_tokens=dec.original_tokens)
        dg = with_footer(body, archive_id=archive_id, full_path=path, ctl=ctl)
        if not worth_replacing(dec.original_tokens, dg.tokens, p.settings):
            return None
        ans = post_tool_use_answer(p.tool_name, p.tool_response, dg.text)
        if ans is None:
            return None
        fields = {k: v for k, v in ans["hookSpecificOutput"].items() if k != "hookEventName"}
        return Replacement(fields=fields, kind=dg.kind, original_tokens=dec.original_tokens, digest_tokens=dg.tokens)
    except Exception:  # noqa: BLE001 - fail safe: the original stays
        log.exception("compress_finish_failed", archive_id=archive_id)
        return None


def view(compressed: Mapping[str, list[int]]) -> M.CompressionView:
    """``status``'s view of a session's ``compressed`` counters (measured: original minus digest)."""
    by_kind = {k: M.CompressionKindView(replaced=c[0], original_tokens=c[1], digest_tokens=c[2],
                                        saved_tokens=max(0, c[1] - c[2]))
               for k, c in sorted(compressed.items()) if len(c) == 3}
    return M.CompressionView(replaced=sum(v.replaced for v in by_kind.values()),
                             saved_tokens=sum(v.saved_tokens for v in by_kind.values()), by_kind=by_kind)


# ---------------------------------------------------------------- failing calls

# Claude Code's mark where it cut the middle of a failing command's output: 2.1.328 writes
# "... [N characters truncated] ..." (spec 2.4b saw "lines").
_CUT_RE = re.compile(r"\.\.\. \[(\d+) (lines?|characters?) truncated\] \.\.\.")
_FAILED_ID_RE = re.compile(
    r"^(?:FAILED \S+.*|ERROR \S+::\S+.*|FAIL: \S+.*|ERROR: \S+.*|--- FAIL: \S+|test \S+ \.\.\. FAILED|not ok \d+ .+"
    r"|\s*(?:✕|●) .+|FAIL\s+\S+|\S+ \(\S+\) \.\.\. (?:FAIL|ERROR)$)", re.M)
MAX_FAILED_IDS = 20


def failure_note(event: PostToolUseFailure) -> str:
    """``additionalContext`` for a failing Bash call whose output Claude Code cut in the middle: how many
    lines are gone, the failing tests the visible part names, and how to see the whole. '' otherwise."""
    if event.tool_name != "Bash":
        return ""
    err = event.error
    m = _CUT_RE.search(err)
    if m is None:
        return ""
    cut, unit = int(m.group(1)), ("line" if m.group(2).startswith("line") else "character")
    ids: list[str] = []
    for fm in _FAILED_ID_RE.finditer(err):
        line = fm.group(0).strip()[:200]
        if line not in ids:
            ids.append(line)
    shown = ids[:MAX_FAILED_IDS]
    parts = [f"Claude Code cut {cut:,} {unit}{'s' if cut != 1 else ''} from the middle of this failing command's"
             " output (it keeps the first and last 5,000 characters of the first 30,000); the cut part is not saved"
             " anywhere, so ctxlifed cannot show it."]
    if shown:
        more = f" (+{len(ids) - len(shown)} more)" if len(ids) > len(shown) else ""
        parts.append("Failing tests named in the visible part" + more + ":\n" + "\n".join(shown))
    else:
        parts.append("The visible part names no failing test.")
    parts.append("To see all of it, re-run the command with its output piped through `tee <file>` (the call then"
                 " succeeds, and ctxlifed replaces a long output with a digest of its failures and a file to Read).")
    return "\n".join(parts)
