"""Acceptance held fixed: the profile's ``pinned``, what reaches vLLM, the plugin's synthetic
branch for vLLM's CPU rejection kernels (against vLLM's own code in the server environment),
and GSM8K's refusal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e.config import load_experiment, parse_experiment
from e2e.errors import ConfigError
from e2e.session.launch import speculative_config

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "standins" / "vllm032_synthetic.py"

torch = pytest.importorskip("torch")


def _raw(**profile):
    raw = load_experiment().model_dump(mode="json")
    raw["speculators"]["dspark"].update(profile)
    return raw


def test_a_pinned_profile_runs_vllms_synthetic_sampling_at_that_length():
    experiment = parse_experiment(_raw(pinned=3.2))
    config = speculative_config(experiment, "dspark")
    assert config["rejection_sample_method"] == "synthetic"
    assert config["synthetic_acceptance_length"] == 3.2
    assert "pinned" not in config and config["method"] == "ngram"
    plain = speculative_config(load_experiment(), "dspark")
    assert "rejection_sample_method" not in plain and "pinned" not in plain


@pytest.mark.parametrize("bad, says", [
    (0.5, r"\[1, 4\]"), (4.5, r"\[1, 4\]"), ("fast", "baseline"), (True, "a number"),
    (float("inf"), "a number"), (float("nan"), "a number"),
])
def test_a_bad_pin_is_refused_naming_the_key(bad, says):
    with pytest.raises(ConfigError, match=f"speculators.dspark.pinned.*{says}"):
        parse_experiment(_raw(pinned=bad))


def test_a_pin_beside_vllms_own_synthetic_keys_is_refused():
    with pytest.raises(ConfigError, match="rejection_sample_method"):
        parse_experiment(_raw(pinned=3.0, rejection_sample_method="synthetic"))


def test_pinned_to_renames_the_experiment_so_pinned_runs_get_their_own_folder():
    pinned = load_experiment().pinned_to(3.47)
    assert pinned.name == "default-pinned" and pinned.pinned() == 3.47
    assert pinned.pinned_to(3.0).name == "default-pinned"
    with pytest.raises(ConfigError, match=r"\[1, 4\]"):
        load_experiment().pinned_to(9.0)


@pytest.mark.slow  # over 1.5 s here (imports, a CLI process)
def test_the_server_gets_the_synthetic_config_and_the_plugin_the_pin():
    from e2e.session import server_launch

    launch = server_launch(load_experiment().pinned_to(3.2), "main", dspark=True, dry=True)
    spec = json.loads(launch.args[launch.args.index("--speculative-config") + 1])
    assert spec["rejection_sample_method"] == "synthetic"
    assert spec["synthetic_acceptance_length"] == 3.2
    assert launch.env["E2E_PINNED_ACCEPTANCE"] == "3.2"
    plain = server_launch(load_experiment(), "main", dspark=True, dry=True)
    assert "E2E_PINNED_ACCEPTANCE" not in plain.env


def _kernel_inputs(drafts_per_req, k=3):
    flat = [t for row in drafts_per_req for t in row]
    cu = torch.tensor([len(r) for r in drafts_per_req]).cumsum(0).to(torch.int32)
    out = torch.full((len(drafts_per_req), k + 1), -1, dtype=torch.int32)
    return out, cu, torch.tensor(flat, dtype=torch.int32)


def test_the_greedy_branch_accepts_by_vllms_rule():
    from e2e.plugin.synthetic import greedy_synthetic

    # conditional rates of length 3.0 with 3 draft tokens: [1, 1, 0]
    out, cu, drafts = _kernel_inputs([[11, 12, 13], [21, -1, 23], [31, 32], []])
    argmax = torch.tensor([90, 91, 92, 93, 94, 95, 96, 97], dtype=torch.int64)[: len(drafts)]
    bonus = torch.tensor([[101], [102], [103], [104]], dtype=torch.int32)
    uniform = torch.full((len(drafts),), 0.5, dtype=torch.float64)
    rates = torch.tensor([1.0, 1.0, 0.0])
    greedy_synthetic(out, cu, drafts, argmax, bonus, None, 3, uniform, rates)
    assert out.tolist() == [
        [11, 12, 92, -1],    # third rejected: the target's argmax there, no bonus
        [21, 94, -1, -1],    # padding (-1) is rejected whatever the rate
        [31, 32, 103, -1],   # a short draft fully accepted gets the bonus
        [104, -1, -1, -1],   # no draft: the bonus token only
    ]
    # a non-greedy request is left to the random kernel
    out2, cu2, drafts2 = _kernel_inputs([[11, 12, 13]])
    greedy_synthetic(out2, cu2, drafts2, argmax[:3], bonus[:1], torch.tensor([False]), 3,
                     uniform[:3], rates)
    assert out2.tolist() == [[-1, -1, -1, -1]]


def test_the_random_branch_takes_the_recovered_token_and_skips_greedy_requests():
    from e2e.plugin.synthetic import random_synthetic

    out, cu, drafts = _kernel_inputs([[11, 12, 13], [21, 22, 23]])
    recovered = torch.tensor([81, 82, 83, 84, 85, 86], dtype=torch.int32)
    uniform = torch.tensor([0.1, 0.7, 0.2, 0.1, 0.1, 0.1], dtype=torch.float64)
    rates = torch.tensor([1.0, 0.6, 1.0])
    random_synthetic(out, cu, drafts, torch.tensor([[101], [102]], dtype=torch.int32), recovered,
                     uniform, torch.tensor([False, True]), 3, rates)
    assert out.tolist() == [[11, 82, -1, -1], [-1, -1, -1, -1]]


def test_the_wrapped_kernel_calls_vllms_own_without_synthetic_mode():
    from e2e.plugin.synthetic import wrap

    calls = []

    def vllm_kernel(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax,
                    bonus_token_ids, is_greedy, max_spec_len, uniform_probs=None,
                    synthetic_conditional_rates=None, SYNTHETIC_MODE=False):
        assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
        calls.append("vllm")

    def mine(**kwargs):
        calls.append(sorted(kwargs))

    kernel = wrap(vllm_kernel, mine, ("output_token_ids", "synthetic_conditional_rates"))
    kernel(1, 2, 3, 4, 5, None, 3)
    kernel(1, 2, 3, 4, 5, None, 3, 6, 7, True)  # positionally, as vLLM's dispatcher forwards
    assert calls == ["vllm", ["output_token_ids", "synthetic_conditional_rates"]]
    import inspect
    assert list(inspect.signature(kernel).parameters) == list(inspect.signature(vllm_kernel).parameters)


@pytest.fixture(scope="module")
def server_python(default_experiment) -> Path:
    from e2e.session.builds import python_path

    path = python_path(default_experiment.server.build)
    if not path.exists():
        if os.environ.get("E2E_SKIP_SERVER_TESTS"):
            pytest.skip(f"the server environment is not built ({path})")
        from e2e.session import resolve_python

        path = resolve_python(default_experiment.server.build)
    return path


@pytest.mark.slow  # imports vLLM in the server environment (~15-50 s)
def test_vllms_cpu_path_holds_acceptance_at_the_pinned_length(server_python, tmp_path):
    out = tmp_path / "synthetic.json"
    done = subprocess.run([str(server_python), str(HARNESS), str(out)],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["platform"] == "CpuPlatform"
    # the gap is real: vLLM's CPU kernel as it ships refuses synthetic mode
    assert got["vllm_alone"] == "refused: Synthetic acceptance not supported with CPU sampling"
    assert got["said"] and "synthetic acceptance installed" in got["said"][0]
    for length, seen in got["lengths"].items():
        # 6000 requests of 3 drafts: the schedule's mean within 4 binomial sd (< 0.03)
        assert seen["mean"] == pytest.approx(float(length), abs=0.03), length
        assert seen["per_pos"] == pytest.approx(seen["rates"], abs=0.03), length
    assert got["lengths"]["4.0"]["bonus_rows"] == 6000 and got["lengths"]["2.0"]["bonus_rows"] == 0
    assert got["padded_rows_last"] == [3] and got["unpadded_rows_bonus"] == [5]
    assert got["random"]["mean"] == pytest.approx(2.5, abs=0.03)
    assert 9 in got["random"]["rejected_tokens"]  # a rejected random request: the recovered token


@pytest.mark.slow  # over 1.5 s here (imports, a CLI process)
def test_gsm8k_refuses_a_pinned_profile():
    from e2e.gsm8k.run import resolve_plan

    with pytest.raises(ConfigError, match="answers would be synthetic"):
        resolve_plan(load_experiment().pinned_to(3.2), arms="main,pr", dspark=True, limit=10)
    resolve_plan(load_experiment().pinned_to(3.2), arms="main,pr", dspark=False, limit=10)


@pytest.mark.slow  # over 1.5 s here (imports, a CLI process)
def test_e2e_gsm8k_exits_2_on_a_pinned_config(tmp_path):
    import subprocess
    import sys

    raw = (ROOT / "e2e" / "configs" / "default.toml").read_text()
    config = tmp_path / "pinned.toml"
    config.write_text(raw.replace("prompt_lookup_min = 2", "prompt_lookup_min = 2\npinned = 3.2"))
    done = subprocess.run([sys.executable, "-m", "e2e.cli", "gsm8k", "--config", str(config),
                           "--arms", "main,pr", "--dspark", "--limit", "5",
                           "--results", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "answers would be synthetic" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def _write_runs(folder: Path, lengths: dict[str, list[float]], *, pinned=None) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from test_spec_attribution import _record

    for arm, values in lengths.items():
        for repeat, length in enumerate(values, start=1):
            rec = _record(arm, repeat, tpot=2.0, length=length, rates=[0.9, 0.8, 0.5])
            # a run's config snapshot names the speculator profile it ran, as e2e writes it
            profile = {"method": "ngram"} if pinned is None else {"pinned": pinned}
            rec = rec.model_copy(update={"config": {
                **rec.config, "speculators": {"dspark": profile}}})
            (folder / rec.run_id).mkdir(parents=True)
            (folder / rec.run_id / "run.json").write_text(rec.model_dump_json())


@pytest.mark.slow  # over 1.5 s here (reads and summarizes runs)
def test_pin_baseline_is_the_median_of_mains_measured_acceptance(tmp_path):
    from e2e.commands._options import pin_acceptance

    experiment = load_experiment()
    _write_runs(tmp_path / "default", {"main": [3.50, 3.61, 3.40], "pr": [2.0, 2.0, 2.0]})
    pinned = pin_acceptance(experiment, "baseline", tmp_path)
    assert pinned.pinned() == 3.5 and pinned.name == "default-pinned"
    assert pin_acceptance(experiment, "3.25", tmp_path).pinned() == 3.25
    assert pin_acceptance(experiment, None, tmp_path) is experiment
    # a profile's "baseline" resolves the same way without the flag
    raw = load_experiment().model_dump(mode="json")
    raw["speculators"]["dspark"]["pinned"] = "baseline"
    assert pin_acceptance(parse_experiment(raw), None, tmp_path).pinned() == 3.5
    # resuming: a pinned folder begun before keeps its pin, whatever main's runs say now
    _write_runs(tmp_path / "default-pinned", {"main": [3.3]}, pinned=3.3)
    assert pin_acceptance(experiment, "baseline", tmp_path).pinned() == 3.3


def test_pin_baseline_without_unpinned_runs_of_main_says_what_to_do(tmp_path):
    from e2e.commands._options import pin_acceptance

    with pytest.raises(ConfigError, match="run `e2e sweep --dspark --arms main` first"):
        pin_acceptance(load_experiment(), "baseline", tmp_path)
    _write_runs(tmp_path / "default", {"main": [3.0, 3.0, 3.0]}, pinned=3.0)  # pinned: not measured
    with pytest.raises(ConfigError, match="no valid reported run"):
        pin_acceptance(load_experiment(), "baseline", tmp_path)
    with pytest.raises(ConfigError, match="give an acceptance length"):
        pin_acceptance(load_experiment(), "fast", tmp_path)
    with pytest.raises(ConfigError, match=r"\[1, 4\]"):
        pin_acceptance(load_experiment(), "7", tmp_path)


@pytest.mark.slow  # over 1.5 s here (reads and summarizes runs)
def test_a_pinned_report_says_so_first(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from test_spec_attribution import _sweep

    from e2e.analysis.sweep.aggregate import summarize
    from e2e.render import render_github, report_json
    from e2e.render.markdown import render_markdown

    recs = [r.model_copy(update={"config": {**r.config, "speculators": {"dspark": {"pinned": 3.47}}}})
            for r in _sweep(1.1, 1.0)]
    summary = summarize(recs)
    assert summary.pinned == (3.47,)
    assert "**Acceptance was pinned** at acceptance length 3.47" in render_markdown(summary)
    assert "**Acceptance was pinned**" in render_github(summary)
    assert report_json(summary)["pinned_acceptance"] == [3.47]
    assert summarize(_sweep(1.1, 1.0)).pinned == ()
    assert "pinned" not in render_markdown(summarize(_sweep(1.1, 1.0))).split("## Headline")[0]


@pytest.mark.server
def test_a_pinned_run_on_the_cpu_default_holds_acceptance_at_the_pin(default_experiment,
                                                                    server_python, tmp_path):
    """The real CPU server: vLLM refuses synthetic sampling there by itself; with e2e's plugin a
    pin of 3.0 (vLLM's schedule [1, 1, 0]) accepts the first two draft tokens of every draft and
    never the third."""
    import e2e.session as session
    from conftest import small
    from e2e.plan import RunSpec

    experiment = small(default_experiment).pinned_to(3.0)
    spec = RunSpec.resolve(experiment, arm="main", concurrency=1, dspark=True, prompts=2,
                           output_len=64)
    folder, record = session.run_unit(experiment, spec, tmp_path,
                                      session.SessionOptions(progress=False))
    assert record.valid, record.invalid_reasons
    log = (folder / "server.log").read_text()
    assert "synthetic acceptance installed in" in log
    assert '"rejection_sample_method": "synthetic"' in " ".join(record.server.argv)
    rates = record.metrics.acceptance_rates_per_pos
    # a draft of fewer than 2 tokens (n-gram) accepts fewer; never the third position
    assert rates[2] == 0.0 and rates[0] == 1.0 and rates[1] > 0.9
    assert 2.9 < record.metrics.acceptance_length <= 3.0
