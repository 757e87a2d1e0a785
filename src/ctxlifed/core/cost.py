"""What stays resident costs money: per turn, the session so far, and what a release would save.

Rules:
- Pure: no I/O, no clock, no logging. Every fold returns a new :class:`CostTally`; the argument is
  never changed. The state is msgspec-serialisable and bounded (:data:`MAX_SAMPLES` samples, each
  time rounded to 0.1 s and money to 1e-6 USD; when full, every other sample is dropped).
- Prices are USD per million input tokens, per model id prefix (most specific first, as
  ``budget.KNOWN_WINDOWS``). Defaults: :data:`DEFAULT_INPUT_PRICES`, the public list prices taken on
  :data:`PRICES_TAKEN` from :data:`PRICES_SOURCE`; the config's ``prices`` override them (a longer
  matching prefix wins, an override wins a tie). An unknown model is priced at :data:`FALLBACK_PRICE`
  and says so (``source="fallback"``).
- Every other rate is a multiple of the input price (the chapter's rule): cache reads 0.1x
  (:data:`CACHE_READ`), cache writes 1.25x (:data:`CACHE_WRITE`, the 5-minute cache), output 5x
  (:data:`OUTPUT`, true of every listed model). One turn costs
  ``p/1e6 * (input + 1.25 cache_creation + 0.1 cache_read + 5 output)``.
- Folding usages (:func:`fold_usages`): one turn per message id. A response whose records straddle two
  reads arrives twice: only the last counted id can straddle, so it is kept (``last``) and a second
  sighting replaces its contribution instead of adding to it.
- The resident context is re-read every turn: with a warm cache it costs ``context * 0.1 p`` per turn
  (:func:`resident_turn_usd`). A cold cache (a resume after the TTL: SessionStart's
  ``prompt_cache_likely_expired``) re-writes it once at 1.25x; SessionStart's
  ``estimated_cache_write_usd`` is Claude Code's own figure for that write and is used as it is.
- Savings over the next N turns (:func:`release_savings`), ignoring what the turns add (the same under
  every choice): keep = N re-reads of the context (the first a re-write when the cache is cold);
  ``/clear`` = one write of the fixed part S, then N-1 re-reads of S; ``/compact`` = one full request
  (a read of the context plus the summary K as output), one write of K, then re-reads of S + K;
  ``/rewind`` to R tokens = N re-reads of R (the earlier prefix is still cached). K is the caller's
  figure (the last compaction's post tokens) or, by default, a tenth of the conversation, between
  2,000 and 20,000 tokens: an estimate, labelled so. A saving is keep minus the action's cost (may
  be negative: ``/compact`` of a small context costs more than it saves).
- Live compression replaces a result before it enters the prompt, so the cache prefix is never
  broken: its saving is the write it avoided (1.25x) plus one re-read (0.1x) per later turn while
  the window would have held it (until the next compaction or /clear: :func:`at_release`).
- Money as text goes through ``core.figures.usd`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from ctxlifed.core.figures import usd
from ctxlifed.core.model import Usage

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "DEFAULT_INPUT_PRICES",
    "FALLBACK_PRICE",
    "OUTPUT",
    "PRICES_SOURCE",
    "PRICES_TAKEN",
    "CostTally",
    "Price",
    "Sample",
    "Saving",
    "TurnCost",
    "advice_reason",
    "at_release",
    "fold_usages",
    "note_live_saved",
    "note_resume",
    "price_for",
    "release_savings",
    "resident_turn_usd",
    "summary_estimate",
    "turn_usd",
]

CACHE_READ = 0.1
CACHE_WRITE = 1.25
OUTPUT = 5.0
MTOK = 1_000_000
MAX_SAMPLES = 160  # the state is saved with every event: a few kB at most
PRICES_TAKEN = "2026-12-01"
PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
FALLBACK_PRICE = 5.0  # an unknown model is priced as the current Opus

# (id prefix, USD per million input tokens), most specific first.
DEFAULT_INPUT_PRICES: tuple[tuple[str, float], ...] = (
    ("claude-fable-5", 10.0),
    ("claude-mythos-5", 10.0),
    ("claude-opus-5-5", 4.0),
    ("claude-opus-5", 5.0),
    ("claude-opus-4-9", 5.0),
    ("claude-opus-4-8", 5.0),
    ("claude-opus-4-7", 5.0),
    ("claude-opus-4-6", 5.0),
    ("claude-opus-4-5", 5.0),
    ("claude-opus-4", 15.0),  # 4, 4-0, 4-1
    ("claude-3-opus", 15.0),
    ("claude-sonnet-5", 2.0),
    ("claude-sonnet-4", 3.0),
    ("claude-3-7-sonnet", 3.0),
    ("claude-3-5-sonnet", 3.0),
    ("claude-haiku-4", 1.0),
    ("claude-3-5-haiku", 0.80),
    ("claude-3-haiku", 0.25),
)
SUMMARY_MIN = 2_000
SUMMARY_MAX = 20_000


class Price(msgspec.Struct, frozen=True):
    """The input price applied to a model, and where it came from."""

    input_per_mtok: float
    prefix: str  # the matching prefix ("" for the fallback)
    source: str  # "default" | "config" | "fallback"


class TurnCost(msgspec.Struct, frozen=True):
    """One response's tokens and what they cost."""

    message_id: str = ""
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


