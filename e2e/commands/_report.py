"""``e2e report``: a results folder rendered as Markdown, HTML, CSV and PNG (and GSM8K's
tables); ``--format github`` prints it as a pull-request comment."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from e2e.commands._options import JsonOpt
from e2e.console import err, guard, out, visible

__all__ = ["report", "write_report"]


def _only(items: list[str] | None) -> dict[str, str]:
    from e2e.errors import ConfigError

    out_: dict[str, str] = {}
    for item in items or []:
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


def write_report(folder: Path, report_from_run: int | None = None, baseline: str = "main",
            only: dict[str, str] | None = None, json_: bool = False,
            confidence: float | None = None, format_: str = "markdown",
            link: str | None = None, max_bytes: int | None = None) -> None:
    from e2e.errors import ConfigError
    from e2e.analysis import gsm8k_report
    from e2e.paths import atomic_write_bytes
    from e2e.render import build_report, gsm8k_csv, gsm8k_markdown
    from e2e.results import read_evaluations

    if format_ not in ("markdown", "github"):
        raise ConfigError(f"--format {format_!r}: give markdown or github")
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
        err.print(f"[dim]report written to {output.report_dir} (github.md: "
                  f"{len(text.encode('utf-8')):,} bytes)[/]", highlight=False)
    elif output is not None:
        console.print(visible(output.markdown), highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]report written to {output.report_dir}[/]", highlight=False)
    if gsm8k is not None:
        text = gsm8k_markdown(gsm8k)
        atomic_write_bytes(folder / "report" / "gsm8k.md", text)
        atomic_write_bytes(folder / "report" / "gsm8k.csv", gsm8k_csv(gsm8k))
        console.print(visible(text.decode()), highlight=False, markup=False, soft_wrap=True)
        err.print(f"[dim]GSM8K report written to {folder / 'report'}[/]", highlight=False)


def report(
    results_dir: Annotated[Path, typer.Argument(
        help="An experiment's results folder, e.g. results/default.")],
    report_from_run: Annotated[Optional[int], typer.Option(
        help="First reported run of each cell (default: the config's report_from_run).",
        min=1)] = None,
    baseline: Annotated[str, typer.Option(help="Arm the others are compared with.")] = "main",
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", help="Report only runs whose spec has FIELD=VALUE (input_len, output_len, "
        "prompts, seed, warmup_requests, request_rate, burstiness, max_concurrency, windows, "
        "workload (e.g. reference, sp4x8p896, trace-<stem>x2), arrival, arm, concurrency, "
        "spec_mode); repeatable. Needed when a folder holds runs of unlike workloads, which "
        "are never averaged together (the refusal names the field and its values).")] = None,
    json_: JsonOpt = False,
    format_: Annotated[str, typer.Option(
        "--format", help="What to print: markdown (the report) or github (a pull-request "
                         "comment: the headline with verdict icons, under GitHub's 64 KB "
                         "limit, also written to report/github.md).")] = "markdown",
    link: Annotated[Optional[str], typer.Option(
        "--link", help="URL of the full report, linked from the github comment.")] = None,
    max_bytes: Annotated[Optional[int], typer.Option(
        "--max-bytes", min=2000, help="Size limit of the github comment (default 65536; "
                                      "1048576 for a step summary).")] = None,
) -> None:
    """Render a results folder: Markdown (PR-description tables), CSV, PNG plots and an HTML
    view (report/index.html); --format github prints a pull-request comment."""
    guard(lambda: write_report(results_dir, report_from_run, baseline, _only(only), json_,
                               format_=format_, link=link, max_bytes=max_bytes))

