"""``e2e bisect``: the search alone (a pure function over a measure callback), the blocked
comparison that decides good or bad, and the whole command against a local git repository of
ten commits whose scripted server (a tiny installable package speaking /health, streaming
/v1/completions with usage, and /metrics with the server TPOT histogram and spec-decode
counters) gets 10 % slower at a known commit: it names that commit after at most
ceil(log2(10)) + 1 builds, and a rerun measures nothing again."""

from __future__ import annotations

import json
import math
import subprocess
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.analysis.nightly.bisect import blocked_change, classify
from e2e.nightly.bisect import search_first_bad
from e2e.results import BlockedChange

# --- the search: pure ----------------------------------------------------------------------

COMMITS = [f"c{i}" for i in range(10)]  # c0 good, c9 bad


@pytest.mark.parametrize("first_bad", range(1, 10))
def test_search_names_the_first_bad_commit_in_at_most_log2_measurements(first_bad):
    calls = []

    def measure(commit):
        calls.append(commit)
        return "bad" if int(commit[1:]) >= first_bad else "good"

    result = search_first_bad(COMMITS, measure)
    assert result.first_bad == f"c{first_bad}" and result.last_good == f"c{first_bad - 1}"
    assert len(calls) <= math.ceil(math.log2(len(COMMITS) - 1))  # 4 for nine candidates
    assert result.measured == tuple(calls) and "c0" not in calls and "c9" not in calls


def test_search_needs_two_commits_and_good_or_bad():
    with pytest.raises(ValueError):
        search_first_bad(["c0"], lambda c: "bad")
    with pytest.raises(ValueError, match="not good or bad"):
        search_first_bad(COMMITS, lambda c: "maybe")
    assert search_first_bad(["c0", "c1"], lambda c: 1 / 0).first_bad == "c1"  # nothing to measure


def test_blocked_change_pairs_rounds_and_classify_decides():
    good = {1: 10.0, 2: 10.5, 3: 9.8, 4: 10.2}
    slower = {k: v * 1.10 for k, v in good.items()}          # +10 % in every round
    c = blocked_change(slower, good)
    assert c.pct == pytest.approx(10.0) and c.low == pytest.approx(10.0)  # no spread of ratios
    assert classify(c, threshold_pct=2.0, higher_is_better=False) == "bad"
    assert classify(c, threshold_pct=2.0, higher_is_better=True) == "good"  # a throughput rise
    same = {1: 10.05, 2: 10.45, 3: 9.82, 4: 10.18}
    assert classify(blocked_change(same, good), threshold_pct=2.0,
                    higher_is_better=False) == "good"
    noisy = BlockedChange(pct=3.0, low=-4.0, high=10.0, rounds=3)
    assert classify(noisy, threshold_pct=2.0, higher_is_better=False) is None  # more rounds
    assert classify(BlockedChange(5.0, None, None, 1), threshold_pct=2.0,
                    higher_is_better=False) is None


# --- the whole command, with real builds and a scripted server -----------------------------

SERVER = textwrap.dedent('''
    """A scripted stand-in for vLLM's OpenAI server: /health, streaming /v1/completions with
    usage (one token per STEP_S), /metrics with the server's TPOT histogram and spec counters."""
    import argparse, asyncio, json, time
    from vllm._speed import STEP_S

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _ = parser.parse_known_args()
    tpot = {"sum": 0.0, "count": 0}

    def chunk(data):
        return b"%x\\r\\n%s\\r\\n" % (len(data), data)

    def metrics():
        return ("# TYPE vllm:request_time_per_output_token_seconds histogram\\n"
                f'vllm:request_time_per_output_token_seconds_sum{{model_name="m"}} {tpot["sum"]}\\n'
                f'vllm:request_time_per_output_token_seconds_count{{model_name="m"}} {tpot["count"]}\\n'
                "# TYPE vllm:spec_decode_num_accepted_tokens counter\\n"
                "vllm:spec_decode_num_accepted_tokens_total 0\\n"
                "# TYPE vllm:spec_decode_num_drafts counter\\n"
                "vllm:spec_decode_num_drafts_total 0\\n"
                "# TYPE vllm:spec_decode_num_draft_tokens counter\\n"
                "vllm:spec_decode_num_draft_tokens_total 0\\n").encode()

    async def handle(reader, writer):
        while True:
            try:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            method, path = head.split(b" ")[:2]
            length = 0
            for line in head.split(b"\\r\\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length) if length else b""
            if method == b"GET":
                data = metrics() if path.startswith(b"/metrics") else b"{}"
                writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: %d\\r\\n\\r\\n%s" % (len(data), data))
                await writer.drain()
                continue
            req = json.loads(body)
            n, prompt = req["max_tokens"], len(req["prompt"])
            writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-type: text/event-stream\\r\\n"
                         b"transfer-encoding: chunked\\r\\n\\r\\n")
            start = time.perf_counter()
            times = []
            for i in range(n):
                delay = start + (i + 1) * STEP_S - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                event = {"choices": [{"index": 0, "text": " t", "finish_reason": None}]}
                writer.write(chunk(b"data: " + json.dumps(event).encode() + b"\\n\\n"))
                await writer.drain()
                times.append(time.perf_counter())
            tpot["sum"] += (times[-1] - times[0]) / (n - 1)
            tpot["count"] += 1
            usage = {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": n,
                                              "total_tokens": prompt + n}}
            writer.write(chunk(b"data: " + json.dumps(usage).encode() + b"\\n\\ndata: [DONE]\\n\\n"))
            writer.write(b"0\\r\\n\\r\\n")
            await writer.drain()

    async def main():
        server = await asyncio.start_server(handle, args.host, args.port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())
''')

