"""The outputs compared prompt by prompt and the one line per arm that says whether it is safe
to merge, where users read them: ``e2e report`` (Markdown), ``e2e report --json`` and
``e2e report --format github``, on results folders written as e2e writes them (run.json and
requests.parquet with each request's token ids)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from e2e.results.records import RequestRecord
from e2e.results.store import write_requests
from test_aggregate import make_record
from test_render import write_results
from test_report_github import tables

N = 32  # prompts per run (make_record's 32 requests at concurrency 1)
NOISE = [0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001, 0.003, -0.002, 0.001, 0.002, -0.001]


def answer(i: int) -> tuple[int, ...]:
    return tuple((i * 31 + k * 7) % 997 for k in range(16))


def changed(i: int) -> tuple[int, ...]:
    """The answer, diverged from token 3 on, for every other prompt."""
    a = answer(i)
    return a if i % 2 else a[:3] + tuple((t + 1) % 997 for t in a[3:])


def sweep(tmp_path, arms: dict[str, tuple[float, object]], *, outputs: bool = True):
    """A results folder: per arm (speed factor, answer function) 4 rounds at concurrency 1,
    server TPOT drifting a little per round (a block), each run's outputs in requests.parquet."""
    records, answers = [], {}
    k = 0
    for repeat in (1, 2, 3, 4):
        for arm, (factor, fn) in arms.items():
            tpot = 10.0 * factor * (1 + 0.01 * repeat) * (1 + NOISE[k % len(NOISE)])
            k += 1
            r = make_record(arm, 1, repeat)
            r = r.model_copy(update={"metrics": r.metrics.model_copy(update={
                "tpot_ms_mean": tpot, "tpot_ms_median": tpot, "ttft_ms_mean": 50.0,
                "e2el_ms_mean": 50.0 + 508 * tpot})})  # what its requests.parquet gives
            records.append(r)
            answers[r.run_id] = fn
    exp = write_results(tmp_path, records)
    if outputs:
        for r in records:
            fn = answers[r.run_id]
            digest = write_requests(exp / r.run_id / "requests.parquet",
                                    [RequestRecord(index=i, send_s=0.0, first_token_s=0.05,
                                                   end_s=r.metrics.e2el_ms_mean / 1000,
                                                   chunk_times_s=(0.1, 0.2), prompt_tokens=1031,
                                                   completion_tokens=509, status=200,
                                                   output_token_ids=fn(i)) for i in range(N)])
            write_results(tmp_path, [r.model_copy(update={"outputs_sha256": digest})])
    return exp


