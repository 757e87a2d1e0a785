"""The four-zone context budget (System / Ledger / Working / Buffer) and the compression level.

Rules:
- Pure: no I/O, no clock. Token figures come from the caller (transcript usage or estimates; ``estimated``
  says which).
- Zone capacities are fractions of the model's window (:class:`ZoneRatios`, default 10/10/65/15 %);
  System, Ledger and Working are rounded, Buffer takes the remainder so the four add up to the window.
- Usage: System = the fixed part (size of the session's first request), capped at the context; Ledger =
  what ctxlifed injected, capped at what is left; Working = context - System - Ledger (>= 0). Working
  beyond its capacity spills into Buffer: Working.used is capped at its capacity, Buffer.used is the
  overflow. ``Zone.pct`` = used / capacity and may exceed 1.0 (System, Ledger, Buffer).
- ``Budget.working_pct`` = uncapped Working tokens / Working capacity (may exceed 1.0); the level is the
  highest threshold it reaches (``>=`` crosses): < l1 NONE, >= l1 L0_L1, >= l2 L1_L2, >= l3 L2_L3.
- Window (spec §6): an explicit override wins; a model id with ``[1m]`` -> 1,000,000; known ids by prefix
  (:data:`KNOWN_WINDOWS`); unknown or None -> 200,000.
- Auto-compact threshold (spec §6): W = window - min(max_output, 20,000); T = W - 13,000; with
  CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=P (1..100): min(floor(W*P/100), W - 13,000). Never below 0.
  ``tokens_to_autocompact`` is floored at 0 (0 means the threshold is reached or passed).
- Figures as text go through ``core.figures`` (percent, tokens, level_name) only, wherever they are
  shown (hook context, advice, ``ctxlifectl status``): one path, so they always agree.
"""

from __future__ import annotations

import math
import re

import msgspec

from ctxlifed.core.model import Level

__all__ = [
    "DEFAULT_WINDOW",
    "KNOWN_WINDOWS",
    "Budget",
    "Thresholds",
    "Zone",
    "ZoneRatios",
    "autocompact_threshold",
    "compute_budget",
    "level_for",
    "render_bar",
    "window_for_model",
]

DEFAULT_WINDOW = 200_000
WINDOW_1M = 1_000_000
AUTOCOMPACT_RESERVE = 13_000  # kept free below the effective window
MAX_OUTPUT_RESERVE = 20_000  # at most this much of the window is reserved for the answer

# (id prefix, window), most specific first. First-party model ids; spec §6 ([DOC:model-config], [OBS]).
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-opus-5", WINDOW_1M),  # claude-opus-5, claude-opus-5-5, ...
    ("claude-sonnet-5", WINDOW_1M),
    ("claude-fable-5", WINDOW_1M),
    ("claude-opus-4-7", WINDOW_1M),  # Opus 4.7+ always run at 1M on the Anthropic API
    ("claude-opus-4-8", WINDOW_1M),
    ("claude-opus-4-9", WINDOW_1M),
    ("claude-opus-4", DEFAULT_WINDOW),  # 4, 4-0, 4-1, 4-5, 4-6 (1M only with [1m])
    ("claude-sonnet-4", DEFAULT_WINDOW),  # 4, 4-5, 4-6 (1M only with [1m])
    ("claude-haiku", DEFAULT_WINDOW),
    ("claude-3", DEFAULT_WINDOW),  # claude-3-*, claude-3-5-*, claude-3-7-*
)
_ONE_M_SUFFIX = re.compile(r"\[1m\]", re.I)


