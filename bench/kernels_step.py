"""The per-step table on a GPU, where e2e's command line is not installed (torch, Triton and
CUDA; no pydantic): every way of building a decode step's SWA metadata timed per build and per
step (``e2e.kernels.step_bench``), written as step.json and step.md by ``e2e.render``. The same
table as ``e2e micro --per-step``.

    E2E_VLLM_OPS=vllm032_ops.py PYTHONPATH=$PWD python3 bench/kernels_step.py --out DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from e2e.kernels import step_bench


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/kernels_step.py")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rows", default="1,2,4,8,16,32,64,128,384")
    parser.add_argument("--vllm-ops", type=Path, default=None)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    from e2e.errors import E2EError
    from e2e.render import write_steps  # step.json and step.md (the standard library alone)

    try:
        spec = step_bench.StepSpec(rows=tuple(int(r) for r in args.rows.split(",")),
                                   runs=args.runs, calls=args.calls)
        result = step_bench.measure_steps(spec, ops_file=args.vllm_ops, dry_run=args.dry_run,
                                          log=lambda m: print(m, file=sys.stderr, flush=True))
        text, _ = write_steps(result, args.out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except E2EError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
