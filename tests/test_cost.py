"""The cost of what stays resident (core/cost.py), the auto-compaction overrides (core/autocompact.py),
their config, and the shim forwarding the overrides."""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import load_hooks
from ctxlifed.core import autocompact as AC
from ctxlifed.core import cost as C
from ctxlifed.core.figures import usd
from ctxlifed.core.model import Usage
from ctxlifed.runtime import config as CFG


def u(mid: str, *, inp: int = 0, write: int = 0, read: int = 0, out: int = 0, ts: float = 0.0,
      model: str = "claude-sonnet-4-5") -> Usage:
    return Usage(message_id=mid, model=model, input_tokens=inp, cache_creation_input_tokens=write,
                 cache_read_input_tokens=read, output_tokens=out, ts=ts)


# -- prices ---------------------------------------------------------------------------------------
def test_price_for_defaults_most_specific_prefix_wins() -> None:
    assert C.price_for("claude-opus-4-1-20250805").input_per_mtok == 15.0
    assert C.price_for("claude-opus-4-5-20251101").input_per_mtok == 5.0
    assert C.price_for("claude-opus-5-5").input_per_mtok == 4.0
    assert C.price_for("claude-opus-5").input_per_mtok == 5.0
    assert C.price_for("us.anthropic.claude-sonnet-4-5-v1").input_per_mtok == 3.0
    assert C.price_for("claude-haiku-4-5").input_per_mtok == 1.0
    p = C.price_for("gpt-something")
    assert (p.source, p.input_per_mtok) == ("fallback", C.FALLBACK_PRICE)
    assert C.price_for(None).source == "fallback"


def test_price_overrides_win_ties_and_longer_prefixes_still_win() -> None:
    over = (("claude-opus-5", 7.0), ("claude", 1.0))
    assert C.price_for("claude-opus-5", over) == C.Price(7.0, "claude-opus-5", "config")
    # the default claude-opus-5-5 is more specific than the override claude-opus-5
    assert C.price_for("claude-opus-5-5", over).input_per_mtok == 4.0
    assert C.price_for("claude-unknown-9", over) == C.Price(1.0, "claude", "config")


def test_default_price_matches_claude_codes_own_cache_write_estimate() -> None:
    """The resume fixtures (claude-opus-5-5) carry Claude Code's estimated_cache_write_usd for their
    context: our price table and the 1.25x write multiplier give the same figure."""
    seen = 0
    for run in ("chain_all", "chain3_continue", "chain4_clear", "chain2_resume_compact"):
        for h in load_hooks(run):
            p = h["payload"]
            if p.get("hook_event_name") == "SessionStart" and "estimated_cache_write_usd" in p:
                ours = C.resident_turn_usd(p["context_tokens"], C.price_for("claude-opus-5-5"), cold=True)
                assert ours == pytest.approx(p["estimated_cache_write_usd"], abs=0.00006)
                seen += 1
    assert seen >= 4


def test_turn_usd_formula() -> None:
    price = C.Price(3.0, "x", "default")
    got = C.turn_usd(u("m", inp=1000, write=2000, read=100_000, out=500), price)
    assert got == pytest.approx(3.0 / 1e6 * (1000 + 1.25 * 2000 + 0.1 * 100_000 + 5 * 500))


# -- folding --------------------------------------------------------------------------------------
def test_fold_counts_one_turn_per_message_and_a_straddling_response_once() -> None:
    price = C.Price(3.0, "x", "default")
    t = C.fold_usages(C.CostTally(), [u("m1", inp=10, read=1000, out=5, ts=1), u("m2", inp=20, read=2000, out=7, ts=2)],
                      price)
    # m2 arrives again (its records straddled two reads), with its final output count
    t = C.fold_usages(t, [u("m2", inp=20, read=2000, out=70, ts=2), u("m3", inp=5, write=300, read=2100, ts=3)], price)
    assert t.turns == 3
    assert (t.input_tokens, t.cache_write_tokens, t.cache_read_tokens, t.output_tokens) == (35, 300, 5100, 75)
    expect = sum(C.turn_usd(x, price) for x in (u("m1", inp=10, read=1000, out=5), u("m2", inp=20, read=2000, out=70),
                                                  u("m3", inp=5, write=300, read=2100)))
    assert t.usd == pytest.approx(expect)
    assert [s.context_tokens for s in t.samples] == [1010, 2020, 2405]
    assert t.samples[-1].usd == pytest.approx(expect)


def test_samples_are_bounded_and_keep_the_span() -> None:
    price = C.Price(1.0, "x", "default")
    t = C.CostTally()
    for i in range(C.MAX_SAMPLES * 3):
        t = C.fold_usages(t, [u(f"m{i}", read=i + 1, ts=float(i))], price)
    assert len(t.samples) <= C.MAX_SAMPLES
    assert t.samples[0].ts == 0.0 and t.samples[-1].ts == C.MAX_SAMPLES * 3 - 1
    assert t.turns == C.MAX_SAMPLES * 3


