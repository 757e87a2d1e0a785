"""Cost in status and the session report: the daemon's ``report`` method, the SVG/HTML builder
(core/report.py, pure), ``ctxlifectl report``, and the page rendered by headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from conftest import run_shim
from ctxlifed.core import cost as C
from ctxlifed.core import report as RP
from test_engine import Session

T0 = 1_795_000_000.0


def _iso(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def usage_at(s: Session, ts: float, context: int, *, write: int = 0, output: int = 50) -> None:
    """One assistant response at ``ts`` holding ``context`` tokens (``write`` of them cache writes)."""
    s.n += 1
    rec = {"type": "assistant", "uuid": f"a{s.n}", "parentUuid": None, "isSidechain": False,
           "timestamp": _iso(ts), "sessionId": s.sid,
           "message": {"id": f"msg_{s.n}", "model": s.model, "role": "assistant",
                       "content": [{"type": "text", "text": "ok"}],
                       "usage": {"input_tokens": 10, "cache_creation_input_tokens": write,
                                 "cache_read_input_tokens": context - 10 - write, "output_tokens": output}}}
    with open(s.transcript, "a") as f:
        f.write(json.dumps(rec) + "\n")


# -- cost in status --------------------------------------------------------------------------------
def test_status_shows_the_sessions_cost_and_what_stays_resident(daemon) -> None:
    s = Session(daemon)  # claude-sonnet-4-5: $3/MTok input
    s.hook("SessionStart", source="startup")
    usage_at(s, T0 + 1, 20_000, write=19_000, output=100)
    s.prompt("hello")
    usage_at(s, T0 + 2, 30_000, write=10_000, output=200)
    s.prompt("more")
    c = s.status()["cost"]
    p = 3.0 / 1e6
    first = p * (10 + 1.25 * 19_000 + 0.1 * (20_000 - 10 - 19_000) + 5 * 100)
    second = p * (10 + 1.25 * 10_000 + 0.1 * (30_000 - 10 - 10_000) + 5 * 200)
    assert c["turns"] == 2 and c["model_price"] == 3.0 and c["price_source"] == "default"
    assert c["usd"] == pytest.approx(first + second, abs=1e-6)
    assert c["last_turn_usd"] == pytest.approx(second, abs=1e-6)
    assert c["resident_turn_usd"] == pytest.approx(30_000 * 0.1 * p, abs=1e-6)
    assert (c["input_tokens"], c["cache_write_tokens"], c["output_tokens"]) == (20, 29_000, 300)
    assert {x["action"] for x in c["savings"]} == {"/clear", "/compact"}
    assert c["prices_taken"] == C.PRICES_TAKEN and c["horizon_turns"] == 10


def test_resume_uses_claude_codes_cache_figures_until_the_next_response(daemon) -> None:
    s = Session(daemon, model="claude-opus-5-5")
    s.hook("SessionStart", source="startup")
    usage_at(s, T0 + 1, 14_253)
    s.prompt("one")
    s.hook("SessionStart", source="resume", seconds_since_last_response=4000, context_tokens=14_253,
           prompt_cache_likely_expired=True, estimated_cache_write_usd=0.0713)
    st = s.status()
    c = st["cost"]
    assert c["cache_expired"] is True and c["resume_write_usd"] == 0.0713
    clear = next(x for x in c["savings"] if x["action"] == "/clear")
    # the context: what the resume said, plus the briefing ctxlifed injected at it
    assert clear["keep_usd"] == pytest.approx(0.0713 + 9 * st["context_tokens"] * 0.1 * 4e-6, abs=1e-6)
    assert "cache has expired" in clear["reason"]
    usage_at(s, T0 + 5000, 15_000, write=14_900)
    s.prompt("two")
    c = s.status()["cost"]
    assert c["cache_expired"] is None and c["resume_write_usd"] is None and c["turns"] == 2


def test_compaction_advice_gives_the_saving_as_its_reason(daemon) -> None:
    s = Session(daemon)
    s.hook("SessionStart", source="startup")
    usage_at(s, T0 + 1, 20_000)
    s.prompt("start")
    usage_at(s, T0 + 2, 120_000)  # Working 100k of 130k: level L1→L2
    s.prompt("go on")
    st = s.status()
    assert st["level"] >= 2
    expect = next(x for x in st["cost"]["savings"] if x["action"] == "/compact")
    line = next(a for a in st["advice"] if a.startswith("Working zone at"))
    assert line.endswith("; " + expect["reason"]) and "/compact saves ≈$" in line
    msg = s.next_answer().get("systemMessage", "")
    assert "/compact saves ≈$" in msg


def test_live_compression_counter_feeds_status() -> None:
    from ctxlifed.runtime.config import Config
    from ctxlifed.service import cost as COST
    from ctxlifed.service.state import SessionState

    st = SessionState(session="s", project="/p", model="claude-sonnet-4-5")
    COST.note_live_compression(st, 40_000, Config())
    v = COST.view(st, None, Config())
    assert v.live_saved_tokens == 40_000 and v.live_saved_usd == pytest.approx(40_000 * 3e-6 * 1.25)


# -- auto-compaction overrides ------------------------------------------------------------------------
def test_overrides_from_the_hook_environment_through_the_real_shim(daemon) -> None:
    s = Session(daemon)
    env = dict(daemon.env, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE="50")
    r = run_shim(s.base("SessionStart", source="startup"), env)
    assert r.returncode == 0
    usage_at(s, T0 + 1, 20_000)
    s.prompt("x")  # sent without the variable: the last value the shim forwarded holds
    st = s.status()
    assert st["autocompact_env"] == {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}
    assert st["autocompact_at"] == 90_000  # min(floor(180,000 * 50 / 100), 167,000)
    assert st["tokens_to_autocompact"] == 70_000


def test_overrides_from_the_settings_files(daemon_factory, short_tmp) -> None:
    cfgdir = short_tmp / "ccd"
    cfgdir.mkdir()
    (cfgdir / "settings.json").write_text(json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60",
                                                              "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "150000"}}))
    d = daemon_factory(CLAUDE_CONFIG_DIR=str(cfgdir)).start()
    s = Session(d)
    (s.project / ".claude").mkdir()
    (s.project / ".claude" / "settings.json").write_text(json.dumps({"env": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW":
                                                                             "100000"}}))
    (s.project / ".claude" / "settings.local.json").write_text("{not json")
    s.hook("SessionStart", source="startup")
    usage_at(s, T0 + 1, 20_000)
    s.prompt("x")
    st = s.status()
    # project window 100,000 wins over the user's 150,000; the user's percent applies: W = 80,000
    assert st["autocompact_env"] == {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60"}
    assert st["autocompact_at"] == min(80_000 * 60 // 100, 67_000)


# -- the report method -----------------------------------------------------------------------------
def _session_with_history(daemon) -> Session:
    s = Session(daemon)
    s.hook("SessionStart", source="startup")
    for i, ctx in enumerate((20_000, 45_000, 80_000, 120_000)):
        usage_at(s, T0 + 60 * (i + 1), ctx)
        s.prompt(f"step {i}: implement the parser")
    s.tool("Read", {"file_path": str(s.project / "big.py")}, {"type": "text", "file": {"filePath": str(s.project / "big.py"),
                                                                                        "content": "x = 1\n" * 9000}})
    usage_at(s, T0 + 400, 130_000)
    s.prompt("now test it")
    return s


def test_report_method_returns_the_series(daemon) -> None:
    s = _session_with_history(daemon)
    r = daemon.call("report", {"session": s.sid})
    assert [x[1] for x in r["samples"]] == [20_000, 45_000, 80_000, 120_000, 130_000]
    assert [x[0] for x in r["samples"]] == [T0 + 60, T0 + 120, T0 + 180, T0 + 240, T0 + 400]
    usd = [x[2] for x in r["samples"]]
    assert usd == sorted(usd) and usd[-1] == pytest.approx(r["cost"]["usd"], abs=1e-6)
    assert r["window"] == 200_000 and r["autocompact_at"] == 167_000
    assert [z["name"] for z in r["zones"]] == ["System", "Ledger", "Working", "Buffer"]
    assert r["thresholds"] == [0.6, 0.75, 0.9]
    assert r["phases"] and r["phases"][0]["start"] <= r["phases"][-1]["end"]
    assert r["largest"] and r["largest"][0]["tokens"] > 0
    by_cwd = daemon.call("report", {"cwd": str(s.project)})
    assert by_cwd["session"] == s.sid
    with pytest.raises(Exception, match="unknown session"):
        daemon.call("report", {"session": "99999999-2222-3333-4444-555555555555"})


def test_cli_report_terminal_and_html(daemon, short_tmp) -> None:
    s = _session_with_history(daemon)
    cli = [sys.executable, "-m", "ctxlifed.cli.main", "report", "--session", s.sid]
    r = subprocess.run(cli, env=daemon.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "context  " in r.stdout and "130,000" in r.stdout and "so far" in r.stdout
    out = short_tmp / "r.html"
    r = subprocess.run([*cli, "--html", str(out)], env=daemon.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="context-line"' in page and 'id="cost-line"' in page
    assert os.stat(out).st_mode & 0o777 == 0o600
    r = subprocess.run([*cli, "--open"], env=daemon.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--open needs --html" in r.stderr


# -- the SVG builder (pure) ---------------------------------------------------------------------------
def _report(**kw: Any) -> dict[str, Any]:
    r = {"session": "abcdef12-0000", "project": "/p", "model": "claude-sonnet-4-5", "window": 200_000,
         "zones": [{"name": "System", "capacity": 20_000, "used": 15_000, "pct": 0.75},
                   {"name": "Ledger", "capacity": 20_000, "used": 1_000, "pct": 0.05},
                   {"name": "Working", "capacity": 130_000, "used": 90_000, "pct": 0.69},
                   {"name": "Buffer", "capacity": 30_000, "used": 0, "pct": 0.0}],
         "thresholds": [0.6, 0.75, 0.9], "autocompact_at": 167_000, "first_ts": 1000.0, "last_ts": 2000.0,
         "samples": [[1000.0, 15_000, 0.05], [1300.0, 60_000, 0.2], [1600.0, 150_000, 0.5], [1700.0, 40_000, 0.9],
                     [2000.0, 106_000, 1.2]],
         "phases": [{"phase": "planning", "start": 1000.0, "end": 1400.0},
                    {"phase": "implementation", "start": 1400.0, "end": 2000.0}],
         "compactions": [{"ts": 1650.0, "trigger": "manual", "pre_tokens": 150_000, "post_tokens": 25_000}],
         "largest": [{"kind": "file_reads", "label": "src/<script>alert(1)</script>.py", "tokens": 30_000},
                     {"kind": "tool", "label": "Bash", "tokens": 8_000}],
         "cost": {"model_price": 3.0, "price_source": "default", "prices_taken": C.PRICES_TAKEN, "turns": 5,
                  "usd": 1.2, "live_saved_tokens": 12_000, "live_saved_usd": 0.06, "resident_turn_usd": 0.0318,
                  "savings": [{"action": "/compact", "reason": "/compact saves ≈$0.20 over the next 10 turns",
                               "estimated": True}]}}
    r.update(kw)
    return r


def _points(svg: str, ident: str) -> list[tuple[float, float]]:
    m = re.search(rf'id="{ident}"[^>]*points="([^"]+)"', svg)
    assert m, ident
    return [tuple(float(v) for v in p.split(",")) for p in m.group(1).split()]  # type: ignore[misc]


def _scale(r: dict[str, Any], vmax: float, top: float, height: float) -> RP.Scale:
    return RP.Scale(r["first_ts"], r["last_ts"], vmax, RP.PAD_L, top, RP.W - RP.PAD_L - RP.PAD_R, height)


def test_context_line_reads_back_as_the_series() -> None:
    r = _report()
    svg = RP.render_svg_context(r)
    pts = _points(svg, "context-line")
    sc = _scale(r, 200_000, RP.PAD_T, RP.H - RP.PAD_T - RP.PAD_B)
    # a step line: every sample is a corner at its own x; the value is read back from its y
    corners = [pts[0]] + pts[2::2]
    assert len(corners) == len(r["samples"])
    for (x, y), (ts, ctx, _u) in zip(corners, r["samples"], strict=True):
        assert x == sc.x(ts)
        assert sc.value_at(y) == pytest.approx(ctx, abs=200_000 / 10_000)
    # the level lines sit at System + Ledger used + l x Working capacity
    for name, at in (("L0→L1", 16_000 + 78_000), ("L1→L2", 16_000 + 97_500), ("L2→L3", 16_000 + 117_000)):
        m = re.search(rf'data-level="{name}"[^>]*y1="([\d.]+)"', svg)
        assert m and sc.value_at(float(m.group(1))) == pytest.approx(at, abs=20)
    m = re.search(r'class="autocompact"[^>]*y1="([\d.]+)"', svg)
    assert m and sc.value_at(float(m.group(1))) == pytest.approx(167_000, abs=20)
    # the four zone bands stack to the window
    bands = re.findall(r'data-zone="(\w+)" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert [b[0] for b in bands] == ["System", "Ledger", "Working", "Buffer"]
    assert sc.value_at(float(bands[-1][1])) == pytest.approx(200_000, abs=1)
    # the compaction: before and after
    pre = re.search(r'class="pre_tokens" cx="([\d.]+)" cy="([\d.]+)"', svg)
    post = re.search(r'class="post_tokens" cx="([\d.]+)" cy="([\d.]+)"', svg)
    assert pre and post and float(pre.group(1)) == sc.x(1650.0)
    assert sc.value_at(float(pre.group(2))) == pytest.approx(150_000, abs=20)
    assert sc.value_at(float(post.group(2))) == pytest.approx(25_000, abs=20)
    phases = re.findall(r'data-phase="(\w+)" x="([\d.]+)"', svg)
    assert [p[0] for p in phases] == ["planning", "implementation"] and float(phases[1][1]) == sc.x(1400.0)


def test_cost_line_reads_back_as_the_series() -> None:
    r = _report()
    svg = RP.render_svg_cost(r)
    pts = _points(svg, "cost-line")
    sc = _scale(r, 1.2 * 1.1, 14, RP.COST_H - 14 - RP.PAD_B)
    assert len(pts) == len(r["samples"])
    for (x, y), (ts, _c, u) in zip(pts, r["samples"], strict=True):
        assert x == sc.x(ts) and sc.value_at(y) == pytest.approx(u, abs=0.001)


def test_page_is_self_contained_and_escaped() -> None:
    page = RP.render_html(_report())
    assert "<script" not in page and "&lt;script&gt;" in page
    assert not re.search(r'(src|href)\s*=', page) and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    assert "12,000 tokens kept out" in page and "$1.20 over 5 turns" in page
    assert "/compact saves ≈$0.20" in page


def test_empty_report_renders() -> None:
    r = _report(samples=[], compactions=[], largest=[], phases=[], cost=None)
    page = RP.render_html(r)
    assert 'id="context-line"' not in page and "No items measured yet." in page
    assert "no responses measured yet" in RP.render_terminal(r)


def test_a_context_past_the_window_stays_in_view() -> None:
    r = _report(samples=[[1000.0, 15_000, 0.05], [2000.0, 220_000, 1.0]])
    svg = RP.render_svg_context(r)
    sc = _scale(r, 231_000, RP.PAD_T, RP.H - RP.PAD_T - RP.PAD_B)
    assert sc.value_at(_points(svg, "context-line")[-1][1]) == pytest.approx(220_000, abs=30)


def test_samples_without_a_time_are_not_drawn() -> None:
    r = _report(samples=[[0, 99_000, 0.1], *(_report()["samples"])])
    assert _points(RP.render_svg_context(r), "context-line") == _points(RP.render_svg_context(_report()), "context-line")


def test_status_text_shows_cost_and_overrides() -> None:
    from ctxlifed.cli.main import render_status

    sess = {"session": "s1", "events": 3, "last_ts": 0, "project": "/p", "phase": "testing", "phase_since": 0,
            "context_tokens": 106_000, "window": 200_000, "estimated": False, "working_pct": 0.69, "level": 1,
            "zones": _report()["zones"], "autocompact_at": 90_000, "tokens_to_autocompact": 0,
            "autocompact_env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"},
            "cost": {**_report()["cost"], "last_turn_usd": 0.02, "cache_expired": True, "resume_write_usd": 0.0713}}
    r = {"version": "x", "protocol": 1, "pid": 1, "uptime_s": 1, "socket": "s", "db_path": "d", "db_bytes": 0,
         "wal_bytes": 0, "archive_items": 0, "events": 0, "sessions": [sess]}
    text = render_status(r, 0.0)
    assert "auto-compact at 90,000, 0 tokens away (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=50)" in text
    assert "cost    $1.20 so far over 5 turns · what stays resident costs $0.03 a turn" in text
    assert "re-writes the context (≈$0.07)" in text
    assert "live    compression kept 12,000 tokens out of the window, saving $0.06" in text
    assert "save    /compact saves ≈$0.20 over the next 10 turns (estimate)" in text


def test_terminal_rendering() -> None:
    text = RP.render_terminal(_report(), width=20)
    lines = text.splitlines()
    spark = next(line for line in lines if line.startswith("context  "))[9:]
    # each sample's eighth of the window, rounded up: 15k, 60k, 150k, 40k, 106k of 200k
    assert spark == "▁▃▆▂▅"
    assert "compact  manual: 150,000 → 25,000" in text
    assert "levels   L0→L1 at 94,000, L1→L2 at 113,500, L2→L3 at 133,000; auto-compact at 167,000" in text


# -- rendered by a real browser --------------------------------------------------------------------------
def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered RGB(A) rows of an 8-bit PNG (stdlib zlib only)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        prev = line
    return w, h, rows


def _screenshot(browser: str, html_path: Path, png: Path, profile: str) -> None:
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1200,900",
                    "--hide-scrollbars", f"file://{html_path}"],
                   capture_output=True, timeout=120, check=False)
    assert png.exists(), "the browser wrote no screenshot"


def _inked(rows: list[bytes], x0: int, x1: int, y0: int, y1: int, colour: tuple[int, int, int]) -> int:
    """Pixels within 40 of ``colour`` (per channel) in the box."""
    n = 0
    for row in rows[y0:y1]:
        for x in range(x0, x1):
            r, g, b = row[3 * x], row[3 * x + 1], row[3 * x + 2]
            if abs(r - colour[0]) < 40 and abs(g - colour[1]) < 40 and abs(b - colour[2]) < 40:
                n += 1
    return n


@pytest.mark.skipif(_browser() is None, reason="no Chromium installed (Debian: apt-get install chromium)")
def test_browser_draws_the_chart() -> None:
    browser = _browser()
    assert browser is not None
    with tempfile.TemporaryDirectory(prefix="ctxrep") as tmp:
        base = Path(tmp)
        page = base / "r.html"
        page.write_text(RP.render_html(_report()))
        blank = base / "blank.html"
        blank.write_text(RP.render_html(_report(samples=[], compactions=[], phases=[], zones=[], autocompact_at=0,
                                                thresholds=[])))
        _screenshot(browser, page, base / "r.png", str(base / "profile1"))
        _screenshot(browser, blank, base / "b.png", str(base / "profile2"))
        w, h, rows = _png_pixels((base / "r.png").read_bytes())
        _w, _h, blank_rows = _png_pixels((base / "b.png").read_bytes())
    assert (w, h) == (1200, 900)
    # the chart's region: the context line's ink (#1d3557) and the Working band (#d6f0da) are drawn
    box = (0, w, 0, h)
    line = _inked(rows, *box, (0x1D, 0x35, 0x57))
    band = _inked(rows, *box, (0xD6, 0xF0, 0xDA))
    assert line > 500, line
    assert band > 20_000, band
    assert _inked(blank_rows, *box, (0xD6, 0xF0, 0xDA)) < band // 10
