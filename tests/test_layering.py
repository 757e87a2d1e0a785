"""Dependency direction: the pure cores import no I/O framework; the CLI never imports the server side;
SQL lives in ``store/``.

Rules:
- The module lists come from the source tree (every ``.py`` under ``core/`` and ``protocol/``, every
  service module but ``app.py``), so a new module is covered without editing this file.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "src" / "ctxlifed"
IO_MODULES = {"anyio", "sqlite3", "socket", "structlog", "sqlite_utils", "watchfiles"}


def modules_under(*packages: str) -> list[str]:
    """Dotted names of every module in these packages of the source tree (``__init__`` as the package)."""
    out = []
    for package in packages:
        for path in sorted((PKG / package).rglob("*.py")):
            parts = path.relative_to(PKG.parent).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


PURE = modules_under("core", "protocol")


def imported_after(stmt: str) -> set[str]:
    code = f"import sys; before=set(sys.modules); {stmt}; print(' '.join(sorted(set(sys.modules) - before)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(r.stdout.split())


def imports_of(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports (anywhere in it, not only at the top)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_module_lists_come_from_the_tree() -> None:
    assert "ctxlifed.core.model" in PURE and "ctxlifed.protocol" in PURE and "ctxlifed.core.lessons" in PURE
    assert len(PURE) == len(list((PKG / "core").rglob("*.py"))) + len(list((PKG / "protocol").rglob("*.py")))


@pytest.mark.parametrize("module", PURE)
def test_pure_cores_do_no_io(module: str) -> None:
    """Importing a pure module pulls in neither anyio, sqlite3, socket nor structlog."""
    mods = imported_after(f"import {module}")
    assert not IO_MODULES & mods


def test_cli_never_imports_the_server_side() -> None:
    """ctxlifectl (and its integration commands) import neither server, service, store nor anyio."""
    mods = imported_after("import ctxlifed.cli.main as m; m.build_parser()")
    bad = {m for m in mods if m.startswith(("ctxlifed.server", "ctxlifed.service", "ctxlifed.store", "anyio", "sqlite_utils"))}
    assert not bad, bad


def test_the_rpc_client_imports_nothing_of_the_package() -> None:
    """The bench loads ``rpc_client.py`` from a checkout by path: it must stand alone (stdlib only)."""
    names = imports_of(PKG / "rpc_client.py")
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def sql_in_service() -> list[str]:
    return [str(p.relative_to(PKG)) for p in sorted((PKG / "service").rglob("*.py"))
            if {"sqlite3", "sqlite_utils"} & imports_of(p)]


SERVICE_HELPERS = sorted(p for p in (PKG / "service").rglob("*.py") if p.name != "app.py")


def imports_app(path: Path) -> bool:
    """Whether ``path`` imports the service's ``app`` module (``from .app import …``, ``from . import app``,
    ``ctxlifed.service.app``), type-checking imports included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            relative_app = node.module == "app" or (node.module is None and any(a.name == "app" for a in node.names))
            if node.level == 1 and relative_app:
                return True
            if node.level == 0 and node.module and node.module.startswith("ctxlifed.service.app"):
                return True
        elif isinstance(node, ast.Import) and any(a.name.startswith("ctxlifed.service.app") for a in node.names):
            return True
    return False


def test_service_helpers_hold_no_sql_and_do_not_import_the_service() -> None:
    """The service modules other than ``app.py`` (listed from the tree, so a new one is covered) import
    neither sqlite3 nor sqlite_utils (their SQL is in ``store/``) and never ``app``: they receive the
    narrow things they use, not the Service."""
    assert len(SERVICE_HELPERS) >= 10 and (PKG / "service" / "ledger.py") in SERVICE_HELPERS
    sql = [str(p.relative_to(PKG)) for p in SERVICE_HELPERS if {"sqlite3", "sqlite_utils"} & imports_of(p)]
    cycles = [str(p.relative_to(PKG)) for p in SERVICE_HELPERS if imports_app(p)]
    assert (sql, cycles) == ([], [])


