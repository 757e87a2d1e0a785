"""Instructions per digest, counted by valgrind: a figure this VM's speed does not move.

    .venv/bin/python bench/digest_instructions.py [--src OLD_SRC ...] [--files a,b] [--symbols] [--n 3]

For each real 100 KB output of bench/digest_corpus/large/ (or ``--files``), runs a child Python under
``valgrind --tool=callgrind`` twice, digesting the output 0 and ``--n`` times after the same warm-up (the
module imported, the output read, one digest), and reports the difference divided by ``--n``: the
instructions one digest takes, in millions, the import and the warm-up cancelled out. ``--src`` adds a
source tree to compare (say the code before a change: ``git archive REV src | tar -x -C /tmp/old``); each
tree is one column. ``--symbols`` also digests each output with characters beyond ASCII that are not word
characters mixed in (quotes, bullets, box drawing, about one per 400 characters, at the same places every
run), the shape of jest's or vitest's output. Child runs use ``PYTHONHASHSEED=0`` (set iteration order,
hence the count, is then the same every run). Needs valgrind; prints the table, writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LARGE = ROOT / "bench" / "digest_corpus" / "large"
SYMBOLS = "‘’…●✕✖✓▶─│╰—–·×→❯"

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ctxlifed.core.digest import digest
text = open(sys.argv[2], encoding="utf-8").read()
command = json.loads(sys.argv[3])
n = int(sys.argv[4])
digest(text, command=command, archive_id=1, full_path="/tmp/out.txt")
for _ in range(n):
    digest(text, command=command, archive_id=1, full_path="/tmp/out.txt")
"""

_COLLECTED_RE = re.compile(r"Collected : (\d+)")


def with_symbols(text: str, every: int = 400, seed: int = 1) -> str:
    """``text`` with one of ``SYMBOLS`` put in about every ``every`` characters (the same places each run)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        step = rng.randrange(1, 2 * every)
        out += [text[i: i + step], rng.choice(SYMBOLS)]
        i += step
    return "".join(out)


def instructions(src: Path, text_file: Path, command: str | None, n: int) -> int:
    """Instructions of a child run digesting ``text_file`` ``n`` times after the warm-up."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", sys.executable, "-c", CHILD,
             str(src), str(text_file), json.dumps(command), str(n)],
            capture_output=True, text=True, env=env, check=True)
    m = _COLLECTED_RE.search(out.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count from valgrind: {out.stderr[-400:]}")
    return int(m.group(1))


def _label(src: Path) -> tuple[str, Path]:
    """A column's label and tree: the tree's folder name (its parent's for a folder named ``src``)."""
    return (src.parent.name if src.name == "src" else src.name)[-12:], src


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", default=[], help="another source tree to count (repeatable)")
    ap.add_argument("--files", help="comma-separated names of bench/digest_corpus/large/ outputs (default: all)")
    ap.add_argument("--symbols", action="store_true", help="also each output with symbols beyond ASCII mixed in")
    ap.add_argument("--n", type=int, default=3, help="digests counted per run (default 3)")
    ns = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind not found: apt-get install valgrind", file=sys.stderr)
        return 2
    trees = [("this", ROOT / "src")] + [(_label(Path(s).resolve())) for s in ns.src]
    names = ns.files.split(",") if ns.files else sorted(p.stem for p in LARGE.glob("*.json"))
    print("instructions per digest, millions (valgrind callgrind; " + f"{ns.n} digests counted, warm-up subtracted)")
    print(f"{'output':34}" + "".join(f"{label:>12}" for label, _src in trees))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            command = json.loads((LARGE / f"{name}.json").read_text()).get("command")
            text = (LARGE / f"{name}.txt").read_text()
            variants = [(name, text)] + ([(f"{name} +symbols", with_symbols(text))] if ns.symbols else [])
            for label, body in variants:
                path = Path(tmp) / "text.txt"
                path.write_text(body, encoding="utf-8")
                row = []
                for _tree, src in trees:
                    base = instructions(src, path, command, 0)
                    row.append((instructions(src, path, command, ns.n) - base) / ns.n / 1e6)
                print(f"{label:34}" + "".join(f"{v:12.2f}" for v in row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
