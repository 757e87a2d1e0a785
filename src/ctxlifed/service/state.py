"""Per-session state the daemon keeps in memory and persists with every change.

Rules:
- One :class:`SessionState` per Claude Code session id, owned by the service; it is serialised
  with msgspec into ``sessions.state`` in the same transaction as the event that changed it, so a
  restart resumes exactly where the last acknowledged event left it.
- Every collection here is bounded.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..core.accounting import Accounting
from ..core.cost import CostTally
from ..core.lessons import Tracker
from ..core.mustsurvive import Item
from ..core.phase import PhaseState
from ..core.transcript import TranscriptCursor

MAX_RECENT = 64
MAX_FAILING = 16


class SessionState(msgspec.Struct, kw_only=True):
    session: str
    project: str
    cwd: str = ""
    transcript_path: str | None = None
    cursor: TranscriptCursor = msgspec.field(default_factory=TranscriptCursor)
    phase: PhaseState = msgspec.field(default_factory=PhaseState)
    phase_index: int = 1  # N of the current phase's ledger page
    phase_started: float = 0.0
    model: str | None = None
    context_tokens: int | None = None
    estimated: bool = True
    # The transcript's latest figure is a compaction boundary's (no usage since): Claude Code's own
    # figure then counts the compacted messages only, without the system prompt and tools.
    context_from_boundary: bool = False
    system_tokens: int | None = None  # the first request's size: the fixed part
    ledger_tokens: int = 0  # what ctxlifed injected since the last compaction (estimate)
    level: int = 0  # last compression level applied
    boundary_ts: float = 0.0  # time of the last compaction boundary seen
    boundary_archive_id: int = 0  # archive ids above this belong to the current window
    compactions: int = 0
    emergency_at: int = -1  # value of ``compactions`` when the last emergency ledger was written
    pending_advice: str | None = None  # a systemMessage waiting for an event that can carry it
    pending_advice_key: str = ""  # its cause (core/advice.py), recorded as delivered when it goes out
    pending_advice_kind: str = ""
    pending_advice_urgency: int = 0
    advised: list[str] = msgspec.field(default_factory=list)  # advice keys delivered (bounded)
    advice_at: dict[str, float] = msgspec.field(default_factory=dict)  # kind -> last delivered
    advice_lines: dict[str, str] = msgspec.field(default_factory=dict)  # kind -> current advice for status
    fail_sig: str = ""  # the latest failing signature and how many times in a row it failed (a red streak)
    fail_count: int = 0
    streak_tests: list[str] = msgspec.field(default_factory=list)  # its failing tests (advice; per command: failing)
    sweep_reads: int = 0  # exploration calls in a row, and their distinct targets (bounded)
    sweep_targets: list[str] = msgspec.field(default_factory=list)
    sweep_start: float = 0.0
    sweep_asked: bool = False  # the latest prompt asked for a sweep (core/advice.py asks_for_sweep)
    last_archived: list[int] = msgspec.field(default_factory=list)  # what the last compaction archived
    files_touched: list[str] = msgspec.field(default_factory=list)  # this phase, most recent last
    tests: list[str] = msgspec.field(default_factory=list)  # this phase: "PASS cmd" / "FAIL cmd"
    acc: Accounting = msgspec.field(default_factory=Accounting)  # where the tokens went (bounded)
    must_survive: list[Item] = msgspec.field(default_factory=list)  # recorded at PreCompact
    delivered: list[str] = msgspec.field(default_factory=list)  # must-survive ids re-injected already
    pre_compact_tokens: int | None = None
    compact_injected: str | None = None  # our SessionStart(compact) text, carried by definition
    last_briefing: str = ""  # our SessionStart texts the context still holds (bounded): a resume gets the rest
    unsent_briefing: str = ""  # SessionStart texts given since the last prompt: a compaction keeps them after its summary
    last_report_id: int = 0  # compaction report waiting for the boundary's post tokens
    lessons: Tracker = msgspec.field(default_factory=Tracker)  # open failures, signatures hinted
    tests_red: bool = False  # the last test run of this session failed
    failing: list[tuple[str, str, str]] = msgspec.field(default_factory=list)  # (command, test id, error) still red
    ended_ts: float | None = None
    transcript_error: str | None = None
    residency_noted: bool = False  # the once-per-session residency note was considered (service/residency.py)
    instructions_warned: dict[str, float] = msgspec.field(default_factory=dict)  # path -> mtime named as changed
    cost: CostTally = msgspec.field(default_factory=CostTally)  # what the session cost so far (bounded)
    autocompact_env: dict[str, str] = msgspec.field(default_factory=dict)  # from the hook env (core/autocompact.VARS)
    autocompact_settings: dict[str, str] | None = None  # from the settings files; None: not read yet
    # Live compression (service/compress.py): per kind of output, [outputs replaced, their tokens,
    # their digests' tokens] this session. Keys are core.digest.KINDS: bounded.
    compressed: dict[str, list[int]] = msgspec.field(default_factory=dict)

    def note_injected(self, tokens: int) -> None:
        """Text ctxlifed put into the context: the Ledger zone holds it, and the context grows by it
        until the next usage figure (which includes it) replaces the estimate. The Working zone is
        unchanged, so a figure stated in that text still equals what ``status`` says after it."""
        self.ledger_tokens += tokens
        if self.context_tokens is not None:
            self.context_tokens += tokens
            self.estimated = True

    def note_file(self, path: str) -> None:
        if path in self.files_touched:
            self.files_touched.remove(path)
        self.files_touched.append(path)
        del self.files_touched[:-MAX_RECENT]

    def note_advised(self, key: str, kind: str, now: float) -> None:
        self.advised.append(key)
        del self.advised[:-MAX_RECENT]
        self.advice_at[kind] = now

    def note_compressed(self, kind: str, original_tokens: int, digest_tokens: int) -> None:
        c = self.compressed.setdefault(kind, [0, 0, 0])
        c[0] += 1
        c[1] += original_tokens
        c[2] += digest_tokens

    def note_test(self, line: str) -> None:
        self.tests.append(line[:200])
        del self.tests[:-MAX_RECENT]

    def note_failing(self, command: str, failures: list[tuple[str, str]]) -> None:
        """A failing run: its failing tests (``testfail.failure_lines``) replace the ones it reported
        before; a run whose output names none keeps them."""
        if not failures:
            return
        cmd = command[:500]
        self.failing = [f for f in self.failing if f[0] != cmd]
        self.failing += [(cmd, tid, err) for tid, err in failures]
        del self.failing[:-MAX_FAILING]

    def clear_failing(self, command: str, *, covers: Callable[[str, str], bool]) -> list[str]:
        """A passing run of ``command``: the failing tests of every run it covers are green. Returns
        their ids."""
        gone = [f for f in self.failing if covers(command, f[0])]
        self.failing = [f for f in self.failing if f not in gone]
        return [f[1] for f in gone]


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(SessionState)


def dump(state: SessionState) -> bytes:
    return _enc.encode(state)


def load(blob: bytes | None) -> SessionState | None:
    if not blob:
        return None
    try:
        return _dec.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
