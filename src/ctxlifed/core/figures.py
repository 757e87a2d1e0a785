"""Figures as text: the one formatting path for every figure ctxlifed shows.

Rules:
- Pure and stdlib only (``ctxlifectl status`` imports it, and the CLI loads neither msgspec nor the
  server side).
- Every percentage, token count and compression level ctxlifed puts before the model or the user
  (hook context, advice, systemMessages, ``ctxlifectl status``) is formatted here, so a number the
  model reads equals its ``status --json`` source.
- ``status --json`` carries fractions rounded to 4 decimals; :func:`percent` rounds the same way
  first, so the raw and the JSON value print alike. A percentage is always given a fraction.
- Money (:func:`usd`): two decimals from a cent up, else up to four significant decimals.
"""

from __future__ import annotations

import math

__all__ = ["LEVEL_NAMES", "level_name", "percent", "tokens", "usd"]

LEVEL_NAMES = {0: "none", 1: "L0→L1", 2: "L1→L2", 3: "L2→L3"}  # core.model.Level values


def percent(fraction: float) -> str:
    """A usage fraction as a percentage with one decimal: ``percent(0.7834) == "78.3%"``
    (``fraction`` is a fraction, never already a percentage; "?" for a non-finite value)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
        return "?"
    return f"{round(fraction, 4) * 100:.1f}%"


def tokens(n: int) -> str:
    """A token count with thousands separators: ``tokens(12345) == "12,345"``."""
    return f"{int(n):,}"


def level_name(level: int) -> str:
    """A compression level as text: none, L0→L1, L1→L2, L2→L3 (the number for an unknown one)."""
    try:
        return LEVEL_NAMES.get(int(level), str(level))
    except (TypeError, ValueError):
        return str(level)


def usd(x: float) -> str:
    """Money as text: ``usd(0.4213) == "$0.42"``, ``usd(0.004) == "$0.004"``, ``usd(0) == "$0.00"``."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "$?"
    a = abs(x)
    sign = "-" if x < 0 else ""
    if a == 0 or a >= 0.01:
        return f"{sign}${a:,.2f}"
    if a >= 0.0001:
        return f"{sign}${a:.4f}".rstrip("0")
    return f"{sign}<$0.0001"
