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

The pages are Jinja2 templates (``templates/*.html.j2``, package data) filled from the rows
the store returns; plots are plotly figures (``plotly.io.to_html`` without the library). The
data each page needs is inside the page (a browser refuses to read other files from
``file://``), so the site works offline, from a CI artifact or any static host.
``site_files`` takes the rows the store returns; ``e2e.commands._dashboard`` reads the store
and writes the files.

Every string from the store is data, never markup: any writer of a team's PostgreSQL store
can put anything in a text column. So the templates autoescape (quotes included) every value
they write; plot texts are HTML-escaped here (``_plot_text``: plotly draws its labels from a
subset of HTML); the compare page's script builds its rows with ``textContent``, never
``innerHTML``; a link is kept only when it is relative or http(s) (``e2e.names.safe_link``,
through ``report_link``, the templates' filter), so no ``javascript:`` URL reaches an
``href`` or a click; and the page's own data block cannot close its ``<script>``
(``_json_for_script``, the ``script_json`` filter). tests/test_dashboard_hostile.py opens a
site built from a store holding hostile strings in every text column in headless Chromium:
no script of theirs runs, no request leaves the page.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from e2e.names import safe_link
from e2e.render.nightly import metric_label
from e2e.results import (GSM8K_METRIC, GSM8KAgreement, HistoryCell, StoredChangePoint,
                         StoredNight, StoredVerdict)

__all__ = ["SiteData", "site_files", "write_site", "report_link", "cell_slug", "plotly_js", "VERDICT_COLOURS"]

VERDICT_COLOURS = {
    "regressed": "#d62728", "improved": "#2ca02c", "noise": "#7f7f7f", "undecided": "#bcbd22",
    "no baseline": "#1f77b4", "new cell": "#1f77b4", "missing": "#ff7f0e",
    "too few runs": "#ff7f0e", "no samples": "#ff7f0e", "not judged": "#c7c7c7",
}
_ORDER = ["regressed", "missing", "too few runs", "no samples", "undecided", "improved", "noise",
          "new cell", "no baseline", "not judged"]
_STATUS_COLOURS = {"pass": "#2ca02c", "regression": "#d62728", "incomplete": "#ff7f0e",
                   "undecided": "#bcbd22", "blind": "#404040"}


@dataclass(frozen=True)
class SiteData:
    """What the site is made of: the store's records, its night cells (``Store.cells``) and
    its nights, change points, verdicts and GSM8K agreement."""

    history: Sequence[HistoryCell]
    nights: Sequence[StoredNight]
    changes: Sequence[StoredChangePoint] = ()
    verdicts: Sequence[StoredVerdict] = ()
    gsm8k: Sequence[GSM8KAgreement] = ()
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


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _shown(value: Any) -> Any:
    """The templates' ``finalize``: a missing value (None, NaN) is written as nothing."""
    return "" if _missing(value) else value


def _blank_as(value: Any, default: str = "—") -> Any:
    """The ``blank_as`` filter: ``default`` for a missing or empty value."""
    return default if _missing(value) or str(value) == "" else value


def _plot_text(text: Any) -> str:
    """A store string for a plotly label, hover or annotation (plotly draws them from a
    subset of HTML, outside the templates' autoescape): HTML-escaped, quotes included."""
    return "" if _missing(text) else html.escape(str(text))


def _f(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{float(value):.{digits}g}"


def _pct(value: Any) -> str:
    return f"{float(value):+.1f} %" if not math.isnan(float(value)) else "—"


def report_link(base: str | None, rel: Any) -> str | None:
    """``rel`` (relative to the results folder) under ``base``; a night's report.md is
    linked as its HTML view, index.html beside it. None when there is no path, ``rel`` is not
    a relative path, or the link would not be one e2e writes (``e2e.names.safe_link``: a
    relative path or an http(s) URL; a store's text is anyone's). The templates'
    ``report_link`` filter (their autoescape escapes it for the ``href`` attribute)."""
    if not rel or not isinstance(rel, str):
        return None
    if rel.endswith("/report.md"):
        rel = rel[: -len("report.md")] + "index.html"
    try:
        safe_link(rel, "a report's path", relative=True)
        return safe_link(rel if base is None else f"{base.rstrip('/')}/{rel}")
    except ValueError:
        return None


def _json_for_script(payload: Any) -> Markup:
    """JSON that is safe inside ``<script type=application/json>``: ``<``, ``>`` and ``&``
    written as escapes, so no string can end the script element or open a comment. The
    templates' ``script_json`` filter (a script's text is not HTML: autoescape would break
    the JSON and could not keep it from closing the element)."""
    return Markup(json.dumps(payload, allow_nan=False).replace("<", "\\u003c")
                  .replace(">", "\\u003e").replace("&", "\\u0026"))


@functools.cache
def _templates() -> jinja2.Environment:
    """The pages' templates, autoescaped. Whitespace: a block tag's line break is dropped
    (``trim_blocks``, ``lstrip_blocks``, and ``{%-`` where a tag starts a line), so a page
    is the bytes the template's lines join to."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("e2e.render", "templates"), autoescape=True,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, finalize=_shown)
    env.filters.update(
        blank_as=_blank_as, script_json=_json_for_script,
        report_link=lambda rel, base: report_link(base, rel),
        verdict_colour=lambda verdict: VERDICT_COLOURS.get(verdict, "#999"),
        status_colour=lambda status: _STATUS_COLOURS.get(status, "#999"))
    return env


def _page(template: str, title: str, *, plots: bool = False, **context: Any) -> bytes:
    page = _templates().get_template(template)
    return page.render(title=title, plots=plots, **context).encode("utf-8")


def _cell_key(r) -> tuple:
    return (r.experiment, r.config_hash, r.kind, r.arm, int(r.concurrency), r.spec_mode, r.metric)


def _cell_title(key: tuple) -> str:
    experiment, config_hash, kind, arm, conc, mode, metric = key
    label, unit = metric_label(metric)
    where = f"{arm} GSM8K {mode}" if kind == "gsm8k" else f"{arm} c{conc} {mode}"
    return f"{where} · {label} ({unit})"


def _scale(metric: str) -> float:
    return 100.0 if metric == GSM8K_METRIC else 1.0


def _report_path(night: StoredNight | None) -> str | None:
    return night.report_path if night else None


def _figure(key: tuple, rows: pd.DataFrame, changes: Sequence[StoredChangePoint],
            nights: Mapping[tuple, StoredNight], base: str | None, *, small: bool):
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
        report = _report_path(nights.get((r.date, r.experiment, r.config_hash)))
        commit = r.build_git_commit or r.engine_git_sha
        hover.append("<br>".join(_plot_text(x) for x in [
            f"night {r.date} ({r.night_status})", f"verdict: {r.verdict}"
            + (f" {float(r.pct):+.1f} %" if isinstance(r.pct, float) and not math.isnan(r.pct)
               else ""),
            f"build: {r.engine or 'engine'} {r.engine_version or '?'}",
            f"commit: {str(commit)[:12] if commit else '?'}",
            f"host: {r.host or '?'} · runs: {r.n}"]
            + (["click: the night's report"] if report else [])))
        links.append(report_link(base, report) or "")
    colours = [VERDICT_COLOURS.get(v, "#999") for v in rows["verdict"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[_plot_text(d) for d in rows["date"]], y=med, mode="lines+markers",
        name=_plot_text(label),
        error_y={"type": "data", "symmetric": False,
                 "array": [h - m for h, m in zip(hi, med)],
                 "arrayminus": [m - low for m, low in zip(med, lo)], "color": "#aaa"},
        marker={"color": colours, "size": 7 if small else 11,
                "line": {"width": 1, "color": "#333"}},
        line={"color": "#888", "width": 1}, customdata=links,
        hovertext=hover, hoverinfo="text"))
    shapes, notes = [], []
    for c in (stored.change for stored in changes):
        colour = "#d62728" if c.worse else "#2ca02c"
        start = _plot_text(c.start)
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": start,
                       "x1": start, "y0": 0, "y1": 1,
                       "line": {"color": colour, "width": 2, "dash": "dash"}})
        notes.append({"x": start, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
                      "showarrow": False, "font": {"color": colour, "size": 11},
                      "text": f"change point: started {start} ({float(c.pct):+.1f} %)"})
    fig.update_layout(
        shapes=shapes, annotations=notes, showlegend=False,
        height=220 if small else 430, margin={"l": 50, "r": 15, "t": 30, "b": 40},
        yaxis={"title": {"text": _plot_text(f"{label} ({unit})")}},
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


def _frame(history: Sequence[HistoryCell]) -> pd.DataFrame:
    """The night cells as a frame, one row each (the plots group and sort it by cell)."""
    return pd.DataFrame([c.row() for c in history])


def site_files(data: SiteData) -> dict[str, bytes]:
    """{file name: bytes} of the whole site (``plotly.min.js`` included)."""
    h = _frame(data.history)
    files: dict[str, bytes] = {"plotly.min.js": plotly_js()}
    nights = {(n.date, n.experiment, n.config_hash): n for n in data.nights}
    if h.empty:
        files["index.html"] = _page("index.html.j2", data.title, empty=True)
        files["compare.html"] = _page("compare.html.j2", "Compare two nights", empty=True)
        files["gsm8k.html"] = _page("gsm8k.html.j2", "GSM8K per night", empty=True)
        return files
    latest_changes: dict[tuple, list[StoredChangePoint]] = {}
    last_date: dict[tuple, str] = {}
    for r in h.itertuples(index=False):
        key = _cell_key(r)
        last_date[key] = max(last_date.get(key, ""), r.date)
    for c in data.changes:
        key = _cell_key(c)
        if c.date == last_date.get(key):  # the change points as the latest night saw them
            latest_changes.setdefault(key, []).append(c)

    cells = {key: rows.sort_values("date") for key, rows in h.groupby(
        ["experiment", "config_hash", "kind", "arm", "concurrency", "spec_mode", "metric"],
        sort=True)}
    for key, rows in cells.items():
        files[f"cell-{cell_slug(*key)}.html"] = _cell(data, key, rows, nights,
                                                      latest_changes.get(key, []))
    files["index.html"] = _index(data, h, cells, nights, latest_changes)
    files["compare.html"] = _compare(data, h)
    files["gsm8k.html"] = _gsm8k(data)
    return files


def _cell(data: SiteData, key: tuple, rows: pd.DataFrame,
          nights: Mapping[tuple, StoredNight], changes: Sequence[StoredChangePoint]) -> bytes:
    fig = _figure(key, rows, changes, nights, data.link_base, small=False)
    scale = _scale(key[-1])
    table = []
    for r in rows.itertuples(index=False):
        night = nights.get((r.date, r.experiment, r.config_hash))
        commit = r.build_git_commit or r.engine_git_sha
        table.append({
            "date": r.date, "status": r.night_status, "median": _f(r.median * scale),
            "low": _f(r.low * scale), "high": _f(r.high * scale), "n": f"{r.n}",
            "verdict": r.verdict, "pct": _pct(r.pct), "baseline": r.baseline_date,
            "version": r.engine_version or "?", "commit": str(commit)[:12] if commit else "",
            "report_path": _report_path(night)})
    points = [{"start": c.start, "before": _f(c.before), "after": _f(c.after),
               "pct": f"{float(c.pct):+.1f} %", "p_value": _f(c.p_value, 3),
               "regression": bool(c.regression)}
              for c in (stored.change for stored in changes)]
    return _page("cell.html.j2", _cell_title(key), plots=True, experiment=key[0],
                 config=key[1][:12], plot=Markup(_plot_div(fig, "cell-plot", clickable=True)),
                 changes=points, rows=table, link_base=data.link_base)


def _outputs_checks(night: StoredNight | None) -> list[dict[str, Any]]:
    """A night's outputs checks as stored (``nights.outputs``), each with a ``line`` and a
    ``finding``; what another writer put there otherwise is left out."""
    raw = night.outputs if night else None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    return [{"line": str(c["line"]), "finding": c.get("finding") is True}
            for c in raw if isinstance(c, dict) and "line" in c] if isinstance(raw, list) else []


def _index(data: SiteData, h: pd.DataFrame, cells, nights, latest_changes) -> bytes:
    order = {v: i for i, v in enumerate(_ORDER)}
    experiments = []
    for experiment in sorted(set(h["experiment"])):
        mine = h[h["experiment"] == experiment]
        date = str(mine["date"].max())
        tonight = mine[mine["date"] == date]
        config_hash = str(tonight["config_hash"].iloc[0])
        night = nights.get((date, experiment, config_hash))
        rows = sorted(tonight.itertuples(index=False),
                      key=lambda r: (order.get(r.verdict, 99), r.arm, r.spec_mode,
                                     r.concurrency, r.metric))
        cp_bad = [c for key, cs in latest_changes.items() if key[0] == experiment
                  and key[1] == config_hash for c in cs if c.change.regression]
        checks = _outputs_checks(night)
        table = []
        for r in rows:
            label, unit = metric_label(r.metric)
            where = f"{r.arm} GSM8K {r.spec_mode}" if r.kind == "gsm8k" else \
                f"{r.arm} c{r.concurrency} {r.spec_mode}"
            table.append({"slug": cell_slug(*_cell_key(r)), "where": where, "label": label,
                          "unit": unit, "verdict": r.verdict,
                          "median": _f(r.median * _scale(r.metric)), "pct": _pct(r.pct),
                          "baseline": r.baseline_date})
        cards = []
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
            plot = _plot_div(fig, f"plot-{slug}", clickable=False, bar=False).replace(
                "<div id=", "<div class='cell-plot' id=", 1)
            cards.append({"slug": slug, "title": _cell_title(key), "plot": Markup(plot)})
        experiments.append({
            "experiment": experiment, "date": date,
            "status": str(tonight["night_status"].iloc[0]), "config": config_hash[:12],
            "host": (night.host if night else None) or "?",
            "baseline": night.baseline_date if night else None,
            "report_path": _report_path(night),
            "regressed": [{"slug": cell_slug(*_cell_key(r)), "title": _cell_title(_cell_key(r)),
                           "pct": f"{float(r.pct):+.1f} %", "baseline": r.baseline_date}
                          for r in rows if r.verdict == "regressed"],
            "change_points": [{"arm": c.arm, "concurrency": f"{c.concurrency}",
                               "spec_mode": c.spec_mode, "label": metric_label(c.metric)[0],
                               "start": c.change.start, "pct": f"{float(c.change.pct):+.1f} %"}
                              for c in cp_bad],
            "checks": checks, "findings": [c["line"] for c in checks if c["finding"]],
            "cells": table, "cards": cards})
    listing = []
    for n in sorted(data.nights, key=lambda n: (n.date, n.experiment), reverse=True):
        checks = _outputs_checks(n)
        listing.append({"date": n.date, "experiment": n.experiment,
                        "config": n.config_hash[:12], "status": n.status,
                        "checks": len(checks), "findings": sum(1 for c in checks if c["finding"]),
                        "host": n.host or "?", "baseline": n.baseline_date,
                        "report_path": n.report_path})
    return _page("index.html.j2", data.title, plots=True, empty=False, experiments=experiments,
                 nights=listing, link_base=data.link_base)


def _compare(data: SiteData, h: pd.DataFrame) -> bytes:
    nights = sorted(data.nights, key=lambda n: (n.date, n.experiment))
    per: dict[int, dict[str, Any]] = {}
    ids = {(n.date, n.experiment, n.config_hash): i for i, n in enumerate(nights)}
    for r in h.itertuples(index=False):
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
    for r in h.itertuples(index=False):
        commit = r.build_git_commit or r.engine_git_sha
        builds.setdefault((r.date, r.experiment, r.config_hash),
                          f"{r.engine_version or '?'} {str(commit)[:12] if commit else ''}".strip())
    payload = {"nights": [{"id": i, "date": n.date, "experiment": n.experiment,
                           "config_hash": n.config_hash, "status": n.status,
                           "host": n.host or "?",
                           "build": builds.get((n.date, n.experiment, n.config_hash), "?"),
                           "report": report_link(data.link_base, n.report_path)}
                          for i, n in enumerate(nights)], "cells": per}
    return _page("compare.html.j2", "Compare two nights", plots=True, empty=False,
                 payload=payload)


def _gsm8k(data: SiteData) -> bytes:
    import plotly.graph_objects as go

    rows = [r for r in data.gsm8k]
    if not rows:
        return _page("gsm8k.html.j2", "GSM8K per night", empty=False, rows=[])
    g_verdicts = {(v.date, v.experiment, v.config_hash, v.arm): v
                  for v in data.verdicts if v.kind == "gsm8k"}
    table = []
    fig = go.Figure()
    series: dict[tuple, tuple[list, list]] = {}
    for r in rows:
        acc = r.right / r.documents * 100 if r.documents else float("nan")
        v = g_verdicts.get((r.date, r.experiment, r.config_hash, r.arm))
        table.append({
            "date": r.date, "experiment": r.experiment, "run_dir": r.run_dir,
            "documents": f"{r.documents}", "right": f"{r.right}",
            "accuracy": f"{acc:.1f} %",
            "changed": f"{r.lost} / {r.gained} of {r.shared}" if r.lost is not None else "—",
            "judged": bool(v), "verdict": v.judged.verdict if v else None,
            "p_value": _f(v.judged.p_value if v else None, 3)})
        if r.first:  # each arm's first fresh server of the night
            xs, ys = series.setdefault((r.experiment, r.arm), ([], []))
            xs.append(_plot_text(r.date))
            ys.append(acc)
    for (experiment, arm), (xs, ys) in series.items():
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers",
                                 name=_plot_text(f"{experiment} {arm}")))
    fig.update_layout(height=330, yaxis={"title": {"text": "strict-match accuracy (%)"}},
                      xaxis={"type": "category"}, template="plotly_white",
                      margin={"l": 50, "r": 15, "t": 20, "b": 40})
    return _page("gsm8k.html.j2", "GSM8K per night", plots=True, empty=False, rows=table,
                 plot=Markup(_plot_div(fig, "gsm8k-plot", clickable=False)))


def write_site(files: Mapping[str, bytes], out: Path) -> list[Path]:
    """Write the site's files under ``out`` (atomically, one by one); returns their paths."""
    from e2e.paths import atomic_write_bytes

    paths = []
    for name, data in files.items():
        atomic_write_bytes(Path(out) / name, data)
        paths.append(Path(out) / name)
    return paths
