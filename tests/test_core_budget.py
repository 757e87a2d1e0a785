"""Tests for ctxlifed.core.budget: four-zone budget, levels, windows and the auto-compact threshold."""

from __future__ import annotations

import math

import msgspec
import pytest

from ctxlifed.core.budget import (
    KNOWN_WINDOWS,
    Budget,
    Thresholds,
    ZoneRatios,
    autocompact_threshold,
    compute_budget,
    level_for,
    render_bar,
    window_for_model,
)
from ctxlifed.core.model import Level

W200 = 200_000
WORKING_200K = 130_000  # 65 % of 200K
SYSTEM_200K = 20_000


def _budget(working_tokens: int, *, window: int = W200, system: int = 15_000, ledger: int = 5_000) -> Budget:
    return compute_budget(
        window=window,
        context_tokens=system + ledger + working_tokens,
        system_tokens=system,
        ledger_tokens=ledger,
    )


@pytest.mark.parametrize(
    ("working_pct", "level"),
    [
        (0.0, Level.NONE),
        (0.599, Level.NONE),
        (0.60, Level.L0_L1),
        (0.7499, Level.L0_L1),
        (0.75, Level.L1_L2),
        (0.8999, Level.L1_L2),
        (0.90, Level.L2_L3),
        (1.5, Level.L2_L3),
    ],
)
def test_level_for(working_pct: float, level: Level) -> None:
    """level_for: a threshold is crossed at >= its value."""
    assert level_for(working_pct, Thresholds()) is level


@pytest.mark.parametrize(
    ("working_tokens", "pct", "level"),
    [
        (77_870, 0.599, Level.NONE),  # 59.9 %
        (78_000, 0.60, Level.L0_L1),  # 60 %
        (97_500, 0.75, Level.L1_L2),  # 75 %
        (117_000, 0.90, Level.L2_L3),  # 90 %
    ],
)
def test_compute_budget_levels(working_tokens: int, pct: float, level: Level) -> None:
    """Levels at 59.9 / 60 / 75 / 90 % of the Working zone of a 200K window."""
    b = _budget(working_tokens)
    assert b.working_pct == pytest.approx(pct, abs=1e-12)
    assert b.level is level
    assert b.zone("Working").used == working_tokens


def test_zones_layout_and_capacities() -> None:
    """Zones are System, Ledger, Working, Buffer; capacities follow the ratios and sum to the window."""
    b = _budget(10_000)
    assert [z.name for z in b.zones] == ["System", "Ledger", "Working", "Buffer"]
    assert [z.capacity for z in b.zones] == [20_000, 20_000, 130_000, 30_000]
    assert sum(z.capacity for z in b.zones) == b.window == W200
    assert [z.used for z in b.zones] == [15_000, 5_000, 10_000, 0]
    assert b.zone("System").pct == 0.75
    assert b.context_tokens == 30_000 and not b.estimated
    with pytest.raises(KeyError):
        b.zone("Nope")


def test_capacities_sum_to_window_for_odd_windows() -> None:
    """Buffer takes the rounding remainder, so capacities always add up to the window."""
    for window in (1, 7, 99_999, 123_457, 1_000_000):
        b = compute_budget(window=window, context_tokens=0, system_tokens=0, ledger_tokens=0)
        assert sum(z.capacity for z in b.zones) == window
        assert all(z.capacity >= 0 for z in b.zones)


def test_working_overflow_spills_into_buffer() -> None:
    """Working beyond its capacity is shown as Buffer use; working_pct stays uncapped."""
    b = _budget(WORKING_200K + 12_000)
    working, buffer = b.zone("Working"), b.zone("Buffer")
    assert (working.used, working.pct) == (WORKING_200K, 1.0)
    assert (buffer.used, buffer.pct) == (12_000, 0.4)
    assert b.working_pct == pytest.approx((WORKING_200K + 12_000) / WORKING_200K)
    assert b.level is Level.L2_L3
    assert sum(z.used for z in b.zones) == b.context_tokens


def test_buffer_pct_may_exceed_one() -> None:
    """A context past Working + Buffer capacity shows Buffer above 100 %."""
    b = compute_budget(window=W200, context_tokens=250_000, system_tokens=20_000, ledger_tokens=0)
    assert b.zone("Buffer").used == 100_000 and b.zone("Buffer").pct == pytest.approx(100_000 / 30_000)
    assert b.tokens_to_autocompact == 0  # floored at 0, never negative


