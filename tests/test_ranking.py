"""Recall ranking: echoes, kind weights, superseded decisions, identifier words (schema 0011),
``type:error`` with red test runs, and the project named when nothing matches.

Store-level tests write rows with the writer's own ``ops.insert_archive`` (idents included); the
end-to-end ones go through a real daemon (see also tests/test_ranking_eval.py)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.core import recall_rank as RR
from ctxlifed.store.fts_query import fts_term_expression
from ctxlifed.store import ops, queries, schema


# ----------------------------------------------------------------------------- pure rules

@pytest.mark.parametrize(("ident", "words"), [
    ("LockTimeout", "Lock Timeout"), ("HTTPServer", "HTTP Server"), ("getUserID2", "get User ID2"),
    ("XMLHttpRequest", "XML Http Request"), ("lock_timeout", ""), ("Postgres", ""), ("ABC", ""), ("x", ""),
])
def test_identifier_phrase(ident: str, words: str) -> None:
    assert RR.identifier_phrase(ident) == words


def test_identifier_words_once_each_and_bounded() -> None:
    text = "raise LockTimeout(d)  # LockTimeout again; cfg.poolSize and max_LockTimeout, lock_timeout"
    assert RR.identifier_words(text).splitlines() == ["Lock Timeout", "pool Size"]
    many = " ".join(f"fooBar{i}x" for i in range(5000))
    assert 0 < len(RR.identifier_words(many)) <= RR.MAX_IDENT_CHARS


def test_fts_term_expression_adds_the_words_of_an_identifier() -> None:
    assert fts_term_expression("LockTimeout") == '("LockTimeout" OR "Lock Timeout")'
    assert fts_term_expression("cfg.LockTimeout") == '("cfg.LockTimeout" OR "cfg Lock Timeout")'
    assert fts_term_expression("lock_timeout") == '"lock_timeout"'  # the index reads it as two words already
    assert fts_term_expression('say "LockTimeout') == '("say ""LockTimeout" OR "say Lock Timeout")'
    assert fts_term_expression("!!") == ""


@pytest.mark.parametrize(("kind", "tool", "head", "echo"), [
    ("prompt", None, "/recall Postgres", True),
    ("prompt", None, "/ctxlifed:recall session store", True),
    ("prompt", None, "/compact keep the decisions", True),  # any slash command
    ("prompt", None, "/home/dev/app/main.py fails to start", False),  # a path, not a command
    ("prompt", None, "what did we decide about Postgres?", True),
    ("prompt", None, "为什么会话过期了？", True),
    ("prompt", None, "Use Postgres for the session store.", False),
    ("prompt", None, "Do not log access tokens.", False),
    ("prompt", None, "did we ever enable the nightly cleanup", True),
    ("tool", "Bash", "$ ctxlifectl recall Postgres\n**Recall** `Postgres`: 3 matches", True),
    ("error", "Bash", "$ ctxlifectl recall Postgres\n[error]\nbash: ctxlifectl: command not found", True),
    ("tool", "Bash", "$ psql -c 'select 1'\n1", False),
    ("assistant", None, "1. **#12** decision · design — use Postgres", True),
    ("ledger", None, "Full text: ctxlifectl recall --id 4", False),  # ctxlifed's memory pages are content
])
def test_is_echo(kind: str, tool: str | None, head: str, echo: bool) -> None:
    assert RR.is_echo(kind, tool, head) is echo


def test_weights_put_facts_then_work_before_chatter() -> None:
    w = RR.weight
    assert w("decision", "") == w("constraint", "") > w("error", "") == w("code_change", "") > w("pending", "") > 1.0
    assert w("test_result", "[test_result FAILED] Bash: pytest") == w("error", "")
    assert w("test_result", "[test_result passed] Bash: pytest") == w("assistant", "") == w("tool", "") == 1.0


def test_supersedes_needs_the_same_topic_and_a_new_choice() -> None:
    t = RR.topic_words
    redis = t("We decided to use Redis for the session store because it expires keys natively.")
    pg = t("Redis kept evicting sessions, so we switched the session store to Postgres.")
    assert RR.supersedes(redis, pg)
    assert not RR.supersedes(pg, t("You decided: the session store uses Postgres."))  # a restatement
    assert not RR.supersedes(redis, t("We decided to use gRPC between internal services."))  # another topic
    assert RR.supersedes(t("我们决定使用 gRPC 作为内部服务之间的通信协议。"), t("我们改用 REST 作为内部服务之间的通信协议。"))


# ----------------------------------------------------------------------------- store

@pytest.fixture
def store(tmp_path: Path):
    conn = sqlite3.connect(str(tmp_path / "s.db"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    schema.migrate(conn)
    conn.execute("COMMIT")
    yield conn
    conn.close()


def _put(conn: sqlite3.Connection, kind: str, text: str, *, session: str = "s1", tool: str | None = None,
         summary: str = "", event_id: int | None = None, project: str = "/p") -> int:
    conn.execute("BEGIN")
    aid, _ = ops.insert_archive(conn, ops.ArchiveRow(session=session, project=project, ts=1.0, kind=kind, text=text,
                                                     tool=tool, summary=summary, uid=f"u-{text[:40]}-{kind}",
                                                     event_id=event_id))
    conn.execute("COMMIT")
    return aid


def _ids(conn: sqlite3.Connection, *words: str, **kw: Any) -> list[int]:
    return [h["id"] for h in queries.search(conn, words=words, project="/p", **kw)[0]]


def test_echoes_never_outrank_content(store) -> None:
    """A short recall prompt, question and ctxlifectl output (the best bm25) rank after a long
    assistant text using the word once."""
    content = _put(store, "assistant", "We looked at the options at length and in the end Postgres holds the "
                   "sessions, with a cleanup job and an index on the expiry column, " + "filler words " * 30)
    echoes = [_put(store, "prompt", "/recall Postgres"), _put(store, "prompt", "Postgres?"),
              _put(store, "tool", "$ ctxlifectl recall Postgres\nNo archived context matches `Postgres`.", tool="Bash")]
    got = _ids(store, "Postgres")
    assert got[0] == content and set(got[1:]) == set(echoes)


def test_assistant_text_of_a_recall_turn_and_its_facts_are_echoes(store) -> None:
    decision = _put(store, "decision", "We decided to keep sessions in Postgres.", event_id=1)
    _put(store, "prompt", "/recall Postgres sessions", event_id=2)
    reply = _put(store, "assistant", "The archive says: we decided to keep sessions in Postgres (#1).", event_id=3)
    fact = _put(store, "decision", "The archive says: we decided to keep sessions in Postgres (#1).", event_id=3)
    got = _ids(store, "Postgres")
    assert got[0] == decision and set(got[1:]) >= {reply, fact}


def test_kind_weight_breaks_comparable_scores(store) -> None:
    chat = _put(store, "assistant", "the pool size is fine for now")
    change = _put(store, "code_change", "Edit config/app.properties\n--- old\nsize=5\n+++ new\npool size=20",
                  tool="Edit")
    assert _ids(store, "pool", "size")[:2] == [change, chat]


def test_superseded_decision_ranks_below_its_replacement_and_is_marked(store) -> None:
    old = _put(store, "decision", "Decision: the session store is Redis, sessions expire in Redis by TTL, "
               "Redis session store Redis Redis.")
    new = _put(store, "decision", "We switched the session store to Postgres.")
    hits, _ = queries.search(store, words=("session", "store"), project="/p")
    assert [h["id"] for h in hits] == [new, old]
    assert hits[1]["superseded_by"] == new and hits[1]["summary"].startswith(f"(superseded by #{new})")
    assert "superseded_by" not in hits[0]
    hits, _ = queries.search(store, words=("Redis",), project="/p")  # the replacement does not match: still marked
    assert [(h["id"], h.get("superseded_by")) for h in hits] == [(old, new)]


def test_identifier_words_find_camel_case(store) -> None:
    camel = _put(store, "code_change", "class LockTimeout(Exception):\n    pass", tool="Edit")
    snake = _put(store, "tool", "SET lock_timeout = '5s';", tool="Bash")
    assert set(_ids(store, "lock", "timeout")) == {camel, snake}
    assert set(_ids(store, "LockTimeout")) == {camel, snake}
    assert set(_ids(store, "lock_timeout")) == {camel, snake}
    assert _ids(store, "timeout", kinds=("code_change",)) == [camel]
    # a text update re-indexes its words (ledger pages follow their file)
    store.execute("BEGIN")
    ops.upsert_archive_by_uid(store, ops.ArchiveRow(session="s1", project="/p", ts=2.0, kind="code_change",
                                                    text="class PoolExhausted(Exception): pass",
                                                    uid="u-class LockTimeout(Exception):\n    pass-code_change"))
    store.execute("COMMIT")
    assert _ids(store, "pool", "exhausted") == [camel] and set(_ids(store, "lock", "timeout")) == {snake}
    store.execute("INSERT INTO archive_fts(archive_fts) VALUES ('integrity-check')")


def test_type_error_includes_red_test_runs(store) -> None:
    err = _put(store, "error", "$ psql\n[error]\nsession refused", tool="Bash")
    red = _put(store, "test_result", "$ pytest\nFAILED test_session - AssertionError", tool="Bash",
               summary="[test_result FAILED] Bash: pytest\n1 failed")
    green = _put(store, "test_result", "$ pytest -k session\n3 passed", tool="Bash",
                 summary="[test_result passed] Bash: pytest -k session\n3 passed")
    assert set(_ids(store, "session", kinds=("error",))) == {err, red}
    assert set(_ids(store, kinds=("error",))) == {err, red}  # the listing form too
    assert set(_ids(store, "session", kinds=("test_result",))) == {red, green}  # type:test stays narrow


# ----------------------------------------------------------------------------- migration 0011

def _store_before(path: Path, last: str) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_ts FLOAT)")
    trigram = schema.has_trigram(conn)
    for name, stmts in schema.MIGRATIONS:
        if name > last:
            break
        if name in ("0003_fts_trigram", "0007_tri_deferred", "0010_tri_merge") and not trigram:
            continue
        for stmt in stmts:
            conn.execute(stmt)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    conn.execute("COMMIT")
    return conn


def test_migration_0011_indexes_the_identifier_words_of_an_old_store(tmp_path: Path) -> None:
    conn = _store_before(tmp_path / "old.db", "0010_tri_merge")
    conn.execute("BEGIN")
    for i, text in enumerate(["raise LockTimeout(deadline)", "plain words only", "SET lock_timeout = 5"]):
        conn.execute("INSERT INTO archive(hash, session, project, ts, kind, phase, text, chars)"
                     " VALUES (?, 's', '/p', 1.0, 'tool', 'design', ?, ?)", (f"h{i}", text, len(text)))
    conn.execute("COMMIT")
    old = conn.execute("SELECT rowid FROM archive_fts WHERE archive_fts MATCH '{text summary} : (lock timeout)'")
    assert old.fetchall() == [(3,)]  # the old index cannot see LockTimeout's words
    conn.execute("BEGIN IMMEDIATE")
    assert schema.migrate(conn)[:1] == ["0011_fts_idents"]  # later migrations follow it
    conn.execute("COMMIT")
    assert [r[0] for r in conn.execute("SELECT idents FROM archive ORDER BY id")] == ["Lock Timeout", "", ""]
    assert set(_ids(conn, "lock", "timeout")) == {1, 3}
    assert _ids(conn, "lock", "timeout", phase="design", kinds=("tool",))  # the filter tags survived
    conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('integrity-check')")
    config = dict(conn.execute("SELECT k, v FROM archive_fts_config WHERE k IN ('automerge', 'crisismerge')"))
    assert config == {"automerge": 0, "crisismerge": 64}  # 0009's settings, set again on the new table
    conn.execute("BEGIN IMMEDIATE")
    assert schema.migrate(conn) == []
    conn.execute("COMMIT")
    conn.close()


# ----------------------------------------------------------------------------- daemon and CLI

def _hook(daemon: Any, project: Path, event: str, **kw: Any) -> None:
    daemon.call("hook", {"session_id": "cccccccc-0000-0000-0000-000000000001", "cwd": str(project),
                         "hook_event_name": event, **kw})


def test_type_error_recall_shows_a_red_test_run(daemon: Any) -> None:
    """A failing test run sent by the hook is found by ``type:error`` and by ``type:test``."""
    proj = daemon.base / "proj"
    (proj / ".git").mkdir(parents=True)
    _hook(daemon, proj, "PostToolUseFailure", tool_name="Bash", tool_input={"command": "pytest -q tests"},
          error="Exit code 1\nFAILED tests/test_a.py::test_expiry - AssertionError\n1 failed in 0.1s",
          tool_use_id="toolu_1")
    _hook(daemon, proj, "PostToolUse", tool_name="Bash", tool_input={"command": "pytest -q tests/test_b.py"},
          tool_response={"stdout": "test_expiry ok\n1 passed in 0.1s", "stderr": ""}, tool_use_id="toolu_2")
    r = daemon.call("recall", {"query": "type:error test_expiry", "cwd": str(proj)})
    assert [h["kind"] for h in r["hits"]] == ["test_result"] and "FAILED" in r["hits"][0]["summary"]
    assert daemon.call("recall", {"query": "type:test test_expiry", "cwd": str(proj)})["total"] == 2


def test_cli_names_the_project_searched_when_nothing_matches(daemon: Any, tmp_path: Path) -> None:
    folder = daemon.base / "nowhere"
    folder.mkdir()
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "recall", "zebra", "words"], env=daemon.env,
                       cwd=folder, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "No archived context matches" in r.stdout
    assert f"Searched project {folder} only" in r.stdout
    assert "ctxlifectl recall --all-projects zebra words" in r.stdout
    j = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "recall", "--json", "zebra"], env=daemon.env,
                       cwd=folder, capture_output=True, text=True, timeout=30)
    assert json.loads(j.stdout)["project"] == str(folder)
    a = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "recall", "--all-projects", "zebra"],
                       env=daemon.env, cwd=folder, capture_output=True, text=True, timeout=30)
    assert "Searched project" not in a.stdout


@pytest.mark.parametrize("path", ["rare", "bm25", "computed"])
def test_identifier_term_with_other_terms_through_every_path(store, monkeypatch, path) -> None:
    """An identifier term (an OR group in the MATCH) next to other terms: found on every bm25 path
    (FTS5 takes an implicit AND only between strings)."""
    if path != "rare":
        monkeypatch.setattr(queries, "DF_WALK", 2)
    monkeypatch.setattr(queries, "BM25_BUDGET", 10**9 if path == "bm25" else 0)
    rows = [_put(store, "tool", f"row {i} 0 raise LockTimeout now", tool="Bash") for i in range(4)]
    other = _put(store, "tool", "the lock timeout of row 0 passed", tool="Bash")
    assert set(_ids(store, "0", "LockTimeout")) == {*rows, other}
    assert set(_ids(store, "0", "AAa")) == set()


# ---- identifier words: the words around the places the case turns, as the plain token scan finds them ----

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _plain_identifier_words(text: str) -> str:
    """The plain form: every ``_TOKEN_RE`` word of the text, each once, through the same checks."""
    if len(text) > 2 * RR.IDENT_SCAN:
        text = text[: RR.IDENT_SCAN] + "\n" + text[-RR.IDENT_SCAN :]
    out: list[str] = []
    size = 0
    for token in dict.fromkeys(RR._TOKEN_RE.findall(text)):
        if token.islower() or token.isupper():
            continue
        phrase = RR.identifier_phrase(token)
        if not phrase:
            continue
        size += len(phrase) + 1
        if size > RR.MAX_IDENT_CHARS:
            break
        out.append(phrase)
    return "\n".join(out)


@settings(max_examples=800, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["get", "User", "ID", "2", "HTTP", "Server", "a", "Z", "9", "_", " ", ".", "\n",
                                 "é", "À", "ǅ", "\ud800", "lockTimeout", "URLs", "A1B", "x9Y", "-", "9abC"]),
                max_size=40).map("".join))
def test_identifier_words_are_the_plain_token_scans(text: str) -> None:
    assert RR.identifier_words(text) == _plain_identifier_words(text)


def test_identifier_words_stop_at_their_cap_as_the_plain_scan_does() -> None:
    text = " ".join(f"fooBar{i}Baz" for i in range(3000))
    assert RR.identifier_words(text) == _plain_identifier_words(text)
    assert len(RR.identifier_words(text)) <= RR.MAX_IDENT_CHARS
