"""A session as a picture: one self-contained HTML page (inline SVG) and a terminal rendering.

Rules:
- Pure and stdlib only (``ctxlifectl report`` renders the ``report`` method's result, a plain dict,
  and the CLI loads neither msgspec nor the server side). No clock: times come from the data.
- Self-contained: no script, no network, no external asset (no URL in any ``src``/``href``); every text
  from the data is HTML-escaped.
- Geometry is one path: :class:`Scale` maps (ts, value) to pixels for every mark of a chart, so a
  number drawn can be read back from its coordinates (the tests do).
- The context chart spans the model's window (or 5 % above the peak, if the context ever exceeded it);
  the time axis spans the responses. Drawn: the four zone bands (System, Ledger, Working, Buffer:
  their capacities stacked from 0), the level lines (System + Ledger used + l x Working capacity, as
  the budget computes the level), the auto-compaction line, phase bands along the top, compactions as
  a vertical line with the size before and after, and the context size after every response (a step
  line). A second chart draws the cost so far; a bar chart the largest items.
- Bounded: at most :data:`MAX_POINTS` samples, :data:`MAX_MARKS` compactions and phases,
  :data:`MAX_BARS` largest items are drawn.
- Money and figures use the same formats as ``status`` (``core.figures``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxlifed.core.figures import level_name, percent, tokens, usd

__all__ = ["Scale", "level_lines", "render_html", "render_svg_context", "render_svg_cost", "render_terminal"]

MAX_POINTS = 2048
MAX_MARKS = 200
MAX_BARS = 10
W, H = 1100, 380  # context chart
PAD_L, PAD_R, PAD_T, PAD_B = 80, 20, 34, 36
COST_H = 220
ZONE_COLOURS = {"System": "#cfe0f5", "Ledger": "#e3d7f5", "Working": "#d6f0da", "Buffer": "#fbe0cc"}
PHASE_COLOURS = ("#8ecae6", "#ffb703", "#90be6d", "#f28482", "#b8b8ff", "#adb5bd")
LINE = "#1d3557"
COST_LINE = "#2a9d8f"
AUTO_LINE = "#d62828"
LEVEL_LINE = "#6c757d"


@dataclass(frozen=True)
class Scale:
    """Data -> pixels for one chart: x from time, y from value (0 at the bottom)."""

    t0: float
    t1: float
    vmax: float
    left: float
    top: float
    width: float
    height: float

    def x(self, ts: float) -> float:
        span = self.t1 - self.t0
        f = 0.5 if span <= 0 else (ts - self.t0) / span
        return round(self.left + min(max(f, 0.0), 1.0) * self.width, 2)

    def y(self, v: float) -> float:
        f = 0.0 if self.vmax <= 0 else v / self.vmax
        return round(self.top + self.height - min(max(f, 0.0), 1.0) * self.height, 2)

    def value_at(self, y: float) -> float:
        """The value drawn at pixel row ``y`` (the inverse of :meth:`y`)."""
        return (self.top + self.height - y) / self.height * self.vmax


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _samples(r: dict[str, Any]) -> list[tuple[float, int, float]]:
    out = []
    for s in (r.get("samples") or [])[-MAX_POINTS:]:
        if isinstance(s, (list, tuple)) and len(s) >= 3 and s[0] > 0:  # a response without a time: not drawn
            out.append((float(s[0]), int(s[1]), float(s[2])))
    return sorted(out, key=lambda s: s[0])


def _span(r: dict[str, Any], samples: Sequence[tuple[float, int, float]]) -> tuple[float, float]:
    """The time axis: the responses' span (transcript times); the session's first and last event
    only without responses (phases and compactions outside it are drawn at its edges)."""
    ts = [s[0] for s in samples]
    if len(ts) >= 2:
        return min(ts), max(ts)
    for key in ("first_ts", "last_ts"):
        v = r.get(key)
        if isinstance(v, (int, float)) and v > 0:
            ts.append(float(v))
    if not ts:
        return 0.0, 1.0
    return min(ts), max(ts)


def _time(ts: float, t0: float) -> str:
    """Elapsed time since the session's start, as m:ss or h:mm."""
    s = max(int(ts - t0), 0)
    return f"{s // 3600}h{s % 3600 // 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def level_lines(r: dict[str, Any]) -> list[tuple[str, int]]:
    """(level name, context size) where each level starts, from the zones and thresholds."""
    zones = {z.get("name"): z for z in r.get("zones") or []}
    if "Working" not in zones:
        return []
    base = int(zones.get("System", {}).get("used", 0)) + int(zones.get("Ledger", {}).get("used", 0))
    cap = int(zones["Working"].get("capacity", 0))
    return [(level_name(i + 1), base + round(t * cap)) for i, t in enumerate((r.get("thresholds") or [])[:3])]


