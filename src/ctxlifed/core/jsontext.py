"""JSON text whose only fault is its Unicode, made decodable: the lenient second try of a decode.

Rules:
- Pure: bytes in, bytes out; no I/O.
- Called only after a strict decode failed, so valid input never pays for it.
- Two faults are repaired, nothing else: a ``\\uD800``-``\\uDFFF`` escape that is not one half of a
  pair (``JSON.stringify`` emits one when it cuts an emoji in two) becomes ``\\uFFFD``
  (:func:`repair_surrogates`); bytes that are not UTF-8 become U+FFFD (:func:`repair_utf8`, Python's
  ``"replace"``; a surrogate written as UTF-8 bytes is one U+FFFD, a pair of them its character). A valid pair, an escaped backslash (``\\\\ud83d`` is text, not an escape) and every
  other escape are left as they are, so text that is not JSON for another reason stays not JSON.
- Each function returns ``None`` when it changed nothing: the caller then reports the strict error.
- Bounded: one linear pass over the input.
"""

from __future__ import annotations

import re

__all__ = ["repair", "repair_surrogates", "repair_utf8"]

# One escape at a time, left to right, so ``\\\\`` (an escaped backslash) is consumed whole and the
# ``u`` after it is never taken for an escape: a high+low pair | a lone half | any other escape.
_ESCAPE = re.compile(
    rb"\\(?:(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)",
    re.S,
)
_REPLACEMENT_ESCAPE = rb"\ufffd"


def _escape(m: re.Match[bytes]) -> bytes:
    return _REPLACEMENT_ESCAPE if m.group(2) is not None else m.group(0)


def repair_surrogates(data: bytes) -> bytes | None:
    """``data`` with every lone surrogate escape replaced by ``\\ufffd``; None if it had none."""
    if b"\\u" not in data:
        return None
    fixed = _ESCAPE.sub(_escape, data)
    return None if fixed == data else fixed


def repair_utf8(data: bytes) -> bytes | None:
    """``data`` with every byte sequence that is not UTF-8 replaced by U+FFFD; None if it was UTF-8.
    Surrogates written as UTF-8 bytes (Python's ``surrogatepass``: what the shim writes when it
    re-encodes a payload that held a lone one) count one U+FFFD each, and a pair of them is joined
    into its character."""
    try:
        data.decode("utf-8")
        return None
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # other invalid bytes: one U+FFFD per bad byte
        return data.decode("utf-8", "replace").encode("utf-8")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")


def repair(data: bytes) -> bytes | None:
    """Both repairs; None when ``data`` needed neither."""
    utf8 = repair_utf8(data)
    fixed = repair_surrogates(utf8 if utf8 is not None else data)
    return fixed if fixed is not None else utf8
