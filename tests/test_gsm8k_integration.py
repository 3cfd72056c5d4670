"""One short GSM8K run against the real vLLM CPU server of the embedded default: lm-eval
over the local files, a fresh server per arm, the speculator's counters, the report; the
secrets planted in the server's config (an API key that lm-eval sends, a token in the server's
environment) are in no file it writes (arm records, lm-eval's output, logs) and no output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted import Planted

from e2e.config import load_experiment
from e2e.gsm8k.run import Runner, resolve_plan, run_gsm8k
from e2e.results.gsm8k import read_arm

pytest.importorskip("lm_eval")
DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gsm8k").resolve()


@pytest.mark.server
@pytest.mark.skipif(not (DATA / "test.jsonl").is_file(), reason=f"no GSM8K data at {DATA}")
def test_gsm8k_main_and_pr_with_speculator(tmp_path, capfd):
    planted = Planted("GSM8K")
    experiment = load_experiment(None)
    # Other e2e processes on this host may hold the one-server lock for a while.
    experiment = experiment.override("server", lock_wait_s=900, **planted.server(experiment.server))
    plan = resolve_plan(experiment, arms="main,pr", dspark=True, limit=5,
                        concurrency=4, data=DATA, results=tmp_path)
    report = run_gsm8k(plan, Runner(log=print), progress=False)

    section = report.sections[0]
    assert (section.spec_mode, section.limit) == ("dspark", 5)
    assert [a.label for a in section.arms] == ["main", "pr"]
    assert all(a.n == 5 for a in section.arms)
    pr = section.arms[1]
    assert pr.agreement is not None and pr.agreement.n == 5
    for arm in section.arms:
        # n-gram drafts on the tiny model's repetitive output move the counters
        assert arm.acceptance_length is not None and arm.acceptance_length >= 1.0
        result = read_arm(plan.eval_dir / arm.label)
        assert result.plugin.check == "passed" and result.plugin.mode == "inject"
        assert result.provenance["server_env"]["engine_version"] == "0.32.0"
        assert "--speculative-config" in result.server.argv
        assert result.lm_eval_results["sample_len"] == 5
        assert "--log_samples" in result.lm_eval_argv
        assert (plan.eval_dir / arm.label / "server.log").stat().st_size > 0
        samples = list((plan.eval_dir / arm.label / "lm_eval").glob("*/samples_e2e_gsm8k_local_*.jsonl"))
        rows = [json.loads(line) for line in samples[0].read_text().splitlines()]
        assert {r["filter"] for r in rows} == {"strict-match", "flexible-extract"}
        assert sorted({r["doc_id"] for r in rows}) == [0, 1, 2, 3, 4]
    md = (tmp_path / "default" / "gsm8k" / "gsm8k.md").read_text()
    assert "| dspark (limit 5) acceptance length |" in md
    assert "pr matches main's verdict on" in md
    assert result.server.argv.count("--api-key") == 2  # planted: e2e's and the config's
    out, err = capfd.readouterr()
    assert planted.leaks(tmp_path, output=out + err) == []
