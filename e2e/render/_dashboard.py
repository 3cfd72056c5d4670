"""The nightly dashboard: the store -> a static, self-contained site (bytes; no I/O here).

    index.html          the latest night of each experiment: every cell's verdict at a glance,
                        regressions first (``#regressions``, an outputs finding among them),
                        its outputs against the reference (``#outputs``), a small history plot
                        per cell, and every night listed (with its outputs findings)
    cell-<slug>.html    one cell: median (min–max) per night coloured by verdict, the change
                        points over its history marked (a line at the night each started),
                        hover: the night's status, build, commit, host; a click opens the
                        night's report
    compare.html        any two nights side by side: every cell's values, change and verdicts
    gsm8k.html          GSM8K per night: strict-match accuracy, documents that changed
    plotly.min.js       plotly's own bundle, written once and loaded by relative path

Plots are plotly figures (``plotly.io.to_html`` without the library); the data each page
needs is inside the page (a browser refuses to read other files from ``file://``), so the
site works offline, from a CI artifact or any static host. ``site_files`` takes the rows the
store returns; ``e2e.commands._dashboard`` reads the store and writes the files.

Every string from the store is data, never markup: any writer of a team's PostgreSQL store
can put anything in a text column. So each one is HTML-escaped (quotes included) where it
enters a page, plot texts too (plotly draws its labels from a subset of HTML); the compare
page's script builds its rows with ``textContent``, never ``innerHTML``; a link is kept only
when it is relative or http(s) (``_link``), so no ``javascript:`` URL reaches an ``href`` or
a click; and the page's own data block cannot close its ``<script>`` (``_json_for_script``).
tests/test_dashboard_hostile.py opens a site built from a store holding hostile strings in
every text column in headless Chromium: no script of theirs runs, no request leaves the page.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from e2e.nightly.settings import GSM8K_METRIC
from e2e.render._nightly import metric_label

__all__ = ["SiteData", "site_files", "write_site", "cell_slug", "plotly_js", "VERDICT_COLOURS"]

VERDICT_COLOURS = {
    "regressed": "#d62728", "improved": "#2ca02c", "noise": "#7f7f7f", "undecided": "#bcbd22",
    "no baseline": "#1f77b4", "new cell": "#1f77b4", "missing": "#ff7f0e",
    "too few runs": "#ff7f0e", "no samples": "#ff7f0e", "not judged": "#c7c7c7",
}
_ORDER = ["regressed", "missing", "too few runs", "no samples", "undecided", "improved", "noise",
          "new cell", "no baseline", "not judged"]
_STATUS_COLOURS = {"pass": "#2ca02c", "regression": "#d62728", "incomplete": "#ff7f0e"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:1200px}
a{color:#0b62c4}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.25em .6em;font-size:14px;text-align:left}
th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums}
.v{display:inline-block;padding:0 .4em;border-radius:3px;color:#fff;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ddd;padding:.4em;width:370px}
.card h4{margin:.1em 0 .3em 0;font-size:14px}nav a{margin-right:1em}
.muted{color:#777;font-size:13px}
"""


@dataclass(frozen=True)
class SiteData:
    """What the site is made of: the store's history frame (``HISTORY_COLUMNS``) and its
    nights, change points, verdict details and GSM8K agreement rows."""

    history: pd.DataFrame
    nights: Sequence[Mapping[str, Any]]
    changes: Sequence[Mapping[str, Any]] = ()
    verdicts: Sequence[Mapping[str, Any]] = ()
    gsm8k: Sequence[Mapping[str, Any]] = ()
    link_base: str | None = None     # URL (or relative path) of the results folder
    title: str = "e2e nightly"


