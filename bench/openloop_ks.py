"""Do e2e's open-loop sends follow the seeded gamma arrival process as sent, not only as
scheduled? The loads of tests/test_load_openloop.py (scripted server in its own process, 2
output tokens per request): Poisson at 50 req/s over 2,000 requests and gamma shape 0.5 at
100 req/s over 1,000; the KS test of the send gaps against the process, the achieved rate and
whether the client flagged its own timing.

    python bench/openloop_ks.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_load_openloop import open_loop, send_gaps  # noqa: E402


def main() -> None:
    for n, rate, shape in ((2000, 50.0, 1.0), (1000, 100.0, 0.5)):
        outcome = open_loop(n, rate, shape)
        test = stats.kstest(send_gaps(outcome.records),
                            stats.gamma(a=shape, scale=1 / (rate * shape)).cdf)
        c = outcome.client
        print(json.dumps({"requests": n, "rate": rate, "burstiness": shape,
                          "achieved_rate": round(outcome.achieved_rate, 4),
                          "ks_d": round(test.statistic, 4), "ks_p": round(test.pvalue, 4),
                          "saturated": c.saturated, "saturated_because": c.saturated_because,
                          "loop_lag_ms_p99": round(c.loop_lag_ms_p99, 2),
                          "wait_share": c.wait_share and round(c.wait_share, 3)}))


if __name__ == "__main__":
    main()