def test_live_compression_saves_the_write_then_a_read_per_turn_until_release() -> None:
    price = C.Price(2.0, "x", "default")
    p = 2.0 / 1e6
    t = C.note_live_saved(C.CostTally(), 10_000, price)
    assert t.live_saved_usd == pytest.approx(10_000 * p * 1.25)
    t = C.fold_usages(t, [u("a", read=5000), u("b", read=6000)], price)
    assert t.live_saved_usd == pytest.approx(10_000 * p * (1.25 + 0.2))
    t = C.at_release(t)
    t = C.fold_usages(t, [u("c", read=1000)], price)
    assert t.live_saved_usd == pytest.approx(10_000 * p * (1.25 + 0.2))
    assert t.live_saved_tokens == 10_000 and t.live_resident_tokens == 0


# -- savings --------------------------------------------------------------------------------------
def test_release_savings_by_hand() -> None:
    price = C.Price(4.0, "x", "default")
    p = 4.0 / 1e6
    c, s, k, n = 150_000, 20_000, 8_000, 10
    got = {x.action: x for x in C.release_savings(context_tokens=c, system_tokens=s, price=price, turns=n,
                                                  summary_tokens=k, rewind_to=90_000)}
    keep = n * c * 0.1 * p
    assert got["/clear"].usd == pytest.approx(keep - (s * 1.25 * p + (n - 1) * s * 0.1 * p))
    compact = c * 0.1 * p + k * 5 * p + s * 0.1 * p + k * 1.25 * p + (n - 1) * (s + k) * 0.1 * p
    assert got["/compact"].usd == pytest.approx(keep - compact)
    assert got["/rewind"].usd == pytest.approx(keep - n * 90_000 * 0.1 * p)
    assert not got["/compact"].estimated and got["/rewind"].estimated
    assert got["/compact"].reason.startswith(f"/compact saves ≈{usd(keep - compact)} over the next 10 turns")
    assert "150,000 resident tokens cost $0.06 a turn as cache reads at $0.40/MTok" in got["/compact"].reason


@pytest.mark.parametrize("price,context", [(3.0, 141_200), (15.0, 80_000), (0.8, 190_000), (3.0, 2_000)])
def test_the_rate_a_reason_names_gives_its_per_turn_figure(price: float, context: int) -> None:
    """Every figure matches its source: the tokens times the rate the text names is the cost it names."""
    for s in C.release_savings(context_tokens=context, system_tokens=1_000, price=C.Price(price, "x", "default"),
                               turns=10):
        m = re.search(r"the ([\d,]+) resident tokens cost \$([\d.]+) a turn as cache reads at \$([\d.]+)/MTok",
                      s.reason)
        assert m is not None, s.reason
        tokens, per_turn, rate = int(m.group(1).replace(",", "")), m.group(2), float(m.group(3))
        assert rate == pytest.approx(price / 10)
        assert usd(tokens * rate / 1e6) == f"${per_turn}"


def test_compact_of_a_small_context_costs_more_than_it_saves() -> None:
    out = C.release_savings(context_tokens=12_000, system_tokens=10_000, price=C.Price(3.0, "x", "default"), turns=2)
    compact = next(x for x in out if x.action == "/compact")
    assert compact.usd < 0 and "costs ≈" in compact.reason and compact.estimated
    assert C.advice_reason(out, "/compact") == (compact.usd, compact.reason)
    assert C.advice_reason([], "/compact") == (0.0, "")


def test_a_cold_cache_uses_claude_codes_write_estimate() -> None:
    price = C.Price(4.0, "x", "default")
    warm = C.release_savings(context_tokens=100_000, system_tokens=10_000, price=price, turns=5)
    cold = C.release_savings(context_tokens=100_000, system_tokens=10_000, price=price, turns=5, cold=True,
                             cold_write_usd=0.9)
    w = next(x for x in warm if x.action == "/clear")
    k = next(x for x in cold if x.action == "/clear")
    assert k.keep_usd == pytest.approx(0.9 + 4 * 100_000 * 0.1 * 4e-6)
    assert k.usd > w.usd and "cache has expired" in k.reason


def test_usd_format() -> None:
    assert (usd(0.4213), usd(0.004), usd(0), usd(1234.5), usd(-0.5), usd(1e-6), usd(math.nan)) == (
        "$0.42", "$0.004", "$0.00", "$1,234.50", "-$0.50", "<$0.0001", "$?")


# -- auto-compaction overrides ---------------------------------------------------------------------
def test_autocompact_overrides() -> None:
    assert AC.autocompact_at(200_000, {}) == 167_000
    assert AC.autocompact_at(1_000_000, {AC.WINDOW_VAR: "100000"}) == 67_000  # spec: --autocompact 100000
    assert AC.autocompact_at(1_000_000, {AC.PCT_VAR: "50"}) == 490_000  # spec: P=50 on 1M
    assert AC.autocompact_at(200_000, {AC.WINDOW_VAR: "1000000"}) == 167_000  # capped at the model's window
    assert AC.autocompact_at(200_000, {AC.PCT_VAR: "0"}) == 167_000  # out of range: ignored
    assert AC.autocompact_at(200_000, {AC.WINDOW_VAR: "abc", AC.PCT_VAR: "101"}) == 167_000