def plotly_js() -> bytes:
    """plotly.js as the ``plotly`` package ships it (no network)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode("utf-8")


def cell_slug(experiment: str, config_hash: str, kind: str, arm: str, concurrency: int,
              spec_mode: str, metric: str) -> str:
    """The cell's page name: its key in file-name characters, at most 160 of them (a long
    key is cut and a hash of the whole key keeps it apart from others)."""
    raw = f"{experiment}-{config_hash[:8]}-{arm}-{kind}-c{concurrency}-{spec_mode}-{metric}"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).lstrip(".")
    if len(slug) > 160:
        slug = slug[:140] + "-" + hashlib.sha256(raw.encode()).hexdigest()[:16]
    return slug


def _e(text: Any) -> str:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    return html.escape(str(text))


def _status(status: str) -> str:
    colour = _STATUS_COLOURS.get(status, "#999")
    return f'<span class="v" style="background:{colour}">{_e(status)}</span>'


def _opt(value: Any, default: str = "—") -> str:
    return _e(value) or default


def _f(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{float(value):.{digits}g}"


def _badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#999")
    return f'<span class="v" style="background:{colour}">{_e(verdict)}</span>'


def _page(title: str, body: str, *, plots: bool = False) -> bytes:
    script = '<script src="plotly.min.js" charset="utf-8"></script>' if plots else ""
    nav = ('<nav><a href="index.html">latest night</a><a href="compare.html">compare nights</a>'
           '<a href="gsm8k.html">GSM8K</a></nav>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}'
            f'</title><style>{_CSS}</style>{script}</head><body>{nav}<h1>{_e(title)}</h1>'
            f"{body}</body></html>\n").encode("utf-8")


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def _safe_url(url: str) -> bool:
    """A relative path or an http(s) URL: what a link of the site may point at (never
    ``javascript:``, ``data:`` or another scheme; no control character, which a browser
    strips before it reads the scheme)."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url) or "\\" in url:
        return False
    scheme = _SCHEME.match(url.strip())
    return scheme is None or scheme.group(1).lower() in ("http", "https")


def _link(base: str | None, rel: Any) -> str | None:
    """``rel`` (relative to the results folder) under ``base``; a night's report.md is
    linked as its HTML view, index.html beside it. None when there is no path, or the link
    would not be a relative path or an http(s) URL (a store's text is anyone's)."""
    if not rel or not isinstance(rel, str):
        return None
    if rel.endswith("/report.md"):
        rel = rel[: -len("report.md")] + "index.html"
    if _SCHEME.match(rel.strip()) or rel.strip().startswith(("/", "\\")):
        return None  # a path relative to the results folder, nothing else
    link = rel if base is None else f"{base.rstrip('/')}/{rel}"
    return link if _safe_url(link) else None


def _json_for_script(payload: Any) -> str:
    """JSON that is safe inside ``<script type=application/json>``: ``<``, ``>`` and ``&``
    written as escapes, so no string can end the script element or open a comment."""
    return (json.dumps(payload, allow_nan=False).replace("<", "\\u003c")
            .replace(">", "\\u003e").replace("&", "\\u0026"))


def _cell_key(r) -> tuple:
    return (r.experiment, r.config_hash, r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric)


def _cell_title(key: tuple) -> str:
    experiment, config_hash, kind, arm, conc, mode, metric = key
    label, unit = metric_label(metric)
    where = f"{arm} GSM8K {mode}" if kind == "gsm8k" else f"{arm} c{conc} {mode}"
    return f"{where} · {label} ({unit})"


def _scale(metric: str) -> float:
    return 100.0 if metric == GSM8K_METRIC else 1.0


