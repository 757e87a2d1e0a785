"""A recall ranking corpus written through a real daemon, and its evaluation (recall@1, MRR).

Rules:
- Every row is stored by the daemon's own write path: hook events sent with the ``hook`` method
  exactly as the shim sends them (prompts, tool calls, failed tool calls, Stop with the assistant's
  last message). Decisions, constraints and pending items are the facts the daemon detects.
- Echoes are produced the way a user produces them: a recall runs against the daemon and what it
  printed is stored as the output of the ``ctxlifectl recall`` Bash call; the ``/recall`` prompt,
  the assistant's reply quoting the hits, a follow-up question and a "command not found" run of
  the same command are stored too.
- Several sessions of one project share the vocabulary (session store, Postgres, Redis, pool,
  lock, timeout, 令牌 ...); a second project uses the same words and must never be returned.
- A query's relevant rows are named by (kind, marker): a hit is relevant when its kind is that
  kind, its full text (``recall --id``) holds the marker and it was stored before the recalls
  began (a fact the daemon found in an echo quoting the planted one is an echo, not the answer). recall@1 is the share of queries whose
  first hit is relevant; MRR the mean of 1/rank of the first relevant hit (0 beyond ``LIMIT``).
- Used by ``tests/test_ranking_eval.py`` (a floor) and ``bench/eval_ranking.py`` (the figures).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Call = Callable[[str, dict[str, Any]], Any]
LIMIT = 10

# The planted rows the queries look for (fact texts are whole sentences the daemon detects).
REDIS_DECISION = "We decided to use Redis for the session store because it expires keys natively."
REDIS_REMINDER = "Reminder: we decided to use Redis as the session store, with keys that expire natively."
PG_DECISION = "Redis kept evicting sessions under memory pressure, so we switched the session store to Postgres."
GRPC_DECISION = "我们决定使用 gRPC 作为内部服务之间的通信协议。"
TOKEN_CONSTRAINT = "日志里不要打印访问令牌。"
CLEANUP_PENDING = "TODO: add the nightly cleanup job that deletes expired rows from the sessions table."
LOCK_CODE = "class LockTimeout(Exception):"
POOL_CONFIG = "db.pool.size=20"
PSQL_ERROR = "password authentication failed for user"
EXPIRY_TEST = "session expired early"

# (query, kind of the relevant row, marker in its text)
QUERIES: list[tuple[str, str, str]] = [
    ("Postgres", "decision", "switched the session store to Postgres"),
    ("session store", "decision", "switched the session store to Postgres"),
    ("Redis session store", "decision", "switched the session store to Postgres"),
    ("LockTimeout", "code_change", LOCK_CODE),
    ("lock timeout", "code_change", LOCK_CODE),
    ("timeout pool", "code_change", LOCK_CODE),
    ("pool size", "code_change", POOL_CONFIG),
    ("db.pool.size", "code_change", POOL_CONFIG),
    ("password authentication", "error", PSQL_ERROR),
    ("session expired early", "test_result", EXPIRY_TEST),
    ("nightly cleanup", "pending", "nightly cleanup job"),
    ("gRPC", "decision", "gRPC 作为内部服务"),
    ("通信协议", "decision", "gRPC 作为内部服务"),
    ("令牌", "constraint", "不要打印访问令牌"),
]

# Queries the user asks repeatedly (the echoes of each are in the archive before evaluation).
ECHOED = ["Postgres", "Postgres", "Postgres", "session store", "LockTimeout", "pool size", "令牌",
          "password authentication", "gRPC"]


class Writer:
    """One Claude Code session of a project, sending hook events to a daemon."""

    def __init__(self, call: Call, project: Path, sid: str) -> None:
        self.call, self.project, self.sid, self.n = call, project, sid, 0

    def hook(self, event: str, **kw: Any) -> None:
        self.call("hook", {"session_id": self.sid, "cwd": str(self.project), "hook_event_name": event, **kw})

    def prompt(self, text: str) -> None:
        self.hook("UserPromptSubmit", prompt=text)

    def say(self, text: str) -> None:
        self.hook("Stop", stop_hook_active=False, last_assistant_message=text)

    def tool(self, name: str, tool_input: dict[str, Any], response: Any) -> None:
        self.n += 1
        self.hook("PostToolUse", tool_name=name, tool_input=tool_input, tool_response=response,
                  tool_use_id=f"toolu_{self.sid[-8:]}_{self.n:04d}")

    def bash(self, command: str, stdout: str, stderr: str = "") -> None:
        self.tool("Bash", {"command": command}, {"stdout": stdout, "stderr": stderr, "interrupted": False})

    def fail(self, name: str, tool_input: dict[str, Any], error: str) -> None:
        self.n += 1
        self.hook("PostToolUseFailure", tool_name=name, tool_input=tool_input, error=error,
                  tool_use_id=f"toolu_{self.sid[-8:]}_{self.n:04d}")

    def edit(self, rel: str, old: str, new: str) -> None:
        self.tool("Edit", {"file_path": str(self.project / rel), "old_string": old, "new_string": new},
                  {"filePath": str(self.project / rel)})

    def write(self, rel: str, content: str) -> None:
        self.tool("Write", {"file_path": str(self.project / rel), "content": content},
                  {"filePath": str(self.project / rel), "type": "create"})

    def recall_echo(self, query: str, variant: int) -> None:
        """The user recalls ``query``: the prompt, the Bash call with what the daemon really printed,
        the assistant's reply repeating it; some variants add a question or a failed run."""
        md = self.call("recall", {"query": query, "cwd": str(self.project)})["markdown"]
        self.prompt(("/recall ", "/ctxlifed:recall ", "/recall ")[variant % 3] + query)
        self.bash(f"ctxlifectl recall {query}", md)
        first = next((ln for ln in md.splitlines() if ln[:1].isdigit()), "")
        self.say(f"The archive has this about {query}: {first[:160]} "
                 f"Ask me if you want the full text of that {query} item.")
        if variant % 3 == 1:
            self.fail("Bash", {"command": f"ctxlifectl recall {query}"},
                      f"Exit code 127\nbash: line 1: ctxlifectl: command not found\n(searching {query})")
        if variant % 3 == 2:
            self.prompt(f"what did we end up doing about {query}?")