class Sample(msgspec.Struct, frozen=True, array_like=True):
    """One point of the session's time series: context size and cost so far after a response."""

    ts: float
    context_tokens: int
    usd: float  # cumulative


class CostTally(msgspec.Struct, frozen=True):
    """The session's cost so far (bounded)."""

    turns: int = 0
    input_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    last: TurnCost | None = None  # the last counted response (it may straddle two reads)
    price: Price | None = None  # the price of the last folded usage
    resume_write_usd: float | None = None  # SessionStart(resume): Claude Code's estimate of the re-write
    cache_expired: bool | None = None  # SessionStart(resume): prompt_cache_likely_expired
    live_saved_tokens: int = 0  # tokens live compression kept out of the window (all time)
    live_resident_tokens: int = 0  # of those, what the window would still hold now
    live_saved_usd: float = 0.0
    samples: tuple[Sample, ...] = ()  # bounded: MAX_SAMPLES, halved when full


def _norm(model: str | None) -> str:
    m = (model or "").strip().lower()
    i = m.find("claude-")  # tolerate provider prefixes ("anthropic/", "us.anthropic.")
    return m[i:] if i >= 0 else m


def price_for(model: str | None, overrides: Sequence[tuple[str, float]] = ()) -> Price:
    """The input price of ``model``: the longest matching prefix of the overrides and defaults."""
    m = _norm(model)
    best: Price | None = None
    for source, table in (("config", overrides), ("default", DEFAULT_INPUT_PRICES)):
        for prefix, price in table:
            p = prefix.strip().lower()
            if p and m.startswith(p) and (best is None or len(p) > len(best.prefix)):
                best = Price(input_per_mtok=float(price), prefix=p, source=source)
    return best or Price(input_per_mtok=FALLBACK_PRICE, prefix="", source="fallback")


def turn_usd(u: Usage, price: Price) -> float:
    """What one response cost (see module rules)."""
    p = price.input_per_mtok / MTOK
    return p * (u.input_tokens + CACHE_WRITE * u.cache_creation_input_tokens
                + CACHE_READ * u.cache_read_input_tokens + OUTPUT * u.output_tokens)


def resident_turn_usd(context_tokens: int, price: Price, *, cold: bool = False) -> float:
    """What re-sending ``context_tokens`` costs on the next turn: a cache read, or a write when cold."""
    return max(context_tokens, 0) * price.input_per_mtok / MTOK * (CACHE_WRITE if cold else CACHE_READ)


def _turn(u: Usage, price: Price) -> TurnCost:
    return TurnCost(message_id=u.message_id, input_tokens=u.input_tokens,
                    cache_write_tokens=u.cache_creation_input_tokens,
                    cache_read_tokens=u.cache_read_input_tokens, output_tokens=u.output_tokens,
                    usd=turn_usd(u, price))


def _add_sample(samples: tuple[Sample, ...], s: Sample, replace_last: bool) -> tuple[Sample, ...]:
    if replace_last and samples:
        return (*samples[:-1], s)
    if len(samples) >= MAX_SAMPLES:
        samples = samples[::2]  # halve the resolution, keep the span (deterministic)
    return (*samples, s)


def fold_usages(t: CostTally, usages: Iterable[Usage], price: Price) -> CostTally:
    """Add responses to the tally, one turn per message id (see module rules)."""
    for u in usages:
        tc = _turn(u, price)
        same = t.last is not None and t.last.message_id == u.message_id and bool(u.message_id)
        prev = t.last if same and t.last is not None else TurnCost()
        live_read = 0.0 if same else t.live_resident_tokens * price.input_per_mtok / MTOK * CACHE_READ
        usd_total = t.usd - prev.usd + tc.usd
        t = msgspec.structs.replace(
            t, turns=t.turns + (0 if same else 1),
            input_tokens=t.input_tokens - prev.input_tokens + tc.input_tokens,
            cache_write_tokens=t.cache_write_tokens - prev.cache_write_tokens + tc.cache_write_tokens,
            cache_read_tokens=t.cache_read_tokens - prev.cache_read_tokens + tc.cache_read_tokens,
            output_tokens=t.output_tokens - prev.output_tokens + tc.output_tokens,
            usd=usd_total, last=tc, price=price, live_saved_usd=t.live_saved_usd + live_read,
            samples=_add_sample(t.samples, Sample(ts=round(u.ts, 1), context_tokens=u.context_tokens,
                                                   usd=round(usd_total, 6)), same))
    return t