@pytest.mark.parametrize(
    ("context", "system", "ledger", "used"),
    [
        (10_000, 30_000, 5_000, (10_000, 0, 0)),  # system capped at the context
        (20_000, 15_000, 9_000, (15_000, 5_000, 0)),  # ledger capped at what is left
        (0, 15_000, 5_000, (0, 0, 0)),
        (-5, 0, 0, (0, 0, 0)),  # negative context treated as 0
        (50_000, -1, -1, (0, 0, 50_000)),
    ],
)
def test_system_and_ledger_are_capped(
    context: int, system: int, ledger: int, used: tuple[int, int, int]
) -> None:
    """System <= context, Ledger <= what System leaves, Working >= 0."""
    b = compute_budget(window=W200, context_tokens=context, system_tokens=system, ledger_tokens=ledger)
    assert tuple(z.used for z in b.zones[:3]) == used


def test_autocompact_fields_and_estimated_flag() -> None:
    """autocompact_at defaults to the window's threshold; tokens_to_autocompact is the distance to it."""
    b = compute_budget(window=W200, context_tokens=100_000, system_tokens=0, ledger_tokens=0, estimated=True)
    assert (b.autocompact_at, b.tokens_to_autocompact, b.estimated) == (167_000, 67_000, True)
    b2 = compute_budget(
        window=W200, context_tokens=100_000, system_tokens=0, ledger_tokens=0, autocompact_at=120_000
    )
    assert b2.tokens_to_autocompact == 20_000


def test_budget_round_trips_through_json() -> None:
    """A Budget encodes to JSON and decodes back equal (it travels over the control socket)."""
    b = _budget(90_000, window=1_000_000)
    assert msgspec.json.decode(msgspec.json.encode(b), type=Budget) == b


def test_custom_ratios_and_thresholds() -> None:
    """Custom ratios change capacities; custom thresholds change the level."""
    ratios = ZoneRatios(system=0.05, ledger=0.05, working=0.80, buffer=0.10)
    b = compute_budget(
        window=W200,
        context_tokens=10_000 + 80_000,
        system_tokens=10_000,
        ledger_tokens=0,
        ratios=ratios,
        thresholds=Thresholds(l1=0.4, l2=0.5, l3=0.6),
    )
    assert b.zone("Working").capacity == 160_000
    assert b.working_pct == 0.5 and b.level is Level.L1_L2