def report(exp, *args) -> str:
    result = CliRunner().invoke(app, ["report", str(exp), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


ARMS = {"main": (1.0, answer), "main-repeat": (1.0, answer), "pr": (1.0, answer),
        "flag-off": (1.0, changed)}


@pytest.mark.slow  # the whole report, plots and all: about 2 s
def test_json_has_each_verdict_the_first_divergent_token_and_the_merge_call(tmp_path):
    doc = json.loads(report(sweep(tmp_path, ARMS), "--json"))
    by = {(c["kind"], c["arm"]): c for c in doc["outputs"]["comparisons"]}
    assert by[("aa", "main-repeat")]["verdict"] == "identical"
    assert by[("arm", "pr")]["verdict"] == "identical"
    assert by[("arm", "pr")]["identical"] == by[("arm", "pr")]["compared"] == N
    off = by[("arm", "flag-off")]
    assert off["verdict"] == "diverges more than A/A"
    assert off["diverged"] == N // 2 and off["first_divergent_token"] == {
        "median": 3.0, "min": 3, "max": 3}
    assert [y["arm"] for y in off["yardsticks"]] == ["main-repeat"]
    assert off["p_holm"] < 0.05
    calls = {m["arm"]: m for m in doc["merge"]}
    assert calls["main-repeat"]["call"] == "the A/A (yardstick)"
    assert calls["flag-off"]["call"] == "not safe to merge"
    assert "c1 base: outputs diverges more than A/A" in calls["flag-off"]["reasons"]
    pr = calls["pr"]
    assert pr["cells"][0]["speed"]["verdict"] == "equivalent", pr
    assert pr["call"] == "safe to merge" and pr["reasons"] == []
    assert {(c["arm"], c["concurrency"]) for c in doc["prefix_cache"]} == {
        (a, 1) for a in ARMS}


@pytest.mark.slow  # the whole report
def test_an_arm_whose_outputs_were_replaced_by_mains_is_refused_not_identical(tmp_path):
    """The adversary's case: flag-off's output_token_ids replaced by main's in each of its
    requests.parquet turned "diverges more than A/A · not safe to merge" into "identical".
    Each edited run is now skipped, named, as a run.json with an edited metric is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    exp = sweep(tmp_path, ARMS)
    edited = sorted(p.parent.name for p in exp.glob("flag-off-*/requests.parquet"))
    assert len(edited) == 4
    for name in edited:
        path = exp / name / "requests.parquet"
        table = pq.read_table(path)
        table = table.set_column(table.column_names.index("output_token_ids"),
                                 "output_token_ids",
                                 pa.array([answer(i) for i in range(N)], pa.list_(pa.int32())))
        pq.write_table(table, path)
    doc = json.loads(report(exp, "--json"))
    assert "flag-off" not in {c["arm"] for c in doc["outputs"]["comparisons"]}
    assert "flag-off" not in {m["arm"] for m in doc["merge"]}
    warnings = " ".join(w["message"] for w in doc["warnings"])
    for name in edited:
        assert f"skipped {name}/run.json: its requests.parquet's output_token_ids" in warnings


@pytest.mark.slow
def test_markdown_leads_with_a_line_per_arm_and_has_a_section_per_cell(tmp_path):
    exp = sweep(tmp_path, ARMS)
    text = report(exp)
    assert "## Safe to merge?" in text
    md = (exp / "report" / "report.md").read_text(encoding="utf-8")
    assert md.index("## Safe to merge?") < md.index("## Headline")
    lines = [line for line in md.splitlines() if line.startswith("- ") and " · speed: " in line]
    assert [line.split("**")[1] for line in lines] == ["main-repeat", "flag-off", "pr"]  # the config's order
    assert lines[2].startswith("- ✅ **pr**: safe to merge")
    assert lines[1].startswith("- 🔴 **flag-off**: not safe to merge")
    assert "diverges more than A/A (16 of 32 diverged, first divergent token 3; " \
           "A/A: 32 of 32 identical)" in lines[1]
    section = md[md.index("## Same answers, prompt by prompt"):]
    assert "### concurrency 1, base" in section
    rows = {r[0]: r for r in tables(section)[0][1:]}
    assert rows["flag-off vs main"][1:3] == ["diverges more than A/A",
                                             "16 of 32 diverged, first divergent token 3"]
    assert rows["main-repeat vs main (A/A)"][1] == "identical"


@pytest.mark.slow
def test_a_slower_arm_is_not_safe_and_missing_outputs_never_read_safe(tmp_path):
    arms = {"main": (1.0, answer), "main-repeat": (1.0, answer), "pr": (1.3, answer)}
    doc = json.loads(report(sweep(tmp_path / "a", arms), "--json"))
    pr = next(m for m in doc["merge"] if m["arm"] == "pr")
    assert pr["call"] == "not safe to merge" and "c1 base: speed slower" in pr["reasons"]

    same = {"main": (1.0, answer), "main-repeat": (1.0, answer), "pr": (1.0, answer)}
    exp = sweep(tmp_path / "b", same, outputs=False)  # e.g. runs imported from another tool
    doc = json.loads(report(exp, "--json"))
    pr = next(m for m in doc["merge"] if m["arm"] == "pr")
    assert pr["cells"][0]["speed"]["verdict"] == "equivalent"
    assert pr["call"] == "not shown safe"
    assert pr["reasons"] == ["c1 base: outputs not recorded"]
    assert "⚪ **pr**: not shown safe" in (exp / "report" / "report.md").read_text()


@pytest.mark.slow
def test_github_comment_says_first_whether_each_arm_is_safe_to_merge(tmp_path):
    exp = sweep(tmp_path, ARMS)
    report(exp, "--format", "github")
    text = (exp / "report" / "github.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[1].startswith("### e2e report") and lines[3] == "#### Safe to merge?"
    assert lines[5].startswith("- 🔁 **main-repeat**")
    assert lines[6].startswith("- 🔴 **flag-off**: not safe to merge")
    assert lines[7].startswith("- ✅ **pr**: safe to merge")
    assert text.index("#### Safe to merge?") < text.index("#### Headline")
    folded = text[text.index("<summary>Same answers, prompt by prompt</summary>"):]
    assert "#### concurrency 1, base" in folded
    assert any(row[0] == "flag-off vs main" and row[1] == "diverges more than A/A"
               for t in tables(folded) for row in t)


def test_the_render_functions_carry_the_outputs_and_the_call(tmp_path):
    """The same through the render functions, on a summary with its outputs (fast tier)."""
    from dataclasses import replace

    from e2e.analysis.outputs.compare import summarize_outputs
    from e2e.analysis.sweep.aggregate import summarize
    from e2e.render import render_github, report_json
    from e2e.render.markdown import render_markdown

    records, outputs = [], {}
    for repeat in (1, 2, 3):
        for arm, fn in (("main", answer), ("main-repeat", answer), ("flag-off", changed)):
            r = make_record(arm, 1, repeat, tpot=10.0 * (1 + 0.01 * repeat))
            records.append(r)
            outputs[r.run_id] = {i: fn(i) for i in range(N)}
    bare = summarize(records)
    assert "Safe to merge" not in render_markdown(bare)  # nobody compared outputs: no line
    summary = replace(bare, outputs=summarize_outputs(records, outputs))
    md = render_markdown(summary)
    assert md.index("- 🔴 **flag-off**: not safe to merge") < md.index("## Headline")
    assert "16 of 32 diverged, first divergent token 3" in md
    assert render_github(summary).splitlines()[6].startswith("- 🔴 **flag-off**")
    doc = report_json(summary)
    assert [m["call"] for m in doc["merge"]] == ["the A/A (yardstick)", "not safe to merge"]


def test_a_few_divergent_prompts_beside_an_identical_aa_are_never_safe():
    """Too few for the exact test (1 of 32 against 0 of 32), but not evidence of no change."""
    from dataclasses import replace

    from e2e.analysis.outputs.compare import summarize_outputs
    from e2e.analysis.outputs.merge import merge_calls
    from e2e.analysis.sweep.aggregate import summarize

    def one_off(i):
        return changed(i) if i == 0 else answer(i)

    records, outputs = [], {}
    for repeat in (1, 2, 3):
        for arm, fn in (("main", answer), ("main-repeat", answer), ("pr", one_off)):
            r = make_record(arm, 1, repeat, tpot=10.0 * (1 + 0.01 * repeat))
            records.append(r)
            outputs[r.run_id] = {i: fn(i) for i in range(N)}
    summary = summarize(records)
    summary = replace(summary, outputs=summarize_outputs(records, outputs))
    pr = next(c for c in merge_calls(summary) if c.arm == "pr")
    assert pr.cells[0].outputs.verdict == "diverges as much as A/A"
    assert pr.call == "not shown safe"
    assert pr.reasons == ("c1 base: outputs diverges as much as A/A (1 of 32 prompts diverged, "
                          "the A/A's none)",)


@pytest.mark.slow  # a 36-run report through the command line (about 3 s)
def test_the_merge_line_shows_gsm8k_and_capacity_where_the_experiment_measured_them(tmp_path):
    """Beside the speed, outputs and cache call: each arm's GSM8K agreement with main (the
    documents judged alike and McNemar's p, an A/A's beside it) where the experiment has a
    GSM8K evaluation, the capacity search where it has one; 'not measured' where absent."""
    import shutil
    from pathlib import Path

    from e2e.results.store import write_run
    from test_report_warnings import busy_duet_sweep

    folder = tmp_path / "results" / "duet3"
    for record in busy_duet_sweep():
        write_run(folder / record.spec.run_id, record)

    def merge_lines() -> list[str]:
        done = CliRunner().invoke(app, ["report", str(folder), "--format", "github", "-q"])
        assert done.exit_code == 0, done.output
        text = (folder / "report" / "github.md").read_text()
        return [line for line in text.splitlines()
                if line.startswith("- ") and " · speed: " in line]

    before = merge_lines()
    assert before and all("GSM8K: not measured · capacity: not measured" in line
                          for line in before)
    golden = Path(__file__).parent / "golden" / "gsm8k" / "results" / "exp" / "gsm8k"
    shutil.copytree(golden, folder / "gsm8k")
    (folder / "capacity.json").write_text("{}")
    (pr,) = [line for line in merge_lines() if "**pr**" in line]
    assert ("GSM8K: base 1 of 30 documents judged alike, McNemar p " in pr
            and "; A/A 28 of 30" in pr), pr
    assert "capacity: in capacity.json (e2e capacity's report)" in pr
