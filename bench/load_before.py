"""The load generator as it was before issue 18 (``drive()``: httpx ``aiter_lines`` + orjson),
against bench/load_ceiling.py's scripted server, pinned to the first core: chunks/s and client
CPU per chunk, for the before/after table in docs/explanation/load.md.

    git archive efc5986 e2e | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python bench/load_before.py /tmp/before [--requests 512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_ceiling import _server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_checkout", help="a folder holding the old e2e package")
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.old_checkout).resolve()))
    from e2e.load.generator import LoadSpec, drive  # the old one, first on sys.path

    if "httpx" not in Path(sys.modules["e2e.load.generator"].__file__).read_text():
        raise SystemExit(f"{args.old_checkout}: e2e/load/generator.py is not the httpx one")
    runs = []
    with _server(0.0) as url:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        for _ in range(args.repeats):
            spec = LoadSpec(base_url=url, model="m", prompts=[[1] * 16] * args.requests,
                            output_len=509, concurrency=64)
            cpu0, t0 = time.process_time(), time.perf_counter()
            records = asyncio.run(drive(spec))
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if not all(r.ok for r in records):
                raise SystemExit(f"a request failed: {next(r for r in records if not r.ok).error}")
            chunks = sum(len(r.chunk_times_s) for r in records)
            runs.append({"chunks_per_s": round(chunks / wall),
                         "client_cpu_us_per_chunk": round(cpu / chunks * 1e6, 2)})
    print(json.dumps({"before": runs, "load_average_1min": os.getloadavg()[0]}, indent=2))


if __name__ == "__main__":
    main()