def _figure(key: tuple, rows: pd.DataFrame, changes: Sequence[Mapping[str, Any]],
            nights: Mapping[tuple, Mapping[str, Any]], base: str | None, *, small: bool):
    import plotly.graph_objects as go

    metric = key[-1]
    scale = _scale(metric)
    label, unit = metric_label(metric)
    # plotly draws axis labels, hover and annotation texts from a subset of HTML: escape
    # every store string it shows (the dates are category labels)
    med = [float(v) * scale for v in rows["median"]]
    lo = [float(v) * scale for v in rows["low"]]
    hi = [float(v) * scale for v in rows["high"]]
    hover, links = [], []
    for r in rows.itertuples(index=False):
        night = nights.get((r.date, r.experiment, r.config_hash), {})
        commit = r.build_git_commit or r.engine_git_sha
        hover.append("<br>".join(_e(x) for x in [
            f"night {r.date} ({r.night_status})", f"verdict: {r.verdict}"
            + (f" {float(r.pct):+.1f} %" if isinstance(r.pct, float) and not math.isnan(r.pct)
               else ""),
            f"build: {r.engine or 'engine'} {r.engine_version or '?'}",
            f"commit: {str(commit)[:12] if commit else '?'}",
            f"host: {r.host or '?'} · runs: {r.n}"]
            + (["click: the night's report"] if night.get("report_path") else [])))
        links.append(_link(base, night.get("report_path")) or "")
    colours = [VERDICT_COLOURS.get(v, "#999") for v in rows["verdict"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[_e(d) for d in rows["date"]], y=med, mode="lines+markers", name=_e(label),
        error_y={"type": "data", "symmetric": False,
                 "array": [h - m for h, m in zip(hi, med)],
                 "arrayminus": [m - low for m, low in zip(med, lo)], "color": "#aaa"},
        marker={"color": colours, "size": 7 if small else 11,
                "line": {"width": 1, "color": "#333"}},
        line={"color": "#888", "width": 1}, customdata=links,
        hovertext=hover, hoverinfo="text"))
    shapes, notes = [], []
    for c in changes:
        colour = "#d62728" if c.get("worse") else "#2ca02c"
        start = _e(c["start"])
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": start,
                       "x1": start, "y0": 0, "y1": 1,
                       "line": {"color": colour, "width": 2, "dash": "dash"}})
        notes.append({"x": start, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
                      "showarrow": False, "font": {"color": colour, "size": 11},
                      "text": f"change point: started {start} ({float(c['pct']):+.1f} %)"})
    fig.update_layout(
        shapes=shapes, annotations=notes, showlegend=False,
        height=220 if small else 430, margin={"l": 50, "r": 15, "t": 30, "b": 40},
        yaxis={"title": {"text": _e(f"{label} ({unit})")}},
        xaxis={"type": "category"}, template="plotly_white")
    return fig


def _plot_div(fig, div_id: str, *, clickable: bool, bar: bool = True) -> str:
    import plotly.io as pio

    post = ("document.getElementById('{plot_id}').on('plotly_click',function(e){"
            "var u=e.points[0].customdata;if(u){window.location.href=u;}});"
            if clickable else None)
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True,
                               "displayModeBar": "hover" if bar else False},
                       post_script=post)


