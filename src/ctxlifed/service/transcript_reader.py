"""Reading a session's transcript: the new complete lines since the last event, folded into the session.

Rules:
- An event reads at most ``MAX_TRANSCRIPT_READ`` bytes, so a long transcript seen late never stalls a
  hook: the rest is read on the next events. A line longer than a read is skipped (hooks archived its
  content; its usage is counted from its head and tail), and the same event reads past it, at most
  ``SKIP_READS`` reads.
- A usual delta (up to ``INLINE_READ``) is read on the event loop; a larger one in a worker thread. A
  derivation with more of its session's jobs queued behind it (catching up after a burst) reads at most
  ``INLINE_READ`` of complete lines when those jobs can read the rest, so one step stays short on the
  event loop and in the writer (figures: bench/RESULTS.md); the last job reads up to
  ``MAX_TRANSCRIPT_READ``, so the accounting catches up when the backlog does. A transcript seen late
  (far more bytes than the queued jobs would read in slices) is read ``MAX_TRANSCRIPT_READ`` an event.
- A read is parsed and folded ``FOLD_SLICE`` at a time, pausing in between (replies go first).
- The cursor's anchor (the bytes just before its offset) is read back with each read: when it is not
  there any more the file was rewritten or replaced and is read again from 0.
- Only a transcript under the allowed roots is read. Every text is redacted (when configured) before
  it is kept anywhere; a tool result a hook delivered already is only counted (its text emptied).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio.to_thread
import msgspec
import structlog

from ..core import accounting
from ..core import transcript
from ..core.redact import redact
from ..runtime.config import Config
from . import cost, files
from .state import SessionState

log = structlog.get_logger("ctxlifed.service")

MAX_TRANSCRIPT_READ = 1 << 20  # bytes an event reads at most
SKIP_READS = 32  # reads (of up to MAX_TRANSCRIPT_READ) an event may spend getting past one over-long line
INLINE_READ = 64 << 10  # a usual delta is read on the event loop; a larger one in a worker thread
FOLD_SLICE = 16 << 10  # a larger read is parsed and folded this much at a time, pausing in between (a
# request arriving meanwhile waits for one slice at most; bench/RESULTS.md "Seventh pass")


class TranscriptReader:
    """Reads and folds transcripts. ``config``: the configuration in use (it may be reloaded);
    ``delivered(sid)``: the tool-use ids a hook delivered; ``on_boundary(st, post_tokens)``: a
    compaction boundary was seen."""

    def __init__(self, config: Callable[[], Config], delivered: Callable[[str], dict[str, None] | None],
                 on_boundary: Callable[[SessionState, int], Awaitable[object]]) -> None:
        self.config = config
        self.delivered = delivered
        self.on_boundary = on_boundary

    async def read(self, st: SessionState, *, behind: int,
                               pause: Callable[[], Awaitable[None]]) -> transcript.TranscriptDelta | None:
        """Read and fold the transcript's new complete lines. ``behind``: this session's jobs queued
        after this derivation (see INLINE_READ); ``pause``: the derivation's pause between slices.
        A line longer than a read (a pasted screenshot) is read past in the same event, up to
        SKIP_READS reads, so the lines after it count at once."""
        if not st.transcript_path:
            return None
        real = files.transcript_allowed(st.transcript_path, self.config().allowed_transcript_roots())
        if real is None:
            st.transcript_error = "transcript outside the allowed roots; not read"
            return None
        out: transcript.TranscriptDelta | None = None
        for _ in range(SKIP_READS):
            data = await self.read_new(st, real, behind)
            if not data:
                break
            if out is None:
                out = transcript.TranscriptDelta()
            await self.fold_slices(st, data, out, pause)
            if not st.cursor.skipping:
                break
            await pause()
        return out

    async def read_new(self, st: SessionState, real: str, behind: int) -> bytes | None:
        """The transcript's bytes from ``st.cursor.offset`` (how many: see INLINE_READ). The
        cursor's anchor, the bytes just before the offset, is read with them: when it is not there
        any more the file was rewritten or replaced (a longer one too) and is read again from 0."""
        anchor = len(st.cursor.anchor)
        offset = st.cursor.offset
        raw, size, restarted = files.read_from(real, offset - anchor, INLINE_READ + anchor)
        if size < 0:
            return None
        data = None if restarted else transcript.resume(st.cursor, raw)
        if data is None:  # shrunk, rewritten or replaced: from the start
            log.info("transcript_restarted", session=st.session, offset=offset, size=size)
            st.cursor = transcript.TranscriptCursor()
            offset = 0
            if not restarted:
                raw, size, _r = files.read_from(real, 0, INLINE_READ)
            data = raw[:INLINE_READ]
        sliced = behind > 0 and size - offset <= behind * INLINE_READ + MAX_TRANSCRIPT_READ and b"\n" in data
        if len(data) == INLINE_READ and size > offset + INLINE_READ and not sliced:
            more, size, _r = await anyio.to_thread.run_sync(
                files.read_from, real, offset + INLINE_READ, MAX_TRANSCRIPT_READ - INLINE_READ)
            data += more
        return data

    async def fold_slices(self, st: SessionState, data: bytes, out: transcript.TranscriptDelta,
                           pause: Callable[[], Awaitable[None]]) -> None:
        """Fold ``data`` FOLD_SLICE of complete lines at a time, with a pause between (a derivation
        yields to replies): a large read in one go held the event loop (bench/RESULTS.md, fourth pass). Each slice folds exactly as
        a separate read would (reads come in arbitrary chunks anyway); ``out`` gets the elements and
        boundaries of all of them."""
        pos, n = 0, len(data)
        while True:
            end = n
            if n - pos > FOLD_SLICE:
                cut = data.rfind(b"\n", pos, pos + FOLD_SLICE)
                if cut < 0:  # a line longer than a slice: it goes whole
                    cut = data.find(b"\n", pos + FOLD_SLICE)
                end = n if cut < 0 else cut + 1
            delta = await self.fold(st, data[pos:end])
            out.elements += delta.elements
            out.boundaries += delta.boundaries
            pos = end
            if pos >= n:
                return
            await pause()

    async def fold(self, st: SessionState, chunk: bytes) -> transcript.TranscriptDelta:
        """Parse the complete lines of ``chunk`` (the transcript from ``st.cursor``) and fold them into
        the session: model, usage, context size, accounting, compaction boundaries."""
        # A line must be shorter than a read to be seen whole; a longer one is skipped (its usage
        # counted from its head and tail), never waited for.
        from_start = st.cursor.offset == 0
        st.cursor, delta = transcript.feed(st.cursor, chunk, max_line=MAX_TRANSCRIPT_READ - 1)
        seen = self.delivered(st.session)
        if seen:
            delta.elements = [msgspec.structs.replace(e, text="") if e.uid in seen else e for e in delta.elements]
        if self.config().redact:
            delta = redact_delta(delta)
        if delta.model:
            st.model = delta.model
        if delta.first_usage is not None and st.system_tokens is None:
            st.system_tokens = delta.first_usage.context_tokens
        ctx = transcript.context_after(delta, None)  # None: this chunk says nothing of the size
        if ctx is not None and delta.boundaries and ctx == delta.boundaries[-1].post_tokens and (
                delta.compacted_last or delta.last_usage is None):
            # A boundary's post tokens count the compacted messages only: the next request also
            # carries the system prompt and tools (the fixed part), so the context is their sum.
            st.context_tokens, st.estimated = ctx + (st.system_tokens or 0), True
            st.context_from_boundary = True
        elif ctx is not None:
            st.context_tokens, st.estimated = ctx, False
            st.context_from_boundary = False
        st.acc = accounting.fold(st.acc, delta)
        cost.fold(st, delta, self.config(), from_start=from_start)
        if delta.boundaries:
            st.boundary_ts = delta.boundaries[-1].ts
            st.ledger_tokens = 0
            await self.on_boundary(st, delta.boundaries[-1].post_tokens)
        return delta


def redact_delta(delta: transcript.TranscriptDelta) -> transcript.TranscriptDelta:
    """Transcripts hold secrets too: redact every text a delta carries before it is kept anywhere."""
    def red(text: str) -> str:
        return redact(text)[0] if text else text

    delta.elements = [msgspec.structs.replace(e, text=red(e.text), command=red(e.command) if e.command else e.command)
                      for e in delta.elements]
    delta.compact_summaries = [red(x) for x in delta.compact_summaries]
    delta.injected = [msgspec.structs.replace(i, text=red(i.text)) for i in delta.injected]
    return delta
