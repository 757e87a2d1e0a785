"""Schema and migrations.

Rules:
- Migrations are append-only: a released migration is never edited; add a new one. A step is an
  SQL statement or a function of the connection (for data no SQL can compute).
- Each migration runs inside the caller's ``BEGIN IMMEDIATE`` transaction and is recorded in
  ``_migrations``; running ``migrate`` twice is a no-op.
- FTS5 tables are external-content tables over ``archive`` kept in sync by triggers: a word index
  (porter + unicode61) and a trigram index (CJK and substrings; filled after the reply, by the
  writer when idle: ``store/backlog.py``). Without trigram support
  (SQLite < 3.34) the trigram table is skipped and ``status`` says so.
- Since 0006 the word index's content is the view ``archive_words``: archive's text and summary
  plus ``tags``, one token per project, session, phase and kind, so recall filters are applied
  inside the index. 0006 rebuilds that index from ``archive`` (time grows with the rows). Its update
  trigger fires on every column the index holds (text, summary, project, session, phase, kind).
- Since 0011 the word index also holds ``idents`` (archive's column of the words of mixed-case
  identifiers, filled by the writer): ``text, summary, idents, tags``. 0011 fills the column for the
  rows already stored and rebuilds the index (like 0006), then sets 0009's merge settings again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import sqlite_utils

_BASE = [
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY,
        session TEXT NOT NULL,
        project TEXT NOT NULL,
        cwd TEXT NOT NULL DEFAULT '',
        event TEXT NOT NULL,
        tool TEXT,
        ts REAL NOT NULL,
        payload BLOB NOT NULL,
        bytes INTEGER NOT NULL DEFAULT 0,
        truncated INTEGER NOT NULL DEFAULT 0,
        redactions INTEGER NOT NULL DEFAULT 0,
        source TEXT NOT NULL DEFAULT 'hook',
        rid TEXT
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS events_rid ON events(rid) WHERE rid IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS events_session ON events(session, id)",
    "CREATE INDEX IF NOT EXISTS events_project ON events(project, id)",
    """CREATE TABLE IF NOT EXISTS sessions (
        session TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        cwd TEXT NOT NULL DEFAULT '',
        transcript_path TEXT,
        first_ts REAL NOT NULL,
        last_ts REAL NOT NULL,
        events INTEGER NOT NULL DEFAULT 0,
        phase TEXT NOT NULL DEFAULT 'planning',
        phase_since REAL NOT NULL DEFAULT 0,
        model TEXT,
        ended_ts REAL,
        state BLOB
    )""",
    "CREATE INDEX IF NOT EXISTS sessions_project ON sessions(project, last_ts)",
    """CREATE TABLE IF NOT EXISTS archive (
        id INTEGER PRIMARY KEY,
        hash TEXT NOT NULL,
        session TEXT NOT NULL,
        project TEXT NOT NULL,
        ts REAL NOT NULL,
        kind TEXT NOT NULL,
        phase TEXT,
        tool TEXT,
        file_path TEXT,
        uid TEXT,
        event_id INTEGER,
        priority INTEGER NOT NULL DEFAULT 50,
        category TEXT,
        level INTEGER NOT NULL DEFAULT 2,
        summary TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        chars INTEGER NOT NULL DEFAULT 0,
        truncated INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS archive_hash ON archive(project, hash)",
    "CREATE INDEX IF NOT EXISTS archive_session ON archive(session, id)",
    "CREATE INDEX IF NOT EXISTS archive_uid ON archive(project, uid)",
    "CREATE INDEX IF NOT EXISTS archive_project_kind ON archive(project, kind, id)",
    """CREATE TABLE IF NOT EXISTS phase_switches (
        id INTEGER PRIMARY KEY,
        session TEXT NOT NULL,
        project TEXT NOT NULL,
        ts REAL NOT NULL,
        from_phase TEXT,
        to_phase TEXT NOT NULL,
        cause TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '[]'
    )""",
    "CREATE INDEX IF NOT EXISTS phase_switches_session ON phase_switches(session, id)",
    """CREATE TABLE IF NOT EXISTS items (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        session TEXT NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        hash TEXT NOT NULL,
        ts REAL NOT NULL,
        phase TEXT,
        status TEXT NOT NULL DEFAULT 'open',
        archive_id INTEGER
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS items_hash ON items(project, kind, hash)",
    "CREATE INDEX IF NOT EXISTS items_project ON items(project, kind, status, id)",
    """CREATE TABLE IF NOT EXISTS ledgers (
        path TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        session TEXT,
        ts REAL NOT NULL,
        archive_id INTEGER
    )""",
    """CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)""",
]

_FTS_WORDS = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS archive_fts USING fts5(
        text, summary, content='archive', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER IF NOT EXISTS archive_ai AFTER INSERT ON archive BEGIN
        INSERT INTO archive_fts(rowid, text, summary) VALUES (new.id, new.text, new.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS archive_ad AFTER DELETE ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary) VALUES ('delete', old.id, old.text, old.summary);
    END""",
    """CREATE TRIGGER IF NOT EXISTS archive_au AFTER UPDATE OF text, summary ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary) VALUES ('delete', old.id, old.text, old.summary);
        INSERT INTO archive_fts(rowid, text, summary) VALUES (new.id, new.text, new.summary);
    END""",
]

