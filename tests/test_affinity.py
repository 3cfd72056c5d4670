"""CPU placement: parsing, a refused set recorded as unpinned, and children that really run
inside the set they were started with."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from e2e.host import describe_affinity, pin_process, pinned_process, spawn_pinned
from e2e.host.affinity import format_cpus, group_placement
from e2e.names import parse_cpus
from e2e.errors import ConfigError

ONLINE = sorted(os.sched_getaffinity(0))
MISSING = str(max(ONLINE) + 1000)  # a core this machine does not have


@pytest.mark.parametrize("text, cores", [
    ("0", {0}), ("0-1", {0, 1}), ("0,2", {0, 2}), (" 0-2, 5 ", {0, 1, 2, 5}), ("3-3", {3}),
])
def test_parse_cpus(text, cores):
    assert parse_cpus(text) == frozenset(cores)
    assert parse_cpus(format_cpus(cores)) == frozenset(cores)


@pytest.mark.parametrize("text", ["", " ", "a", "1-", "-1", "2-1", "0,,1", "0;1", "1.5"])
def test_parse_cpus_refuses_bad_text(text):
    with pytest.raises(ConfigError, match="CPU set"):
        parse_cpus(text)


def test_format_cpus():
    assert format_cpus({0, 1, 3, 5, 6, 7}) == "0-1,3,5-7"
    assert format_cpus([]) == ""


def _child_mask(code: str = "import os; print(sorted(os.sched_getaffinity(0)))") -> list[int]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout)  # a list of ints printed by the child


def test_child_started_inside_spawn_pinned_has_the_set():
    core = ONLINE[-1]
    before = sorted(os.sched_getaffinity(0))
    with spawn_pinned(str(core)) as placement:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"],
                                 start_new_session=True)
    try:
        assert placement.applied == [core] and placement.refused is None
        assert sorted(os.sched_getaffinity(0)) == before  # the parent's mask is restored
        assert sorted(os.sched_getaffinity(child.pid)) == [core]
        assert describe_affinity(child.pid) == [core]  # its whole process group
        rows = group_placement(child.pid)
        assert [r.pid for r in rows] == [child.pid] and rows[0].cores == [core]
    finally:
        child.kill()
        child.wait()


def test_refused_set_runs_unpinned_and_says_why():
    before = sorted(os.sched_getaffinity(0))
    with spawn_pinned(MISSING) as placement:
        mask = _child_mask()
    assert placement.applied is None and placement.requested == MISSING
    assert "refused" in placement.refused and "unpinned" in placement.refused
    assert mask == before and placement.allowed == before
    assert sorted(os.sched_getaffinity(0)) == before


def test_pin_process_pins_every_thread_and_refusal_changes_nothing():
    before = sorted(os.sched_getaffinity(0))
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        refused = pin_process(MISSING)
        assert refused.applied is None and "unpinned" in refused.refused
        assert sorted(os.sched_getaffinity(worker.native_id)) == before
        placement = pin_process(str(ONLINE[0]))
        assert placement.applied == [ONLINE[0]] and placement.allowed == [ONLINE[0]]
        assert sorted(os.sched_getaffinity(worker.native_id)) == [ONLINE[0]]
        assert _child_mask() == [ONLINE[0]]  # children inherit it
    finally:
        stop.set()
        worker.join()
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), before)
            except ProcessLookupError:
                pass  # a thread of another test's pool ended since the listing
    assert pin_process(None).applied is None


def test_pinned_process_restores_every_thread():
    before = sorted(os.sched_getaffinity(0))
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        with pinned_process(str(ONLINE[-1])) as placement:
            assert placement.applied == [ONLINE[-1]]
            assert sorted(os.sched_getaffinity(worker.native_id)) == [ONLINE[-1]]
        assert sorted(os.sched_getaffinity(0)) == before
        assert sorted(os.sched_getaffinity(worker.native_id)) == before
        assert _child_mask() == before
    finally:
        stop.set()
        worker.join()


def test_busy_processes_get_distinct_physical_cores_before_siblings():
    from e2e.host import spread_cores

    siblings = {0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (0, 1), 4: (1, 0)}  # cpu -> (package, core)
    assert spread_cores({3, 1, 0, 2, 4}, core_of=siblings.get) == [0, 2, 4, 1, 3]
    # topology unknown
    assert spread_cores({2, 0, 1}, core_of=lambda cpu: None) == [0, 1, 2]

