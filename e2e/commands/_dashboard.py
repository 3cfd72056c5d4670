"""``e2e dashboard``: the results store -> a static site (``e2e.render.site_files``), and
``--serve`` to look at it on http://127.0.0.1:PORT/. Exit 2 on bad input or a store that
cannot be opened."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import StoreConfigOpt, StoreOpt, StoreResultsOpt

from e2e.console import guard, out, say

__all__ = ["dashboard_command", "build_dashboard"]


def build_dashboard(store, out_dir: Path, *, link_base: str | None = None) -> list[Path]:
    """Write the site of ``store`` (an ``e2e.results.nightly_store.Store``) under ``out_dir``."""
    from e2e.render import SiteData, site_files, write_site

    data = SiteData(history=store.cells(), nights=store.night_details(),
                    changes=store.change_points(), verdicts=store.verdict_details(),
                    gsm8k=store.gsm8k_agreement(), link_base=link_base)
    return write_site(site_files(data), out_dir)


def dashboard_command(
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder the site is written to.", file_okay=False)] = Path("site"),
    results: StoreResultsOpt = Path("results"),
    store: StoreOpt = None,
    config: StoreConfigOpt = None,
    link_base: Annotated[Optional[str], typer.Option(
        help="URL where results/ is published, for the links to each night's report: an "
             "http(s) URL or a relative path (default: the path from --out to --results).")] = None,
    serve: Annotated[bool, typer.Option(
        "--serve", help="Then serve the site on 127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[int, typer.Option(help="Port for --serve (0: any free one).",
                                      min=0, max=65535)] = 8000,
) -> None:
    """Write a static, self-contained dashboard of the nightly store: the latest night's
    verdicts (regressions first), each cell's history with its change points, two nights
    side by side, GSM8K per night. Works offline (plotly's script is written beside it)."""
    code = guard(lambda: _dashboard(out_dir, results, store, config, link_base, serve, port),
                 error_exit=2, unexpected_exit=2, interrupted="stopped serving")
    raise SystemExit(code)


def _dashboard(out_dir, results, store, config, link_base, serve, port) -> int:
    from urllib.parse import quote

    from e2e.commands._history import store_url
    from e2e.names import check_link
    from e2e.results import open_store

    out_dir = Path(out_dir)
    # the default, a path e2e makes, percent-encoded (a space in a folder's name is not a link)
    base = check_link(link_base, "--link-base") or quote(
        os.path.relpath(Path(results).resolve(), out_dir.resolve()))
    with open_store(store_url(store, config), results, create=False) as opened:
        paths = build_dashboard(opened, out_dir, link_base=base)
        source = opened.masked
    out.print(f"dashboard of {source}: {len(paths)} files in {out_dir} "
              f"(open {out_dir / 'index.html'})", highlight=False, markup=False)
    if serve:
        _serve(out_dir, port)
    return 0


def _serve(folder: Path, port: int) -> None:
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        say(f"serving {folder} on http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)")
        httpd.serve_forever()
