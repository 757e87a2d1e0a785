"""Method table: one Params/Result Struct pair per method. These Structs ARE the wire schema.

Rules:
- Params Structs forbid unknown fields (a typo is an error, not a silent default), except
  ``hook``, whose params are Claude Code's payload verbatim: unknown fields there are expected.
- Evolving the schema: add optional fields with defaults; never rename or retype a field; bump
  ``PROTOCOL_VERSION`` (ctxlifed/__init__.py) only for incompatible changes. ``hello`` lets a
  client detect skew and say so clearly.
- Results are plain Structs encoded by msgspec; every field is always present on the wire.
- Decoders are built once, at import.
- Text that is not valid Unicode inside ``params`` (bytes that are not UTF-8, a lone surrogate
  escape): a hook payload is decoded with U+FFFD in its place and stored, never lost for it; the
  other methods answer -32602 naming the fault. The strict decode runs first; the lenient one
  (``core.jsontext``) only after it failed, so valid params pay nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..core.jsontext import repair
from ._errors import InvalidParams, MethodNotFound


class _P(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class _R(msgspec.Struct, kw_only=True):
    pass


# -- hello / ping / shutdown ------------------------------------------------------------------
class HelloParams(_P, kw_only=True):
    client: str = "unknown"
    version: str = ""
    protocol: int = 0


class HelloResult(_R, kw_only=True):
    version: str
    protocol: int
    pid: int
    compatible: bool


class PingParams(_P, kw_only=True):
    pass


class PingResult(_R, kw_only=True):
    pong: bool = True
    version: str
    pid: int
    uptime_s: float


class ShutdownParams(_P, kw_only=True):
    pass


class ShutdownResult(_R, kw_only=True):
    stopping: bool = True


# -- hook ---------------------------------------------------------------------------------------
class HookResult(_R, kw_only=True):
    """What the shim prints (``stdout``, possibly empty) and the exit code it returns."""

    stdout: str = ""
    exit_code: int = 0


# -- status -------------------------------------------------------------------------------------
class StatusParams(_P, kw_only=True):
    session: str | None = None
    project: str | None = None
    cwd: str | None = None
    where: bool = False
    survival: bool = False
    residency: bool = False  # residency hygiene of the session's project (skills, CLAUDE.md, rules, MCP)
    compact_instructions: bool = False  # a "# Compact instructions" section for the session's project
    limit: int = 20


class ZoneView(_R, kw_only=True):
    name: str
    capacity: int
    used: int
    pct: float


class SavingView(_R, kw_only=True):
    action: str
    turns: int
    usd: float
    keep_usd: float
    action_usd: float
    estimated: bool
    reason: str


class CostView(_R, kw_only=True):
    """What the session cost so far and what stays resident costs (core/cost.py)."""

    model_price: float  # USD per million input tokens
    price_source: str  # default | config | fallback
    prices_taken: str  # the date the default prices were taken
    turns: int = 0
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    last_turn_usd: float = 0.0
    resident_turn_usd: float = 0.0  # the next turn's re-read of the current context
    cache_expired: bool | None = None  # SessionStart(resume): prompt_cache_likely_expired
    resume_write_usd: float | None = None  # SessionStart(resume): estimated_cache_write_usd
    live_saved_tokens: int = 0  # kept out of the window by live compression
    live_saved_usd: float = 0.0
    horizon_turns: int = 10
    savings: list[SavingView] = []


class CompressionKindView(_R, kw_only=True):
    replaced: int  # outputs replaced by their digest
    original_tokens: int
    digest_tokens: int
    saved_tokens: int  # original minus digest: kept out of the window


class CompressionView(_R, kw_only=True):
    """Live compression this session (service/compress.py): tokens kept out of the window."""

    replaced: int = 0
    saved_tokens: int = 0
    by_kind: dict[str, CompressionKindView] = {}


class SessionView(_R, kw_only=True):
    session: str
    project: str
    events: int
    first_ts: float
    last_ts: float
    phase: str = "planning"
    phase_since: float = 0.0
    model: str | None = None
    window: int = 0
    context_tokens: int | None = None
    estimated: bool = False
    zones: list[ZoneView] = []
    working_pct: float = 0.0
    level: int = 0
    autocompact_at: int = 0
    tokens_to_autocompact: int = 0
    advice: list[str] = []
    ended: bool = False
    where: dict[str, Any] | None = None
    survival: dict[str, Any] | None = None
    residency: dict[str, Any] | None = None
    compact_instructions: str | None = None
    cost: CostView | None = None
    autocompact_env: dict[str, str] = {}  # the overrides honoured for autocompact_at
    compression: CompressionView = msgspec.field(default_factory=CompressionView)


class StatusResult(_R, kw_only=True):
    version: str
    protocol: int
    pid: int
    uptime_s: float
    socket: str
    db_path: str
    db_bytes: int
    wal_bytes: int
    archive_items: int
    events: int
    spool_ingested: int = 0
    fts_trigram: bool = True
    derive_pending: int = 0  # events acknowledged, not derived yet (write-behind; 0 when idle)
    index_pending: int = 0  # archive rows waiting for the trigram index
    derive_failed: int = 0  # events whose derivation raised since start (kept as stored, raw)
    side_work_pending: int = 0  # side jobs (L3 Markdown files) started after a reply, not finished yet
    maintenance_failed: int = 0  # index/merge steps that failed since start (retried every second)
    maintenance_error: str = ""  # the last such failure
    read_ahead_made: int = 0  # persisted outputs read, redacted and digested when they appeared, since start
    read_ahead_used: int = 0  # of them, taken by their PostToolUse
    read_ahead_missed: int = 0  # persisted outputs whose PostToolUse found nothing usable read ahead
    sessions: list[SessionView] = []


# -- recall -------------------------------------------------------------------------------------
class RecallParams(_P, kw_only=True):
    query: str = ""
    id: int | None = None
    session: str | None = None
    project: str | None = None
    cwd: str | None = None
    all_projects: bool = False
    limit: int = 20
    cap_tokens: int = 1200


class RecallHitView(_R, kw_only=True):
    id: int
    session: str
    project: str
    ts: float
    kind: str
    phase: str | None = None
    tool: str | None = None
    summary: str = ""
    snippet: str = ""
    score: float = 0.0
    superseded_by: int | None = None  # a later decision replaced this one


class RecallResult(_R, kw_only=True):
    markdown: str
    total: int
    total_capped: bool = False  # counting stopped at ``total``: there are at least that many matches
    hits: list[RecallHitView] = []
    text: str | None = None  # full text for --id
    project: str | None = None  # the project searched; None: every project (or an --id lookup)


# -- phase --------------------------------------------------------------------------------------
class PhaseSetParams(_P, kw_only=True):
    session: str | None = None
    cwd: str | None = None
    phase: str


class PhaseSetResult(_R, kw_only=True):
    session: str
    phase: str
    changed: bool


# -- forget -------------------------------------------------------------------------------------
class ForgetParams(_P, kw_only=True):
    id: int | None = None
    session: str | None = None
    project: str | None = None


class ForgetResult(_R, kw_only=True):
    events: int = 0
    archive: int = 0


# -- lessons ------------------------------------------------------------------------------------
class LessonsParams(_P, kw_only=True):
    project: str | None = None
    cwd: str | None = None
    all_projects: bool = False
    limit: int = 100


class LessonsResult(_R, kw_only=True):
    markdown: str
    lessons: list[dict[str, Any]] = []


# -- compactions --------------------------------------------------------------------------------
class CompactionsParams(_P, kw_only=True):
    session: str | None = None
    project: str | None = None
    cwd: str | None = None
    limit: int = 20


class CompactionsResult(_R, kw_only=True):
    markdown: str
    reports: list[dict[str, Any]] = []


# -- pending ------------------------------------------------------------------------------------
class PendingParams(_P, kw_only=True):
    project: str | None = None
    cwd: str | None = None
    session: str | None = None
    all_projects: bool = False
    all: bool = False  # closed items too
    resolve: int | None = None  # close the item shown as #N first
    limit: int = 100


class PendingView(_R, kw_only=True):
    id: int  # the #N the item is shown with (its archive id): ``ctxlifectl pending --resolve N``
    text: str
    session: str
    project: str
    ts: float
    phase: str | None = None
    status: str = "open"  # open | resolved
    resolution: str | None = None  # how it closed: todo, decision, test, todo_line, user, ctl, ledger
    stale: bool = False  # open, but untouched for many phases or sessions: not shown as current


class PendingResult(_R, kw_only=True):
    markdown: str
    items: list[PendingView] = []
    resolved: int | None = None
# -- memory.prune -------------------------------------------------------------------------------
class MemoryPruneParams(_P, kw_only=True):
    project: str | None = None
    cwd: str | None = None
    keep: int | None = None  # session folders to keep; None: the config's memory_keep_sessions
    dry_run: bool = False


class MemoryKeptView(_R, kw_only=True):
    path: str
    why: str


class MemoryPruneResult(_R, kw_only=True):
    project: str
    markdown: str
    rolled_up: list[str] = []  # pages rolled up into history.md and deleted (would be, with dry_run)
    sessions: list[str] = []  # session folders rolled up
    kept: list[MemoryKeptView] = []  # files in those folders that were not deleted, and why
    history: str = ""  # history.md written ("" when nothing was written)
    reason: str = ""  # why nothing could be done, when so


# -- report -------------------------------------------------------------------------------------
class ReportParams(_P, kw_only=True):
    session: str | None = None
    cwd: str | None = None


class ReportResult(_R, kw_only=True):
    """One session's time series and what the HTML/terminal report draws (core/report.py)."""

    session: str
    project: str
    model: str | None = None
    window: int = 0
    zones: list[ZoneView] = []  # capacities of System, Ledger, Working, Buffer
    thresholds: list[float] = []  # Working-zone fractions of the levels l1, l2, l3
    autocompact_at: int = 0
    first_ts: float = 0.0
    last_ts: float = 0.0
    samples: list[list[float]] = []  # [ts, context_tokens, cumulative usd], oldest first
    phases: list[dict[str, Any]] = []  # {phase, start, end}
    compactions: list[dict[str, Any]] = []  # {ts, trigger, pre_tokens, post_tokens}
    largest: list[dict[str, Any]] = []  # {kind, label, tokens}
    cost: CostView | None = None