def site_files(data: SiteData) -> dict[str, bytes]:
    """{file name: bytes} of the whole site (``plotly.min.js`` included)."""
    h = data.history
    files: dict[str, bytes] = {"plotly.min.js": plotly_js()}
    nights = {(n["date"], n["experiment"], n["config_hash"]): n for n in data.nights}
    if h.empty:
        files["index.html"] = _page(data.title, "<p>No nights in the store yet: run "
                                    "<code>e2e nightly</code>.</p>")
        files["compare.html"] = _page("Compare two nights", "<p>No nights.</p>")
        files["gsm8k.html"] = _page("GSM8K per night", "<p>No nights.</p>")
        return files
    latest_changes: dict[tuple, list] = {}
    last_date: dict[tuple, str] = {}
    for r in h.itertuples(index=False):
        key = _cell_key(r)
        last_date[key] = max(last_date.get(key, ""), r.date)
    for c in data.changes:
        key = (c["experiment"], c["config_hash"], c["kind"], c["arm"], int(c["concurrency"]),
               c["spec_mode"], c["metric"])
        if c["date"] == last_date.get(key):  # the change points as the latest night saw them
            latest_changes.setdefault(key, []).append(c)

    cells = {key: rows.sort_values("date") for key, rows in h.groupby(
        ["experiment", "config_hash", "kind", "arm", "concurrency", "spec_mode", "metric"],
        sort=True)}
    for key, rows in cells.items():
        slug = cell_slug(*key)
        fig = _figure(key, rows, latest_changes.get(key, []), nights, data.link_base,
                      small=False)
        table = ["<table><tr><th>night</th><th>status</th><th class=num>median</th>"
                 "<th class=num>min</th><th class=num>max</th><th class=num>runs</th>"
                 "<th>verdict</th><th class=num>change</th><th>baseline</th><th>build</th>"
                 "<th>report</th></tr>"]
        scale = _scale(key[-1])
        for r in rows.itertuples(index=False):
            night = nights.get((r.date, r.experiment, r.config_hash), {})
            report = _link(data.link_base, night.get("report_path"))
            commit = r.build_git_commit or r.engine_git_sha
            pct = f"{float(r.pct):+.1f} %" if not math.isnan(float(r.pct)) else "—"
            table.append(
                f"<tr class=night data-date='{_e(r.date)}' data-verdict='{_e(r.verdict)}'>"
                f"<td>{_e(r.date)}</td><td>{_e(r.night_status)}</td>"
                f"<td class=num>{_f(r.median * scale)}</td><td class=num>{_f(r.low * scale)}</td>"
                f"<td class=num>{_f(r.high * scale)}</td><td class=num>{r.n}</td>"
                f"<td>{_badge(r.verdict)}</td><td class=num>{pct}</td>"
                f"<td>{_opt(r.baseline_date)}</td>"
                f"<td>{_e(r.engine_version or '?')} {_e(str(commit)[:12] if commit else '')}</td>"
                f"<td>{f'<a href={chr(34)}{_e(report)}{chr(34)}>report</a>' if report else '—'}"
                "</td></tr>")
        table.append("</table>")
        cps = latest_changes.get(key, [])
        cp_html = ("<h2>Change points</h2><ul id='changepoints'>" + "".join(
            f"<li class='changepoint' data-start='{_e(c['start'])}'>started <b>{_e(c['start'])}"
            f"</b>: {_f(c['before'])} → {_f(c['after'])} ({float(c['pct']):+.1f} %, p "
            f"{_f(c['p_value'], 3)}){' — <b>regression</b>' if c.get('regression') else ''}"
            f"</li>" for c in cps) + "</ul>") if cps else "<p>No change point over the history.</p>"
        body = (f"<p class=muted>experiment {_e(key[0])} · config {_e(key[1][:12])} · "
                "each point: median (min–max) of the night's reported runs, coloured by its "
                "verdict; dashed lines: change points (where each started). Click a point for "
                "its night's report.</p>"
                + _plot_div(fig, "cell-plot", clickable=True) + cp_html + "<h2>Nights</h2>"
                + "".join(table))
        files[f"cell-{slug}.html"] = _page(_cell_title(key), body, plots=True)

    files["index.html"] = _index(data, cells, nights, latest_changes)
    files["compare.html"] = _compare(data, cells)
    files["gsm8k.html"] = _gsm8k(data)
    return files


