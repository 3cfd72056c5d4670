"""Every other tool's format e2e reads or writes, registered here once each: ``e2e import
<name>`` reads with ``READERS[name]`` (``e2e.interop.importing.import_file``), ``e2e export
--format <name>`` writes with ``WRITERS[name]``. A new format is a reader module (its
``READER``: the documents of a file, and one of them as a run) or a writer (the folder's runs
as files), and one line here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from e2e.interop import aiperf, guidellm, vllm_bench, vllm_bench_writer
from e2e.interop.importing import Reader

__all__ = ["READERS", "WRITERS", "Writer"]

# (results_dir, out, *, include_invalid, force) -> (files written, runs skipped and why)
Writer = Callable[..., tuple[list[Path], list[str]]]

READERS: dict[str, Reader] = {
    "vllm-bench": vllm_bench.READER,
    "aiperf": aiperf.READER,
    "guidellm": guidellm.READER,
}
WRITERS: dict[str, Writer] = {
    "vllm-bench": vllm_bench_writer.export_dir,
}
