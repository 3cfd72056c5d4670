"""Two nights of `e2e nightly` on the real vLLM CPU server (the embedded config cut small, as
tests/test_nightly_server.py cuts it, with 128-token answers and 8 prompts a run): an unchanged
night's outputs are identical to the reference's and it passes; a night whose build perturbs
the first layer's MLP output by 1 % (`--arm-setting perturb=0.01`) answers some prompts
otherwise, its summary says so first and it exits 1 (`outputs_fail`'s default). About 10
minutes on a busy 2-core host; results under --out.

    PYTHONPATH=. python bench/nightly_outputs_server.py --out /tmp/nights
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_nightly_server import tiny_config  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    config, results = tiny_config(out), out / "results"
    text = config.read_text()
    for old, new in [("output_len = 32", "output_len = 128"),
                     ("prompts_per_concurrency = 2", "prompts_per_concurrency = 4"),
                     ("max_runs = 4", "max_runs = 2")]:
        text = text.replace(old, new)
    config.write_text(text)
    for date, extra in (("2026-01-01", []), ("2026-01-02", ["--arm-setting", "perturb=0.01"])):
        done = subprocess.run([sys.executable, "-m", "e2e.cli", "nightly", "--config", str(config),
                               "--results", str(results), "--date", date, "-q", *extra],
                              capture_output=True, text=True)
        folder = results / "nightly" / date / "nightly"
        checks = json.loads((folder / "judgement.json").read_text())["outputs"]
        print(f"{date} {' '.join(extra) or '(unchanged)'}: exit {done.returncode}")
        for check in checks:
            print(f"  {check['line']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
