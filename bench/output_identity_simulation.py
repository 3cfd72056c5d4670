"""How often the output check calls "diverges more than A/A" for an arm that answers as main
does (false calls), and for one that changes a share of the answers (power), in the designs
e2e plans: main, main-repeat (the A/A), flag-off and pr in one cell, every run paired by
round, 32 x concurrency prompts per run (the default) or 8 x 3 windows (the calibration).

Noise model. In each run, each prompt's answer is the build's own answer or, with probability
q_i (batch-variant numerics: the prompt met another batch), one of its own variants, never
equal to another run's variant; q_i ~ Beta with mean ``q`` (``--q``; shape ``--q-shape``, so
that some prompts are fragile and most are not), the same prompt equally fragile on every
arm. A changed arm's own answer differs from main's on a share ``f`` (``--effects``) of the
prompts, in every run. Two runs of a round agree on a prompt exactly when both gave the
build's own answer and the builds' answers are equal. The comparisons are e2e's own
(``e2e.analysis.outputs.summarize_outputs`` on records made for each simulated sweep): flag-off and pr
tested against the A/A in every cell, Holm over the summary's tests.

    python bench/output_identity_simulation.py [--sims 400] [--q 0,0.02,0.1]
        [--effects 0.05,0.1,0.25] [--designs default-c1,default-c4,calibration]

Prints per design and q: the false-call rate of the null arm (flag-off, f = 0) and the power
of pr at each f, with the Monte Carlo standard error, and the seconds it took.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from e2e.analysis.outputs.compare import summarize_outputs
from e2e.results import MORE_THAN_AA
from test_aggregate import make_record  # noqa: E402

ARMS = ("main", "main-repeat", "flag-off", "pr")
DESIGNS = {  # name: (concurrency, prompts per run, rounds)
    "default-c1": (1, 32, 4),
    "default-c4": (4, 128, 4),
    "default-c64": (64, 2048, 4),
    "calibration": (1, 24, 4),
}


def one_sweep(rng, conc: int, prompts: int, rounds: int, q: float, shape: float,
              effect: float):
    """Records and outputs of one simulated sweep's cell; pr changes ``effect`` of answers."""
    if q > 0:
        a = q * shape / (1 - q)
        fragile = rng.beta(a, shape, size=prompts) if q < 1 else np.ones(prompts)
    else:
        fragile = np.zeros(prompts)
    changed = rng.random(prompts) < effect
    records, outputs = [], {}
    variant = iter(range(1, 10**9))
    for arm in ARMS:
        for r in range(1, rounds + 1):
            record = make_record(arm, conc, r)
            records.append(record)
            strays = rng.random(prompts) < fragile
            own = changed if arm == "pr" else np.zeros(prompts, bool)
            outputs[record.run_id] = {
                i: ((-next(variant),) if strays[i] else ((1, i) if own[i] else (0, i)))
                for i in range(prompts)}
    return records, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--q", default="0,0.02,0.1")
    parser.add_argument("--q-shape", type=float, default=0.5,
                        help="the Beta's second shape: small = a few fragile prompts")
    parser.add_argument("--effects", default="0.05,0.1,0.25")
    parser.add_argument("--designs", default="calibration,default-c1,default-c4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = []
    for design in args.designs.split(","):
        conc, prompts, rounds = DESIGNS[design]
        for q in (float(x) for x in args.q.split(",")):
            for effect in (float(x) for x in args.effects.split(",")):
                rng = np.random.default_rng([args.seed, int(q * 1e6), int(effect * 1e6), conc])
                started = time.monotonic()
                false_calls = hits = 0
                for _ in range(args.sims):
                    records, outputs = one_sweep(rng, conc, prompts, rounds, q, args.q_shape,
                                                 effect)
                    s = summarize_outputs(records, outputs)
                    false_calls += s.find("flag-off", conc, "base").verdict == MORE_THAN_AA
                    hits += s.find("pr", conc, "base").verdict == MORE_THAN_AA
                n = args.sims

                def rate(k: int) -> str:
                    p = k / n
                    return f"{p * 100:.1f} % ± {math.sqrt(p * (1 - p) / n) * 100:.1f}"

                rows.append({"design": design, "concurrency": conc, "prompts": prompts,
                             "rounds": rounds, "q": q, "effect": effect, "sims": n,
                             "false_calls_flag_off": rate(false_calls),
                             "power_pr": rate(hits),
                             "seconds": round(time.monotonic() - started, 1)})
                print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
