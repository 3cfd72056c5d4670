"""Rerun issue 24's, issue 34's and round 4's hostile cases against the installed CLI (``python -m e2e.cli``): for each,
the exit code, whether a traceback was printed, whether any file landed outside the case's
results root, and whether a planted secret appeared in the output or any file written.

    python bench/hostile_cases.py            # one line per case, then a summary
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "vllm_bench"
SECRET = "SECRET123"


def e2e(args: list[str], cwd: Path, env: dict | None = None) -> tuple[int, str]:
    # this checkout's e2e (PYTHONPATH), whichever e2e the interpreter has installed
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    try:
        proc = subprocess.run([sys.executable, "-m", "e2e.cli", *args], cwd=cwd,
                              capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return 124, "timed out after 120 s"
    return proc.returncode, proc.stdout + proc.stderr


def doc(**changes) -> str:
    d = json.loads((DATA / "c1-base.json").read_text())
    d.update(changes)
    return json.dumps(d)


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        case_no = 0

        def case(name: str, args: list[str], files: dict[str, str | bytes] | None = None,
                 env: dict | None = None, want: int | None = 2,
                 links: dict[str, str] | None = None) -> None:
            """``links``: {path under the root: target}; a target "{outside}" is a folder in
            the box beside the root (a write through the link lands outside)."""
            nonlocal case_no
            case_no += 1
            box = top / f"case{case_no}"
            root = box / "a" / "b" / "root"  # results root, two levels below the box
            root.mkdir(parents=True)
            (box / "outside").mkdir()
            for rel, content in (files or {}).items():
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
            for rel, target in (links or {}).items():
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target.replace("{outside}", str(box / "outside")), path)
            before = {p for p in box.rglob("*")}
            argv = [a.replace("{root}", str(root)) for a in args]
            code, output = e2e(argv, cwd=root, env=env)
            outside = [str(p.relative_to(box)) for p in box.rglob("*")
                       if p not in before and root not in p.parents and p != root]
            leaked = SECRET in output or any(
                SECRET.encode() in p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p not in before)
            tb = "Traceback" in output
            ok = (want is None or code == want) and not tb and not outside and not leaked
            rows.append((ok, name, code, tb, outside, leaked))
            print(f"{'ok  ' if ok else 'FAIL'} exit {code:>3}  traceback={tb!s:5} "
                  f"outside={len(outside)} secret={leaked!s:5} {name}", flush=True)

        base = {"c1-base.json": doc()}
        imp = ["import", "vllm-bench", "c1-base.json", "--results", "r", "--experiment", "exp"]
        case("import --arm ../../victim", [*imp, "--arm", "../../victim", "--repeat", "1"], base)
        case("import --experiment ../../expx", ["import", "vllm-bench", "c1-base.json",
             "--results", "r", "--experiment", "../../expx"], base)
        case("import file arm ../../victim", imp, {"c1-base.json": doc(arm="../../victim")})
        case("import --arm with NUL-like/leading slash", [*imp, "--arm", "/abs"], base)
        case("import --arm of 5000 chars", [*imp, "--arm", "a" * 5000], base)
        case("import --arm with a newline", [*imp, "--arm", "x\ny"], base)
        for label, changes in [("completed 1e30", {"completed": 1e30}),
                               ("duration 1e308", {"duration": 1e308}),
                               ("duration NaN", {"duration": float("nan")}),
                               ("duration negative", {"duration": -3}),
                               ("itls not a list", {"itls": 5}),
                               ("start_times strings", {"start_times": ["a"] * 8}),
                               ("output_lens Infinity", {"output_lens": [float("inf")] * 8}),
                               ("ttfts negative", {"ttfts": [-1.0] * 8}),
                               ("max_concurrency 1e25", {"max_concurrency": 1e25}),
                               ("schema-ish: num_prompts 0", {"num_prompts": 0})]:
            case(f"import: {label}", imp, {"c1-base.json": doc(**changes)})
        case("import: non-UTF-8 bytes", imp, {"c1-base.json": b"\xff\xfe\x00{"})
        case("import: nested 100000 deep", imp, {"c1-base.json": "[" * 100000 + "]" * 100000})
        case("import /dev/zero", ["import", "vllm-bench", "/dev/zero", "--results", "r",
                                  "--experiment", "exp"])
        case("import twice (second skipped)", [*imp], {"c1-base.json": doc(),
             "r/exp/main-c1-base-r2/run.json": ""}, want=None)
        case("sweep --dry-run repeats 1e21", ["sweep", "--dry-run", "--runs",
                                              "999999999999999999999"])
        case("sweep --dry-run --runs 1e11", ["sweep", "--dry-run", "--runs", "100000000000"])
        case("run --client-cpus 0-99999", ["run", "--client-cpus", "0-99999", "--results", "r"])
        case("report --only output_len=abc", ["report", "r/exp", "--only", "output_len=abc"],
             {"r/exp/x/run.json": "{}"})
        case("sweep --dry-run --base-url with creds", ["sweep", "--dry-run", "--base-url",
             f"http://user:pw{SECRET}@host:8000/v1", "--runs", "1"], want=0)
        case("run --base-url ftp://x", ["run", "--base-url", "ftp://x", "--results", "r"])
        case("run --base-url with ?query", ["run", "--base-url", "http://h:1/?a=b",
                                            "--results", "r"])
        config = (ROOT / "e2e" / "configs" / "default.toml").read_text().replace(
            'args = ["--enforce-eager",', f'args = ["--api-key", "arg{SECRET}", '
            f'"--hf-token=hfarg{SECRET}", "--enforce-eager",').replace(
            'env = { VLLM_CPU_KVCACHE_SPACE', f'env = {{ SESSION_COOKIE = "c{SECRET}", '
            f'DATABASE_URL = "postgres://u:db{SECRET}@db/x", VLLM_CPU_KVCACHE_SPACE')
        case("e2e arms with secrets in args/env", ["arms", "--config", "s.toml"],
             {"s.toml": config}, want=0)
        case("sweep --dry-run with secrets", ["sweep", "--dry-run", "--config", "s.toml",
                                              "--runs", "1"], {"s.toml": config}, want=0)
        # a real imported run whose run.json was edited to carry a run id that leads out
        seed = top / "seed"
        (seed / "c1-base.json").parent.mkdir(parents=True)
        (seed / "c1-base.json").write_text(doc())
        e2e(imp, cwd=seed)
        record = json.loads(next((seed / "r" / "exp").glob("*/run.json")).read_text())
        record["run_id"] = "../../evil"
        case("export run id with ../", ["export", "r/exp", "--out", "out"],
             {"r/exp/x/run.json": json.dumps(record)}, want=0)
        case("export a run.json that is not a run", ["export", "r/exp", "--out", "out"],
             {"r/exp/x/run.json": json.dumps({"run_id": "x"})}, want=0)

        # --- round 3 (issue 34): files, store URLs, secrets, links, histories --------------
        real_run = json.dumps(record | {"run_id": "main-c1-base-r2"})
        case("arms --config /dev/zero", ["arms", "--config", "/dev/zero"])
        case("arms --config nested 50000 deep", ["arms", "--config", "deep.toml"],
             {"deep.toml": "x = " + "[" * 50000 + "]" * 50000 + "\n"})
        case("arms --config 200000 unknown keys", ["arms", "--config", "many.toml"],
             {"many.toml": "".join(f"k{i} = 1\n" for i in range(200000))})
        for label, url in [("?password=", f"postgresql+psycopg://e2e@db/e2e?password={SECRET}"),
                           ("unencoded @", f"postgresql+psycopg://e2e:p@{SECRET}@db/e2e"),
                           ("a libpq DSN", f"host=db user=e2e password={SECRET} dbname=e2e"),
                           ("${VAR} in the host", "postgresql+psycopg://e2e@${E2E_T_SECRET}:1/e2e")]:
            case(f"history --store with {label}", ["history", "--results", "r", "--store", url],
                 env={"E2E_T_SECRET": SECRET}, want=None if "VAR" in label else 2)
        secrets_cfg = (ROOT / "e2e" / "configs" / "default.toml").read_text().replace(
            "env = { VLLM_CPU_KVCACHE_SPACE", f'env = {{ DB_PASS = "a{SECRET}", MYSQL_PWD = '
            f'"b{SECRET}", GPG_PASSPHRASE = "c{SECRET}", CI_JOB_JWT = "d{SECRET}", CONN = '
            f'"host=db password=e{SECRET}", VLLM_CPU_KVCACHE_SPACE')
        custom_cfg = secrets_cfg.replace("[server]\n", "[server]\nsecret_pattern = '^MYCORP_'\n", 1)
        for label, cfg in [("default pattern", secrets_cfg), ("custom pattern", custom_cfg)]:
            case(f"e2e arms, common secret names, {label}", ["arms", "--config", "s.toml"],
                 {"s.toml": cfg}, want=0)
            case(f"sweep --dry-run, common secret names, {label}",
                 ["sweep", "--dry-run", "--config", "s.toml", "--runs", "1"], {"s.toml": cfg},
                 want=0)
        for link in ("report", "report/plots"):
            case(f"report with {link}/ a link out", ["report", "r/exp"],
                 {"r/exp/main-c1-base-r2/run.json": real_run}, want=None,
                 links={f"r/exp/{link}": "{outside}"})
        case("export with export/vllm-bench a link out", ["export", "r/exp"],
             {"r/exp/main-c1-base-r2/run.json": real_run}, want=None,
             links={"r/exp/export/vllm-bench": "{outside}"})
        case("import --force with .attempts a link out", [*imp, "--repeat", "2", "--force"],
             {"c1-base.json": doc(), "r/exp/main-c1-base-r2/run.json": real_run}, want=None,
             links={"r/exp/.attempts": "{outside}"})
        case("report with a run.json that is /dev/zero", ["report", "r/exp"],
             {"r/exp/main-c1-base-r2/run.json": real_run}, want=0,
             links={"r/exp/main-c1-base-r3/run.json": "/dev/zero"})
        hostile_date = "<img src=x onerror=alert(1)>"
        try:
            sys.path.insert(0, str(ROOT))
            import pandas as pd

            from e2e.results._nightly_history import HISTORY_COLUMNS

            row = {c: None for c in HISTORY_COLUMNS} | dict(
                schema_version=2, date=hostile_date, experiment="n", config_hash="c" * 64,
                night_status="pass", kind="load", arm="main", concurrency=1, spec_mode="base",
                metric="server_tpot_ms_mean", n=1, median=1.0, low=1.0, high=1.0, values=[1.0],
                repeats=[2], run_dirs=["x"], verdict="no baseline", pct=float("nan"))
            hist = top / "history.parquet"
            pd.DataFrame([row], columns=HISTORY_COLUMNS).to_parquet(hist)
            case("dashboard over a history.parquet with a hostile date",
                 ["dashboard", "--results", "r", "--out", "site"],
                 {"r/nightly/history.parquet": hist.read_bytes()})
        except ImportError:
            pass
        # --- round 4: imports keep what the tool measured; secrets and terminals ------------
        aiperf = ROOT / "tests" / "data" / "aiperf"
        lines = (aiperf / "profile_export.jsonl").read_text().splitlines()
        summary = json.loads((aiperf / "profile_export_aiperf.json").read_text())
        fixed = json.loads(json.dumps(summary))
        fixed["input_config"]["phases"][1]["type"] = "fixed_schedule"
        err = json.loads(lines[2])
        err["error"] = {"code": 401, "type": "x", "message": f"api_key={SECRET} \x1b[31m"}
        leaky = json.loads(json.dumps(summary))
        leaky["run_info"]["cli_command"] = f"aiperf profile --api-key {SECRET} --url x"
        ai = ["import", "aiperf", "a", "--arm", "main", "--results", "r", "--experiment", "exp"]
        case("import aiperf: a fixed-schedule phase", ai,
             {"a/profile_export.jsonl": "\n".join(lines) + "\n",
              "a/profile_export_aiperf.json": json.dumps(fixed)})
        case("import aiperf: api_key= in an error, --api-key in cli_command", ai,
             {"a/profile_export.jsonl": "\n".join([*lines[:2], json.dumps(err), *lines[3:]]) + "\n",
              "a/profile_export_aiperf.json": json.dumps(leaky)}, want=0)
        gl = json.loads((ROOT / "tests" / "data" / "guidellm" / "benchmarks.json").read_text())
        gl["benchmarks"][0]["requests"]["successful"][0]["output_tokens"] = True
        case("import guidellm: output_tokens true", ["import", "guidellm", "b.json", "--arm",
             "main", "--results", "r", "--experiment", "exp"], {"b.json": json.dumps(gl)})
        short = json.loads(doc())
        short["ttfts"] = short["ttfts"][:-1]
        case("import: per-request arrays of unequal length", imp,
             {"c1-base.json": json.dumps(short)})
        deep: object = 1
        for _ in range(900):
            deep = {"a": deep}
        case("import: a field 900 deep", imp, {"c1-base.json": doc(deep=deep)})
        case("nightly --arm-setting api_key=SECRET", ["nightly", "--dry-run", "--results", "r",
             "--arm-setting", f"api_key={SECRET}"])
        case("report of a folder without runs", ["report", "r/exp"], {"r/exp/x/notes.txt": "x"})
        # --- round 4: bounded runs, deep files and flags, duet slots --------------------------
        default = (ROOT / "e2e" / "configs" / "default.toml").read_text()
        trace = ROOT / "tests" / "data" / "traces" / "mooncake_small.jsonl"

        def with_workload(table: str, **load: int) -> str:
            import re

            text = default.replace("[load]\n", f"[load]\nworkload = {table}\n", 1)
            for key, value in load.items():
                text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
            return text

        dry = ["sweep", "--dry-run", "--no-dspark", "--runs", "1", "--config", "c.toml",
               "--results", "r"]
        fifo = top / "trace.fifo"
        os.mkfifo(fifo)
        case("capacity --min-rate 1e-6 (a second request due in 11 days)",
             ["capacity", "--slo", "tpot=20ms", "--min-rate", "1e-6", "--results", "r"])
        case("trace at speedup 1e-9 (replays for years)", dry, {"c.toml": with_workload(
            f'{{ kind = "trace", path = "{trace}", speedup = 1e-9 }}')})
        case("a FIFO as the trace", dry, {"c.toml": with_workload(
            f'{{ kind = "trace", path = "{fifo}" }}')})
        case("multi-turn user_len 1e9 on a 4,096-token model", dry, {"c.toml": with_workload(
            '{ kind = "multi-turn", sessions = 4, turns = 3, user_len = 1000000000 }')})
        case("multi-turn 2,000 x 1,000 turns", dry, {"c.toml": with_workload(
            '{ kind = "multi-turn", sessions = 2000, turns = 1000, user_len = 1 }',
            input_len=1, output_len=2)})
        case("run --request-rate 1e300", ["run", "--request-rate", "1e300", "--results", "r"])
        case("a deep order.json", ["sweep", "--dry-run", "--runs", "1", "--results", "r"],
             {"r/default/order.json": "[" * 5000 + "]" * 5000})
        case("nightly --arm-setting 20,000 deep", ["nightly", "--dry-run", "--results", "r",
             "--arm-setting", "x=" + "[" * 20000 + "]" * 20000])
        slots = ('[{{ server_cpus = "0", client_cpus = "1"{env} }}, '
                 '{{ server_cpus = "{other}", client_cpus = "0" }}]')
        case("a duet slot env with '='", ["sweep", "--dry-run", "--duet", "--runs", "1",
             "--config", "c.toml", "--results", "r"], {"c.toml": default + "\n[duet]\nslots = "
             + slots.format(env=', env = { "A=B" = "1" }', other="1") + "\n"})
        case("both duet slots' servers on core 0", ["sweep", "--dry-run", "--duet", "--runs",
             "1", "--config", "c.toml", "--results", "r"], {"c.toml": default
             + "\n[duet]\nslots = " + slots.format(env="", other="0") + "\n"})
    bad = [r for r in rows if not r[0]]
    print(f"{len(rows)} cases, {len(rows) - len(bad)} as wanted, {len(bad)} not")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
