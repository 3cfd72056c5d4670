"""The Ray executor's scaling: the same plan on a local Ray cluster of 1 node and of 2 nodes.

Each node is its own raylet on this machine (``ray.cluster_utils.Cluster``) advertising
``e2e_host: 1`` with its own $E2E_HOME (its own server lock). The server is the scripted vLLM
of tests/fakevllm.py behind e2e's real session, server and load generator, taking
``--unit-s`` seconds to become healthy: a fixed unit duration, so the figure shows the
scheduling, not this machine's cores. Prints the wall time of each and the ratio.

    python bench/ray_scaling.py [--unit-s 10] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fakevllm  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from e2e.pipeline import execute  # noqa: E402
from e2e.plan import make_plan  # noqa: E402
from e2e.execute.ray import RayExecutor  # noqa: E402
from e2e.session.session import SessionOptions  # noqa: E402


def timed_run(nodes: int, experiment, units, root: Path) -> float:
    """Wall seconds of ``execute`` over ``units`` on a fresh ``nodes``-node cluster (the
    cluster's start-up is not counted)."""
    def args(i: int) -> dict:
        return {"num_cpus": 1, "resources": {"e2e_host": 1},
                "env_vars": {"E2E_HOME": str(root / f"home-{nodes}-{i}")}}

    cluster = Cluster(initialize_head=True, head_node_args=args(0))
    for i in range(1, nodes):
        cluster.add_node(**args(i))
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    try:
        t0 = time.monotonic()
        outcome = execute(experiment, units, root / f"results-{nodes}", executor=RayExecutor(),
                          session=SessionOptions(progress=False))
        wall = time.monotonic() - t0
    finally:
        ray.shutdown()
        cluster.shutdown()
    bad = [r.run_id for r in outcome.ran if not r.valid]
    if bad or len(outcome.ran) != len(units):
        raise SystemExit(f"not every unit was made valid: {bad}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit-s", type=float, default=10.0,
                        help="seconds each scripted server takes to become healthy")
    parser.add_argument("--runs", type=int, default=2, help="rounds of the plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="e2e-ray-bench-") as tmp:
        root = Path(tmp)
        os.environ["E2E_HOME"] = str(root / "driver-home")
        from e2e.session.tinymodel import build_tiny_llama

        model = build_tiny_llama()
        experiment = fakevllm.experiment(fakevllm.install(root / "fake"), str(model),
                                         start_s=args.unit_s)
        units = make_plan(experiment, arms=["main", "pr"], concurrencies=[1],
                          spec_modes=[False, True], runs=args.runs)
        one = timed_run(1, experiment, units, root)
        two = timed_run(2, experiment, units, root)
    print(json.dumps({"units": len(units), "blocks": len(units) // 2, "unit_s": args.unit_s,
                      "one_node_s": round(one, 1), "two_nodes_s": round(two, 1),
                      "ratio": round(two / one, 3)}, indent=2))


if __name__ == "__main__":
    main()
