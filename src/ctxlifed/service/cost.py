"""The service side of cost and auto-compaction overrides: folds usage into the session, builds the
status view, and reads the overrides from the hook environment and the settings files.

Rules:
- The pure parts are ``core/cost.py`` and ``core/autocompact.py``; this module only joins them with
  the session state, the config (``prices``, ``cost_turns``) and the settings files.
- Usage is folded per transcript read (:func:`fold`); a read from the file's start (a new or
  rewritten transcript) starts the tally afresh, so nothing is counted twice.
- :func:`note_live_compression` is the counter live compression increments (tokens it kept out of the
  prompt); status shows its total and the money it saved.
- ``/rewind`` is priced back to where the current phase began (the context of the last response
  before it), when that is after the last compaction; otherwise it is not offered.
- A resume's cache figures (``estimated_cache_write_usd``, ``prompt_cache_likely_expired``) hold until
  the next response, which re-writes the cache (its cost is then in the tally).
- Overrides (:func:`note_overrides`): the event's ``ctxlifed_env`` (the shim forwards the two
  variables from Claude Code's environment; absent or empty keeps the last one seen) wins per
  variable; then the ``env`` of ``<project>/.claude/settings.local.json``,
  ``<project>/.claude/settings.json`` and the user's ``settings.json`` (``$CLAUDE_CONFIG_DIR`` or
  ``~/.claude``), read at SessionStart and at a session's first event, each at most
  :data:`MAX_SETTINGS_BYTES`; an unreadable or malformed file (or a path that cannot be opened, a
  NUL in it) is skipped.
"""

from __future__ import annotations

import os
from typing import Any

from ..core import autocompact as AC
from ..core import budget as B
from ..core import cost as C
from ..core.hook_events import SessionStart
from ..core.transcript import TranscriptDelta
from ..protocol import _methods as M
from ..runtime import claude_settings
from ..runtime.config import Config
from .state import SessionState

MAX_SETTINGS_BYTES = 256 * 1024


def price(st: SessionState, cfg: Config) -> C.Price:
    return C.price_for(st.model, cfg.prices)


def fold(st: SessionState, delta: TranscriptDelta, cfg: Config, *, from_start: bool) -> None:
    """Add the delta's responses to the session's tally (see module rules)."""
    if from_start and st.cost.turns:
        st.cost = C.CostTally(live_saved_tokens=st.cost.live_saved_tokens, live_saved_usd=st.cost.live_saved_usd)
    if delta.usages:
        st.cost = C.fold_usages(st.cost, delta.usages, price(st, cfg))
        if st.cost.cache_expired is not None:  # a response re-wrote the cache: the resume figures are spent
            st.cost = C.note_resume(st.cost, write_usd=None, expired=None)
    if delta.boundaries:
        st.cost = C.at_release(st.cost)


def note_live_compression(st: SessionState, tokens: int, cfg: Config) -> None:
    """Live compression kept ``tokens`` out of the prompt (the counter the service increments)."""
    st.cost = C.note_live_saved(st.cost, tokens, price(st, cfg))


def note_session_start(st: SessionState, event: SessionStart) -> None:
    """SessionStart: a resume's cache figures; a /clear releases what live compression kept out."""
    source = event.source
    if source in ("resume", "fork"):
        w = event.estimated_cache_write_usd
        st.cost = C.note_resume(st.cost, write_usd=w if w is not None and w >= 0 else None,
                                expired=event.prompt_cache_likely_expired)
    elif source == "clear":
        st.cost = C.at_release(C.note_resume(st.cost, write_usd=None, expired=None))


def cache_cold(st: SessionState) -> bool:
    """The resume said the cache expired and no response has re-written it since."""
    return bool(st.cost.cache_expired) and st.cost.resume_write_usd is not None


def savings(st: SessionState, b: B.Budget, cfg: Config) -> list[C.Saving]:
    rewind_to = _context_before(st, st.phase_started)
    return C.release_savings(context_tokens=b.context_tokens, system_tokens=st.system_tokens or 0,
                             price=price(st, cfg), turns=cfg.cost_turns, cold=cache_cold(st),
                             cold_write_usd=st.cost.resume_write_usd, summary_tokens=_last_post_tokens(st),
                             rewind_to=rewind_to,
                             rewind_note=f"back to {rewind_to:,} tokens, where the {st.phase.phase} phase began"
                             if rewind_to is not None else "")


