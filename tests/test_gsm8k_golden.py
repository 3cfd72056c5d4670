"""The GSM8K records, store and report byte for byte: hand-made evaluations written through
the store give the files in ``tests/golden/gsm8k/results/`` (arm.json, eval.json,
verdicts.jsonl), and the report over them gives ``gsm8k.md``, ``gsm8k.csv`` and the
``--json`` document in ``tests/golden/gsm8k/`` exactly, through the library and through
``e2e report``. The golden bytes were written by the code before its records, store,
statistics and renderers moved into results/, analysis/ and render/
(``E2E_UPDATE_GOLDEN=1`` rewrites them)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from e2e.analysis.outputs.gsm8k import gsm8k_report
from e2e.paths import atomic_write_json
from e2e.render import dumps, gsm8k_csv, gsm8k_json, gsm8k_markdown
from e2e.results.gsm8k import (VERDICTS_FILE, ArmResult, EvalInfo, SampleVerdict, gsm8k_dir,
                               read_arm, read_eval_info, read_evaluations, read_verdicts,
                               write_eval_info, write_verdicts)
from e2e.results.records import SpecCounters

GOLDEN = Path(__file__).parent / "golden" / "gsm8k"
DOCS = 30


def _verdicts(right, flexible=None) -> tuple[SampleVerdict, ...]:
    return tuple(SampleVerdict(doc_id=d, prompt_hash=f"h{d:03d}", strict=right(d),
                               flexible=None if flexible is None else flexible(d))
                 for d in range(DOCS))


# main right on every third document; its repeat flips two; pr right where main is wrong but
# one (29 flipped against main: the Markdown names 20 and points to the CSV for the rest)
MAIN = _verdicts(lambda d: d % 3 == 0, lambda d: d % 3 == 0 or d == 1)
REPEAT = _verdicts(lambda d: (d % 3 == 0) != (d in (4, 9)), lambda d: d % 3 == 0)
PR = _verdicts(lambda d: d % 3 != 0 and d != 5)
WRONG = _verdicts(lambda d: False)
RIGHT = _verdicts(lambda d: True)


def _arm(label: str, arm: str, occurrence: int, verdicts, *, spec_mode="base", limit=None,
         valid=True, warnings=(), counters=None) -> ArmResult:
    right = sum(v.strict for v in verdicts)
    flexible = [v.flexible for v in verdicts]
    return ArmResult(
        experiment="exp", label=label, arm=arm, occurrence=occurrence, spec_mode=spec_mode,
        limit=limit, concurrency=4, data={"kind": "local", "task": "e2e_gsm8k_local"},
        lm_eval_version="0.4.13", lm_eval_argv=["python", "-m", "lm_eval", "run"],
        base_url="http://127.0.0.1:8000", model="tiny", n=len(verdicts),
        accuracy_strict=right / len(verdicts),
        accuracy_flexible=(None if None in flexible else sum(flexible) / len(flexible)),
        lm_eval_results={"exact_match,strict-match": right / len(verdicts), "sample_len": DOCS},
        counters_before=counters and SpecCounters(drafts=10, draft_tokens=30, accepted=12),
        counters_after=counters and SpecCounters(drafts=10 + counters[0],
                                                 draft_tokens=30 + 3 * counters[0],
                                                 accepted=12 + counters[1]),
        acceptance_length=counters and 1.0 + counters[1] / counters[0],
        started_at="2026-12-01T10:00:00+00:00", finished_at="2026-12-01T10:05:00+00:00",
        wall_s=300.125, warnings=list(warnings), valid=valid,
        invalid_reasons=[] if valid else ["lm-eval exited with status 1"])


def _evaluations():
    """(folder, EvalInfo, [(label, ArmResult, verdicts or None)]): a full base evaluation
    with main, its repeat and pr (written out of order); a DSpark one limited to 30
    documents with acceptance lengths and lm-eval's own warning; one without main; one whose
    every arm is wrong; one where pr is right wherever main is wrong (p < 0.001); an invalid arm and an unfinished one, both left out of the report."""
    base = EvalInfo(experiment="exp", spec_mode="base", limit=None, data={"kind": "local"},
                    lm_eval_version="0.4.13", arms=("main", "pr", "main.r2"))
    dspark = EvalInfo(experiment="exp", spec_mode="dspark", limit=DOCS, data={"kind": "local"},
                      lm_eval_version="0.4.13", arms=("main", "main.r2", "pr"))
    no_main = EvalInfo(experiment="exp", spec_mode="base", limit=5, data={"kind": "hub"},
                       lm_eval_version="0.4.13", arms=("pr",))
    wrong = EvalInfo(experiment="exp", spec_mode="dspark", limit=7, data={"kind": "hub"},
                     lm_eval_version="0.4.13", arms=("main", "pr"))
    apart = EvalInfo(experiment="exp", spec_mode="base", limit=3, data={"kind": "hub"},
                     lm_eval_version="0.4.13", arms=("main", "pr"))
    return [
        ("base-all", base, [
            ("pr", _arm("pr", "pr", 1, PR), PR),
            ("main.r2", _arm("main.r2", "main", 2, REPEAT), REPEAT),
            ("main", _arm("main", "main", 1, MAIN), MAIN),
            ("main.r3", _arm("main.r3", "main", 3, MAIN, valid=False), None),
        ]),
        ("dspark-n30", dspark, [
            ("main", _arm("main", "main", 1, MAIN, spec_mode="dspark", limit=DOCS,
                          counters=(60, 45)), MAIN),
            ("main.r2", _arm("main.r2", "main", 2, REPEAT, spec_mode="dspark", limit=DOCS,
                             counters=(64, 44)), REPEAT),
            ("pr", _arm("pr", "pr", 1, PR, spec_mode="dspark", limit=DOCS,
                        warnings=["lm-eval reports strict-match 0.5100 but its samples give "
                                  "0.5000"], counters=(50, 50)), PR),
            ("pr.r2", None, PR),  # verdicts without arm.json: unfinished
        ]),
        ("base-n5", no_main, [("pr", _arm("pr", "pr", 1, PR, limit=5), PR)]),
        ("dspark-n7", wrong, [
            ("main", _arm("main", "main", 1, WRONG, spec_mode="dspark", limit=7), WRONG),
            ("pr", _arm("pr", "pr", 1, WRONG, spec_mode="dspark", limit=7), WRONG),
        ]),
        ("base-n3", apart, [
            ("main", _arm("main", "main", 1, WRONG, limit=3), WRONG),
            ("pr", _arm("pr", "pr", 1, RIGHT, limit=3), RIGHT),
        ]),
    ]


def _write(results: Path) -> None:
    """Each evaluation as the pipeline and the server session write it."""
    for folder, info, arms in _evaluations():
        eval_dir = gsm8k_dir(results, "exp") / folder
        write_eval_info(eval_dir, info)
        for label, record, verdicts in arms:
            if record is not None:  # the session's record write (e2e.session.session)
                atomic_write_json(eval_dir / label / "arm.json", record.model_dump(mode="json"))
            if verdicts is not None and (record is None or record.valid):
                write_verdicts(eval_dir / label / VERDICTS_FILE, verdicts)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _outputs(results: Path) -> dict[str, bytes]:
    report = gsm8k_report(read_evaluations(results, "exp"))
    return {"gsm8k.md": gsm8k_markdown(report), "gsm8k.csv": gsm8k_csv(report),
            "gsm8k.json": (dumps(gsm8k_json(report)) + "\n").encode("utf-8")}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gsm8k") / "results"
    _write(root)
    if os.environ.get("E2E_UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        shutil.copytree(root, GOLDEN / "results")
        for name, data in _outputs(root).items():
            (GOLDEN / name).write_bytes(data)
    return root


def test_the_store_writes_the_golden_records(results):
    assert _files(results) == _files(GOLDEN / "results")


def test_records_read_back_and_written_again_are_the_same_bytes(tmp_path):
    """The store reads each golden file as its record, and writes it back unchanged."""
    eval_dir = GOLDEN / "results" / "exp" / "gsm8k" / "dspark-n30"
    info = read_eval_info(eval_dir)
    arm = read_arm(eval_dir / "pr")
    verdicts = read_verdicts(eval_dir / "pr" / VERDICTS_FILE)
    write_eval_info(tmp_path, info)
    atomic_write_json(tmp_path / "arm.json", arm.model_dump(mode="json"))
    write_verdicts(tmp_path / VERDICTS_FILE, verdicts)
    for name in ("eval.json", "arm.json", VERDICTS_FILE):
        source = eval_dir / (name if name == "eval.json" else f"pr/{name}")
        assert (tmp_path / name).read_bytes() == source.read_bytes(), name


def test_the_report_is_the_golden_bytes():
    outputs = _outputs(GOLDEN / "results")
    for name, data in outputs.items():
        assert data == (GOLDEN / name).read_bytes(), name


def test_e2e_report_writes_the_golden_report(tmp_path):
    from typer.testing import CliRunner

    from e2e.commands import app

    shutil.copytree(GOLDEN / "results", tmp_path / "results")
    done = CliRunner().invoke(app, ["report", str(tmp_path / "results" / "exp")])
    assert done.exit_code == 0, done.output
    report = tmp_path / "results" / "exp" / "report"
    assert (report / "gsm8k.md").read_bytes() == (GOLDEN / "gsm8k.md").read_bytes()
    assert (report / "gsm8k.csv").read_bytes() == (GOLDEN / "gsm8k.csv").read_bytes()
    assert (GOLDEN / "gsm8k.md").read_text(encoding="utf-8") in done.output
