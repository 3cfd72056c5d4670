"""The dashboard over a hostile store: any writer of a team's PostgreSQL store can put any
text in any column, and a ``history.parquet`` from anywhere is imported into the default
store. Every string must render as text: a site built from a store whose every text column
holds markup opens in headless Chromium with no script of the store's running and no
request leaving the page; and an imported history with a date that is not a date is
refused."""

from __future__ import annotations

import html.parser
import re

import pandas as pd
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import chromium
from e2e.errors import ResultsError
from e2e.render.dashboard import report_link
from e2e.results._nightly_history import HISTORY_FILE
from e2e.results.nightly_store import metadata as STORE_METADATA
from e2e.results import open_store
from test_dashboard import config, ten_nights

LEAK = "http://127.0.0.1:9/leak"
# closes a quoted attribute of either kind, a tag, a script and a comment; loads a remote
# image; runs script four ways. Each sets window.__pwned if it ever runs.
PAYLOAD = ("'\"></a></td></script><img src=\"" + LEAK + ".png\" onerror=\"window.__pwned=1\">"
           "<script>window.__pwned=2</script><svg onload=\"window.__pwned=3\"></svg>"
           "<b onmouseover=\"window.__pwned=4\">b</b><!--")
JS_URL = "javascript:window.__pwned=5//"