def _context_before(st: SessionState, ts: float) -> int | None:
    """The context size of the last response before ``ts`` (None without one, or after a compaction
    since: a rewind does not cross a compaction)."""
    if st.boundary_ts and st.boundary_ts >= ts:
        return None
    before = [s for s in st.cost.samples if 0 < s.ts < ts and s.ts > st.boundary_ts]
    return before[-1].context_tokens if before else None


def compact_reason(st: SessionState, b: B.Budget | None, cfg: Config) -> str:
    """The short reason given with compaction advice ("" when the saving is not positive)."""
    if b is None:
        return ""
    saved, reason = C.advice_reason(savings(st, b, cfg), "/compact")
    return reason if saved > 0 else ""


def _last_post_tokens(st: SessionState) -> int | None:
    for note in reversed(st.acc.history):
        if note.post_tokens is not None:
            return note.post_tokens
    return None


def view(st: SessionState, b: B.Budget | None, cfg: Config) -> M.CostView:
    p = price(st, cfg)
    t = st.cost
    v = M.CostView(model_price=p.input_per_mtok, price_source=p.source, prices_taken=C.PRICES_TAKEN,
                   turns=t.turns, input_tokens=t.input_tokens, cache_write_tokens=t.cache_write_tokens,
                   cache_read_tokens=t.cache_read_tokens, output_tokens=t.output_tokens, usd=round(t.usd, 6),
                   last_turn_usd=round(t.last.usd, 6) if t.last else 0.0, cache_expired=t.cache_expired,
                   resume_write_usd=t.resume_write_usd, live_saved_tokens=t.live_saved_tokens,
                   live_saved_usd=round(t.live_saved_usd, 6), horizon_turns=cfg.cost_turns)
    if b is not None:
        v.resident_turn_usd = round(C.resident_turn_usd(b.context_tokens, p), 6)
        v.savings = [M.SavingView(action=s.action, turns=s.turns, usd=round(s.usd, 6), keep_usd=round(s.keep_usd, 6),
                                  action_usd=round(s.action_usd, 6), estimated=s.estimated, reason=s.reason)
                     for s in savings(st, b, cfg)]
    return v


# -- auto-compaction overrides ------------------------------------------------------------------
def overrides(st: SessionState) -> dict[str, str]:
    """The overrides honoured: the hook environment's, then the settings files' (see module rules)."""
    return AC.merge_env([st.autocompact_env, st.autocompact_settings])


def autocompact_at(st: SessionState, window: int) -> int:
    return AC.autocompact_at(window, overrides(st))


def note_overrides(st: SessionState, env: dict[str, str], event: str) -> None:
    """Take the overrides from the event's ``ctxlifed_env`` (the hook environment) and, at SessionStart
    and a session's first event, from the settings files (see module rules)."""
    if env:
        st.autocompact_env = AC.merge_env([env])
    if event == "SessionStart" or st.autocompact_settings is None:
        st.autocompact_settings = AC.merge_env(_settings_envs(st))


def _settings_envs(st: SessionState) -> list[dict[str, Any] | None]:
    base = st.project or st.cwd
    paths = []
    if base:
        paths += [os.path.join(base, ".claude", "settings.local.json"), os.path.join(base, ".claude", "settings.json")]
    ccd = os.environ.get("CLAUDE_CONFIG_DIR")
    paths.append(os.path.join(ccd or os.path.join(os.path.expanduser("~"), ".claude"), "settings.json"))
    return [_env_of(p) for p in paths]


def _env_of(path: str) -> dict[str, Any] | None:
    try:  # bounded, a regular file only (a FIFO there does not block), a JSON object
        data = claude_settings.read_json(path, MAX_SETTINGS_BYTES)
    except (claude_settings.Unreadable, ValueError):  # ValueError: a NUL in a path from the payload
        return None
    env = data.get("env") if data is not None else None
    return env if isinstance(env, dict) else None