def note_resume(t: CostTally, *, write_usd: float | None, expired: bool | None) -> CostTally:
    """SessionStart(resume/fork): Claude Code's estimate of the cache re-write and whether it is due."""
    return msgspec.structs.replace(t, resume_write_usd=write_usd, cache_expired=expired)


def note_live_saved(t: CostTally, tokens: int, price: Price) -> CostTally:
    """Live compression kept ``tokens`` out of the window: the write it avoided is saved now, and one
    re-read per later turn while the window would have held them (see :func:`fold_usages`)."""
    n = max(int(tokens), 0)
    return msgspec.structs.replace(
        t, live_saved_tokens=t.live_saved_tokens + n, live_resident_tokens=t.live_resident_tokens + n,
        live_saved_usd=t.live_saved_usd + n * price.input_per_mtok / MTOK * CACHE_WRITE)


def at_release(t: CostTally) -> CostTally:
    """A compaction or /clear: what live compression kept out would have left the window too."""
    return msgspec.structs.replace(t, live_resident_tokens=0)


class Saving(msgspec.Struct, frozen=True):
    """What one release would save over the next ``turns`` turns (negative: it costs more)."""

    action: str  # "/clear" | "/compact" | "/rewind"
    turns: int
    usd: float
    keep_usd: float  # the next ``turns`` turns without it
    action_usd: float  # the same turns after it, the release itself included
    estimated: bool  # rests on an estimate (the summary size, the rewind point)
    reason: str


def summary_estimate(context_tokens: int, system_tokens: int) -> int:
    """The default compaction summary size: a tenth of the conversation, within 2,000..20,000."""
    return min(max((max(context_tokens - system_tokens, 0)) // 10, SUMMARY_MIN), SUMMARY_MAX)


def release_savings(*, context_tokens: int, system_tokens: int, price: Price, turns: int,
                    cold: bool = False, cold_write_usd: float | None = None,
                    summary_tokens: int | None = None, rewind_to: int | None = None,
                    rewind_note: str = "") -> list[Saving]:
    """Savings of ``/clear``, ``/compact`` and (with ``rewind_to``) ``/rewind`` over the next ``turns``
    turns, largest first (see module rules). ``cold``: the cache has expired; ``cold_write_usd``:
    Claude Code's own figure for re-writing the context then; ``rewind_note``: where the rewind goes
    (said in its reason)."""
    n = max(int(turns), 1)
    c = max(context_tokens, 0)
    sys_ = min(max(system_tokens, 0), c)
    p = price.input_per_mtok / MTOK
    read, write = p * CACHE_READ, p * CACHE_WRITE
    first = cold_write_usd if cold and cold_write_usd is not None else (c * write if cold else c * read)
    keep = first + (n - 1) * c * read
    estimated = summary_tokens is None
    k = summary_estimate(c, sys_) if summary_tokens is None else max(summary_tokens, 0)
    costs: list[tuple[str, float, bool]] = [
        ("/clear", sys_ * write + (n - 1) * sys_ * read, False),
        ("/compact", c * (write if cold else read) + k * p * OUTPUT + sys_ * read + k * write
         + (n - 1) * (sys_ + k) * read, estimated),
    ]
    if rewind_to is not None and 0 <= rewind_to < c:
        costs.append(("/rewind", n * rewind_to * read, True))
    out = []
    for action, cost, est in costs:
        saved = keep - cost
        out.append(Saving(action=action, turns=n, usd=saved, keep_usd=keep, action_usd=cost, estimated=est,
                          reason=_reason(action, saved, n, c, price, cold,
                                         rewind_note if action == "/rewind" else "")))
    return sorted(out, key=lambda s: -s.usd)


def _reason(action: str, saved: float, n: int, c: int, price: Price, cold: bool, note: str = "") -> str:
    per_turn = resident_turn_usd(c, price)
    head = (f"{action} saves ≈{usd(saved)} over the next {n} turns" if saved > 0
            else f"{action} costs ≈{usd(-saved)} more than it saves over the next {n} turns")
    # the rate said is the one the figure is made of (a tenth of the input price): c x rate = the figure
    tail = (f"the {c:,} resident tokens cost {usd(per_turn)} a turn as cache reads at "
            f"{usd(price.input_per_mtok * CACHE_READ)}/MTok"
            + ("; the cache has expired, so the next turn re-writes them" if cold else ""))
    return f"{head} ({note + '; ' if note else ''}{tail})"


def advice_reason(savings: Sequence[Saving], action: str = "/compact") -> tuple[float, str]:
    """The saving of ``action`` and its short reason, for compaction advice ((0.0, "") if absent)."""
    for s in savings:
        if s.action == action:
            return s.usd, s.reason
    return 0.0, ""
