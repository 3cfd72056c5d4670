"""``e2e report``: a results folder rendered as Markdown, HTML, CSV and PNG (and GSM8K's
tables); ``--format github`` prints it as a pull-request comment."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from e2e.commands._options import JsonOpt
from e2e.console import err, guard, out, visible

__all__ = ["report", "write_report"]


def _pairs(items: list[str] | None) -> list[str]:
    """``--only``'s FIELD=VALUE items, comma-separated or repeated; a comma inside a value
    (``arrival=poisson 3 req/s, at most 8 in flight``) stays in it: a piece without '=' belongs
    to the value before it."""
    pairs: list[str] = []
    for text in items or []:
        mine: list[str] = []
        for piece in text.split(","):
            if "=" not in piece and mine:
                mine[-1] += "," + piece
            elif piece.strip():
                mine.append(piece.strip())
        pairs += mine
    return pairs


def _only(items: list[str] | None) -> dict[str, str]:
    from e2e.errors import ConfigError

    out_: dict[str, str] = {}
    for item in _pairs(items):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--only {item!r}: give FIELD=VALUE, e.g. output_len=128")
        key, value = key.strip(), value.strip()
        _check_only_value(key, value)
        out_[key] = value
    return out_


def _check_only_value(key: str, value: str) -> None:
    """A value of the kind the field holds (--only output_len=abc is a mistake to name, not
    a selection of nothing)."""
    from e2e.plan import RunSpec
    from e2e.errors import ConfigError

    if key == "spec_mode":
        if value not in ("base", "dspark"):
            raise ConfigError(f"--only spec_mode={value!r}: give base or dspark")
        return
    field = RunSpec.model_fields.get(key)
    if field is None:
        return  # an unknown field: the report names the ones allowed
    kind = "whole number" if "int" in str(field.annotation) else (
        "number" if "float" in str(field.annotation) else None)
    try:
        if kind == "whole number":
            int(value)
        elif kind == "number":
            float(value)
    except ValueError:
        raise ConfigError(f"--only {key}={value!r}: {key} is a {kind}, e.g. "
                          f"{key}=128") from None


ReportFormat = Literal["markdown", "github", "json"]


def write_report(folder: Path, report_from_run: int | None = None, baseline: str | None = None,
            only: dict[str, str] | None = None, json_: bool = False,
            confidence: float | None = None, format_: str = "markdown",
            link: str | None = None, max_bytes: int | None = None,
            quiet: bool = False) -> None:
    """Render ``folder`` and print it as ``format_`` (markdown, github, or json: one JSON
    document on stdout, the Markdown on stderr); ``json_`` is ``format_`` json (the old
    ``--json``); ``quiet`` leaves out the notes on where the files went."""
    from e2e.errors import ConfigError
    from e2e.analysis.outputs import gsm8k_report
    from e2e.paths import atomic_write_bytes
    from e2e.names import check_link
    from e2e.render import build_report, gsm8k_csv, gsm8k_markdown
    from e2e.results.gsm8k import read_evaluations

    if format_ not in ("markdown", "github", "json"):
        raise ConfigError(f"--format {format_!r}: give markdown, github or json")
    link = check_link(link, "--link")
    if json_ and format_ == "github":
        raise ConfigError("--json is --format json: give one of --json and --format github")
    json_ = json_ or format_ == "json"
    note = (lambda text: None) if quiet else (lambda text: err.print(text, highlight=False))
    folder = Path(folder)
    gsm8k = gsm8k_report(read_evaluations(folder.parent, folder.name)) if folder.is_dir() else None
    output = None
    if gsm8k is None or any(folder.glob("*/run.json")):  # else only GSM8K results here
        output = build_report(folder, report_from_run=report_from_run, baseline=baseline,
                              only=only, confidence=confidence)
    if json_:
        from e2e.render import dumps, gsm8k_json, report_json

        # the load report for a folder with load runs (its GSM8K evaluations under "gsm8k"),
        # the GSM8K report alone for one with GSM8K results only
        document = report_json(output.summary) if output is not None else gsm8k_json(gsm8k)
        if output is not None and gsm8k is not None:
            document["gsm8k"] = gsm8k_json(gsm8k)
        sys.stdout.write(dumps(document) + "\n")
    console = err if json_ else out
    if output is not None and format_ == "github":
        from e2e.render import COMMENT_LIMIT, render_github

        text = render_github(output.summary, link=link, limit=max_bytes or COMMENT_LIMIT)
        atomic_write_bytes(output.report_dir / "github.md", text.encode("utf-8"))
        sys.stdout.write(visible(text))
        note(f"[dim]report written to {output.report_dir} (github.md: "
             f"{len(text.encode('utf-8')):,} bytes)[/]")
    elif output is not None:
        console.print(visible(output.markdown), highlight=False, markup=False, soft_wrap=True)
        note(f"[dim]report written to {output.report_dir}[/]")
    if gsm8k is not None:
        text = gsm8k_markdown(gsm8k)
        atomic_write_bytes(folder / "report" / "gsm8k.md", text)
        atomic_write_bytes(folder / "report" / "gsm8k.csv", gsm8k_csv(gsm8k))
        console.print(visible(text.decode()), highlight=False, markup=False, soft_wrap=True)
        note(f"[dim]GSM8K report written to {folder / 'report'}[/]")


def report(
    results_dir: Annotated[Path, typer.Argument(
        help="An experiment's results folder, e.g. results/default.")],
    report_from_run: Annotated[Optional[int], typer.Option(
        help="First reported run of each cell (default: the config's report_from_run).",
        min=1)] = None,
    baseline: Annotated[Optional[str], typer.Option(
        help="Arm the others are compared with, one of the folder's (default: main).",
        show_default=False)] = None,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", metavar="FIELD=VALUE[,...]", show_default=False,
        help="Report only runs whose spec has FIELD=VALUE (input_len, output_len, "
        "prompts, seed, warmup_requests, request_rate, burstiness, max_concurrency, windows, "
        "workload (e.g. reference, sp4x8p896, trace-<stem>x2), arrival, arm, concurrency, "
        "spec_mode); comma-separated or repeated. Needed when a folder holds runs of unlike workloads, which "
        "are never averaged together (the refusal names the field and its values).")] = None,
    format_: Annotated[ReportFormat, typer.Option(
        "--format", help="What to print: markdown (the report), github (a pull-request "
                         "comment: the verdicts first, under GitHub's 64 KB limit, also written "
                         "to report/github.md) or json (one JSON document on stdout, the report "
                         "on stderr; keys in docs/reference/json.md).")] = "markdown",
    json_: JsonOpt = False,
    link: Annotated[Optional[str], typer.Option(
        "--link", help="URL of the full report, linked from the github comment: an http(s) "
                       "URL or a relative path.")] = None,
    max_bytes: Annotated[Optional[int], typer.Option(
        "--max-bytes", min=2000, help="Size limit of the github comment (default 65536; "
                                      "1048576 for a step summary).")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No notes on stderr of where the files went.")] = False,
) -> None:
    """Render a results folder: Markdown (PR-description tables), CSV, PNG plots and an HTML
    view (report/index.html); --format github prints a pull-request comment."""
    guard(lambda: write_report(results_dir, report_from_run, baseline, _only(only), json_,
                               format_=format_, link=link, max_bytes=max_bytes, quiet=quiet))