_FTS_TRIGRAM = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS archive_tri USING fts5(
        text, content='archive', content_rowid='id', tokenize='trigram')""",
    """CREATE TRIGGER IF NOT EXISTS archive_tri_ai AFTER INSERT ON archive BEGIN
        INSERT INTO archive_tri(rowid, text) VALUES (new.id, new.text);
    END""",
    """CREATE TRIGGER IF NOT EXISTS archive_tri_ad AFTER DELETE ON archive BEGIN
        INSERT INTO archive_tri(archive_tri, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    """CREATE TRIGGER IF NOT EXISTS archive_tri_au AFTER UPDATE OF text ON archive BEGIN
        INSERT INTO archive_tri(archive_tri, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO archive_tri(rowid, text) VALUES (new.id, new.text);
    END""",
]


def has_trigram(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._tri_probe USING fts5(x, tokenize='trigram')")
        conn.execute("DROP TABLE temp._tri_probe")
        return True
    except sqlite3.OperationalError:
        return False


def has_fts5(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._fts_probe USING fts5(x)")
        conn.execute("DROP TABLE temp._fts_probe")
        return True
    except sqlite3.OperationalError:
        return False


_COMPACTIONS = [
    """CREATE TABLE IF NOT EXISTS compactions (
        id INTEGER PRIMARY KEY,
        session TEXT NOT NULL,
        project TEXT NOT NULL,
        ts REAL NOT NULL,
        report BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS compactions_session ON compactions(session, id)",
    "CREATE INDEX IF NOT EXISTS compactions_project ON compactions(project, id)",
]

_LESSONS = [
    """CREATE TABLE IF NOT EXISTS lessons (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        signature TEXT NOT NULL,
        data BLOB NOT NULL,
        count INTEGER NOT NULL DEFAULT 1,
        last_seen REAL NOT NULL,
        archive_id INTEGER
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS lessons_sig ON lessons(project, signature)",
    "CREATE INDEX IF NOT EXISTS lessons_rank ON lessons(project, count, last_seen)",
]

# Filter tags (0006): one token per filter column, so that ``project`` / ``session`` / ``phase`` /
# ``kind`` filters are intersected inside the word index instead of by visiting every term match.
# A token is a letter naming the column, the hex of the UTF-8 value, and a closing "0": letters and
# digits only (unicode61 keeps it whole), injective, and the final digit leaves it untouched by
# the porter stemmer (all its rules strip letter suffixes). ``queries.tag_token`` builds the same.
def _tags_sql(row: str) -> str:
    return (f"'p' || hex({row}.project) || '0 s' || hex({row}.session) || '0 h' || hex(coalesce({row}.phase, ''))"
            f" || '0 k' || hex({row}.kind) || '0'")


_FTS_TAGS = [
    "DROP TRIGGER IF EXISTS archive_ai",
    "DROP TRIGGER IF EXISTS archive_ad",
    "DROP TRIGGER IF EXISTS archive_au",
    "DROP TABLE IF EXISTS archive_fts",
    # The word index's content: archive's text and summary plus the filter tags (a view, so the
    # archive table itself is unchanged; FTS5 reads it for rebuild, highlight and integrity-check).
    f"""CREATE VIEW IF NOT EXISTS archive_words AS
        SELECT a.id AS id, a.text AS text, a.summary AS summary, {_tags_sql('a')} AS tags FROM archive a""",
    """CREATE VIRTUAL TABLE archive_fts USING fts5(
        text, summary, tags, content='archive_words', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER archive_ai AFTER INSERT ON archive BEGIN
        INSERT INTO archive_fts(rowid, text, summary, tags) VALUES (new.id, new.text, new.summary, {_tags_sql('new')});
    END""",
    f"""CREATE TRIGGER archive_ad AFTER DELETE ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary, tags)
            VALUES ('delete', old.id, old.text, old.summary, {_tags_sql('old')});
    END""",
    f"""CREATE TRIGGER archive_au AFTER UPDATE OF text, summary, project, session, phase, kind ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary, tags)
            VALUES ('delete', old.id, old.text, old.summary, {_tags_sql('old')});
        INSERT INTO archive_fts(rowid, text, summary, tags) VALUES (new.id, new.text, new.summary, {_tags_sql('new')});
    END""",
    "INSERT INTO archive_fts(archive_fts) VALUES ('rebuild')",
]

# Deferred trigram indexing (0007, see ``store/backlog.py``): an insert or a text update queues the
# row in ``tri_pending``; the writer indexes it when idle. Each trigger keeps both cases in ONE body
# (SQLite does not order triggers of the same event): the FTS 'delete' runs only for a row that was
# indexed, i.e. not pending, and the pending mark is dropped or set after that check.
_TRI_DEFERRED = [
    "CREATE TABLE IF NOT EXISTS tri_pending (id INTEGER PRIMARY KEY)",
    "DROP TRIGGER IF EXISTS archive_tri_ai",
    "DROP TRIGGER IF EXISTS archive_tri_ad",
    "DROP TRIGGER IF EXISTS archive_tri_au",
    """CREATE TRIGGER archive_tri_ai AFTER INSERT ON archive BEGIN
        INSERT OR IGNORE INTO tri_pending(id) VALUES (new.id);
    END""",
    """CREATE TRIGGER archive_tri_ad AFTER DELETE ON archive BEGIN
        INSERT INTO archive_tri(archive_tri, rowid, text) SELECT 'delete', old.id, old.text
            WHERE NOT EXISTS (SELECT 1 FROM tri_pending WHERE id = old.id);
        DELETE FROM tri_pending WHERE id = old.id;
    END""",
    """CREATE TRIGGER archive_tri_au AFTER UPDATE OF text ON archive BEGIN
        INSERT INTO archive_tri(archive_tri, rowid, text) SELECT 'delete', old.id, old.text
            WHERE NOT EXISTS (SELECT 1 FROM tri_pending WHERE id = old.id);
        INSERT OR IGNORE INTO tri_pending(id) VALUES (new.id);
    END""",
]

# Write-behind derivation (0008, see ``service/derive.py``): an event acknowledged before it is
# derived carries ``pending = 1`` until the transaction that stores what was derived from it.
_EVENTS_PENDING = [
    "ALTER TABLE events ADD COLUMN pending INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS events_pending ON events(id) WHERE pending = 1",
]

# FTS5 merges off the insert path (0009): automerge off, merges done in small idle steps
# (``backlog.idle_step``); crisismerge bounds the segments a level may gather if idle never comes.
_FTS_MERGE = [
    "INSERT INTO archive_fts(archive_fts, rank) VALUES ('automerge', 0)",
    "INSERT INTO archive_fts(archive_fts, rank) VALUES ('crisismerge', 64)",
]
_TRI_MERGE = [
    "INSERT INTO archive_tri(archive_tri, rank) VALUES ('automerge', 0)",
    "INSERT INTO archive_tri(archive_tri, rank) VALUES ('crisismerge', 64)",
]

# Identifier words in the word index (0011): ``archive.idents`` holds the words of the text's
# mixed-case identifiers (``LockTimeout`` -> ``Lock Timeout``, ``core.recall_rank.identifier_words``;
# the writer fills it, ``store.ops``), indexed as the word index's ``idents`` column, so that
# ``lock timeout`` and ``timeout`` find ``LockTimeout`` (unicode61 already splits ``lock_timeout`` and
# ``db.pool.size``). The index gains a column: it is rebuilt (like 0006), after the rows already
# stored got their words; the merge settings of 0009 are set again on the new table.
def _fill_idents(conn: sqlite3.Connection) -> None:
    from ..core.recall_rank import identifier_words  # pure; the writer computes the same

    last = 0
    while True:
        rows = conn.execute("SELECT id, text FROM archive WHERE id > ? AND (text GLOB '*[a-z0-9][A-Z]*'"
                            " OR text GLOB '*[A-Z][A-Z][a-z]*') ORDER BY id LIMIT 2000", (last,)).fetchall()
        if not rows:
            return
        conn.executemany("UPDATE archive SET idents = ? WHERE id = ?",
                         [(w, aid) for aid, text in rows if (w := identifier_words(text))])
        last = rows[-1][0]


_FTS_IDENTS: list[str | Callable[[sqlite3.Connection], None]] = [
    "ALTER TABLE archive ADD COLUMN idents TEXT NOT NULL DEFAULT ''",
    "DROP TRIGGER IF EXISTS archive_ai",
    "DROP TRIGGER IF EXISTS archive_ad",
    "DROP TRIGGER IF EXISTS archive_au",
    "DROP TABLE IF EXISTS archive_fts",
    "DROP VIEW IF EXISTS archive_words",
    _fill_idents,
    f"""CREATE VIEW archive_words AS
        SELECT a.id AS id, a.text AS text, a.summary AS summary, a.idents AS idents, {_tags_sql('a')} AS tags
        FROM archive a""",
    """CREATE VIRTUAL TABLE archive_fts USING fts5(
        text, summary, idents, tags, content='archive_words', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER archive_ai AFTER INSERT ON archive BEGIN
        INSERT INTO archive_fts(rowid, text, summary, idents, tags)
            VALUES (new.id, new.text, new.summary, new.idents, {_tags_sql('new')});
    END""",
    f"""CREATE TRIGGER archive_ad AFTER DELETE ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary, idents, tags)
            VALUES ('delete', old.id, old.text, old.summary, old.idents, {_tags_sql('old')});
    END""",
    f"""CREATE TRIGGER archive_au AFTER UPDATE OF text, summary, idents, project, session, phase, kind ON archive BEGIN
        INSERT INTO archive_fts(archive_fts, rowid, text, summary, idents, tags)
            VALUES ('delete', old.id, old.text, old.summary, old.idents, {_tags_sql('old')});
        INSERT INTO archive_fts(rowid, text, summary, idents, tags)
            VALUES (new.id, new.text, new.summary, new.idents, {_tags_sql('new')});
    END""",
    "INSERT INTO archive_fts(archive_fts) VALUES ('rebuild')",
    *_FTS_MERGE,
]

# Pending items have a lifecycle (core/pending.py): when an item was last created or restated, and
# when and how it was closed (todo, decision, test, todo_line, user, ctl, ledger).
_ITEMS_LIFECYCLE = [
    "ALTER TABLE items ADD COLUMN touched_ts REAL",
    "ALTER TABLE items ADD COLUMN resolved_ts REAL",
    "ALTER TABLE items ADD COLUMN resolution TEXT",
    "UPDATE items SET touched_ts = ts",
]

MIGRATIONS: list[tuple[str, list[str | Callable[[sqlite3.Connection], None]]]] = [
    ("0001_base", _BASE),
    ("0002_fts_words", _FTS_WORDS),
    ("0003_fts_trigram", _FTS_TRIGRAM),
    ("0004_compactions", _COMPACTIONS),
    ("0005_lessons", _LESSONS),
    ("0006_fts_tags", _FTS_TAGS),
    ("0007_tri_deferred", _TRI_DEFERRED),
    ("0008_events_pending", _EVENTS_PENDING),
    ("0009_fts_merge", _FTS_MERGE),
    ("0010_tri_merge", _TRI_MERGE),
    ("0011_fts_idents", _FTS_IDENTS),
    ("0012_items_lifecycle", _ITEMS_LIFECYCLE),
]


def applied_names(conn: sqlite3.Connection) -> set[str]:
    try:
        return {r[0] for r in conn.execute("SELECT name FROM _migrations")}
    except sqlite3.OperationalError:
        return set()


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply pending migrations; the caller holds a write transaction. Returns names applied."""
    db = sqlite_utils.Database(conn)
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_ts": float}, pk="name")
    done = {r["name"] for r in db["_migrations"].rows}
    applied = []
    trigram = has_trigram(conn)
    for name, stmts in MIGRATIONS:
        if name in done:
            continue
        if name in ("0003_fts_trigram", "0007_tri_deferred", "0010_tri_merge") and not trigram:
            continue
        for stmt in stmts:
            if callable(stmt):
                stmt(conn)
            else:
                conn.execute(stmt)
        conn.execute(
            "INSERT INTO _migrations(name, applied_ts) VALUES (?, strftime('%s','now'))", (name,)
        )
        applied.append(name)
    return applied