# -- wrap.store ---------------------------------------------------------------------------------
class WrapStoreParams(_P, kw_only=True):
    """A command ``ctxlifectl run`` ran (the PreToolUse wrapper): its merged output, to archive and digest."""

    session: str
    cwd: str = ""
    command: str  # the original command, as the model wrote it
    exit_code: int = 0
    output: str = ""  # stdout and stderr merged; bounded by the wrapper (its cut marked in the text)


class WrapStoreResult(_R, kw_only=True):
    replace: bool  # False: print the output itself (too small to digest, or not stored)
    digest: str = ""  # what the wrapper prints instead of the output
    archive_id: int = 0  # ``ctxlifectl recall --id N`` gives the full output
    path: str = ""  # a file holding the full output that the model may Read ("" when none)
    reason: str = ""


METHODS: dict[str, tuple[type | None, type]] = {
    "hello": (HelloParams, HelloResult),
    "ping": (PingParams, PingResult),
    "shutdown": (ShutdownParams, ShutdownResult),
    "hook": (None, HookResult),  # params: Claude Code's payload, a JSON object
    "status": (StatusParams, StatusResult),
    "recall": (RecallParams, RecallResult),
    "phase.set": (PhaseSetParams, PhaseSetResult),
    "forget": (ForgetParams, ForgetResult),
    "compactions": (CompactionsParams, CompactionsResult),
    "lessons": (LessonsParams, LessonsResult),
    "pending": (PendingParams, PendingResult),
    "memory.prune": (MemoryPruneParams, MemoryPruneResult),
    "report": (ReportParams, ReportResult),
    "wrap.store": (WrapStoreParams, WrapStoreResult),
}