@pytest.mark.parametrize(
    ("ratios", "message"),
    [
        (ZoneRatios(system=-0.1, ledger=0.2), "system=-0.1 must be between 0 and 1"),
        (ZoneRatios(working=1.5), "working=1.5 must be between 0 and 1"),
        (ZoneRatios(buffer=0.2), "must sum to 1.0"),
        (ZoneRatios(system=0.5, ledger=0.5, working=0.0, buffer=0.0), "working must be greater than 0"),
        (ZoneRatios(ledger=math.nan), "ledger=nan"),
    ],
)
def test_ratio_validation_errors(ratios: ZoneRatios, message: str) -> None:
    """Invalid zone ratios raise ValueError with a message naming the problem."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        ratios.validate()
    with pytest.raises(ValueError):
        compute_budget(window=W200, context_tokens=0, system_tokens=0, ledger_tokens=0, ratios=ratios)


def test_ratio_validation_accepts_defaults_and_tolerance() -> None:
    """Defaults are valid; a sum within ±0.001 of 1 is accepted."""
    ZoneRatios().validate()
    ZoneRatios(system=0.1005, ledger=0.1, working=0.65, buffer=0.15).validate()
    Thresholds().validate()


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        (Thresholds(l1=0.8, l2=0.75), "strictly increasing"),
        (Thresholds(l2=0.9, l3=0.9), "strictly increasing"),
        (Thresholds(l1=0.0), r"l1=0\.0 must be in \(0, 1\]"),
        (Thresholds(l3=1.2), r"l3=1\.2 must be in \(0, 1\]"),
    ],
)
def test_threshold_validation_errors(thresholds: Thresholds, message: str) -> None:
    """Thresholds must be in (0, 1] and strictly increasing."""
    with pytest.raises(ValueError, match=message):
        thresholds.validate()


def test_window_must_be_positive() -> None:
    """compute_budget rejects a non-positive window."""
    with pytest.raises(ValueError, match="window must be positive"):
        compute_budget(window=0, context_tokens=0, system_tokens=0, ledger_tokens=0)


@pytest.mark.parametrize(
    ("model", "override", "window"),
    [
        ("claude-opus-5-5", None, 1_000_000),
        ("claude-opus-5", None, 1_000_000),
        ("claude-sonnet-5", None, 1_000_000),
        ("claude-fable-5", None, 1_000_000),
        ("claude-opus-4-7", None, 1_000_000),
        ("claude-opus-4-8-20260101", None, 1_000_000),
        ("claude-opus-4-6", None, 200_000),
        ("claude-opus-4-6[1m]", None, 1_000_000),
        ("claude-sonnet-4-6[1M]", None, 1_000_000),
        ("opus[1m]", None, 1_000_000),
        ("claude-sonnet-4-5-20250929", None, 200_000),
        ("claude-opus-4-1-20250805", None, 200_000),
        ("claude-opus-4-5", None, 200_000),
        ("claude-opus-4-20250514", None, 200_000),
        ("claude-haiku-4-5", None, 200_000),
        ("claude-3-5-sonnet-20241022", None, 200_000),
        ("claude-3-opus-20240229", None, 200_000),
        ("anthropic/claude-opus-5-5", None, 1_000_000),
        ("Claude-Opus-5-5", None, 1_000_000),
        ("gpt-4o", None, 200_000),
        ("my-gateway-model", None, 200_000),
        ("", None, 200_000),
        (None, None, 200_000),
        (None, 500_000, 500_000),
        ("claude-opus-5-5", 200_000, 200_000),
        ("claude-3-haiku", 0, 200_000),  # a non-positive override is ignored
    ],
)
def test_window_for_model(model: str | None, override: int | None, window: int) -> None:
    """Override wins, then [1m], then the known-id table; unknown or None -> 200K."""
    assert window_for_model(model, override) == window


def test_known_windows_table_shape() -> None:
    """KNOWN_WINDOWS maps claude- id prefixes to 200K or 1M, most specific first."""
    assert all(p.startswith("claude-") and w in (200_000, 1_000_000) for p, w in KNOWN_WINDOWS)
    prefixes = [p for p, _ in KNOWN_WINDOWS]
    for i, p in enumerate(prefixes):  # no earlier prefix shadows a later, more specific one
        assert not any(p.startswith(q) for q in prefixes[:i])


@pytest.mark.parametrize(
    ("window", "max_output", "pct", "threshold"),
    [
        (1_000_000, 20_000, None, 967_000),
        (200_000, 20_000, None, 167_000),
        (1_000_000, 64_000, None, 967_000),  # output reserve capped at 20K
        (200_000, 8_000, None, 179_000),
        (1_000_000, 20_000, 50, 490_000),  # spec §6: P=50 on 1M
        (1_000_000, 20_000, 100, 967_000),  # P can only lower it
        (200_000, 20_000, 0, 167_000),  # out-of-range P ignored
        (200_000, 20_000, 101, 167_000),
        (100_000, 20_000, None, 67_000),  # spec §6: --autocompact 100000
        (10_000, 20_000, None, 0),  # never negative
    ],
)
def test_autocompact_threshold(window: int, max_output: int, pct: int | None, threshold: int) -> None:
    """Auto-compact threshold per spec §6."""
    assert autocompact_threshold(window, max_output, pct) == threshold


@pytest.mark.parametrize(
    ("pct", "width", "bar"),
    [
        (0.0, 20, "[--------------------]"),
        (0.5, 20, "[##########----------]"),
        (1.0, 20, "[####################]"),
        (1.7, 10, "[##########]"),
        (-0.2, 10, "[----------]"),
        (0.25, 8, "[##------]"),
        (0.04, 10, "[----------]"),
        (0.06, 10, "[#---------]"),
        (math.nan, 5, "[-----]"),
        (0.5, 0, "[#]"),
    ],
)
def test_render_bar(pct: float, width: int, bar: str) -> None:
    """render_bar draws a clamped ASCII bar of the requested width."""
    assert render_bar(pct, width) == bar


def test_figures_have_one_text_form() -> None:
    """percent takes a fraction; raw and status --json (rounded to 4 decimals) values print alike."""
    from ctxlifed.core.figures import level_name, percent, tokens

    assert ("78.3%", "0.0%", "150.0%", "?") == (percent(0.7834), percent(0.0), percent(1.5), percent(float("nan")))
    for x in (0.784449999, 0.78445, 1 / 3, 0.125):
        assert percent(x) == percent(round(x, 4))
    assert ("12,345", "0") == (tokens(12345), tokens(0))
    assert ["none", "L0→L1", "L1→L2", "L2→L3", "7"] == [level_name(i) for i in (0, 1, 2, 3, 7)]
