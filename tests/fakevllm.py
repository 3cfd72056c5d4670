"""A scripted vLLM for executor tests that cross process boundaries (Ray workers): a real
server process started by e2e's own ``serve`` (process group, /health, stop), speaking the
OpenAI completions stream with ``usage``, logging e2e's plugin line and moving the
spec-decode counters. It takes ``FAKE_START_S`` seconds to become healthy, so a unit lasts a
fixed time; it writes its pid to ``$FAKE_PID_DIR/<pid>`` while it runs (removed on SIGTERM)
so tests can see that no server survives.

``install(folder)`` writes the package (``vllm.entrypoints.openai.api_server``) under
``folder``; ``experiment(...)`` is the embedded default pointed at it."""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.config import Experiment, load_experiment

SERVER = r'''
import asyncio, json, os, signal, sys, time

args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

port, host = int(opt("--port")), opt("--host", "127.0.0.1")
settings = os.environ.get("E2E_PLUGIN_SETTINGS")
arm = os.environ.get("E2E_ARM", "?")
print(f"fake vllm for {arm} on port {port}; args: {args}", flush=True)  # as vLLM logs them
if settings:
    parsed = json.loads(settings)
    # what the plugin is made of, from the e2e this process imports (the PYTHONPATH e2e gave it)
    from e2e.plugin import provenance_fields
    print(f"e2e-plugin: applied in worker (pid {os.getpid()}, FakeModelRunner): arm={arm} "
          f"mode=inject packing={parsed.get('packing')} | settings={json.dumps(parsed, sort_keys=True)}"
          f"{provenance_fields()}", flush=True)
pid_dir = os.environ.get("FAKE_PID_DIR")
pid_file = os.path.join(pid_dir, str(os.getpid())) if pid_dir else None

def bye(*_):
    if pid_file and os.path.exists(pid_file):
        os.unlink(pid_file)
    os._exit(0)

signal.signal(signal.SIGTERM, bye)  # before the pid file: a stopped server never leaves one
signal.signal(signal.SIGINT, bye)
if pid_file:
    open(pid_file, "w").write(arm)
time.sleep(float(os.environ.get("FAKE_START_S", "0")))
tpot = float(os.environ.get("FAKE_TPOT_S", "0.001"))
tpot += float(json.loads(settings or "{}").get("step_delay_us", 0)) / 1e6  # the calibration delay
counters = {"drafts": 0.0, "accepted": 0.0, "requests": 0, "tpot_sum": 0.0}
perturb = float(json.loads(settings or "{}").get("perturb", 0))

def answer(prompt, i):
    """Token i of a prompt's greedy answer; with the perturb setting, prompts whose ids sum to
    an odd number answer otherwise from token 3 on (a numerics change that flips some argmaxes)."""
    total = sum(prompt) if isinstance(prompt, list) else sum(map(ord, prompt))
    base = (total * 31 + i * 7) % 1000
    return base + 1 if perturb and total % 2 and i >= 3 else base

def reply(writer, status, body, ctype="text/plain"):
    writer.write(b"HTTP/1.1 %d OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
                 % (status, ctype.encode(), len(body), body))

def sse(obj):
    data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)

async def handle(reader, writer):
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode()
        method, path = line.split()[:2]
        length = 0
        for h in head.split(b"\r\n"):
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":")[1])
        body = await reader.readexactly(length) if length else b""
        if path == "/health":
            reply(writer, 200, b"")
        elif path == "/metrics":
            text = (f"vllm:spec_decode_num_drafts_total {counters['drafts']}\n"
                    f"vllm:spec_decode_num_accepted_tokens_total {counters['accepted']}\n"
                    f"vllm:spec_decode_num_draft_tokens_total {counters['drafts'] * 3}\n"
                    "# TYPE vllm:request_time_per_output_token_seconds histogram\n"
                    f"vllm:request_time_per_output_token_seconds_count {counters['requests']}\n"
                    f"vllm:request_time_per_output_token_seconds_sum {counters['tpot_sum']}\n")
            reply(writer, 200, text.encode())
        elif path == "/v1/completions":
            req = json.loads(body)
            tokens, prompt = req["max_tokens"], len(req["prompt"])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            ask = bool(req.get("return_token_ids"))
            for i in range(tokens):
                await asyncio.sleep(tpot)
                choice = {"index": 0, "text": " t", "finish_reason": None}
                if ask:  # greedy "answers": a function of the prompt; perturb moves some
                    choice["token_ids"] = [answer(req["prompt"], i)]
                    echo = isinstance(req["prompt"], list) and i == 0
                    choice["prompt_token_ids"] = req["prompt"] if echo else None
                writer.write(sse({"id": "c", "object": "text_completion", "model": req["model"],
                                  "choices": [choice]}))
                await writer.drain()
            counters["requests"] += 1
            counters["tpot_sum"] += tpot
            counters["drafts"] += tokens / 2
            counters["accepted"] += tokens * 0.4
            writer.write(sse({"id": "c", "object": "text_completion", "model": req["model"],
                              "choices": [], "usage": {"prompt_tokens": prompt,
                              "completion_tokens": tokens, "total_tokens": prompt + tokens}}))
            writer.write(sse(b"[DONE]") + b"0\r\n\r\n")
            await writer.drain()
        else:
            reply(writer, 404, b"not found")
        await writer.drain()

async def main():
    server = await asyncio.start_server(handle, host, port)
    async with server:
        await server.serve_forever()

asyncio.run(main())
'''


def install(folder: Path) -> Path:
    """Write the fake ``vllm`` package under ``folder``; returns ``folder``."""
    pkg = Path(folder) / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True, exist_ok=True)
    for part in (Path(folder) / "vllm", Path(folder) / "vllm" / "entrypoints", pkg):
        (part / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(SERVER)
    return Path(folder)


def experiment(fake: Path, model: str, *, start_s: float = 0.0, pid_dir: Path | None = None,
               name: str = "default") -> Experiment:
    """The embedded default experiment with its server replaced by the fake one (this
    interpreter, ``PYTHONPATH`` = the fake package), a small load, and a long lock wait."""
    base = load_experiment()
    env = {"PYTHONPATH": str(fake), "FAKE_START_S": str(start_s)}
    if pid_dir is not None:
        env["FAKE_PID_DIR"] = str(pid_dir)
    raw = base.model_dump(mode="json")
    raw["name"] = name
    raw["server"].update(model=model, env=env, build={"python": sys.executable},
                         lock_wait_s=600.0, startup_timeout_s=60.0, stop_grace_s=10.0)
    raw["load"].update(input_len=16, output_len=8, prompts_per_concurrency=2, warmup_requests=1,
                       request_timeout_s=30.0, stall_timeout_s=10.0)
    return Experiment.model_validate(raw)