PYPROJECT = textwrap.dedent('''
    [build-system]
    requires = ["setuptools>=68"]
    build-backend = "setuptools.build_meta"
    [project]
    name = "vllm"
    version = "0.0.1"
    [tool.setuptools.packages.find]
    include = ["vllm*"]
''')

SLOW_AT = 6  # the commit (1..9) from which every token takes 10 % longer


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path) -> list[str]:
    """A fake vLLM with ten commits; commit SLOW_AT makes decoding 10 % slower."""
    repo = root / "fake-vllm"
    pkg = repo / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    (repo / "vllm" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (repo / "vllm" / "entrypoints" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(SERVER)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    git("init", "-q", "-b", "main", cwd=repo)
    commits = []
    for i in range(10):
        step = 0.0033 if i >= SLOW_AT else 0.0030
        (repo / "vllm" / "_speed.py").write_text(f"STEP_S = {step}\n")
        (repo / "NOTES").write_text(f"change {i}\n")
        git("add", "-A", cwd=repo)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"change {i}", cwd=repo)
        commits.append(git("rev-parse", "HEAD", cwd=repo))
    return commits


def make_model(root: Path) -> Path:
    """A model folder with only a tokenizer.json (the scripted server needs no weights)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    folder = root / "model"
    folder.mkdir()
    vocab = {f"w{i}": i for i in range(200)}
    Tokenizer(WordLevel(vocab, unk_token="w0")).save(str(folder / "tokenizer.json"))
    return folder


# The scripted server paces tokens (3 ms, 3.3 ms from SLOW_AT on) and reports the TPOT it
# measured; on a busy 2-core host single runs still move by a few %, which the blocked
# rounds and --threshold 5 (half the step) absorb.
@pytest.mark.server  # builds five environments and starts about forty scripted servers (~2 min)
def test_bisect_names_the_commit_that_made_the_cell_slower(tmp_path, monkeypatch):
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    commits = make_repo(tmp_path)
    config = tmp_path / "bisect.toml"
    config.write_text(textwrap.dedent(f'''
        name = "fake"
        repeats = 3
        report_from_run = 1
        [server]
        model = "{make_model(tmp_path)}"
        startup_timeout_s = 60
        lock_wait_s = 900
        [server.build]
        git = {{ repo = "{tmp_path / 'fake-vllm'}", ref = "main" }}
        [load]
        input_len = 16
        output_len = 100
        prompts_per_concurrency = 3
        concurrencies = [1]
        warmup_requests = 1
        [arms.main]
    '''))
    from e2e.cli import app

    argv = ["bisect", "--config", str(config), "--arm", "main", "--metric",
            "server_tpot_ms_mean", "--good", commits[0], "--bad", "main", "--results",
            str(tmp_path / "results"), "--runs", "3", "--max-runs", "7", "--threshold", "5",
            "--quiet"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert f"first bad commit: {commits[SLOW_AT]}" in result.output
    assert f"last good commit: {commits[SLOW_AT - 1]}" in result.output

    (state_path,) = (tmp_path / "results" / "bisect").glob("*/bisect.json")
    state = json.loads(state_path.read_text())
    measured = state["result"]["measured"]
    builds = {commits[0], *measured}  # the good build is measured beside every midpoint
    assert len(builds) <= math.ceil(math.log2(10)) + 1
    envs = [p for p in (tmp_path / "home" / "envs").iterdir() if (p / "bin" / "python").exists()]
    assert len(envs) == len(builds)  # one environment per measured commit, nothing else
    for commit in measured:
        m = state["measurements"][commit]
        slower = commits.index(commit) >= SLOW_AT
        assert m["outcome"] == ("bad" if slower else "good")
        assert (m["pct"] > 5.0) if slower else (abs(m["pct"]) < 5.0)
    run_files = sorted(state_path.parent.glob("*/*/run.json"))
    assert len(run_files) >= 2 * 3 * len(measured)

    # resumable: the same command measures nothing again
    again = CliRunner().invoke(app, argv)
    assert again.exit_code == 0 and f"first bad commit: {commits[SLOW_AT]}" in again.output
    assert sorted(state_path.parent.glob("*/*/run.json")) == run_files


def test_bisect_refuses_an_arm_not_built_from_git(tmp_path):
    from e2e.cli import app

    result = CliRunner().invoke(app, ["bisect", "--good", "a", "--bad", "b", "--results",
                                      str(tmp_path)])
    assert result.exit_code == 2
    assert "not built from a git ref" in result.output
