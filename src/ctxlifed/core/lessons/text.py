"""Small text helpers shared by the lessons modules: one-line, bounded, redacted, code-span text.

Rules:
- Pure and total: no I/O, never raises on a string.
- :func:`clean` is the redaction point for every text a lesson keeps (it calls
  :func:`~ctxlifed.core.redact.redact`); :func:`one_line` and :func:`cut` only bound (``…`` marks a cut).
- :func:`code_span` fences a text with one more backtick than its longest backtick run, so any text
  renders as one Markdown code span.
"""

from __future__ import annotations

import re

from ctxlifed.core.redact import redact

__all__ = ["WS_RE", "clean", "code_span", "cut", "one_line"]

WS_RE = re.compile(r"\s+")


def one_line(text: str, limit: int) -> str:
    t = WS_RE.sub(" ", text).strip()
    return t if len(t) <= limit else t[: max(0, limit - 1)].rstrip() + "…"


def clean(text: str, limit: int) -> str:
    """Redacted, one line, bounded."""
    if not text:
        return ""
    return one_line(redact(text[: limit * 8])[0], limit)


def cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 1)].rstrip() + "…"


def code_span(text: str) -> str:
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * ((max(runs) + 1) if runs else 1)
    pad = " " if (len(fence) > 1 or text.startswith("`") or text.endswith("`")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"
