"""Privacy and disk: planted secrets never reach a file, forget really forgets, retention, low disk.

Matrix rows E1-E8 of docs/reliability.md. tests/test_core_redact.py measures the redactor on its
corpora in process; here the same corpora go through the running daemon (prompts, tool input and
output, transcripts, the spool, L3 ledgers) and the files on disk are grepped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ._harness import (
    check_reply,
    connect,
    db_checks,
    frame,
    git_project,
    grep_files,
    hook,
    query,
    recv_line,
    run_shim_timed,
    settled,
    store_files,
    transcript_line,
    wait_until,
)

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root (tmpfs mount)")


def _corpora() -> tuple[list[tuple[str, list[str]]], list[str]]:
    from test_core_redact import ordinary_lines, planted_texts  # the redactor's own corpora (tests/)

    return planted_texts(), ordinary_lines()


def _everything_on_disk(d: Any, *projects: Path) -> list[Path]:
    files = [*store_files(d), d.log, d.data_dir / "spool.jsonl", d.data_dir / "spool.jsonl.ingesting"]
    for p in projects:
        files += [f for f in (p / "docs").rglob("*") if f.is_file()] if (p / "docs").exists() else []
    return files


# -- E1: planted secrets ------------------------------------------------------------------------------------
@pytest.mark.parametrize("channel", ["hook", "transcript"])
def test_planted_secrets_never_reach_a_file(rdaemon: Any, short_tmp: Path, figures: Any, channel: str) -> None:
    """Every planted secret (providers' keys and tokens, bearer, PEM blocks, .env assignments, URL
    passwords, JWTs, <private> spans), sent as a prompt and as tool input and output (``hook``) or
    written by the assistant into the transcript (``transcript``), is absent from the database, WAL,
    SHM, log, spool and L3 pages (grep of the bytes)."""
    planted, _ = _corpora()
    roots = short_tmp / "claude" / "projects"
    (roots / "p").mkdir(parents=True)
    proj = git_project(short_tmp / "proj")
    transcript = roots / "p" / "secrets.jsonl"
    transcript.write_bytes(b"")
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(roots))
    d.start()
    values = sorted({v for _t, vals in planted for v in vals}, key=len)
    tp = str(transcript) if channel == "transcript" else ""
    # Several entries per event (blank-line separated) keep the run short; each still stands alone.
    groups = ["\n\n".join(t for t, _v in planted[k : k + 6]) for k in range(0, len(planted), 6)]
    with connect(d.socket) as s:
        buf = bytearray()
        for i, text in enumerate(groups):
            if channel == "transcript":
                with open(transcript, "ab") as f:
                    f.write(transcript_line(f"Here is what I found: {text}", i + 1))
                payloads = [hook("Stop", "secrets", str(proj), transcript_path=tp)]
            else:
                payloads = [
                    hook("UserPromptSubmit", "secrets", str(proj), prompt=f"Decision: keep this. {text}"),
                    hook("PostToolUse", "secrets", str(proj), tool_name="Bash", tool_input={"command": text},
                         tool_response={"stdout": text, "stderr": ""}),
                ]
            for j, payload in enumerate(payloads):
                s.sendall(frame("hook", payload, f"secret-{i}-{j}"))
                (r,) = check_reply(json.loads(recv_line(s, buf) or b"null"))
                assert "result" in r, r
    # A decision, so the session settles something and its ledger page is written (a session that
    # settled nothing writes none), then the L3 pages are grepped too.
    d.rpc("hook", hook("UserPromptSubmit", "secrets", str(proj), prompt="Decision: keep the archive in SQLite.",
                       transcript_path=tp))
    d.rpc("phase.set", {"session": "secrets", "phase": "implementation"})
    d.rpc("hook", hook("SessionEnd", "secrets", str(proj), transcript_path=tp))
    wait_until(lambda: list((proj / "docs" / "memory").rglob("*.md")))
    wait_until(lambda: settled(d))  # every side job (ledger pages, their index rows) done
    live = grep_files(_everything_on_disk(d, proj), values)  # while running: WAL included
    d.stop()
    after = grep_files(_everything_on_disk(d, proj), values)
    leaked = sorted(set(live) | set(after))
    redactions = query(d.db, "SELECT coalesce(sum(redactions), 0) FROM events")[0][0]
    figures.record("planted_entries", len(planted))
    figures.record("secret_values", len(values))
    figures.record("leaked_values", len(leaked), where=sorted({w for v in leaked for w in (live.get(v, []) + after.get(v, []))}))
    figures.record("detection_rate_pct", round(100.0 * (len(values) - len(leaked)) / len(values), 2), "%")
    figures.record("redactions_counted", redactions)
    assert [] == leaked


def _structured_secrets() -> tuple[dict[str, Any], list[str]]:
    """A tool input holding secrets where a text scan does not reach: as dict keys, and nested
    deeper than 200 levels (a dict chain and a list chain). Returns the input and its values."""
    from test_core_redact import rule_values

    vals, _ = rule_values(seed=29)
    key_gh, key_aws, deep_a, deep_b = vals["I_B64_GITHUB"], vals["R_AWS_ABIA"], vals["R_SENDGRID"], vals["R_LINEAR"]
    key_gh = __import__("base64").b64decode(key_gh).decode()  # the raw token itself, used as a key
    deep_dict: Any = {"token_value": deep_a}
    for _ in range(300):
        deep_dict = {"a": deep_dict}
    deep_list: Any = [deep_b]
    for _ in range(250):
        deep_list = [deep_list]
    inp = {"headers": {key_gh: "1", f"x-{key_aws}": "2"}, "deep_list": deep_list, "deep_dict": deep_dict}
    return inp, [key_gh, key_aws, deep_a, deep_b]


@pytest.mark.parametrize("channel", ["hook", "transcript"])
def test_secrets_as_keys_and_deeply_nested_never_reach_a_file(rdaemon: Any, short_tmp: Path, figures: Any,
                                                             channel: str) -> None:
    """Secrets used as dict keys and secrets nested deeper than 200 levels, in a hook's tool input
    and output (``hook``) or in a transcript's tool call (``transcript``), are absent from every
    file of the data dir (DB, WAL, SHM, log, spool)."""
    inp, values = _structured_secrets()
    roots = short_tmp / "claude" / "projects"
    (roots / "p").mkdir(parents=True)
    transcript = roots / "p" / "structured.jsonl"
    transcript.write_bytes(b"")
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(roots))
    d.start()
    if channel == "hook":
        r = d.rpc("hook", hook("PostToolUse", "structured", "/tmp/structured", tool_name="mcp__db__query",
                               tool_input=inp, tool_response={"result": inp}))
    else:
        call = {"type": "assistant", "uuid": "00000000-0000-4000-8000-000000000101", "sessionId": "t",
                "timestamp": "2026-11-29T10:00:00.000Z",
                "message": {"id": "msg_s1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                            "content": [{"type": "tool_use", "id": "toolu_structured01", "name": "mcp__db__query",
                                         "input": inp}],
                            "usage": {"input_tokens": 10, "output_tokens": 5}}}
        result = {"type": "user", "uuid": "00000000-0000-4000-8000-000000000102", "sessionId": "t",
                  "timestamp": "2026-11-29T10:00:01.000Z",
                  "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_structured01",
                                                           "content": json.dumps(inp)}]}}
        transcript.write_bytes((json.dumps(call) + "\n" + json.dumps(result) + "\n").encode())
        r = d.rpc("hook", hook("Stop", "structured", "/tmp/structured", transcript_path=str(transcript)))
        d.rpc("hook", hook("SessionEnd", "structured", "/tmp/structured", transcript_path=str(transcript)))
    assert "result" in r, r
    stored = query(d.db, "SELECT count(*) FROM events WHERE session = 'structured'")[0][0]
    live = grep_files(_everything_on_disk(d), values)
    d.stop()
    after = grep_files(_everything_on_disk(d), values)
    leaked = sorted(set(live) | set(after))
    figures.record("structured_values", len(values))
    figures.record("leaked_values", len(leaked), where=sorted({w for v in leaked for w in live.get(v, []) + after.get(v, [])}))
    assert stored >= 1
    assert [] == leaked


def test_spooled_events_are_redacted_at_rest(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """With no daemon, the shim spools: the spool file already holds no planted secret, and once
    ingested the spool is gone and the store holds none either."""
    planted, _ = _corpora()
    d = rdaemon(CTXLIFED_DAEMON_CMD="/bin/true", CTXLIFED_HOOK_DEADLINE="0.5")
    sample = planted[:: max(1, len(planted) // 12)]
    values = [v for _t, vals in sample for v in vals]
    for i, (text, _vals) in enumerate(sample):
        r, _ms = run_shim_timed(hook("UserPromptSubmit", "spooled", "/tmp", prompt=text), d.env)
        assert 0 == r.returncode
    spool = d.data_dir / "spool.jsonl"
    lines = len(spool.read_bytes().splitlines())
    at_rest = grep_files([spool], values)
    d.start()
    wait_until(lambda: not spool.exists())
    d.stop()
    stored = grep_files(store_files(d), values)
    figures.record("spooled_events", lines, n=len(sample))
    figures.record("secrets_in_spool", len(at_rest), n=len(values))
    figures.record("secrets_in_store_after_ingest", len(stored), n=len(values))
    assert len(sample) == lines
    assert {} == at_rest
    assert {} == stored


def test_ordinary_code_is_stored_unchanged(rdaemon: Any, figures: Any) -> None:
    """Ordinary code and prose (tests/data/secrets/ordinary.txt) stored through the daemon comes back
    byte for byte: the false-positive figure end to end."""
    _, ordinary = _corpora()
    d = rdaemon()
    d.start()
    text = "\n".join(ordinary)
    d.rpc("hook", hook("PostToolUse", "ordinary", "/tmp/ord", tool_name="Read",
                       tool_input={"file_path": "/tmp/ord/code.py"}, tool_response={"file": {"content": text}}))
    d.rpc("hook", hook("UserPromptSubmit", "ordinary", "/tmp/ord", prompt=text))
    rows = [r[0] for r in query(d.db, "SELECT text FROM archive WHERE session = 'ordinary'")]
    changed = [ln for ln in ordinary if not any(ln in t for t in rows)]
    redactions = query(d.db, "SELECT coalesce(sum(redactions), 0) FROM events WHERE session = 'ordinary'")[0][0]
    figures.record("ordinary_lines", len(ordinary))
    figures.record("false_positive_lines", len(changed), examples=changed[:5])
    figures.record("redactions_counted", redactions)
    assert [] == changed
    assert 0 == redactions


# -- E3: forget -------------------------------------------------------------------------------------------
def _seed_two_projects(d: Any, short_tmp: Path) -> dict[str, Any]:
    roots = Path(d.env["CTXLIFED_TRANSCRIPT_ROOTS"])
    out: dict[str, Any] = {}
    for name in ("a", "b"):
        proj = git_project(short_tmp / f"proj{name}")
        t = roots / f"{name}.jsonl"
        t.write_bytes(transcript_line(f"assistant note QUOKKA{name}TRANSCRIPT checked", 1))
        sid = f"forget-{name}"
        d.rpc("hook", hook("UserPromptSubmit", sid, str(proj), transcript_path=str(t),
                           prompt=f"We decided to use QUOKKA{name}DECISION for storage. Remember QUOKKA{name}PROMPT."))
        d.rpc("hook", hook("PostToolUse", sid, str(proj), tool_name="Bash", transcript_path=str(t),
                           tool_input={"command": f"grep QUOKKA{name}COMMAND"},
                           tool_response={"stdout": f"QUOKKA{name}OUTPUT " * 50, "stderr": ""}))
        d.rpc("phase.set", {"session": sid, "phase": "implementation"})
        wait_until(lambda p=proj: list((p / "docs" / "memory").rglob("phase-*.md")))
        out[name] = {"proj": str(proj), "sid": sid,
                     "markers": [f"QUOKKA{name}{k}" for k in ("DECISION", "PROMPT", "COMMAND", "OUTPUT", "TRANSCRIPT")]}
    wait_until(lambda: settled(d))  # every side job (ledger pages, their index rows) done
    return out


def _rows(d: Any, col: str, val: str) -> dict[str, int]:
    return {t: query(d.db, f"SELECT count(*) FROM {t} WHERE {col} = ?", (val,))[0][0]
            for t in ("events", "archive", "items", "phase_switches", "ledgers", "sessions")}


@pytest.mark.parametrize("scope", ["session", "project"])
def test_forget_removes_rows_index_and_bytes(rdaemon: Any, short_tmp: Path, figures: Any, scope: str) -> None:
    """forget --session / --project: no row left in any table, recall finds nothing, and after the
    checkpoint no byte of the forgotten text is left in the database file or the WAL; the other
    project is untouched."""
    (short_tmp / "claude").mkdir()
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(short_tmp / "claude"))
    d.start()
    seed = _seed_two_projects(d, short_tmp)
    a, b = seed["a"], seed["b"]
    assert grep_files(store_files(d), a["markers"])  # the text really was stored
    checked = a["markers"]
    params = {"session": a["sid"]} if scope == "session" else {"project": a["proj"]}
    t0 = time.monotonic()
    r = d.rpc("forget", params)
    forget_ms = (time.monotonic() - t0) * 1000
    col, val = ("session", a["sid"]) if scope == "session" else ("project", a["proj"])
    rows = _rows(d, col, val)
    hits = {m: d.rpc("recall", {"query": m, "all_projects": True})["result"]["total"] for m in a["markers"]}
    left = grep_files(store_files(d), a["markers"])
    checked_hits = {m: n for m, n in hits.items() if m in checked}
    checked_left = {m: w for m, w in left.items() if m in checked}
    kept = grep_files(store_files(d), b["markers"])
    wal = os.path.getsize(f"{d.db}-wal") if os.path.exists(f"{d.db}-wal") else 0
    figures.record("forget_ms", round(forget_ms, 1), "ms", result=r.get("result"))
    figures.record("rows_left", sum(rows.values()), per_table=rows)
    figures.record("recall_hits_left", sum(hits.values()), per_marker=hits)
    figures.record("marker_bytes_left", len(left), where=left)
    figures.record("wal_bytes_after", wal, "bytes")
    assert {"events": 0, "archive": 0, "items": 0, "phase_switches": 0, "ledgers": 0, "sessions": 0} == rows
    assert 0 == sum(checked_hits.values())
    assert {} == checked_left
    assert set(b["markers"]) == set(kept)
    assert 0 == wal
    assert db_checks(d.db)["ok"]


def test_forget_session_also_forgets_its_decisions_in_the_project_log(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """forget --session: the session's decisions are not left recallable through the project's decision log."""
    (short_tmp / "claude").mkdir()
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(short_tmp / "claude"))
    d.start()
    a = _seed_two_projects(d, short_tmp)["a"]
    d.rpc("forget", {"session": a["sid"]})
    hits = d.rpc("recall", {"query": "QUOKKAaDECISION", "all_projects": True})["result"]["total"]
    left = grep_files(store_files(d), ["QUOKKAaDECISION"])
    figures.record("decision_hits_left", hits)
    figures.record("decision_bytes_left", len(left))
    assert (0, {}) == (hits, left)


def test_forget_id_removes_the_item_and_its_index_entry(rdaemon: Any, figures: Any) -> None:
    """forget --id: the archived item and its FTS entries are gone (recall finds nothing)."""
    d = rdaemon()
    d.start()
    d.rpc("hook", hook("UserPromptSubmit", "fid", "/tmp/fid", prompt="the word QUOKKAIDMARK appears once"))
    hit = d.rpc("recall", {"query": "QUOKKAIDMARK", "all_projects": True})["result"]["hits"][0]
    r = d.rpc("forget", {"id": hit["id"]})
    total = d.rpc("recall", {"query": "QUOKKAIDMARK", "all_projects": True})["result"]["total"]
    fts = query(d.db, "SELECT count(*) FROM archive_fts WHERE archive_fts MATCH 'QUOKKAIDMARK'")[0][0]
    figures.record("archive_deleted", r["result"]["archive"])
    figures.record("recall_hits_left", total)
    figures.record("fts_rows_left", fts)
    assert (1, 0, 0) == (r["result"]["archive"], total, fts)


def test_forget_id_leaves_no_copy_of_the_text(rdaemon: Any, figures: Any) -> None:
    """forget --id: no byte of the item's text is left in the database files."""
    d = rdaemon()
    d.start()
    d.rpc("hook", hook("UserPromptSubmit", "fid2", "/tmp/fid2", prompt="the word QUOKKAIDCOPY appears once"))
    hit = d.rpc("recall", {"query": "QUOKKAIDCOPY", "all_projects": True})["result"]["hits"][0]
    d.rpc("forget", {"id": hit["id"]})
    left = grep_files(store_files(d), ["QUOKKAIDCOPY"])
    figures.record("marker_bytes_left", len(left), where=left)
    assert {} == left


