"""Warnings a reader acts on: one line per cause (not per metric or cell), none for what the
design itself explains (a duet arm in several duets of a round; raw spread the duet model's
blocks cancel), advice that names the measured cause, and the PR comment's verdicts before its
warnings, folded under one line with their count. Pictures name the method their table names."""

from __future__ import annotations

import math
import random

import pytest

from e2e.analysis.sweep.aggregate import summarize
from e2e.analysis.sweep.report_warnings import warning_lines
from e2e.plan import RunSpec
from e2e.render import render_github
from e2e.render.markdown import render_markdown
from e2e.render.forest import forest_figure
from e2e.results.records import ClientStats, HostNoise
from test_aggregate import make_record


def duet_records(rounds: int = 6, *, arms=("main", "flag-off", "pr"), saturated_by_others=(),
                 saturated_alone=(), seed: int = 3) -> list:
    """A duet sweep as e2e plans it for three arms on two slots: each round, every pair of
    arms in one duet (so each arm is in two duets of a round, with the same repeat), each
    duet's level shared by both sides (a busy host's moment: up to 3x), pr 4 % faster.
    ``saturated_*``: (arm, round) whose client was saturated, by other processes (which took
    0.9 of a core; the client used 0.3 of its own) or by its own load (0.95, quiet host)."""
    rng = random.Random(seed)
    effect = {"main": 1.0, "flag-off": 1.0, "pr": 0.96}
    out = []
    for r in range(1, rounds + 1):
        pairs = [(a, b) for i, a in enumerate(arms) for b in arms[i + 1:]]
        for d, pair in enumerate(pairs, start=1):
            level = math.exp(rng.uniform(0.0, math.log(3.0)))  # the duet's moment of the host
            for slot, arm in enumerate(pair if r % 2 else pair[::-1]):
                tpot = 10.0 * effect[arm] * level * math.exp(rng.gauss(0, 0.01))
                jitter = math.exp(rng.gauss(0, 0.02))
                rec = make_record(arm, 1, r, tpot=tpot, ttft=50.0 * level * jitter,
                                  throughput=100 / level * jitter)
                spec = rec.spec.model_copy(update={"duet": d, "slot": slot})
                others = (arm, r) in saturated_by_others
                alone = (arm, r) in saturated_alone
                client = ClientStats(
                    workers=1, wall_s=10.0, cpu_s=3.0, chunks=4000, cpu_us_per_chunk=750.0,
                    core_share=0.3 if others else 0.95 if alone else 0.3,
                    loop_lag_ms_max=40.0, loop_lag_ms_p99=20.0 if (others or alone) else 0.5,
                    wait_share=0.4 if others else 0.0, saturated=others or alone,
                    saturated_because="waited for a core 40 % of the load" if others else
                    "used 95 % of a core" if alone else None)
                noise = HostNoise(
                    wall_s=10.0, cpus_online=2, loadavg_before=(2.0, 2.0, 2.0),
                    loadavg_after=(2.0, 2.0, 2.0), host_busy_cpu_s=20.0, own_cpu_s=11.0,
                    other_cpu_s=9.0 if others else 0.5, other_cpu_share=0.9 if others else 0.05,
                    unattributed_cpu_s=0.0, steal_s=0.0, steal_share=0.0, top_other=[])
                out.append(rec.model_copy(update={
                    "spec": spec, "run_id": spec.run_id, "client": client, "host_noise": noise}))
    return out


def test_a_duet_arm_in_several_duets_of_a_round_is_the_design_not_a_duplicate():
    summary = summarize(duet_records())
    assert all(c.design == "duet" and c.method_name == "duet model"
               for c in summary.comparisons if c.metric == "tpot_ms_mean")
    text = " ".join(w.message for w in summary.warnings)
    assert "recorded more than once" not in text
    # the host's moments moved every figure up to 3x, but the duet model's blocks cancel
    # them: no raw-spread warning for a cell compared by the duet model
    assert "spread (max" not in " ".join(w.cause or "" for w in summary.warnings), text
    assert not any(w.message.startswith("spread ") for w in summary.warnings)
    # a run truly recorded twice (same round, same duet) is still a duplicate
    records = duet_records()
    copy = records[-1].model_copy(update={"run_id": "a-copy"})
    summary = summarize(records + [copy])
    (line,) = [l for l in warning_lines(summary) if "more than once" in l.cause]
    assert line.places == (f"{copy.spec.arm} c1 base (repeat 6)",)


def test_raw_spread_is_still_warned_where_no_block_cancels_it():
    records = [make_record(a, 1, r, tpot=t) for a in ("main", "pr")
               for r, t in enumerate([10.0, 10.0, 13.0, 9.0, 11.0], start=1)]
    lines = warning_lines(summarize(records))
    (spread,) = [l for l in lines if l.cause.startswith("spread")]
    # runs 2-5 reported: 10, 13, 9, 11 ms: (13 - 9) / 10.5
    assert spread.places[0] == "main c1 base (mean TPOT 38.1 %, median TPOT 38.1 %)"
    assert len(spread.places) == 2  # one line: both cells, every metric in its cell


def test_saturation_advice_names_the_cause_the_runs_measured():
    records = duet_records(saturated_by_others={("main", 3), ("pr", 4)},
                           saturated_alone={("flag-off", 5)})
    lines = warning_lines(summarize(records))
    causes = [l.cause for l in lines]
    (others,) = [l for l in lines if "other processes took its core" in l.cause]
    assert "rerun on a quiet host, or use --require-quiet" in others.cause
    assert "load.workers" not in others.cause
    assert others.places == ("main c1 base (2 of 10 runs, others up to 0.90 of a core)",
                             "pr c1 base (2 of 10 runs, others up to 0.90 of a core)")
    (own,) = [l for l in lines if "by its own load" in l.cause]
    assert "raise load.workers" in own.cause and own.places == ("flag-off c1 base (2 of 10 runs)",)
    assert len(causes) == len(set(causes))