def _outputs_checks(night: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A night's outputs checks as stored (``nights.outputs``), each with a ``line`` and a
    ``finding``; what another writer put there otherwise is left out."""
    raw = night.get("outputs")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    return [{"line": str(c["line"]), "finding": c.get("finding") is True}
            for c in raw if isinstance(c, dict) and "line" in c] if isinstance(raw, list) else []


def _outputs_cell(checks: Sequence[Mapping[str, Any]]) -> str:
    if not checks:
        return "—"
    bad = sum(1 for c in checks if c["finding"])
    return (f"<span class=regression>{bad} finding{'s' if bad != 1 else ''}</span>" if bad
            else "no finding")


def _index(data: SiteData, cells, nights, latest_changes) -> bytes:
    h = data.history
    parts = []
    for experiment in sorted(set(h["experiment"])):
        mine = h[h["experiment"] == experiment]
        date = str(mine["date"].max())
        tonight = mine[mine["date"] == date]
        config_hash = str(tonight["config_hash"].iloc[0])
        night = nights.get((date, experiment, config_hash), {})
        status = str(tonight["night_status"].iloc[0])
        report = _link(data.link_base, night.get("report_path"))
        parts.append(f"<h2>{_e(experiment)}: night {_e(date)} {_status(status)}</h2>")
        parts.append(f"<p class=muted>config {_e(config_hash[:12])} · host "
                     f"{_e(night.get('host') or '?')} · baseline "
                     f"{_opt(night.get('baseline_date'), 'none')}"
                     + (f' · <a href="{_e(report)}">full report</a>' if report else "")
                     + "</p>")
        order = {v: i for i, v in enumerate(_ORDER)}
        rows = sorted(tonight.itertuples(index=False),
                      key=lambda r: (order.get(r.verdict, 99), r.arm, r.spec_mode,
                                     r.concurrency, r.metric))
        bad = [r for r in rows if r.verdict == "regressed"]
        cp_bad = [c for key, cs in latest_changes.items() if key[0] == experiment
                  and key[1] == config_hash for c in cs if c.get("regression")]
        items = [f"<li class=regression><a href='cell-{cell_slug(*_cell_key(r))}.html'>"
                 f"{_e(_cell_title(_cell_key(r)))}</a>: {float(r.pct):+.1f} % against "
                 f"{_e(r.baseline_date)}</li>" for r in bad]
        items += [f"<li class=regression>{_e(c['arm'])} c{c['concurrency']} "
                  f"{_e(c['spec_mode'])} {_e(metric_label(c['metric'])[0])}: change point "
                  f"started {_e(c['start'])} ({float(c['pct']):+.1f} %)</li>" for c in cp_bad]
        checks = _outputs_checks(night)
        items += [f"<li class=regression>outputs: {_e(c['line'])}</li>" for c in checks
                  if c["finding"]]
        parts.append("<h3>Regressions</h3><ul id='regressions' data-experiment='"
                     f"{_e(experiment)}'>" + ("".join(items) or
                                              "<li class=none>none tonight</li>") + "</ul>")
        if checks:
            parts.append("<h3>Outputs against the reference</h3><ul id='outputs'>" + "".join(
                f"<li class={'regression' if c['finding'] else 'none'}>{_e(c['line'])}</li>"
                for c in checks) + "</ul>")
        table = ["<table class=verdicts><tr><th>cell</th><th>metric</th><th>verdict</th>"
                 "<th class=num>tonight</th><th class=num>change</th><th>baseline night</th>"
                 "</tr>"]
        for r in rows:
            key = _cell_key(r)
            label, unit = metric_label(r.metric)
            where = f"{r.arm} GSM8K {r.spec_mode}" if r.kind == "gsm8k" else \
                f"{r.arm} c{r.concurrency} {r.spec_mode}"
            pct = f"{float(r.pct):+.1f} %" if not math.isnan(float(r.pct)) else "—"
            table.append(f"<tr data-verdict='{_e(r.verdict)}'><td><a href='cell-{cell_slug(*key)}"
                         f".html'>{_e(where)}</a></td><td>{_e(label)} ({_e(unit)})</td>"
                         f"<td>{_badge(r.verdict)}</td>"
                         f"<td class=num>{_f(r.median * _scale(r.metric))}</td>"
                         f"<td class=num>{pct}</td><td>{_opt(r.baseline_date)}</td></tr>")
        table.append("</table>")
        parts += ["<h3>Every cell tonight</h3>", "".join(table), "<h3>History</h3>",
                  "<div class=grid>"]
        latest_verdict = {_cell_key(r): r.verdict for r in rows}
        mine_cells = sorted((k for k in cells if k[0] == experiment and k[1] == config_hash),
                            key=lambda k: (order.get(latest_verdict.get(k, ""), 99), k))
        for key in mine_cells:
            cell_rows = cells[key]
            if set(cell_rows["verdict"]) == {"not judged"} and len(cells) > 24:
                continue  # keep the page light: unjudged metrics are on their own pages
            fig = _figure(key, cell_rows, latest_changes.get(key, []), nights, data.link_base,
                          small=True)
            slug = cell_slug(*key)
            parts.append(f"<div class=card><h4><a href='cell-{slug}.html'>"
                         f"{_e(_cell_title(key))}</a></h4>"
                         + _plot_div(fig, f"plot-{slug}", clickable=False, bar=False).replace(
                             "<div id=", "<div class='cell-plot' id=", 1) + "</div>")
        parts.append("</div>")
    listing = ["<h2>Every night</h2><table id=nights><tr><th>night</th><th>experiment</th>"
               "<th>config</th><th>status</th><th>outputs</th><th>host</th><th>baseline</th>"
               "<th>report</th></tr>"]
    for n in sorted(data.nights, key=lambda n: (n["date"], n["experiment"]), reverse=True):
        report = _link(data.link_base, n.get("report_path"))
        listing.append(f"<tr><td>{_e(n['date'])}</td><td>{_e(n['experiment'])}</td>"
                       f"<td>{_e(n['config_hash'][:12])}</td><td>{_status(n['status'])}</td>"
                       f"<td>{_outputs_cell(_outputs_checks(n))}</td>"
                       f"<td>{_e(n.get('host') or '?')}</td>"
                       f"<td>{_opt(n.get('baseline_date'))}</td><td>"
                       + (f'<a href="{_e(report)}">report</a>' if report else "—")
                       + "</td></tr>")
    listing.append("</table>")
    return _page(data.title, "".join(parts) + "".join(listing), plots=True)


_COMPARE_JS = r"""
var D=JSON.parse(document.getElementById('data').textContent);
function el(tag,text,cls){var e=document.createElement(tag);if(text!==undefined&&text!==null)e.textContent=String(text);if(cls)e.className=cls;return e;}
function fill(sel,def){D.nights.forEach(function(n,i){sel.appendChild(el('option',n.date+' · '+n.experiment+' · '+String(n.config_hash).slice(0,8)+' · '+n.status)).value=i;});
sel.value=(def>=0&&def<D.nights.length)?def:D.nights.length-1;}
var a=document.getElementById('a'),b=document.getElementById('b');
var q=new URLSearchParams(window.location.search);
function arg(k,d){var v=parseInt(q.get(k),10);return isNaN(v)?d:v;}
fill(a,arg('a',Math.max(0,D.nights.length-2)));fill(b,arg('b',D.nights.length-1));
function fmt(x){return (x===null||x===undefined)?'—':Number(x).toPrecision(4);}
function row(cells,head){var tr=document.createElement('tr');cells.forEach(function(c){tr.appendChild(el(head?'th':'td',c[0],c[1]));});return tr;}
function side(label,n){var li=el('li',label+': '+n.date+' · '+n.experiment+' · '+n.status+' · build '+n.build+' · host '+n.host);
if(n.report){li.appendChild(document.createTextNode(' · '));var l=el('a','report');l.setAttribute('href',n.report);li.appendChild(l);}return li;}
function draw(){var A=D.nights[a.value],B=D.nights[b.value];if(!A||!B)return;var rows=[],xs=[],ys=[];
var keys=Object.keys(Object.assign({},D.cells[A.id]||{},D.cells[B.id]||{})).sort();
keys.forEach(function(k){var x=(D.cells[A.id]||{})[k],y=(D.cells[B.id]||{})[k];
var ch=(x&&y&&x.median)?(y.median/x.median-1)*100:null;
rows.push(row([[k],[fmt(x?x.median:null),'num'],[x?x.verdict:'—'],[fmt(y?y.median:null),'num'],[y?y.verdict:'—'],
[ch===null?'—':(ch>=0?'+':'')+ch.toFixed(1)+' %','num']]));if(ch!==null){xs.push(ch);ys.push(k);}});
document.getElementById('sides').replaceChildren(side('A',A),side('B',B));
document.getElementById('table').replaceChildren(row([['cell · metric'],[A.date],['verdict'],[B.date],['verdict'],['change of the median']],true),...rows);
Plotly.react('compare-plot',[{type:'bar',orientation:'h',x:xs,y:ys.map(function(k){return el('i',k).innerHTML;}),marker:{color:xs.map(function(v){return v>0?'#d62728':'#2ca02c';})}}],
{height:120+22*ys.length,margin:{l:380,r:20,t:20,b:40},xaxis:{title:{text:el('i',B.date+' against '+A.date+' (%)').innerHTML}},template:'plotly_white'},{displaylogo:false});}
a.onchange=draw;b.onchange=draw;draw();
"""


def _compare(data: SiteData, cells) -> bytes:
    nights = sorted(data.nights, key=lambda n: (n["date"], n["experiment"]))
    per: dict[int, dict[str, Any]] = {}
    ids = {(n["date"], n["experiment"], n["config_hash"]): i for i, n in enumerate(nights)}
    for r in data.history.itertuples(index=False):
        i = ids.get((r.date, r.experiment, r.config_hash))
        if i is None:
            continue
        label, unit = metric_label(r.metric)
        where = f"{r.arm} GSM8K {r.spec_mode}" if r.kind == "gsm8k" else \
            f"{r.arm} c{r.concurrency} {r.spec_mode}"
        med = float(r.median) * _scale(r.metric)
        per.setdefault(i, {})[f"{where} · {label} ({unit})"] = {
            "median": med if math.isfinite(med) else None, "verdict": r.verdict}
    builds: dict[tuple, str] = {}
    for r in data.history.itertuples(index=False):
        commit = r.build_git_commit or r.engine_git_sha
        builds.setdefault((r.date, r.experiment, r.config_hash),
                          f"{r.engine_version or '?'} {str(commit)[:12] if commit else ''}".strip())
    payload = {"nights": [{"id": i, "date": n["date"], "experiment": n["experiment"],
                           "config_hash": n["config_hash"], "status": n["status"],
                           "host": n.get("host") or "?",
                           "build": builds.get((n["date"], n["experiment"], n["config_hash"]), "?"),
                           "report": _link(data.link_base, n.get("report_path"))}
                          for i, n in enumerate(nights)], "cells": per}
    text = _json_for_script(payload)
    body = ("<p>Night A <select id=a></select> against night B <select id=b></select> "
            "<span class=muted>(the medians of each cell; the verdicts are each night's "
            "against its own baseline)</span></p><ul id=sides></ul><div id='compare-plot'></div>"
            "<table id=table></table>"
            f"<script type='application/json' id='data'>{text}</script>"
            f"<script>{_COMPARE_JS}</script>")
    return _page("Compare two nights", body, plots=True)


def _gsm8k(data: SiteData) -> bytes:
    import plotly.graph_objects as go

    rows = [r for r in data.gsm8k]
    if not rows:
        return _page("GSM8K per night", "<p>No GSM8K documents in the store (enable "
                     "<code>[nightly.gsm8k]</code>).</p>")
    g_verdicts = {(v["date"], v["experiment"], v["config_hash"], v["arm"]): v
                  for v in data.verdicts if v["kind"] == "gsm8k"}
    table = ["<table id=gsm8k><tr><th>night</th><th>experiment</th><th>arm folder</th>"
             "<th class=num>documents</th><th class=num>strict right</th><th class=num>"
             "accuracy</th><th class=num>lost / gained vs the night before</th>"
             "<th>verdict</th><th class=num>McNemar p</th></tr>"]
    fig = go.Figure()
    series: dict[tuple, tuple[list, list]] = {}
    for r in rows:
        acc = r["right"] / r["documents"] * 100 if r["documents"] else float("nan")
        v = g_verdicts.get((r["date"], r["experiment"], r["config_hash"], r["arm"]))
        changed = (f"{r['lost']} / {r['gained']} of {r['shared']}" if "lost" in r else "—")
        table.append(f"<tr><td>{_e(r['date'])}</td><td>{_e(r['experiment'])}</td>"
                     f"<td>{_e(r['run_dir'])}</td><td class=num>{r['documents']}</td>"
                     f"<td class=num>{r['right']}</td><td class=num>{acc:.1f} %</td>"
                     f"<td class=num>{changed}</td>"
                     f"<td>{_badge(v['verdict']) if v else '—'}</td>"
                     f"<td class=num>{_f(v.get('p_value') if v else None, 3)}</td></tr>")
        if r.get("first"):  # each arm's first fresh server of the night
            xs, ys = series.setdefault((r["experiment"], r["arm"]), ([], []))
            xs.append(_e(r["date"]))
            ys.append(acc)
    for (experiment, arm), (xs, ys) in series.items():
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=_e(f"{experiment} {arm}")))
    fig.update_layout(height=330, yaxis={"title": {"text": "strict-match accuracy (%)"}},
                      xaxis={"type": "category"}, template="plotly_white",
                      margin={"l": 50, "r": 15, "t": 20, "b": 40})
    table.append("</table>")
    return _page("GSM8K per night", _plot_div(fig, "gsm8k-plot", clickable=False)
                 + "<p class=muted>Lost / gained: documents right the night before and wrong "
                 "this night, and the other way, on the documents both nights share (each "
                 "arm's first fresh server).</p>" + "".join(table), plots=True)


def write_site(files: Mapping[str, bytes], out: Path) -> list[Path]:
    """Write the site's files under ``out`` (atomically, one by one); returns their paths."""
    from e2e.paths import atomic_write_bytes

    paths = []
    for name, data in files.items():
        atomic_write_bytes(Path(out) / name, data)
        paths.append(Path(out) / name)
    return paths