def render_svg_context(r: dict[str, Any]) -> str:
    """The context chart: zones, levels, auto-compaction, phases, compactions, context size."""
    samples = _samples(r)
    t0, t1 = _span(r, samples)
    window = int(r.get("window") or 0)
    peak = max([s[1] for s in samples] + [1])
    vmax = window if peak <= window else round(peak * 1.05)  # a context past the window stays in view
    sc = Scale(t0, t1, vmax, PAD_L, PAD_T, W - PAD_L - PAD_R, H - PAD_T - PAD_B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="context-chart" width="{W}" height="{H}"'
           f' viewBox="0 0 {W} {H}" role="img" aria-label="context size over time">',
           f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>']
    lo = 0
    for z in r.get("zones") or []:
        cap = int(z.get("capacity", 0))
        name = str(z.get("name", ""))
        y_top, y_bot = sc.y(lo + cap), sc.y(lo)
        out.append(f'<rect class="zone" data-zone="{_esc(name)}" x="{sc.left}" y="{y_top}" width="{sc.width}"'
                   f' height="{round(y_bot - y_top, 2)}" fill="{ZONE_COLOURS.get(name, "#eeeeee")}"/>')
        out.append(f'<text x="{sc.left + sc.width - 6}" y="{round(y_top + 14, 2)}" text-anchor="end" font-size="11"'
                   f' fill="#555">{_esc(name)} {tokens(cap)}</text>')
        lo += cap
    for name, at in level_lines(r):
        y = sc.y(at)
        out.append(f'<line class="level" data-level="{_esc(name)}" x1="{sc.left}" x2="{sc.left + sc.width}"'
                   f' y1="{y}" y2="{y}" stroke="{LEVEL_LINE}" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{sc.left + 4}" y="{round(y - 3, 2)}" font-size="11" fill="{LEVEL_LINE}">'
                   f'{_esc(name)} at {tokens(at)}</text>')
    auto = int(r.get("autocompact_at") or 0)
    if auto:
        y = sc.y(auto)
        out.append(f'<line class="autocompact" x1="{sc.left}" x2="{sc.left + sc.width}" y1="{y}" y2="{y}"'
                   f' stroke="{AUTO_LINE}" stroke-width="1.5" stroke-dasharray="8 4"/>')
        out.append(f'<text x="{sc.left + sc.width / 2}" y="{round(y - 4, 2)}" font-size="11" fill="{AUTO_LINE}"'
                   f' text-anchor="middle">auto-compact at {tokens(auto)}</text>')
    for i, ph in enumerate((r.get("phases") or [])[:MAX_MARKS]):
        start = float(ph.get("start") or t0)
        end = float(ph.get("end") or t1)
        x0, x1 = sc.x(start), sc.x(end)
        colour = PHASE_COLOURS[i % len(PHASE_COLOURS)]
        out.append(f'<rect class="phase" data-phase="{_esc(ph.get("phase", ""))}" x="{x0}" y="{PAD_T - 22}"'
                   f' width="{round(max(x1 - x0, 1), 2)}" height="18" fill="{colour}" opacity="0.85"/>')
        out.append(f'<text x="{round(x0 + 3, 2)}" y="{PAD_T - 9}" font-size="11" fill="#111">'
                   f'{_esc(ph.get("phase", ""))}</text>')
    # axes
    out.append(f'<line x1="{sc.left}" x2="{sc.left}" y1="{sc.top}" y2="{sc.top + sc.height}" stroke="#333"/>')
    out.append(f'<line x1="{sc.left}" x2="{sc.left + sc.width}" y1="{sc.top + sc.height}"'
               f' y2="{sc.top + sc.height}" stroke="#333"/>')
    for k in range(5):
        v = vmax * k / 4
        y = sc.y(v)
        out.append(f'<text x="{sc.left - 6}" y="{round(y + 4, 2)}" text-anchor="end" font-size="11">'
                   f'{tokens(round(v))}</text>')
    for k in range(5):
        ts = t0 + (t1 - t0) * k / 4
        out.append(f'<text x="{sc.x(ts)}" y="{H - PAD_B + 16}" text-anchor="middle" font-size="11">'
                   f'{_time(ts, t0)}</text>')
    if samples:
        pts = []
        prev_y: float | None = None
        for ts, ctx, _u in samples:
            x, y = sc.x(ts), sc.y(ctx)
            if prev_y is not None:
                pts.append(f"{x},{prev_y}")  # step: the size holds until the next response
            pts.append(f"{x},{y}")
            prev_y = y
        out.append(f'<polyline id="context-line" fill="none" stroke="{LINE}" stroke-width="2"'
                   f' points="{" ".join(pts)}"/>')
    for c in (r.get("compactions") or [])[:MAX_MARKS]:
        ts = c.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        x = sc.x(ts)
        out.append(f'<line class="compaction" x1="{x}" x2="{x}" y1="{sc.top}" y2="{sc.top + sc.height}"'
                   f' stroke="#e76f51" stroke-width="1.5"/>')
        for key, fill in (("pre_tokens", "#e76f51"), ("post_tokens", "#2a9d8f")):
            v = c.get(key)
            if isinstance(v, int):
                out.append(f'<circle class="{key}" cx="{x}" cy="{sc.y(v)}" r="4" fill="{fill}">'
                           f'<title>{"before" if key == "pre_tokens" else "after"}: {tokens(v)}</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def render_svg_cost(r: dict[str, Any]) -> str:
    """The cost chart: USD so far after every response."""
    samples = _samples(r)
    t0, t1 = _span(r, samples)
    vmax = max([s[2] for s in samples] + [0.0])
    vmax = vmax * 1.1 if vmax > 0 else 1.0
    sc = Scale(t0, t1, vmax, PAD_L, 14, W - PAD_L - PAD_R, COST_H - 14 - PAD_B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="cost-chart" width="{W}" height="{COST_H}"'
           f' viewBox="0 0 {W} {COST_H}" role="img" aria-label="cost over time">',
           f'<rect x="0" y="0" width="{W}" height="{COST_H}" fill="#ffffff"/>',
           f'<line x1="{sc.left}" x2="{sc.left}" y1="{sc.top}" y2="{sc.top + sc.height}" stroke="#333"/>',
           f'<line x1="{sc.left}" x2="{sc.left + sc.width}" y1="{sc.top + sc.height}" y2="{sc.top + sc.height}"'
           f' stroke="#333"/>']
    for k in range(3):
        v = vmax * k / 2
        out.append(f'<text x="{sc.left - 6}" y="{round(sc.y(v) + 4, 2)}" text-anchor="end" font-size="11">'
                   f'{_esc(usd(v))}</text>')
    if samples:
        pts = " ".join(f"{sc.x(ts)},{sc.y(u)}" for ts, _c, u in samples)
        out.append(f'<polyline id="cost-line" fill="none" stroke="{COST_LINE}" stroke-width="2" points="{pts}"/>')
    out.append("</svg>")
    return "\n".join(out)


def _svg_largest(items: Sequence[dict[str, Any]]) -> str:
    rows = [i for i in items if isinstance(i.get("tokens"), int)][:MAX_BARS]
    if not rows:
        return "<p>No items measured yet.</p>"
    h = 24 * len(rows) + 10
    top = max(i["tokens"] for i in rows) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="largest-chart" width="{W}" height="{h}"'
           f' viewBox="0 0 {W} {h}">']
    for n, i in enumerate(rows):
        y = 5 + 24 * n
        wbar = round(600 * i["tokens"] / top, 2)
        out.append(f'<rect class="item" x="360" y="{y}" width="{max(wbar, 1)}" height="18" fill="#457b9d"/>')
        label = str(i.get("label", ""))
        label = label if len(label) <= 50 else "…" + label[-49:]
        out.append(f'<text x="354" y="{y + 14}" text-anchor="end" font-size="12">{_esc(i.get("kind", ""))}:'
                   f' {_esc(label)}</text>')
        out.append(f'<text x="{round(366 + wbar, 2)}" y="{y + 14}" font-size="12">{tokens(i["tokens"])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _cost_rows(c: dict[str, Any] | None) -> list[tuple[str, str]]:
    if not c:
        return []
    rows = [
        ("price", f"{usd(c.get('model_price', 0))}/MTok input ({c.get('price_source', '?')},"
                  f" list prices of {c.get('prices_taken', '?')}); cache reads 0.1×, writes 1.25×"),
        ("so far", f"{usd(c.get('usd', 0))} over {c.get('turns', 0)} turns: input {tokens(c.get('input_tokens', 0))},"
                   f" cache writes {tokens(c.get('cache_write_tokens', 0))}, cache reads"
                   f" {tokens(c.get('cache_read_tokens', 0))}, output {tokens(c.get('output_tokens', 0))}"),
        ("per turn", f"what stays resident: {usd(c.get('resident_turn_usd', 0))} a turn (cache read);"
                     f" last turn {usd(c.get('last_turn_usd', 0))}"),
    ]
    if c.get("cache_expired"):
        rows.append(("resume", "the prompt cache has likely expired: the next turn re-writes the context"
                     + (f" (≈{usd(c['resume_write_usd'])})" if c.get("resume_write_usd") is not None else "")))
    rows.append(("live compression", f"{tokens(c.get('live_saved_tokens', 0))} tokens kept out,"
                                     f" {usd(c.get('live_saved_usd', 0))} saved"))
    for s in c.get("savings") or []:
        rows.append((s.get("action", ""), s.get("reason", "") + (" (estimate)" if s.get("estimated") else "")))
    return rows


def render_html(r: dict[str, Any]) -> str:
    """The whole page for one session (self-contained)."""
    samples = _samples(r)
    title = f"ctxlifed report · session {str(r.get('session', ''))[:8]}"
    last_ctx = samples[-1][1] if samples else None
    summary = [
        ("session", r.get("session", "")),
        ("project", r.get("project", "")),
        ("model", r.get("model") or "unknown"),
        ("window", tokens(int(r.get("window") or 0))),
        ("context now", "unknown" if last_ctx is None else
         f"{tokens(last_ctx)} ({percent(last_ctx / max(int(r.get('window') or 1), 1))} of the window)"),
        ("auto-compact at", tokens(int(r.get("autocompact_at") or 0))),
        ("compactions", str(len(r.get("compactions") or []))),
    ]
    table = "\n".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in summary)
    cost = "\n".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in _cost_rows(r.get("cost")))
    comps = "\n".join(
        f"<tr><td>{_esc(_time(float(c['ts']), _span(r, samples)[0]))}</td><td>{_esc(c.get('trigger') or '')}</td>"
        f"<td>{_esc(tokens(c['pre_tokens']) if isinstance(c.get('pre_tokens'), int) else '?')}</td>"
        f"<td>{_esc(tokens(c['post_tokens']) if isinstance(c.get('post_tokens'), int) else '?')}</td></tr>"
        for c in (r.get("compactions") or [])[:MAX_MARKS] if isinstance(c.get("ts"), (int, float)))
    legend = " ".join(f'<span class="sw" style="background:{col}"></span>{_esc(n)}' for n, col in ZONE_COLOURS.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:20px;color:#222;background:#fff}}
table{{border-collapse:collapse;margin:8px 0 16px}}th,td{{text-align:left;padding:2px 10px;font-size:13px}}
th{{color:#555;font-weight:600}}h2{{font-size:16px;margin:18px 0 6px}}
.sw{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}}
</style></head><body>
<h1 style="font-size:20px">{_esc(title)}</h1>
<table>{table}</table>
<h2>Context size over time</h2>
<div>{legend}<span class="sw" style="background:{LINE}"></span>context
<span class="sw" style="background:{AUTO_LINE}"></span>auto-compaction
<span class="sw" style="background:#e76f51"></span>compaction (before)
<span class="sw" style="background:#2a9d8f"></span>(after)</div>
{render_svg_context(r)}
<h2>Cost so far</h2>
{render_svg_cost(r)}
<table>{cost}</table>
<h2>Compactions</h2>
<table><tr><th>at</th><th>trigger</th><th>before</th><th>after</th></tr>{comps}</table>
<h2>Largest items in the window</h2>
{_svg_largest(r.get("largest") or [])}
</body></html>
"""


SPARK = " ▁▂▃▄▅▆▇█"


def _spark(values: Sequence[float], vmax: float, width: int) -> str:
    if not values:
        return ""
    if len(values) > width:  # the largest value per column: peaks stay visible
        step = len(values) / width
        values = [max(values[int(i * step):max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    top = vmax if vmax > 0 else 1
    return "".join(SPARK[min(max(math.ceil(v / top * (len(SPARK) - 1)), 0), len(SPARK) - 1)] for v in values)


def render_terminal(r: dict[str, Any], width: int = 72) -> str:
    """The report as text: sparklines of context and cost, compactions, largest items, cost."""
    samples = _samples(r)
    window = int(r.get("window") or 0)
    lines = [f"session {r.get('session', '')} · {r.get('project', '')} · model {r.get('model') or 'unknown'}"]
    if samples:
        t0, t1 = _span(r, samples)
        peak = max(s[1] for s in samples)
        lines.append(f"context  {_spark([s[1] for s in samples], window or peak, width)}")
        lines.append(f"         0 → {tokens(window)} (window); now {tokens(samples[-1][1])}, peak {tokens(peak)},"
                     f" {len(samples)} responses over {_time(t1, t0)}")
        lines.append(f"cost     {_spark([s[2] for s in samples], samples[-1][2], width)}")
    else:
        lines.append("no responses measured yet")
    lines.append(f"zones    " + ", ".join(f"{z.get('name')} {tokens(int(z.get('capacity', 0)))}"
                                         for z in r.get("zones") or []))
    lv = level_lines(r)
    if lv:
        lines.append("levels   " + ", ".join(f"{n} at {tokens(t)}" for n, t in lv)
                     + f"; auto-compact at {tokens(int(r.get('autocompact_at') or 0))}")
    phases = r.get("phases") or []
    if phases:
        lines.append("phases   " + " → ".join(str(p.get("phase", "")) for p in phases[-8:]))
    for c in (r.get("compactions") or [])[-5:]:
        pre, post = c.get("pre_tokens"), c.get("post_tokens")
        lines.append(f"compact  {c.get('trigger') or '?'}: {tokens(pre) if isinstance(pre, int) else '?'}"
                     f" → {tokens(post) if isinstance(post, int) else '?'}")
    for i in (r.get("largest") or [])[:5]:
        lines.append(f"largest  {tokens(int(i.get('tokens', 0))):>9}  {i.get('kind', '')}: {i.get('label', '')}")
    for k, v in _cost_rows(r.get("cost")):
        lines.append(f"{k:<8} {v}" if len(k) <= 8 else f"{k}: {v}")
    return "\n".join(lines)