def _project(root: Path, name: str) -> Path:
    p = root / name
    (p / ".git").mkdir(parents=True, exist_ok=True)
    return p


def build(call: Call, root: Path) -> tuple[Path, int]:
    """Write the corpus through the daemon; returns the main project's folder (recall's cwd) and
    the highest archive id stored before the recalls began."""
    proj = _project(root, "shop")
    other = _project(root, "other")

    # Session 1 (design): the first session-store decision, an identifier, Chinese decisions.
    s = Writer(call, proj, "aaaaaaaa-0000-0000-0000-000000000001")
    s.hook("SessionStart", source="startup")
    s.prompt("We need a session store for the login service. Options are Redis or Postgres; "
             "Redis expires keys natively, Postgres is already running for orders.")
    s.say("Redis gives us key expiry for free and is fast; Postgres gives durability and one less "
          "service to run. For a session store either works at our scale.")
    s.prompt(f"{REDIS_DECISION} Keep the session TTL at 30 minutes.")
    s.say("Understood: the session store will be Redis with a 30 minute TTL. I will add the client.")
    s.write("src/shop/sessions/store.py",
            "import redis\n\nclass SessionStore:\n    \"\"\"Sessions in Redis, expired by TTL.\"\"\"\n\n"
            "    def __init__(self, url: str, ttl: int = 1800) -> None:\n        self.r = redis.Redis.from_url(url)\n"
            "        self.ttl = ttl\n")
    s.prompt(f"{GRPC_DECISION}REST 只留给外部接口。")
    s.say("好的，内部服务用 gRPC，外部接口继续用 REST。gRPC 的性能比 REST 好一些，但调试更麻烦，"
          "需要准备 grpcurl 之类的工具。通信协议的选择我会写进设计文档。")
    s.prompt(f"还有一点：{TOKEN_CONSTRAINT}调试时也一样。")
    s.say("明白，日志中间件会把令牌替换成 ***。访问令牌和刷新令牌都会处理。")
    s.hook("SessionEnd", reason="other")

    # Session 2 (implementation): the pool, a lock timeout, errors, a red test run.
    s = Writer(call, proj, "aaaaaaaa-0000-0000-0000-000000000002")
    s.hook("SessionStart", source="startup")
    s.prompt(REDIS_REMINDER)  # a near-duplicate of the first decision
    s.prompt("Implement the connection pool for the orders database and make slow checkouts fail fast.")
    s.edit("src/shop/db/pool.py", "class Pool:\n    pass\n",
           f"{LOCK_CODE}\n    \"\"\"Raised when no connection is free before the deadline.\"\"\"\n\n\n"
           "class Pool:\n    def acquire(self, deadline: float):\n        if not self._wait(deadline):\n"
           "            raise LockTimeout(deadline)\n")
    s.bash("grep -rn LockTimeout src/", "src/shop/db/pool.py:1:class LockTimeout(Exception):\n"
           "src/shop/db/pool.py:9:            raise LockTimeout(deadline)")
    s.say("Added LockTimeout to the pool; acquire raises it when the deadline passes.")
    s.say("Postgres has its own lock_timeout setting; that lock timeout is separate from the pool "
          "deadline and stays at its default.")
    s.edit("config/app.properties", "db.pool.size=5\n", f"{POOL_CONFIG}\ndb.pool.recycle=3600\n")
    s.say("I raised the pool size to 20 because the checkout tests were timing out waiting for a "
          "connection. The pool size can go back down once the slow query is fixed.")
    s.bash("grep -n pool config/app.properties", f"3:{POOL_CONFIG}\n4:db.pool.recycle=3600")
    s.fail("Bash", {"command": "psql -h localhost -U postgres -c 'select 1'"},
           f"Exit code 2\npsql: error: connection to server at \"localhost\" (127.0.0.1), port 5432 failed: "
           f"FATAL:  {PSQL_ERROR} \"postgres\"")
    s.say("psql could not log in: the password for the postgres user is wrong in .env. "
          "I will read it from the secrets file instead.")
    s.fail("Bash", {"command": "pytest -q tests/test_sessions.py"},
           "Exit code 1\n.F.\n=================================== FAILURES ===================================\n"
           "______________________________ test_expiry ______________________________\n"
           f"    assert store.get(sid) is not None\nE   AssertionError: {EXPIRY_TEST} (ttl 1800, age 12)\n"
           "FAILED tests/test_sessions.py::test_expiry - AssertionError: session expired early\n"
           "1 failed, 2 passed in 0.31s")
    s.say("test_expiry fails: the session expired early because the TTL is applied in milliseconds.")
    s.bash("pytest -q tests/test_sessions.py", "...\n3 passed in 0.29s")
    s.hook("SessionEnd", reason="other")

    # Session 3 (later): the reversal, a pending item, near-duplicates.
    s = Writer(call, proj, "aaaaaaaa-0000-0000-0000-000000000003")
    s.hook("SessionStart", source="startup")
    s.prompt(f"{PG_DECISION} Sessions live in a sessions table now.")
    s.say("The session store now writes to the sessions table in Postgres; the Redis client is gone. "
          "Postgres sessions survive restarts, which Redis sessions did not.")
    s.write("src/shop/sessions/store.py",
            "import psycopg\n\nclass SessionStore:\n    \"\"\"Sessions in the Postgres sessions table.\"\"\"\n\n"
            "    def __init__(self, dsn: str) -> None:\n        self.conn = psycopg.connect(dsn)\n")
    s.prompt(f"{CLEANUP_PENDING} The session store should not grow forever.")
    s.say("Noted the nightly cleanup. The session store table has an index on expires_at, so the "
          "cleanup will be cheap.")
    s.say("Postgres is configured; the session store tests pass against Postgres 16.")
    s.hook("SessionEnd", reason="other")

    # Another project with the same vocabulary: never returned for this project.
    o = Writer(call, other, "bbbbbbbb-0000-0000-0000-000000000001")
    o.prompt("We decided to use Postgres for the session store of the admin tool. LockTimeout is raised "
             "by the pool; the pool size is 5. 日志里不要打印访问令牌。")
    o.edit("pool.py", "x", "class LockTimeout(Exception):\n    pass\ndb.pool.size=5")

    call("status", {})  # reads wait for the derivation backlog
    planted = call("status", {})["archive_items"]  # ids are dense: nothing was deleted

    # Session 4: the user recalls, again and again (each recall sees the echoes of the previous ones).
    s = Writer(call, proj, "aaaaaaaa-0000-0000-0000-000000000004")
    s.hook("SessionStart", source="resume")
    for i, q in enumerate(ECHOED):
        s.recall_echo(q, i)
    call("status", {"session": s.sid})
    return proj, planted