# -- E4: retention -------------------------------------------------------------------------------------------
def test_retention_age_cap(rdaemon: Any, figures: Any) -> None:
    """retention_days: rows of a project older than the cap are deleted in the background (events,
    archive, facts, switches, sessions) and their text is gone from the file; recent rows stay."""
    d = rdaemon()
    d.start()
    for i in range(20):
        d.rpc("hook", hook("UserPromptSubmit", "old", "/tmp/oldproj", prompt=f"We decided OLDQUOKKA{i} is fine"))
        d.rpc("hook", hook("UserPromptSubmit", "new", "/tmp/newproj", prompt=f"We decided NEWQUOKKA{i} is fine"))
    d.rpc("phase.set", {"session": "old", "phase": "design"})
    d.stop()
    age = 40 * 86400
    conn = __import__("sqlite3").connect(d.db)
    with conn:
        for t in ("events", "archive", "items", "phase_switches"):
            conn.execute(f"UPDATE {t} SET ts = ts - ? WHERE project = '/tmp/oldproj'", (age,))
        conn.execute("UPDATE sessions SET first_ts = first_ts - ?, last_ts = last_ts - ? WHERE project = '/tmp/oldproj'", (age, age))
    conn.close()
    before = _rows(d, "project", "/tmp/oldproj")
    d.env["CTXLIFED_RETENTION_DAYS"] = "30"
    d.start()
    t0 = time.monotonic()
    wait_until(lambda: sum(_rows(d, "project", "/tmp/oldproj").values()) == 0, timeout=20)
    enforce_ms = (time.monotonic() - t0) * 1000
    wait_until(lambda: d.log_events("retention"), timeout=10)
    left = grep_files(store_files(d), [f"OLDQUOKKA{i} " for i in range(20)])
    new_rows = _rows(d, "project", "/tmp/newproj")
    figures.record("old_rows_before", sum(before.values()), per_table=before)
    figures.record("enforced_after_ready_ms", round(enforce_ms, 1), "ms")
    figures.record("old_text_bytes_left", len(left))
    figures.record("recent_rows_kept", sum(new_rows.values()))
    assert {} == left
    assert new_rows["events"] == 20 and new_rows["archive"] >= 20


