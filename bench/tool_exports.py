"""Make tests/data's AIPerf and GuideLLM files: one fresh vLLM CPU server of e2e's default
config (arm main, started and locked by e2e like any run's), then each tool against it.

    python bench/tool_exports.py --aiperf /tmp/aiperf-venv/bin/aiperf \
        --guidellm /tmp/guidellm-venv/bin/guidellm --out /tmp/tool-exports

Each tool runs from its own environment (neither installs beside e2e's pinned packages: both
would replace some, docs/how-to/interop.md says which), with the model folder as its tokenizer, a
few requests at concurrency 1, prompts of INPUT_LEN tokens and completions of OUTPUT_LEN
(ignore_eos). What each ran is printed and written to <out>/commands.txt.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

INPUT_LEN, OUTPUT_LEN, REQUESTS = 256, 16, 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiperf", help="the aiperf executable (its own environment)")
    parser.add_argument("--guidellm", help="the guidellm executable (its own environment)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--url", help="run the tools against this server instead of starting "
                        "e2e's (e.g. a tool's mock server, to try the commands)")
    args = parser.parse_args()

    from e2e.config import load_experiment
    from e2e.session import server_launch
    from e2e.session.server import ServerOptions, serve

    experiment = load_experiment()
    launch = server_launch(experiment, "main", dspark=False)
    args.out.mkdir(parents=True, exist_ok=True)
    options = ServerOptions.of(experiment.server)
    options = ServerOptions(**{**options.__dict__, "lock_wait_s": 3600.0})
    commands = []
    tokenizer = _tokenizer_copy(Path(launch.model), args.out / "tokenizer")
    if args.url:
        run_tools(args, args.url, launch.model, str(tokenizer), commands)
    else:
        with serve(launch, args.out / "server.log", options) as server:
            run_tools(args, server.base_url, server.model, str(tokenizer), commands)
    (args.out / "commands.txt").write_text("".join(shlex.join(c) + "\n" for c in commands))


def _tokenizer_copy(model: Path, folder: Path) -> Path:
    """The model's tokenizer.json with ``tokenizer_class = TokenizersBackend``: the tools'
    transformers 5 does not load e2e's tiny model's ``PreTrainedTokenizerFast`` class
    (``get_vocab`` raises NotImplementedError); the vocabulary is the same file."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "special_tokens_map.json", "config.json"):
        shutil.copy(model / name, folder / name)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "TokenizersBackend"
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def run_tools(args, url: str, model: str, tokenizer: str, commands: list) -> None:
    print(f"server {url}, model {model}", flush=True)
    if args.aiperf:
        cmd = [args.aiperf, "profile", "--model", model, "--url", url,
               "--endpoint-type", "completions", "--streaming", "--tokenizer", tokenizer,
               "--use-server-token-count",
               "--isl", str(INPUT_LEN), "--synthetic-input-tokens-stddev", "0",
               "--osl", str(OUTPUT_LEN), "--osl-stddev", "0",
               "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
               "--concurrency", "1", "--request-count", str(REQUESTS),
               "--warmup-request-count", "1", "--random-seed", "0",
               "--export-level", "records", "--no-auto-plot",
               "--artifact-dir", str(args.out / "aiperf"), "--ui-type", "none"]
        commands.append(cmd)
        print(shlex.join(cmd), flush=True)
        subprocess.run(cmd, check=False)
    if args.guidellm:
        scenario = {
            "metadata": {"name": "e2e-interop", "description": "tests/data/guidellm"},
            "spec": {
                "backend": {"kind": "openai_http", "target": url, "model": model,
                            "request_format": "/v1/completions", "stream": True,
                            "extras": {"body": {"ignore_eos": True, "temperature": 0}}},
                "profile": {"kind": "concurrent", "streams": [1]},
                "tokenizer": {"kind": "huggingface_auto", "model": tokenizer},
                "data": [{"kind": "synthetic_text", "prompt_tokens": INPUT_LEN,
                          "output_tokens": OUTPUT_LEN}],
                "constraints": [{"kind": "max_requests", "count": REQUESTS}],
                "seed": {"kind": "static", "value": 0},
                "outputs": [{"kind": "json",
                             "path": str(args.out / "guidellm" / "benchmarks.json")}]}}
        (args.out / "guidellm").mkdir(exist_ok=True)
        path = args.out / "guidellm" / "scenario.json"
        path.write_text(json.dumps(scenario, indent=2) + "\n")
        cmd = [args.guidellm, "run", "--scenario", str(path), "--disable-console-interactive"]
        commands.append(cmd)
        print(shlex.join(cmd), flush=True)
        subprocess.run(cmd, check=False)


if __name__ == "__main__":
    main()