_decoders: dict[str, msgspec.json.Decoder] = {
    name: msgspec.json.Decoder(p) for name, (p, _r) in METHODS.items() if p is not None
}
_hook_decoder = msgspec.json.Decoder(dict[str, Any])


def decode_params(method: str, params: bytes) -> Any:
    """Bind raw params to the method's Params Struct, or raise MethodNotFound / InvalidParams."""
    if method not in METHODS:
        raise MethodNotFound(f"Method not found: {method[:100]}")
    if method == "hook":
        if not params:
            raise InvalidParams("hook params must be the hook payload object")
        try:
            return _hook_decoder.decode(params)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"hook params must be an object: {exc}") from None
        except msgspec.DecodeError as exc:  # not valid text: decoded with U+FFFD, the event kept
            return _lenient_hook(params, exc)
        except RecursionError:
            raise InvalidParams("hook payload nested too deep") from None
    dec = _decoders[method]
    if not params or params.strip() == b"[]":
        params = b"{}"
    elif params.lstrip().startswith(b"["):
        raise InvalidParams("params must be an object (by-name) for this method")
    try:
        return dec.decode(params)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"Invalid params: {exc}", data={"detail": str(exc)}) from None
    except msgspec.DecodeError as exc:  # e.g. bytes that are not UTF-8 inside a string
        raise InvalidParams(f"params are not valid JSON text: {exc}", data={"detail": str(exc)}) from None
    except RecursionError:
        raise InvalidParams("params nested too deep") from None


def _lenient_hook(params: bytes, exc: msgspec.DecodeError) -> dict[str, Any]:
    fixed = repair(params)
    if fixed is not None:
        try:
            return _hook_decoder.decode(fixed)
        except (msgspec.DecodeError, RecursionError):
            pass
    raise InvalidParams(f"hook params are not valid JSON text: {exc}", data={"detail": str(exc)}) from None