def test_merge_env_first_source_wins_per_variable() -> None:
    got = AC.merge_env([{AC.PCT_VAR: "70"}, None, {AC.PCT_VAR: "50", AC.WINDOW_VAR: 300000, "OTHER": "1"},
                        {AC.WINDOW_VAR: "9"}])
    assert got == {AC.PCT_VAR: "70", AC.WINDOW_VAR: "300000"}
    assert AC.merge_env([{AC.PCT_VAR: True}, {AC.PCT_VAR: " 12 "}]) == {AC.PCT_VAR: "12"}


# -- config -----------------------------------------------------------------------------------------
def test_config_prices_from_file_and_env(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('cost_turns = 20\n[prices]\n"claude-opus-5" = 6.5\n')
    c = CFG.load(str(f), env={})
    assert c.prices == (("claude-opus-5", 6.5),) and c.cost_turns == 20 and not c.problems
    c = CFG.load(None, env={"CTXLIFED_PRICES": "claude-opus-5=7, claude-x=1.5", "CTXLIFED_COST_TURNS": "3"})
    assert c.prices == (("claude-opus-5", 7.0), ("claude-x", 1.5)) and c.cost_turns == 3
    bad = CFG.load(None, env={"CTXLIFED_PRICES": "claude-opus-5", "CTXLIFED_COST_TURNS": "0"})
    assert bad.prices == () and bad.cost_turns == 10 and len(bad.problems) == 2


# -- the shim forwards the overrides ------------------------------------------------------------------
@pytest.fixture
def shim_mod(monkeypatch):
    from ctxlifed._shim import ctxlifed_shim as shim

    for k in shim.ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    return shim


def test_shim_adds_the_overrides_to_the_payload(shim_mod, monkeypatch) -> None:
    assert shim_mod._with_env(b'{"a": 1}') == b'{"a": 1}'  # nothing set: unchanged
    monkeypatch.setenv("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "200000")
    monkeypatch.setenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "x50")  # not a whole number: not forwarded
    got = json.loads(shim_mod._with_env(b'{"a": {"b": 1}}'))
    assert got == {"ctxlifed_env": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}, "a": {"b": 1}}
    monkeypatch.setenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "50")
    assert json.loads(shim_mod._with_env(b"{ }")) == {"ctxlifed_env": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000",
                                                                       "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}}



def test_settings_paths_that_cannot_be_opened_are_skipped(tmp_path, monkeypatch) -> None:
    from ctxlifed.service import cost as COST

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-user-settings"))
    from ctxlifed.service.state import SessionState

    st = SessionState(session="s", project="/tmp\x00x", cwd="/tmp\x00x")
    COST.note_overrides(st, {}, "SessionStart")
    assert st.autocompact_settings is not None and st.autocompact_env == {}
    big = tmp_path / "p" / ".claude"
    big.mkdir(parents=True)
    (big / "settings.json").write_text(json.dumps({"env": {AC.PCT_VAR: "40"}, "pad": "x" * COST.MAX_SETTINGS_BYTES}))
    (big / "settings.local.json").write_text(json.dumps(["not", "an", "object"]))
    st = SessionState(session="s", project=str(tmp_path / "p"))
    COST.note_overrides(st, {}, "SessionStart")
    assert AC.PCT_VAR not in st.autocompact_settings  # over the size bound: skipped


def test_rewind_is_priced_back_to_where_the_phase_began() -> None:
    from ctxlifed.core import budget as B
    from ctxlifed.core.phase import PhaseState
    from ctxlifed.runtime.config import Config
    from ctxlifed.service import cost as COST
    from ctxlifed.service.state import SessionState

    price = C.price_for("claude-sonnet-4-5")
    st = SessionState(session="s", project="/p", model="claude-sonnet-4-5", system_tokens=10_000,
                      phase=PhaseState(phase="testing", since=150.0), phase_started=150.0)
    st.cost = C.fold_usages(C.CostTally(), [u("a", read=40_000, ts=100.0), u("b", read=60_000, ts=140.0),
                                            u("c", read=90_000, ts=160.0)], price)
    b = B.compute_budget(window=200_000, context_tokens=90_000, system_tokens=10_000, ledger_tokens=0)
    rw = next(x for x in COST.savings(st, b, Config()) if x.action == "/rewind")
    assert rw.usd == pytest.approx(10 * (90_000 - 60_000) * 0.1 * 3e-6)
    assert "back to 60,000 tokens, where the testing phase began" in rw.reason
    st.boundary_ts = 155.0  # a compaction since the phase began: no rewind across it
    assert "/rewind" not in {x.action for x in COST.savings(st, b, Config())}


def test_a_settings_file_nested_too_deep_for_json_is_skipped_like_a_malformed_one(tmp_path) -> None:
    """The env overrides read settings files with the settings reader: a file Python's JSON parser
    cannot take (nested past its recursion limit) is skipped, not raised."""
    from ctxlifed.service import cost

    deep = tmp_path / "settings.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert cost._env_of(str(deep)) is None
    good = tmp_path / "good.json"
    good.write_text('{"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}}')
    assert cost._env_of(str(good)) == {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}