def test_service_holds_no_sql() -> None:
    """All SQL lives in ``store/``: no module of ``service/`` imports sqlite3 (or sqlite_utils)."""
    assert sql_in_service() == []


def test_only_public_anyio_api() -> None:
    """No module reaches into anyio's internals (``anyio._*``, an event-loop token's backend fields):
    they change between the releases pyproject allows (a wake-up through them failed silently under
    anyio 4.7 and a writer job's caller waited for ever)."""
    import re

    private = re.compile(r"\banyio\._|\bfrom anyio\._|\.backend_class\b|\.native_token\b")
    bad = [f"{p.relative_to(PKG)}:{n}" for p in sorted(PKG.rglob("*.py"))
           for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if private.search(line)]
    assert bad == []


# The edge where a hook payload arrives as a dict: ``Service.hook`` hands it to ``pipeline.decode``,
# which redacts it, decodes it once into its typed event and encodes it into the stored event row.
PAYLOAD_EDGE = {("app.py", "hook"), ("pipeline.py", "decode")}


def _is_payload(node: ast.expr) -> bool:
    """A name or attribute called like a hook payload (``payload``, ``job.payload``, ``raw_payload``...)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "payload" in name.lower()


def payload_reads(path: Path) -> list[str]:
    """Where ``path`` reads a payload dict by key (``payload[k]``, ``payload.get(k)``, ``.keys()``,
    ``.items()``, ``.values()``, ``k in payload``), and the functions that take a payload parameter."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and _is_payload(node.value):
            out.append(f"{path.name}:{node.lineno}: subscript")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_payload(node.func.value)
              and node.func.attr in ("get", "keys", "items", "values", "pop", "setdefault")):
            out.append(f"{path.name}:{node.lineno}: .{node.func.attr}()")
        elif (isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
              and any(_is_payload(c) for c in node.comparators)):
            out.append(f"{path.name}:{node.lineno}: in")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (path.name, node.name) not in PAYLOAD_EDGE:
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            if any("payload" in a.lower() for a in params):
                out.append(f"{path.name}:{node.lineno}: {node.name}() takes a payload")
    return sorted(out, key=lambda r: int(r.split(":")[1]))


def test_service_reads_hook_fields_from_the_typed_event_only() -> None:
    """Issue 18: a hook payload is decoded once at the edge (``PAYLOAD_EDGE``) into its typed event
    (``core/hook_events.py``); every other function of ``service/`` takes the typed event or the typed
    fields it needs. So no module of ``service/`` reads a payload dict by key, and only the edge takes
    a payload parameter (the raw, redacted payload is only encoded into the stored row there)."""
    paths = sorted((PKG / "service").rglob("*.py"))
    assert (PKG / "service" / "pipeline.py") in paths and (PKG / "service" / "advice.py") in paths
    assert [r for p in paths for r in payload_reads(p)] == []


def test_the_payload_read_check_finds_what_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(st, payload):\n    st.a = payload.get('prompt')\n    st.b = job.payload['cwd']\n"
                   "    return 'x' in payload\n", encoding="utf-8")
    assert payload_reads(bad) == ["bad.py:1: f() takes a payload", "bad.py:2: .get()", "bad.py:3: subscript",
                                  "bad.py:4: in"]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in it, ``TYPE_CHECKING`` blocks included:
    a cycle there is still two modules that cannot be understood apart)."""
    mods: dict[str, Path] = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def targets(current: str, node: ast.ImportFrom) -> set[str]:
        package = current if mods[current].name == "__init__.py" else current.rsplit(".", 1)[0]
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        return {f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names} & set(mods)

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                graph[m] |= targets(m, node) - {m}
            elif isinstance(node, ast.Import):
                graph[m] |= {a.name for a in node.names if a.name in mods}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycles_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or around a loop (the service helpers once imported
    ``app`` for its type, ``watch`` imported ``daemon``): each part receives what it uses."""
    assert cycles(import_graph()) == []