def test_retention_size_cap_per_project(rdaemon: Any, figures: Any) -> None:
    """max_project_mb: a project over the cap loses its oldest events and archive first, down to 90% of
    the cap; its newest rows and every other project stay."""
    d = rdaemon()
    d.write_config(max_project_mb=1, retention_interval_s=1)
    d.start()
    chunk = 60_000
    with connect(d.socket) as s:
        buf = bytearray()
        for i in range(40):
            out = f"BIGQUOKKA{i:03d} " + (f"{i:03d}-line of build output\n" * (chunk // 24))
            s.sendall(frame("hook", hook("PostToolUse", "big", "/tmp/bigproj", tool_name="Bash", tool_input={"command": f"make {i}"},
                                         tool_response={"stdout": out, "stderr": ""}), f"big-{i}"))
            assert "result" in json.loads(recv_line(s, buf) or b"{}")
        s.sendall(frame("hook", hook("UserPromptSubmit", "small", "/tmp/smallproj", prompt="tiny"), "small-1"))
        assert "result" in json.loads(recv_line(s, buf) or b"{}")

    def footprint(project: str) -> int:
        e = query(d.db, "SELECT coalesce(sum(bytes), 0) FROM events WHERE project = ?", (project,))[0][0]
        a = query(d.db, "SELECT coalesce(sum(chars), 0) FROM archive WHERE project = ?", (project,))[0][0]
        return e + a

    peak = footprint("/tmp/bigproj")
    t0 = time.monotonic()
    wait_until(lambda: footprint("/tmp/bigproj") <= 1 << 20, timeout=20)
    ms = (time.monotonic() - t0) * 1000
    after = footprint("/tmp/bigproj")
    kept = {r[0] for r in query(d.db, "SELECT rid FROM events WHERE project = '/tmp/bigproj'")}
    figures.record("footprint_peak_bytes", peak, "bytes")
    figures.record("footprint_after_bytes", after, "bytes", cap=1 << 20)
    figures.record("trimmed_within_ms", round(ms, 1), "ms")
    figures.record("events_kept", len(kept), n=41)
    assert "big-39" in kept and "big-0" not in kept, sorted(kept)
    assert query(d.db, "SELECT count(*) FROM events WHERE project = '/tmp/smallproj'")[0][0] == 1
    chk = db_checks(d.db)
    assert chk["ok"], chk


# -- E5/E6: low disk ---------------------------------------------------------------------------------------------
def _fill_until_full(d: Any, tag: str, size: int = 48_000, limit: int = 2000) -> tuple[list[str], int, str]:
    """Send unique events until the daemon answers storage_full; returns acked ids, refusals, message."""
    acked: list[str] = []
    refused = 0
    message = ""
    with connect(d.socket) as s:
        buf = bytearray()
        for i in range(limit):
            rid = f"{tag}-{i}"
            body = f"{rid} " + os.urandom(size // 2).hex()
            s.sendall(frame("hook", hook("PostToolUse", f"{tag}-s", f"/tmp/{tag}", tool_name="Bash",
                                         tool_input={"command": f"dump {i}"}, tool_response={"stdout": body}), rid))
            (r,) = check_reply(json.loads(recv_line(s, buf) or b"null"))
            if "result" in r:
                acked.append(rid)
                continue
            assert "storage_full" == r["error"]["data"]["name"], r
            refused += 1
            message = r["error"]["message"]
            if refused >= 3:
                break
    return acked, refused, message


def _reads_work(d: Any, marker: str) -> dict[str, bool]:
    return {"ping": "result" in d.rpc("ping"), "status": "result" in d.rpc("status", {"limit": 3}),
            "recall": d.rpc("recall", {"query": marker, "all_projects": True}).get("result", {}).get("total", 0) >= 1}


def _low_disk_scenario(d: Any, figures: Any, tag: str, free_space: Any) -> None:
    acked, refused, message = _fill_until_full(d, tag)
    reads = _reads_work(d, acked[0])
    # The shim during the full state: the daemon refuses with storage_full, the shim spools.
    shim_env = dict(d.env, CTXLIFED_DAEMON_CMD="/bin/true")
    big = f"FULLQUOKKA{tag} during full\n" + os.urandom(150_000).hex()  # too big for what room is left
    r, shim_ms = run_shim_timed(hook("PostToolUse", f"{tag}-shim", "/tmp/shim", tool_name="Bash", tool_input={"command": "dump"},
                                     tool_response={"stdout": big}), shim_env)
    spool = d.data_dir / "spool.jsonl"
    spooled = len(spool.read_bytes().splitlines()) if spool.exists() else 0
    # Space comes back.
    t0 = time.monotonic()
    free_space()

    def writes() -> bool:
        return "result" in d.rpc("hook", hook("UserPromptSubmit", f"{tag}-after", "/tmp/after", prompt="space is back"))

    wait_until(writes, timeout=20, interval=0.1)
    recovery_ms = (time.monotonic() - t0) * 1000
    wait_until(lambda: not spool.exists() and not Path(f"{spool}.ingesting").exists(), timeout=20)
    ingested = d.rpc("recall", {"query": f"FULLQUOKKA{tag}", "all_projects": True})["result"]["total"]
    stored = {x[0] for x in query(d.db, "SELECT rid FROM events WHERE rid LIKE ?", (f"{tag}-%",))}
    lost = [x for x in acked if x not in stored]
    figures.record("acked_before_full", len(acked))
    figures.record("storage_full_replies", refused, message=message[:120])
    figures.record("reads_ok_while_full", reads)
    figures.record("shim_spooled_while_full", spooled, shim_exit=r.returncode, shim_ms=round(shim_ms, 1))
    figures.record("recovery_ms", round(recovery_ms, 1), "ms")
    figures.record("spool_ingested_after", ingested)
    figures.record("acked_lost", len(lost), n=len(acked))
    assert refused >= 1 and acked
    assert {"ping": True, "status": True, "recall": True} == reads
    assert (0, b"", 1) == (r.returncode, r.stdout, spooled)
    assert 1 == ingested
    assert [] == lost
    assert db_checks(d.db)["ok"]


def test_low_disk_size_cap_max_page_count(rdaemon: Any, figures: Any) -> None:
    """The store at its size cap (SQLite max_page_count via max_db_mb): writes get storage_full, reads
    keep working, the shim spools, nothing acknowledged is lost; raising the cap (config reload)
    recovers and the spool is ingested."""
    d = rdaemon()
    d.write_config(max_db_mb=2)
    d.start()

    def raise_cap() -> None:
        d.write_config(max_db_mb=64)

    _low_disk_scenario(d, figures, "cap", raise_cap)


@ROOT_ONLY
def test_low_disk_real_tmpfs(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """A real small filesystem (tmpfs): below the free-space mark writes get storage_full before SQLite
    ever sees ENOSPC, reads keep working, the shim spools, nothing acknowledged is lost; freeing space
    recovers at once."""
    mnt = short_tmp / "data"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(mnt)], check=True)
    filler = mnt / "filler.bin"
    d = None
    try:
        d = rdaemon(CTXLIFED_MIN_FREE_MB="8")
        d.start()
        st = os.statvfs(mnt)
        free = st.f_bavail * st.f_frsize
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, free - (14 << 20)))

        def free_space() -> None:
            filler.unlink()

        _low_disk_scenario(d, figures, "tmpfs", free_space)
        full_errors = d.log_text().count("database or disk is full") + d.log_text().count("No space left")
        figures.record("sqlite_full_or_enospc_seen", full_errors)
        assert 0 == full_errors
    finally:
        if d is not None:
            d.stop()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_transcript_text_survives_a_storage_full_retry(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """An event refused with storage_full and retried later still archives its transcript text."""
    roots = short_tmp / "claude"
    roots.mkdir()
    t = roots / "t.jsonl"
    t.write_bytes(transcript_line("first turn", 1))
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(roots))
    d.write_config(max_db_mb=2)
    d.start()
    assert "result" in d.rpc("hook", hook("Stop", "retry", "/tmp/retry", transcript_path=str(t)))
    _fill_until_full(d, "retryfill")
    with open(t, "ab") as f:  # a turn too big for what room is left
        f.write(transcript_line("TURNQUOKKA written while the disk was full\n" + os.urandom(150_000).hex(), 2))
    # Either the event itself is refused (the shim spools it and retries), or it is acknowledged
    # (it fits) and its derivation, which archives the turn, waits for room (derive.py).
    first = d.rpc("hook", hook("Stop", "retry", "/tmp/retry", transcript_path=str(t)), id_="retry-1")
    assert "result" in first or "storage_full" == first["error"]["data"]["name"], first
    d.write_config(max_db_mb=64)
    wait_until(lambda: "result" in d.rpc("hook", hook("Stop", "retry", "/tmp/retry", transcript_path=str(t)), id_="retry-1"),
               timeout=20, interval=0.1)
    # The event may have been acknowledged before the raised cap was applied: its derivation retries
    # until there is room (reads do not wait on a derivation stalled by a full store).
    hits = wait_until(lambda: d.rpc("recall", {"query": "TURNQUOKKA", "all_projects": True})["result"]["total"],
                      timeout=20, interval=0.1)
    figures.record("first_attempt", first.get("error", {}).get("data", {}).get("name", "result"))
    figures.record("transcript_text_archived", hits)
    assert 1 == hits
