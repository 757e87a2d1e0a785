"""Configuration: defaults < config.toml < environment variables.

Rules:
- Every setting has a default here; the file and the environment only override.
- A bad file or a bad value never stops the daemon: the field keeps its previous/default value
  and the problem is reported (``Config.problems``) for ``status`` and ``doctor`` to show.
- Environment variables: ``CTXLIFED_ZONES=10/10/65/15``, ``CTXLIFED_THRESHOLDS=60/75/90``,
  ``CTXLIFED_WINDOW``, ``CTXLIFED_INJECT_CAP``, ``CTXLIFED_RECALL_CAP``, ``CTXLIFED_MEMORY_DIR``,
  ``CTXLIFED_REDACT=0|1``, ``CTXLIFED_MAX_FRAME``, ``CTXLIFED_IDLE_TIMEOUT``,
  ``CTXLIFED_TRANSCRIPT_ROOTS`` (``:``-separated), ``CTXLIFED_MIN_FREE_MB``, ``CTXLIFED_MAX_DB_MB``,
  ``CTXLIFED_RETENTION_DAYS``, ``CTXLIFED_MAX_PROJECT_MB``, ``CTXLIFED_REQUEST_TIMEOUT``,
  ``CTXLIFED_MAX_CONNECTIONS``, ``CTXLIFED_RESIDENCY_NOTE=0|1``, ``CTXLIFED_MATRIX`` (``phase.kind=category,...``),
  ``CTXLIFED_PENDING_STALE_PHASES``, ``CTXLIFED_PENDING_STALE_SESSIONS``,
  ``CTXLIFED_MEMORY_KEEP``, ``CTXLIFED_PRICES`` (``prefix=usd,prefix=usd``),
  ``CTXLIFED_COST_TURNS``, ``CTXLIFED_COMPRESS_OUTPUTS=auto|off|aggressive``,
  ``CTXLIFED_COMPRESS_MIN_TOKENS=7500/2000/1000/500``.
- ``matrix`` overrides cells of the category matrix (``core/matrix.py``): a table
  ``[matrix.<phase>]`` of ``<kind> = "keep" | "summarize" | "archive" | "discard"``. An unknown phase,
  kind or category, or discarding a never-discard kind, is a problem and the whole value is ignored.
- A pending item untouched for ``pending_stale_phases`` phase switches or ``pending_stale_sessions``
  later sessions of its project (0 = never) is stale: listed as stale, never injected as current.
- Prices: ``prices`` maps a model id prefix to its input price in USD per million tokens
  (``[ctxlifed.prices]`` table, or ``prices = {"claude-opus-5" = 5.0}``); it overrides the defaults in
  ``core/cost.py`` (public list prices, dated there). ``cost_turns``: the N of "what a release would
  save over the next N turns" (1..1000).
- Live compression (``service/compress.py``): ``compress_outputs`` (``auto``, ``off``, ``aggressive``),
  ``compress_min_tokens`` (the thresholds by Working-zone level 0..3, ``aggressive`` halves them) and
  ``compress_files_mb`` (the bound of a session's folder of full outputs). Per project, a
  ``[projects."<absolute project root>"]`` table may set ``compress_outputs`` (:meth:`Config.compress_mode`);
  and ``wrap_failing_commands``; any other key there is reported and ignored.
- ``wrap_failing_commands`` (default off; per project as well, :meth:`Config.wrap_mode`): a PreToolUse
  hook runs test and build commands through ``ctxlifectl run`` (``service/wrap.py``), only where Claude
  Code would have run them without a prompt anyway (``core/wrap_policy.py``). ``ctxlifectl install``
  adds the PreToolUse(Bash) hook only while it is on in the global setting or any project's.
- Storage: below ``min_free_mb`` of free disk, or once the store reaches ``max_db_mb`` (0 = no cap),
  writes get a typed ``storage_full`` error while reads keep working. Retention: ``retention_days``
  and ``max_project_mb`` (0 = off) are applied to each project every ``retention_interval_s``.
- Project memory: the newest ``memory_keep_sessions`` session folders of ``<memory_dir>/sessions`` are
  kept; older ones roll up into ``history.md`` when a session ends (0 = only ``ctxlifectl memory prune``).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace

from ..core.matrix import parse_overrides


@dataclass(frozen=True)
class Config:
    zones: tuple[float, float, float, float] = (0.10, 0.10, 0.65, 0.15)
    thresholds: tuple[float, float, float] = (0.60, 0.75, 0.90)
    window: int | None = None  # override the model's window
    inject_cap_tokens: int = 1500
    recall_cap_tokens: int = 1200
    memory_dir: str = "docs/memory"  # relative to the project root
    write_ledgers: bool = True
    residency_note: bool = True  # once per session, a systemMessage naming residency problems (service/residency.py)
    memory_keep_sessions: int = 10  # session folders kept under <memory_dir>/sessions; older ones roll up (0 = never)
    redact: bool = True
    max_frame: int = 1 << 20
    max_batch: int = 64
    max_connections: int = 256
    idle_timeout_s: float = 30.0
    request_timeout_s: float = 10.0
    transcript_roots: tuple[str, ...] = ()  # empty = ~/.claude/projects and $CLAUDE_CONFIG_DIR/projects
    min_free_mb: int = 64
    max_db_mb: int = 0  # 0 = no cap; the store refuses writes (storage_full) once it reaches the cap
    archive_max_chars: int = 256 * 1024  # per archived item; more is truncated with a marker
    retention_days: int = 0  # 0 = keep forever
    max_project_mb: int = 0  # 0 = unbounded
    retention_interval_s: float = 3600.0  # retention runs at start and then this often
    # Category matrix overrides, (phase, kind, category), sorted: see core/matrix.py.
    matrix: tuple[tuple[str, str, str], ...] = ()
    pending_stale_phases: int = 4  # an open item untouched for this many phase switches is stale (0 = never)
    pending_stale_sessions: int = 3  # ... or for this many later sessions of its project (0 = never)
    prices: tuple[tuple[str, float], ...] = ()  # (model id prefix, USD per million input tokens) overrides
    cost_turns: int = 10  # horizon of the release savings shown in status and advice
    compress_outputs: str = "auto"  # auto | off | aggressive (live compression of tool outputs)
    compress_min_tokens: tuple[int, int, int, int] = (7_500, 2_000, 1_000, 500)  # by Working-zone level
    compress_files_mb: int = 64  # bound of one session's folder of full outputs (oldest removed first)
    project_compress: tuple[tuple[str, str], ...] = ()  # (project root, compress_outputs) from [projects."…"]
    wrap_failing_commands: bool = False  # PreToolUse wrapper for test/build commands (opt-in)
    project_wrap: tuple[tuple[str, bool], ...] = ()  # (project root, wrap_failing_commands) from [projects."…"]
    problems: tuple[str, ...] = field(default=(), compare=False)

    def allowed_transcript_roots(self) -> tuple[str, ...]:
        if self.transcript_roots:
            return tuple(os.path.realpath(os.path.expanduser(r)) for r in self.transcript_roots)
        roots = [os.path.join(os.path.expanduser("~"), ".claude", "projects")]
        ccd = os.environ.get("CLAUDE_CONFIG_DIR")
        if ccd:
            roots.append(os.path.join(ccd, "projects"))
        return tuple(os.path.realpath(r) for r in roots)

    def compress_mode(self, project: str) -> str:
        """``compress_outputs`` for ``project`` (its root): its ``[projects."<root>"]`` value, else the global one."""
        for root, mode in self.project_compress:
            if root == project:
                return mode
        return self.compress_outputs

    def wrap_mode(self, project: str) -> bool:
        """``wrap_failing_commands`` for ``project`` (its root): its ``[projects."<root>"]`` value, else the global one."""
        for root, on in self.project_wrap:
            if root == project:
                return on
        return self.wrap_failing_commands

    def wrap_anywhere(self) -> bool:
        """Is the wrapper on globally or for some project (then ``install`` adds the PreToolUse hook)?"""
        return self.wrap_failing_commands or any(on for _root, on in self.project_wrap)


def _pct_list(text: str, n: int) -> tuple[float, ...]:
    parts = [p for p in text.replace(",", "/").split("/") if p.strip()]
    if len(parts) != n:
        raise ValueError(f"expected {n} numbers separated by '/', got {text!r}")
    vals = tuple(float(p) for p in parts)
    if any(v > 1.0 for v in vals):
        vals = tuple(v / 100.0 for v in vals)
    return vals


def _prices(value: object) -> tuple[tuple[str, float], ...]:
    """``{"claude-opus-5": 5}`` or ``"claude-opus-5=5,claude-sonnet-5=2"`` -> ((prefix, price), ...)."""
    if isinstance(value, str):
        pairs = []
        for part in value.split(","):
            if not part.strip():
                continue
            k, sep, v = part.partition("=")
            if not sep or not k.strip():
                raise ValueError(f"expected prefix=price, got {part.strip()!r}")
            pairs.append((k.strip(), v))
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise ValueError(f"expected a table of prefix = price, got {type(value).__name__}")
    return tuple((str(k).strip().lower(), float(v)) for k, v in pairs)


def _validate(c: Config) -> None:
    if any(not 0 <= z <= 1 for z in c.zones) or abs(sum(c.zones) - 1.0) > 0.001:
        raise ValueError(f"zone ratios must be within 0..1 and sum to 100%, got {c.zones}")
    t = c.thresholds
    if not (0 < t[0] < t[1] < t[2] <= 1.5):
        raise ValueError(f"thresholds must be increasing, got {t}")
    if c.inject_cap_tokens < 50 or c.recall_cap_tokens < 50:
        raise ValueError("caps must be at least 50 tokens")
    if c.max_frame < 4096:
        raise ValueError("max_frame must be at least 4096 bytes")
    if c.idle_timeout_s <= 0 or c.request_timeout_s <= 0:
        raise ValueError("timeouts must be positive")
    if c.max_connections < 1 or c.max_batch < 1:
        raise ValueError("max_connections and max_batch must be at least 1")
    if min(c.min_free_mb, c.max_db_mb, c.retention_days, c.max_project_mb, c.pending_stale_phases,
           c.pending_stale_sessions, c.memory_keep_sessions) < 0:
        raise ValueError("sizes and days must not be negative")
    if any(not (v >= 0) or v > 1000 for _k, v in c.prices):
        raise ValueError("prices must be between 0 and 1000 USD per million tokens")
    if not 1 <= c.cost_turns <= 1000:
        raise ValueError("cost_turns must be between 1 and 1000")
    if c.compress_outputs not in COMPRESS_MODES or any(m not in COMPRESS_MODES for _, m in c.project_compress):
        raise ValueError(f"compress_outputs must be one of {', '.join(COMPRESS_MODES)}")
    if len(c.compress_min_tokens) != 4 or min(c.compress_min_tokens) < 1 or c.compress_files_mb < 1:
        raise ValueError("compress_min_tokens needs 4 positive numbers (levels 0..3); compress_files_mb >= 1")
    if c.retention_interval_s < 1:
        raise ValueError("retention_interval_s must be at least 1 second")


COMPRESS_MODES = ("auto", "off", "aggressive")
_FILE_KEYS = {f.name for f in fields(Config)} - {"problems", "project_compress", "project_wrap"}


def _coerce(name: str, value: object, current: object) -> object:
    if name == "zones":
        return _pct_list(value, 4) if isinstance(value, str) else tuple(float(v) / (100 if float(v) > 1 else 1) for v in value)  # type: ignore[union-attr]
    if name == "thresholds":
        return _pct_list(value, 3) if isinstance(value, str) else tuple(float(v) / (100 if float(v) > 1 else 1) for v in value)  # type: ignore[union-attr]
    if name == "matrix":
        return parse_overrides(value)
    if name == "prices":
        return _prices(value)
    if name == "compress_min_tokens":
        vals = value.replace(",", "/").split("/") if isinstance(value, str) else list(value)  # type: ignore[union-attr]
        return tuple(int(v) for v in vals)
    if name == "compress_outputs":
        return str(value).strip().lower()
    if name == "transcript_roots":
        return tuple(value.split(":")) if isinstance(value, str) else tuple(str(v) for v in value)  # type: ignore[union-attr]
    if isinstance(current, bool) or name in ("redact", "write_ledgers", "wrap_failing_commands"):
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    if name == "window":
        return None if value in (None, "", 0, "0") else int(value)  # type: ignore[arg-type]
    if isinstance(current, int):
        return int(value)  # type: ignore[arg-type]
    if isinstance(current, float):
        return float(value)  # type: ignore[arg-type]
    return str(value)


_ENV = {
    "CTXLIFED_ZONES": "zones",
    "CTXLIFED_THRESHOLDS": "thresholds",
    "CTXLIFED_WINDOW": "window",
    "CTXLIFED_INJECT_CAP": "inject_cap_tokens",
    "CTXLIFED_RECALL_CAP": "recall_cap_tokens",
    "CTXLIFED_MEMORY_DIR": "memory_dir",
    "CTXLIFED_REDACT": "redact",
    "CTXLIFED_MAX_FRAME": "max_frame",
    "CTXLIFED_IDLE_TIMEOUT": "idle_timeout_s",
    "CTXLIFED_TRANSCRIPT_ROOTS": "transcript_roots",
    "CTXLIFED_MIN_FREE_MB": "min_free_mb",
    "CTXLIFED_WRITE_LEDGERS": "write_ledgers",
    "CTXLIFED_RESIDENCY_NOTE": "residency_note",
    "CTXLIFED_MEMORY_KEEP": "memory_keep_sessions",
    "CTXLIFED_MAX_DB_MB": "max_db_mb",
    "CTXLIFED_RETENTION_DAYS": "retention_days",
    "CTXLIFED_MAX_PROJECT_MB": "max_project_mb",
    "CTXLIFED_REQUEST_TIMEOUT": "request_timeout_s",
    "CTXLIFED_MAX_CONNECTIONS": "max_connections",
    "CTXLIFED_MATRIX": "matrix",
    "CTXLIFED_PENDING_STALE_PHASES": "pending_stale_phases",
    "CTXLIFED_PENDING_STALE_SESSIONS": "pending_stale_sessions",
    "CTXLIFED_PRICES": "prices",
    "CTXLIFED_COST_TURNS": "cost_turns",
    "CTXLIFED_COMPRESS_OUTPUTS": "compress_outputs",
    "CTXLIFED_COMPRESS_MIN_TOKENS": "compress_min_tokens",
    "CTXLIFED_WRAP_FAILING_COMMANDS": "wrap_failing_commands",
}


def _apply(c: Config, name: str, value: object, origin: str, problems: list[str]) -> Config:
    try:
        nc = replace(c, **{name: _coerce(name, value, getattr(c, name))})
        _validate(nc)
        return nc
    except (ValueError, TypeError) as exc:
        problems.append(f"{origin}: {name}: {exc}")
        return c


def _apply_projects(c: Config, projects: object, origin: str, problems: list[str]) -> Config:
    if not isinstance(projects, dict):
        problems.append(f"{origin}: projects: expected a table of [projects.\"<project root>\"] tables")
        return c
    out: list[tuple[str, str]] = []
    wraps: list[tuple[str, bool]] = []
    for root, table in projects.items():
        if not isinstance(table, dict):
            problems.append(f"{origin}: projects.{root!r}: expected a table")
            continue
        for k, v in table.items():
            mode = str(v).strip().lower()
            if k == "wrap_failing_commands":
                if isinstance(v, bool):
                    wraps.append((os.path.realpath(os.path.expanduser(str(root))), v))
                else:
                    problems.append(f"{origin}: projects.{root!r}: wrap_failing_commands {v!r} is not true or false")
            elif k != "compress_outputs":
                problems.append(f"{origin}: projects.{root!r}: unknown setting {k!r} (ignored)")
            elif mode not in COMPRESS_MODES:
                problems.append(f"{origin}: projects.{root!r}: compress_outputs {v!r} is not one of {', '.join(COMPRESS_MODES)}")
            else:
                out.append((os.path.realpath(os.path.expanduser(str(root))), mode))
    return replace(c, project_compress=tuple(out), project_wrap=tuple(wraps))


def load(path: str | None, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ) if env is None else env
    c = Config()
    problems: list[str] = []
    if path and os.path.exists(path):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            data = {}
        # Accept a flat file or a [ctxlifed] table.
        if isinstance(data.get("ctxlifed"), dict):
            data = data["ctxlifed"]
        projects = data.pop("projects", None)
        if projects is not None:
            c = _apply_projects(c, projects, path, problems)
        for k, v in data.items():
            if k in _FILE_KEYS:
                c = _apply(c, k, v, path, problems)
            else:
                problems.append(f"{path}: unknown setting {k!r} (ignored)")
    for var, name in _ENV.items():
        if env.get(var):
            c = _apply(c, name, env[var], var, problems)
    return replace(c, problems=tuple(problems))
