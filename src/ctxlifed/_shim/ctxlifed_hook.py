"""ctxlifed hook shim, the script Claude Code runs for every hook event:

    <absolute python> -I -S ctxlifed_hook.py   (hook JSON on stdin)

It only loads the shim proper (``ctxlifed_shim.py``, next to this file's real path) and runs it.
Python compiles the script it is given on every start, but an imported module's bytecode can be
cached: so this script stays tiny and the shim proper is loaded as a module, from cached bytecode.

Rules:
- No import beyond what the interpreter has loaded at start (os, sys, time, and the loader class
  that importlib.machinery exports: ``_frozen_importlib_external``).
- The bytecode cache is private: ``<data dir>/pycache`` (the data dir as ``runtime/paths.py``:
  ``CTXLIFED_DATA_DIR`` > ``$XDG_DATA_HOME/ctxlifed`` > ``~/.local/share/ctxlifed``), created 0700,
  and used only when it is a real folder (not a link), ours, and open to nobody else (no group or
  other permission bits). Otherwise (untrusted, or no data dir yet) the shim proper is compiled in
  memory: no bytecode is read from or written to any folder. Only the shim proper goes through the
  cache (``sys.pycache_prefix`` is set while it loads, then restored); any bytecode next to the
  source (``__pycache__``, which another user may have written) is never read.
- The shim proper is loaded by its exact path: no sys.path entry is added, so nothing else is
  imported from its folder. It is trusted as this script is (Claude Code runs this one from there).
- Fail open: any fault here -> exit 0, nothing on stdout or stderr. The shim's deadline counts from
  this script's start.
- One source: ``ctxlifectl plugin`` copies both files into the plugin's ``hooks/`` folder.
"""

import os
import sys
import time

STARTED = time.monotonic()
SHIM_FILE = "ctxlifed_shim.py"
SHIM_MODULE = "ctxlifed_shim"
CACHE_NAME = "pycache"


def cache_dir():
    """The private bytecode folder, or None when it cannot be made or is not ours alone."""
    try:
        d = os.environ.get("CTXLIFED_DATA_DIR")
        if not d:
            base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
            d = os.path.join(base, "ctxlifed")
        path = os.path.join(os.path.abspath(os.path.expanduser(d)), CACHE_NAME)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
    except (OSError, KeyError, ValueError):  # no home, a NUL in a variable: no cache
        return None
    if st.st_mode & 0o170000 != 0o040000 or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return path


def load(path, cache):
    """The shim proper at ``path`` as a module: its bytecode cached under ``cache``, or compiled in memory."""
    mod = type(sys)(SHIM_MODULE)
    mod.__file__ = path
    if cache is None:
        with open(path, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec"), mod.__dict__)
        return mod
    try:
        from _frozen_importlib_external import SourceFileLoader  # loaded at start: free to import
    except ImportError:
        from importlib.machinery import SourceFileLoader
    before = sys.pycache_prefix
    sys.pycache_prefix = cache
    try:
        loader = SourceFileLoader(SHIM_MODULE, path)
        mod.__loader__ = loader
        loader.exec_module(mod)
    finally:
        sys.pycache_prefix = before
    return mod


def main():
    try:
        path = os.path.join(os.path.dirname(os.path.realpath(__file__)), SHIM_FILE)
        try:
            shim = load(path, cache_dir())
        except Exception:
            shim = load(path, None)  # whatever went wrong with the cache, the shim still runs
        shim.main(STARTED)
    except BaseException:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
