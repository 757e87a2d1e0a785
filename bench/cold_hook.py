"""The per-hook-script design ctxlifed replaces: ONE hook handled in a fresh Python process.

    <python> bench/cold_hook.py        (hook JSON on stdin, the same environment as the daemon)

What it does is what the daemon does for one hook, minus the daemon: import ctxlifed's service and
store, load the config, open the store (Writer + one reader; migrations are a no-op on an existing
store), load the session's state from the store, run ``Service.hook`` (redact, derive, store,
commit, answer), wait for any side work it spawned, close the store, print the answer.

Used by ``bench_hook`` as variant (a) of target 1. It is deliberately generous to the cold design:
one reader connection instead of the daemon's pool, and no socket, no spool, no shim.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    data = sys.stdin.buffer.read()
    import anyio
    import msgspec

    from ctxlifed.daemon import configure_logging
    from ctxlifed.runtime.config import load
    from ctxlifed.runtime.dirs import ensure_data_dir
    from ctxlifed.runtime.paths import resolve
    from ctxlifed.service.app import Service
    from ctxlifed.store.db import Readers, Writer

    configure_logging(json=True)
    paths = resolve()
    cfg = load(paths.config)
    os.umask(0o077)
    ensure_data_dir(paths.data_dir)
    writer = Writer(paths.db, min_free_bytes=cfg.min_free_mb << 20)
    readers = Readers(paths.db, size=1)
    try:
        svc = Service(cfg, paths, writer, readers)
        payload = msgspec.json.decode(data)

        async def one() -> str:
            async with anyio.create_task_group() as tg:
                svc.bind(tg, derive=False)  # one event, derived inline (a new process holds no session)
                res = await svc.hook(payload if isinstance(payload, dict) else {})
            return res.stdout

        out = anyio.run(one)
    finally:
        writer.close()
        readers.close()
    if out:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