def poison(results) -> int:
    """Prefix every text column of every table of the default store with PAYLOAD (uniques
    stay unique), every JSON list with it, and make every report path a javascript: URL.
    Returns the number of text columns poisoned."""
    engine = sa.create_engine(f"sqlite:///{results / 'nightly' / 'history.db'}")
    count = 0
    with engine.begin() as conn:
        for table in STORE_METADATA.sorted_tables:
            if table.name in ("schema_version", "imports"):
                continue
            for col in table.columns:
                if isinstance(col.type, sa.JSON):
                    conn.execute(table.update().values({col.name: [PAYLOAD]})
                                 .where(col.is_not(None)))
                elif isinstance(col.type, sa.String):
                    conn.execute(table.update().values({col.name: PAYLOAD + sa.func.coalesce(
                        col, "")}))
                    count += 1
        conn.execute(STORE_METADATA.tables["nights"].update().values(
            report_path=JS_URL + STORE_METADATA.tables["nights"].c.report_path))
    engine.dispose()
    return count


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    from e2e.cli import app

    root = tmp_path_factory.mktemp("hostile-dash")
    results = root / "results"
    ten_nights(results, config())
    assert poison(results) > 20
    out = root / "site"
    result = CliRunner().invoke(app, ["dashboard", "--results", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_no_markup_of_the_store_reaches_a_page(hostile_site):
    """Parsed as a browser would: no element the store's text made, no event handler, no
    javascript: link; the pages still carry the text itself (escaped)."""
    pages = sorted(hostile_site.glob("*.html"))
    assert len(pages) >= 5
    for page in pages:
        text = page.read_text()
        parser = _Tags()
        parser.feed(text)
        for tag, attrs in parser.tags:
            assert tag not in ("img", "svg", "iframe"), (page.name, tag, attrs)
            assert not any(k.startswith("on") for k in attrs), (page.name, tag, attrs)
            for key in ("href", "src"):
                assert not str(attrs.get(key) or "").lower().startswith("javascript"), page.name
        scripts = [a for t, a in parser.tags if t == "script"]
        assert all(a.get("src") in (None, "plotly.min.js") for a in scripts), page.name
        assert JS_URL not in text, page.name


def test_hostile_store_in_headless_chromium(hostile_site):
    """Every page, compare.html with several pairs of nights: no script of the store runs
    (``window.__pwned`` stays unset), no request leaves the page (only the page itself and
    plotly.min.js are loaded), and the hostile text is shown as text."""
    chromium.browser_or_skip()
    urls = [p.as_uri() for p in sorted(hostile_site.glob("*.html"))]
    urls += [hostile_site.joinpath("compare.html").as_uri() + q
             for q in ("?a=0&b=9", "?a=4&b=5", "?a=x&b=-3")]
    with chromium.Browser() as browser:
        for url in urls:
            page = browser.page(url, settle_s=0.8)
            # hover every plot point and open the menus: the store's text in hovers and
            # options is text too
            page.eval("document.querySelectorAll('select').forEach(function(s){"
                      "for(var i=0;i<s.options.length;i++){s.value=i;s.onchange&&s.onchange();}})")
            assert page.eval("typeof window.__pwned") == "undefined", url
            others = [u for u in page.requests if not u.startswith("file://")]
            assert others == [], (url, others)
            files = {re.sub(r"[?#].*", "", u).rsplit("/", 1)[-1] for u in page.requests}
            assert files <= {url.rsplit("/", 1)[-1].split("?")[0], "plotly.min.js"}, (url, files)
            hrefs = page.eval("Array.from(document.querySelectorAll('[href]')).map("
                              "a => a.getAttribute('href'))")
            assert not [h for h in hrefs if h.strip().lower().startswith("javascript")], url
            links = page.eval("Array.from(document.querySelectorAll('.js-plotly-plot')).map("
                              "d => JSON.stringify((d.data||[]).map(t => t.customdata||[])))")
            assert not any("javascript" in x for x in links), url
            assert page.errors == [], (url, page.errors)
            if "compare.html" in url:
                shown = page.eval("document.getElementById('sides').textContent")
                assert "<script>window.__pwned=2</script>" in shown, shown
            page.close()


def test_links_are_relative_or_http():
    assert report_link(None, "nightly/2026-01-01/x/report/report.md") == \
        "nightly/2026-01-01/x/report/index.html"
    assert report_link("https://ci.example.org/r", "a/report.md") == "https://ci.example.org/r/a/index.html"
    for bad in ("javascript:alert(1)", " JaVaScRiPt:alert(1)", "data:text/html,x",
                "//evil.example/x", "/etc/passwd", "java\tscript:alert(1)", "vbscript:x"):
        assert report_link(None, bad) is None, bad
        assert report_link("../results", bad) is None, bad
    assert report_link("javascript:alert(1)//", "a/report.md") is None


def _history(results, date: str) -> None:
    """A one-row history.parquet beside the default store, night ``date``."""
    from e2e.results._nightly_history import HISTORY_COLUMNS

    row = {c: None for c in HISTORY_COLUMNS}
    row.update(schema_version=2, date=date, experiment="nightly", config_hash="c" * 64,
               night_status="pass", kind="load", arm="main", concurrency=1, spec_mode="base",
               metric="server_tpot_ms_mean", n=1, median=1.0, low=1.0, high=1.0,
               values=[1.0], repeats=[2], run_dirs=["x"],
               verdict="no baseline", pct=float("nan"))
    path = results / "nightly" / HISTORY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([row], columns=HISTORY_COLUMNS).to_parquet(path)


@pytest.mark.parametrize("date", ["<img src=x onerror=alert(1)>", "2026-13-45", "2026-01-01x",
                                  "", "20260101"])
def test_an_imported_history_with_a_bad_date_is_refused(tmp_path, date):
    _history(tmp_path, date)
    with pytest.raises(ResultsError, match="not a date"):
        open_store(None, tmp_path).close()
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'nightly' / 'history.db'}")
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(STORE_METADATA.tables["nights"])).scalar() == 0
    engine.dispose()


def test_an_imported_history_with_good_dates_lands(tmp_path):
    _history(tmp_path, "2026-01-02")
    with open_store(None, tmp_path) as store:
        assert [n.date for n in store.nights()] == ["2026-01-02"]


def test_an_imported_history_of_the_wrong_shape_is_refused(tmp_path):
    _history(tmp_path, "2026-01-02")
    path = tmp_path / "nightly" / HISTORY_FILE
    frame = pd.read_parquet(path)
    frame["values"] = ["[1.0]"]   # a string where a list belongs
    frame.to_parquet(path)
    with pytest.raises(ResultsError, match="not an e2e nightly history"):
        open_store(None, tmp_path).close()