def test_the_pr_comment_shows_verdicts_first_and_folds_one_line_per_cause():
    records = duet_records(saturated_by_others={("main", 3), ("pr", 4), ("flag-off", 2)})
    summary = summarize(records)
    text = render_github(summary)
    headline = text.index("#### Headline")
    folded = text.index("<details><summary>⚠️ ")
    assert headline < folded
    assert "🟢" in text[headline:folded] or "⚪" in text[headline:folded]
    block = text[folded:text.index("</details>", folded)]
    bullets = [line for line in block.splitlines() if line.startswith("- ")]
    assert block.startswith(f"<details><summary>⚠️ {len(bullets)} warning")
    assert len(bullets) == len(warning_lines(summary)) == 1  # three cells, one cause
    assert "recorded more than once" not in text and "spread" not in block


def test_the_forest_plot_names_the_method_its_table_names():
    summary = summarize(duet_records())
    figure = forest_figure(summary, "base", "tpot_ms_mean")
    labels = [t.get_text() for t in figure.axes[0].texts]
    assert labels and all(label.endswith("(duet model)") for label in labels), labels
    table = render_markdown(summary)
    assert "· duet model" in table and "unpaired" not in " ".join(labels)


def test_markdown_numbers_causes_and_marks_figures_with_their_cause():
    records = duet_records(saturated_by_others={("main", 3)})
    summary = summarize(records)
    text = render_markdown(summary)
    section = text.split("## Warnings")[1].split("## How to read this")[0]
    lines = [l for l in section.splitlines() if l.startswith("- ")]
    assert lines == [f"- \u26a01 {warning_lines(summary)[0].text}"]
    row = next(l for l in text.splitlines() if l.startswith("| 1 | mean TPOT (ms)"))
    assert row.split(" | ")[2].endswith("\u26a01")  # main's figure


def test_the_report_and_the_session_judge_interference_alike():
    """A starved client whose others took exactly the share the session warns about
    (``e2e.results.records.INTERFERENCE_SHARE``) is blamed on them in the report; just under
    it, on its own load."""
    from e2e.results.records import INTERFERENCE_SHARE

    def causes(share: float) -> list[str]:
        records = duet_records(saturated_by_others={("main", 3)})
        records = [r.model_copy(update={"host_noise": r.host_noise.model_copy(
                       update={"other_cpu_share": share})}) if r.client.saturated else r
                   for r in records]
        return [l.cause for l in warning_lines(summarize(records)) if "saturated" in l.cause]

    (at,) = causes(INTERFERENCE_SHARE)
    assert "other processes took its core" in at
    (under,) = causes(INTERFERENCE_SHARE - 0.01)
    assert "by its own load" in under


def test_a_profile_of_another_name_is_named_beside_its_figures():
    records = [make_record(a, 1, r, tpot=10.0 + r * 0.01, acceptance=2.0, dspark=True)
               for a in ("main", "pr") for r in range(1, 5)]
    eagle = [r.model_copy(update={"config": {**r.config, "speculators": {"eagle": {"method": "x"}}}})
             for r in records]
    assert summarize(records).speculator_label == "DSpark"
    summary = summarize(eagle)
    assert summary.speculators == ("eagle",) and "ms per verify step, eagle" in render_markdown(summary)
    assert "### dspark (with the eagle speculator)" in render_markdown(summary)


def busy_duet_sweep() -> list:
    """The records of a real three-arm duet sweep on a busy host (tests/data/duet_busy)."""
    import gzip
    from pathlib import Path

    from e2e.results.records import RunRecord

    path = Path(__file__).parent / "data" / "duet_busy" / "runs.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [RunRecord.model_validate_json(line) for line in handle if line.strip()]


def test_the_pr_comment_of_a_real_duet_sweep_on_a_busy_host():
    """Before: a two-row table, then 33 bullets (a 'repeat ... recorded more than once' per
    cell, a raw spread per metric, 'raise load.workers' where each run said another process
    took the client's core). Now: the verdicts, then one folded line per cause."""
    records = busy_duet_sweep()
    assert len(records) == 36 and all(r.spec.duet is not None for r in records)
    assert sum("another process, not the load, took its cores" in " ".join(r.warnings)
               for r in records if r.spec.repeat >= 2) == 5  # what each run itself said
    summary = summarize(records)
    text = render_github(summary)
    verdicts = text.index("#### Headline")
    folded = text.index("<details><summary>⚠️ ")
    assert verdicts < folded and "vs main" in text[verdicts:folded]
    block = text[folded:text.index("</details>", folded)]
    bullets = [line for line in block.splitlines() if line.startswith("- ")]
    assert block.startswith(f"<details><summary>⚠️ {len(bullets)} warnings</summary>")
    lines = warning_lines(summary)
    assert len(bullets) == len(lines) == len({line.cause for line in lines}) <= 3
    assert "recorded more than once" not in text and "spread" not in block
    assert "raise load.workers" not in block
    (saturated,) = [b for b in bullets if "saturated" in b]
    assert "other processes took its core" in saturated and "--require-quiet" in saturated
    for arm in ("main", "flag-off", "pr"):
        assert f"{arm} c1 base (" in saturated
    assert all(c.method_name == "duet model" for c in summary.comparisons)