class ZoneRatios(msgspec.Struct, frozen=True):
    """Share of the window given to each zone."""

    system: float = 0.10
    ledger: float = 0.10
    working: float = 0.65
    buffer: float = 0.15

    def validate(self) -> None:
        """Raise ValueError unless every ratio is in [0, 1], working > 0 and they sum to 1 (±0.001)."""
        for name in ("system", "ledger", "working", "buffer"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or math.isnan(v) or not 0.0 <= v <= 1.0:
                raise ValueError(f"zone ratio {name}={v!r} must be between 0 and 1")
        if self.working <= 0.0:
            raise ValueError("zone ratio working must be greater than 0")
        total = self.system + self.ledger + self.working + self.buffer
        if abs(total - 1.0) > 0.001:
            raise ValueError(
                f"zone ratios must sum to 1.0 (±0.001), got {total:.4f} "
                f"(system={self.system}, ledger={self.ledger}, working={self.working}, "
                f"buffer={self.buffer})"
            )


class Thresholds(msgspec.Struct, frozen=True):
    """Working-zone usage fractions at which the compression levels start."""

    l1: float = 0.60
    l2: float = 0.75
    l3: float = 0.90

    def validate(self) -> None:
        """Raise ValueError unless 0 < l1 < l2 < l3 <= 1."""
        for name in ("l1", "l2", "l3"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or math.isnan(v) or not 0.0 < v <= 1.0:
                raise ValueError(f"threshold {name}={v!r} must be in (0, 1]")
        if not self.l1 < self.l2 < self.l3:
            raise ValueError(
                f"thresholds must be strictly increasing: l1={self.l1} < l2={self.l2} < l3={self.l3}"
            )


class Zone(msgspec.Struct, frozen=True):
    """One zone: its capacity and how much of it is in use."""

    name: str
    capacity: int
    used: int
    pct: float  # used / capacity; may exceed 1.0


class Budget(msgspec.Struct, frozen=True):
    """The window split into zones, with the level the Working zone calls for."""

    window: int
    context_tokens: int
    zones: tuple[Zone, ...]  # System, Ledger, Working, Buffer
    working_pct: float  # uncapped Working tokens / Working capacity
    level: Level
    autocompact_at: int
    tokens_to_autocompact: int  # floored at 0
    estimated: bool

    def zone(self, name: str) -> Zone:
        """The zone called ``name`` (KeyError if none)."""
        for z in self.zones:
            if z.name == name:
                return z
        raise KeyError(name)


def window_for_model(model: str | None, override: int | None = None) -> int:
    """Context window of ``model`` in tokens (see module rules)."""
    if override is not None and override > 0:
        return override
    if not model:
        return DEFAULT_WINDOW
    m = model.strip().lower()
    if _ONE_M_SUFFIX.search(m):
        return WINDOW_1M
    i = m.find("claude-")  # tolerate provider prefixes such as "anthropic/" or "us.anthropic."
    if i < 0:
        return DEFAULT_WINDOW
    m = m[i:]
    for prefix, window in KNOWN_WINDOWS:
        if m.startswith(prefix):
            return window
    return DEFAULT_WINDOW


def autocompact_threshold(
    window: int, max_output_tokens: int = MAX_OUTPUT_RESERVE, pct_override: int | None = None
) -> int:
    """Context size at which Claude Code auto-compacts (spec §6)."""
    effective = window - min(max(max_output_tokens, 0), MAX_OUTPUT_RESERVE)
    threshold = effective - AUTOCOMPACT_RESERVE
    if pct_override is not None and 1 <= pct_override <= 100:
        threshold = min(effective * pct_override // 100, threshold)
    return max(threshold, 0)


def level_for(working_pct: float, thresholds: Thresholds) -> Level:
    """Compression level for a Working-zone usage fraction (``>=`` a threshold crosses it)."""
    if working_pct >= thresholds.l3:
        return Level.L2_L3
    if working_pct >= thresholds.l2:
        return Level.L1_L2
    if working_pct >= thresholds.l1:
        return Level.L0_L1
    return Level.NONE


def _zone(name: str, capacity: int, used: int) -> Zone:
    return Zone(name=name, capacity=capacity, used=used, pct=used / max(capacity, 1))


def compute_budget(
    *,
    window: int,
    context_tokens: int,
    system_tokens: int,
    ledger_tokens: int,
    ratios: ZoneRatios = ZoneRatios(),  # noqa: B008 - frozen, immutable default
    thresholds: Thresholds = Thresholds(),  # noqa: B008
    estimated: bool = False,
    autocompact_at: int | None = None,
) -> Budget:
    """Split ``context_tokens`` over the four zones of ``window`` and derive the level.

    ``autocompact_at`` defaults to :func:`autocompact_threshold` of the window.
    Raises ValueError when ``ratios``/``thresholds`` are invalid or ``window`` is not positive.
    """
    ratios.validate()
    thresholds.validate()
    if window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    context = max(context_tokens, 0)
    cap_system = round(window * ratios.system)
    cap_ledger = round(window * ratios.ledger)
    cap_working = max(round(window * ratios.working), 1)
    cap_buffer = max(window - cap_system - cap_ledger - cap_working, 0)

    system = min(max(system_tokens, 0), context)
    ledger = min(max(ledger_tokens, 0), context - system)
    working = context - system - ledger
    overflow = max(working - cap_working, 0)
    working_pct = working / cap_working

    if autocompact_at is None:
        autocompact_at = autocompact_threshold(window)
    return Budget(
        window=window,
        context_tokens=context,
        zones=(
            _zone("System", cap_system, system),
            _zone("Ledger", cap_ledger, ledger),
            _zone("Working", cap_working, working - overflow),
            _zone("Buffer", cap_buffer, overflow),
        ),
        working_pct=working_pct,
        level=level_for(working_pct, thresholds),
        autocompact_at=autocompact_at,
        tokens_to_autocompact=max(autocompact_at - context, 0),
        estimated=estimated,
    )


def render_bar(pct: float, width: int = 20) -> str:
    """ASCII bar for a fraction, e.g. ``render_bar(0.25, 8) == "[##------]"`` (clamped to 0..1)."""
    width = max(width, 1)
    frac = 0.0 if math.isnan(pct) else min(max(pct, 0.0), 1.0)
    filled = min(int(frac * width + 0.5), width)  # round half up
    return "[" + "#" * filled + "-" * (width - filled) + "]"

