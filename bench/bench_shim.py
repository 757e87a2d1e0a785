"""Target 6: shim start-up. What the shim imports, what each import costs, and what its process
costs next to the interpreter floor.

- Imports: the shim is run as Claude Code runs it (``-I -S``, payload on stdin) against a warm
  daemon with ``-X importtime``; modules the bare interpreter (``-c pass``) does not import are
  listed with their median self time over N runs. Two payloads: UserPromptSubmit (empty answer,
  the common case) and SessionStart (an answer with text to print).
- Compile: the script Claude Code runs (``_shim/ctxlifed_hook.py``) is compiled on every start (no
  .pyc for ``__main__``); it loads the shim proper from bytecode cached in ``<data dir>/pycache``.
  Both compiles are measured in-process: the script's is paid by every hook, the shim proper's only
  when its cache cannot be used.
- Processes (interleaved): ``-c pass``, ``-c "import socket, json"`` (target 1's floor), and the
  shim for both payloads, each a full spawn-to-exit time.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from typing import Any

import msgspec
from _common import (PY, SHIM, SHIM_MODULE, Daemon, adapt, call, daemon_env, dist, new_session, rmtree, sample,
                     short_tmp, small_transcript)

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")
# What a Unix-socket client needs: what ``import socket, json`` brings in (target 1's floor).
FLOOR = "import socket, json"


def importtime(argv: list[str], data: bytes | None, env: dict[str, str]) -> dict[str, int]:
    r = subprocess.run(argv, input=data, capture_output=True, env=env, check=False,
                       stdin=None if data is not None else subprocess.DEVNULL)
    out = {}
    for line in r.stderr.decode(errors="replace").splitlines():
        m = _LINE.match(line)
        if m:
            out[m.group(4)] = int(m.group(1))
    return out


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    n_imp = 8 if quick else 40
    n_proc = 20 if quick else 150
    base = short_tmp("clbs-")
    try:
        env = daemon_env(base)
        proj = base / "proj"
        (proj / ".git").mkdir(parents=True)
        tr = base / "t.jsonl"
        shutil.copy(small_transcript(), tr)
        d = Daemon(base, env).start()
        try:
            sid = new_session()
            ss = msgspec.json.encode(adapt(sample("SessionStart:startup"), sid, str(proj), str(tr)))
            call(d.socket, "hook", ss)
            call(d.socket, "phase.set", {"session": sid, "phase": "design"})  # something to say at SessionStart

            def ups() -> bytes:
                p = adapt(sample("UserPromptSubmit"), sid, str(proj), str(tr))
                p["prompt"], p["prompt_id"] = "and now?", new_session()
                return msgspec.json.encode(p)

            def ss_new() -> bytes:
                # A session the daemon has not briefed yet: a resume briefs only what changed since its last briefing.
                return msgspec.json.encode(adapt(sample("SessionStart:resume"), new_session(), str(proj), str(tr)))

            shim = [PY, "-I", "-S", str(SHIM)]
            imp_shim: dict[str, dict[str, list[int]]] = {"UserPromptSubmit": {}, "SessionStart": {}}
            imp_base: dict[str, list[int]] = {}
            floor_mods = set(importtime([PY, "-I", "-S", "-X", "importtime", "-c", FLOOR], None, env))
            for _ in range(n_imp):
                for name, mod in importtime([PY, "-I", "-S", "-X", "importtime", "-c", "pass"], None, env).items():
                    imp_base.setdefault(name, []).append(mod)
                for ev, mk in (("UserPromptSubmit", ups), ("SessionStart", ss_new)):
                    for name, us in importtime([PY, "-I", "-S", "-X", "importtime", str(SHIM)], mk(), env).items():
                        imp_shim[ev].setdefault(name, []).append(us)
            # Process times, interleaved.
            variants = {
                "python -I -S -c pass": ([PY, "-I", "-S", "-c", "pass"], None),
                "python -I -S -c 'import socket, json'": ([PY, "-I", "-S", "-c", "import socket, json"], None),
                "shim UserPromptSubmit (empty answer)": (shim, ups),
                "shim SessionStart (answer printed)": (shim, ss_new),
            }
            times: dict[str, list[float]] = {k: [] for k in variants}
            rng = random.Random(5)
            for _ in range(n_proc):
                order = list(variants)
                rng.shuffle(order)
                for k in order:
                    argv, mk = variants[k]
                    data = mk() if mk else None
                    t0 = time.perf_counter()
                    r = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                       stdin=None if data is not None else subprocess.DEVNULL, check=False)
                    times[k].append((time.perf_counter() - t0) * 1000)
                    if k.startswith("shim SessionStart") and not r.stdout:
                        raise RuntimeError("the shim printed nothing for SessionStart")
        finally:
            d.stop()
    finally:
        rmtree(base)

    compiles: dict[str, tuple[list[float], int]] = {}
    for label, path in (("the script per start", SHIM), ("the shim proper, without its cache", SHIM_MODULE)):
        src = path.read_text()
        comp = []
        for _ in range(300):
            t0 = time.perf_counter()
            compile(src, str(path), "exec")
            comp.append((time.perf_counter() - t0) * 1000)
        compiles[label] = (comp, len(src.splitlines()))

    def med(xs: list[int]) -> float:
        xs = sorted(xs)
        return float(xs[len(xs) // 2])

    imports: dict[str, Any] = {}
    for ev, mods in imp_shim.items():
        extra = {m: med(v) for m, v in mods.items() if m not in imp_base}
        imports[ev] = {"modules": dict(sorted(extra.items(), key=lambda kv: -kv[1])),
                       "total_self_us": round(sum(extra.values())),
                       "beyond_socket_client": sorted(m for m in extra if m not in floor_mods)}
    rows = []
    for ev, info in imports.items():
        mods = ", ".join(f"{m} {us / 1000:.2f}" for m, us in info["modules"].items())
        rows.append([f"shim.imports ({ev}) beyond -c pass", round(info["total_self_us"] / 1000, 3), "ms",
                     mods or "(none)"])
    for label, (comp, lines) in compiles.items():
        rows.append([f"shim.compile of {label}", dist(comp), "ms", f"{lines} lines"])
    for k, v in times.items():
        rows.append([f"shim.process {k}", dist(v), "ms", ""])
    floor = dist(times["python -I -S -c 'import socket, json'"])["p50"]
    from _common import target

    targets = [
        target("6 shim imports nothing beyond a socket client (modules not imported by 'import socket, json')",
               float(len(imports["UserPromptSubmit"]["beyond_socket_client"])
                     + len(imports["SessionStart"]["beyond_socket_client"])), 0,
               note=", ".join(imports["UserPromptSubmit"]["beyond_socket_client"]
                              + imports["SessionStart"]["beyond_socket_client"]) or "none"),
        target("6 shim (empty answer) p50 / 'import socket, json' p50",
               dist(times["shim UserPromptSubmit (empty answer)"])["p50"] / floor, 1.3, unit="x", note="reference"),
    ]
    return {"rows": rows, "targets": targets,
            "data": {"imports": imports, "baseline_modules": sorted(imp_base),
                     "compile_ms": {label: dist(c) for label, (c, _n) in compiles.items()}, "process_ms": {k: dist(v) for k, v in times.items()}}}
