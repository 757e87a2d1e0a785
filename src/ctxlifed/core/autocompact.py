"""Claude Code's auto-compaction overrides: where "auto-compact at ..." really is.

Rules:
- Pure: no I/O. The caller gathers the variables (the hook's environment, as the shim forwards it in
  the payload's ``ctxlifed_env``, and the ``env`` of the settings files) and passes them in.
- Variables (spec §6): ``CLAUDE_CODE_AUTO_COMPACT_WINDOW=<int>`` is the window auto-compaction works
  with (it wins over ``/autocompact`` and ``--autocompact``); it is capped at the model's window.
  ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=P`` (1..100) can only lower the threshold
  (``budget.autocompact_threshold``). A value that is not a whole number in range is ignored.
- Precedence: the hook environment > ``.claude/settings.local.json`` > ``.claude/settings.json`` (the
  project's) > the user's ``settings.json`` (:func:`merge_env`, first source wins per variable).
- Only these two variables are kept (:data:`VARS`); their values are bounded digit strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxlifed.core.budget import autocompact_threshold

__all__ = ["PCT_VAR", "VARS", "WINDOW_VAR", "autocompact_at", "merge_env", "parse_overrides"]

WINDOW_VAR = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
PCT_VAR = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
VARS = (WINDOW_VAR, PCT_VAR)
MAX_DIGITS = 12


def _digits(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        v = str(v)
    if not isinstance(v, str):
        return None
    v = v.strip()
    return v if v.isascii() and v.isdigit() and len(v) <= MAX_DIGITS else None


def merge_env(sources: Iterable[Mapping[str, Any] | None]) -> dict[str, str]:
    """The two variables from ``sources`` in precedence order (first wins), as digit strings."""
    out: dict[str, str] = {}
    for src in sources:
        if not isinstance(src, Mapping):
            continue
        for k in VARS:
            if k not in out:
                v = _digits(src.get(k))
                if v is not None:
                    out[k] = v
    return out


def parse_overrides(env: Mapping[str, str]) -> tuple[int | None, int | None]:
    """(auto-compact window, percent) from ``env``; None for a missing or invalid value."""
    w = _digits(env.get(WINDOW_VAR))
    p = _digits(env.get(PCT_VAR))
    window = int(w) if w is not None and int(w) > 0 else None
    pct = int(p) if p is not None and 1 <= int(p) <= 100 else None
    return window, pct


def autocompact_at(window: int, env: Mapping[str, str]) -> int:
    """The context size at which Claude Code auto-compacts, with the overrides in ``env`` applied."""
    auto_window, pct = parse_overrides(env)
    w = min(window, auto_window) if auto_window is not None else window
    return autocompact_threshold(w, pct_override=pct)
