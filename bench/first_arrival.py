"""How late an open loop's first arrival is sent, in fresh client processes: a 5-arrival schedule
(the first at 0) against a local scripted server, each run in a new process (so the event
loop's start-up, uvloop's import included, is part of it), optionally beside ``--hogs`` busy
processes. Prints one line per e2e checkout given.

    python bench/first_arrival.py [--runs 5] [--hogs 2] CHECKOUT [CHECKOUT ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE = f'''
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from sse_server import ScriptedServer, good, stream
from e2e.load.generator import LoadSpec, run_measured_load

async def respond(payload, writer):
    await stream(writer, good(2))

with ScriptedServer(respond, process=True) as server:
    spec = LoadSpec(base_url=server.base_url, model="m", prompts=[[5, 6, 7]] * 5, output_len=2,
                    concurrency=1, at_s=[0.0, 0.02, 0.04, 0.06, 0.08])
    out = run_measured_load(spec, progress=False)
print(min(out.records, key=lambda r: r.index).send_s * 1000)
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=0)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    try:
        for checkout in args.checkouts:
            late = []
            for _ in range(args.runs):
                out = subprocess.run([sys.executable, "-c", ONE], capture_output=True, text=True,
                                     env={**os.environ, "PYTHONPATH": checkout}, check=True)
                late.append(float(out.stdout.split()[-1]))
            print(f"{checkout}: first arrival late by "
                  + " ".join(f"{x:.2f}" for x in late) + f" ms ({args.hogs} hogs)")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
