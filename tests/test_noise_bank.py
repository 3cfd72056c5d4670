"""The bank of real duet noise (``tests/data/noise_bank/duets.csv``, made by
``bench/noise_bank.py record`` from A/A nights of the embedded nightly) holds what the
simulations that resample it assume: each row one real duet of two servers of one build, in
time order within its night, its log ratio the judged metric's, the sides swapping slots from
round to round as the nightly's duets do."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from collections import defaultdict
from datetime import datetime

from conftest import ROOT

BANK = ROOT / "tests" / "data" / "noise_bank" / "duets.csv"
COLUMNS = ["condition", "night", "round", "duet", "started_at", "main_slot", "main_tpot_ms",
           "reference_tpot_ms", "main_interference", "reference_interference", "log_ratio"]


def rows() -> list[dict]:
    with BANK.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_every_duet_is_a_real_a_over_a_pair_in_time_order():
    nights: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows():
        nights[(row["condition"], row["night"])].append(row)
        a, b = float(row["main_tpot_ms"]), float(row["reference_tpot_ms"])
        assert a > 0 and b > 0
        assert math.isclose(float(row["log_ratio"]), math.log(a / b), abs_tol=1e-6)
        assert abs(float(row["log_ratio"])) < 0.5  # one build: no side twice the other's
    assert len({c for c, _ in nights}) >= 2  # more than one condition
    for key, night in nights.items():
        assert len(night) >= 8, key
        starts = [datetime.fromisoformat(r["started_at"]) for r in night]
        assert starts == sorted(starts), key
        rounds = [int(r["round"]) for r in night]
        assert rounds == list(range(1, len(night) + 1)), key
        slots = [int(r["main_slot"]) for r in night]
        assert all(x != y for x, y in zip(slots, slots[1:])), key  # the sides swap slots


def test_the_summary_reads_the_bank():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "noise_bank.py"), "summary",
                           str(BANK)], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    conditions = {r["condition"] for r in rows()}
    for condition in conditions:
        assert f"{condition}: " in done.stdout and "within-night sd" in done.stdout