def _text(call: Call, aid: int, cache: dict[int, str]) -> str:
    if aid not in cache:
        cache[aid] = call("recall", {"query": "", "id": aid})["text"]
    return cache[aid]


def evaluate(call: Call, proj: Path, planted: int) -> dict[str, Any]:
    """recall@1, MRR and each query's rank (0: no relevant hit in the first LIMIT)."""
    cache: dict[int, str] = {}
    per: list[dict[str, Any]] = []
    for query, kind, marker in QUERIES:
        r = call("recall", {"query": query, "cwd": str(proj), "limit": LIMIT})
        rank = 0
        for i, h in enumerate(r["hits"], 1):
            if h["project"] != str(proj):
                raise AssertionError(f"{query!r} returned a hit of another project: {h}")
            if h["kind"] == kind and h["id"] <= planted and marker in _text(call, h["id"], cache):
                rank = i
                break
        top = r["hits"][0] if r["hits"] else None
        per.append({"query": query, "rank": rank,
                    "top": f"#{top['id']} {top['kind']}: {top['summary'][:70]}" if top else "(none)"})
    n = len(per)
    return {"recall_at_1": sum(p["rank"] == 1 for p in per) / n,
            "mrr": sum(1 / p["rank"] for p in per if p["rank"]) / n, "queries": per}


def report(res: dict[str, Any]) -> str:
    lines = [f"recall@1 {res['recall_at_1']:.3f}   MRR {res['mrr']:.3f}   ({len(res['queries'])} queries)"]
    for p in res["queries"]:
        lines.append(f"  rank {p['rank'] or '-':>2}  {p['query']:<24} top: {p['top']}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(QUERIES, ensure_ascii=False))
