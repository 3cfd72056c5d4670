"""A Ray host whose e2e differs from the driver's is refused before any unit runs on it.

A real 2-node Ray cluster on this machine (``ray.cluster_utils.Cluster``), as in
tests/test_ray_executor.py, but the second node's workers import e2e from a clone whose
kernel differs (its ``PYTHONPATH``). The driver runs in its own process, started in a folder
without e2e (Ray puts the driver's working folder first on every worker's path, which on one
machine would hand the second node the driver's e2e). The plan goes only to the second node
(its label); the run stops with the host's refusal, no unit was started and no server ran."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

import e2e  # noqa: E402
from e2e.plugin.source import plugin_sha256  # noqa: E402

pytestmark = pytest.mark.slow  # the whole module is the slow tier

ROOT = Path(e2e.__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

DRIVER = r'''
import json, sys
from pathlib import Path
import ray
from ray.cluster_utils import Cluster
import fakevllm
from e2e.config import ExecutorConfig
from e2e.errors import E2EError
from e2e.execute.ray import RayExecutor
from e2e.pipeline import execute
from e2e.plan import make_plan
from e2e.session import SessionOptions
from e2e.session.tinymodel import build_tiny_llama

root, clone = Path(sys.argv[1]), sys.argv[2]
def node(home, pool, extra):
    return {"num_cpus": 1, "resources": {"e2e_host": 1}, "labels": {"e2e-pool": pool},
            "env_vars": {"E2E_HOME": str(root / home), **extra}}
cluster = Cluster(initialize_head=True, head_node_args=node("home-a", "a", {}))
cluster.add_node(**node("home-b", "b", {"PYTHONPATH": clone}))
ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
out = {"said": []}
try:
    @ray.remote(num_cpus=0, resources={"e2e_host": 1}, label_selector={"e2e-pool": "b"})
    def host_e2e():
        import e2e
        return e2e.__file__
    out["host_e2e"] = ray.get(host_e2e.remote())
    pids = root / "pids"
    pids.mkdir()
    experiment = fakevllm.experiment(fakevllm.install(root / "fake"), str(build_tiny_llama()),
                                     pid_dir=pids)
    units = make_plan(experiment, arms=["main", "pr"], concurrencies=[1], spec_modes=[False],
                      runs=1)
    try:
        execute(experiment, units, root / "results",
                executor=RayExecutor(ExecutorConfig(kind="ray", labels={"e2e-pool": "b"})),
                session=SessionOptions(say=out["said"].append, progress=False))
        out["error"] = None
    except E2EError as exc:
        out["error"] = str(exc)
        out["error_type"] = type(exc).__name__
    out["servers"] = sorted(p.name for p in pids.iterdir())
    out["unit_files"] = sorted(str(p.relative_to(root / "results"))
                               for p in (root / "results").rglob("*") if p.is_file())
finally:
    ray.shutdown()
    cluster.shutdown()
print("RESULT " + json.dumps(out))
'''


def test_a_host_with_another_e2e_is_refused_before_any_unit(tmp_path):
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "e2e", clone / "e2e", ignore=shutil.ignore_patterns("__pycache__"))
    kernel = clone / "e2e" / "kernels" / "reference.py"
    kernel.write_text(kernel.read_text() + "\n# this host's kernel differs\n")
    theirs, ours = plugin_sha256(clone / "e2e"), plugin_sha256()
    assert theirs != ours
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "drive.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
           "E2E_HOME": str(tmp_path / "driver-home")}
    done = subprocess.run([sys.executable, "drive.py", str(tmp_path), str(clone)], cwd=driver,
                          env=env, capture_output=True, text=True, timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (done.stdout[-3000:], done.stderr[-3000:])
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert Path(out["host_e2e"]).resolve().is_relative_to(clone)  # the host's own e2e
    assert out["error_type"] == "E2EError", out
    assert "has another e2e: its plugin and kernels" in out["error"]
    assert f"(plugin_sha256 {theirs[:12]}, from {(clone / 'e2e').resolve()})" in out["error"]
    assert f"differ from the driver's ({ours[:12]}, from {ROOT / 'e2e'}" in out["error"]
    assert "no unit ran on it" in out["error"]
    assert not any(" on " in s and "attempt" in s for s in out["said"]), out["said"]
    assert out["servers"] == []
    assert not any(f.endswith(("run.json", "server.log")) for f in out["unit_files"])
