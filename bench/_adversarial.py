"""Adversarial error texts for the error-signature path: long words, many lines, repeated
separators -- the shapes on which a regex goes quadratic. Shared by the test that checks the
signature stays bounded on them (tests/test_core_lessons.py) and the bench that times it
(bench/bench_worstcase.py): a test asserts what is computed, the bench measures how long it takes.
"""

ERROR_TEXTS: list[str] = [
    "ValueError: bad " + "x" * 50_000,
    "Error: " + "a/" * 30_000,
    "Error: " + "a." * 30_000,
    "Error: " + "1" * 60_000,
    "Error: " + "ab12" * 20_000,
    "Error: a.ts" + "(1," * 20_000,
    "Error: x.py" + ":1" * 30_000,
    "Error: http://" + "a" * 50_000,
    "No such file or directory: '" + "a" * 50_000,
    "x" * 50_000 + ": command not found",
    ("x" * 1999 + "\n") * 500 + "Error: boom",
    "FAILED t.py::x - a...\n" + "E   " + "a" * 50_000,
    "\n".join(f"___ t{i} ___\nE   boom" for i in range(20_000)) + "\nFAILED a.py::t9 - x...",
    "Traceback (most recent call last)\n" * 20_000,
]

# Shapes for the digest's patterns (core/digest.py): one long line of a pattern's first literal, where a match
# tried at each occurrence that walks on to the line's end would go quadratic.
DIGEST_TEXTS: list[str] = [
    "::" * 50_000,
    "x.c:1:2: warning: y [-Wa" * 5_000,
    "x.c:1:2: warning: y" + " [-Wa" * 20_000,
    "Error: " + "a/" * 30_000,
    ": " * 60_000,
    "error: " * 15_000,
    "= " + "a b " * 30_000,
    "=" * 2_000 + " " + "x, " * 30_000,
    "warning " * 15_000,
    "test x ... " * 10_000,
    "\n\t" * 50_000,
    "● " * 50_000,
    "a.b." * 25_000 + "Error",
    "FAILED " * 15_000,
    ":1" * 50_000,
    "TS" * 50_000,
]
