"""The house stays easy to see: no import cycle among e2e's modules (imports inside functions
and under ``TYPE_CHECKING`` count too: a lazy or type-only import that hides a cycle is still
a cycle), the stages layered (foundation <- results <- analysis, host <- load <- session <-
render <- execute <- pipeline <- commands), each stage package reached only through its
face (its ``__init__``'s ``__all__``, pinned here), only ``e2e.commands`` imports typer, and
nothing imports the command line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "e2e"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the e2e modules it imports (``from e2e.pkg import sub`` counts as importing
    the submodule ``e2e.pkg.sub`` when there is one)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.slow
def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    assert "e2e.session" in graph["e2e.commands._run"]  # imported inside the command's body
    # "from e2e.kernels import host_cost", inside a function
    assert "e2e.kernels.host_cost" in graph["e2e.kernels.micro"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert cycles(import_graph()) == []


@pytest.mark.slow
def test_nothing_imports_the_command_line():
    importers = sorted(m for m, deps in import_graph().items() if "e2e.cli" in deps)
    assert importers == []


# --- layers ---------------------------------------------------------------------------------
# Each module's layer, by the longest matching prefix. A module may import its own layer and
# the layers before it, never a later one. nightly and interop are features that cut across
# stages, so their modules are placed one by one; gsm8k and capacity are pipelines (their
# records, statistics and renderers are results', analysis' and render's).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("e2e", "e2e.errors", "e2e.paths", "e2e.console", "e2e.kinds",
                    "e2e.slo", "e2e.redact", "e2e.names", "e2e.config", "e2e.traces", "e2e.arms",
                    "e2e.plan", "e2e.kernels", "e2e.plugin")),
    ("results", ("e2e.results", "e2e.metrics")),
    ("analysis", ("e2e.analysis",)),
    ("host", ("e2e.host",)),
    ("load", ("e2e.load",)),
    ("session", ("e2e.session",)),
    ("render", ("e2e.render", "e2e.nightly.settings", "e2e.interop")),
    ("execute", ("e2e.execute",)),
    ("pipeline", ("e2e.pipeline", "e2e.capacity", "e2e.gsm8k", "e2e.nightly", "e2e.nightly.assess",
                  "e2e.nightly.run", "e2e.nightly.bisect")),
    ("commands", ("e2e.commands", "e2e.cli")),
]
STAGES = ("results", "analysis", "host", "load", "session", "render", "execute", "commands")


def layer_of(module: str) -> int:
    best, rank = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    assert rank >= 0, f"{module} has no layer: add it to LAYERS"
    return rank


@pytest.mark.slow
def test_every_import_goes_down_the_layers():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
              for m, deps in sorted(import_graph().items()) for d in sorted(deps)
              if layer_of(d) > layer_of(m)]
    assert upward == []


def test_a_stage_is_reached_only_through_its_face():
    """Outside ``e2e/<stage>/`` nothing imports ``e2e.<stage>._private``."""
    leaks = []
    for m, deps in sorted(import_graph().items()):
        for d in sorted(deps):
            parts = d.split(".")
            if (len(parts) == 3 and parts[1] in STAGES and parts[2].startswith("_")
                    and not m.startswith(f"e2e.{parts[1]}")):
                leaks.append(f"{m} -> {d}")
    assert leaks == []


@pytest.mark.slow
def test_only_the_commands_import_typer():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "typer" or n.startswith("typer.") for n in names):
                importers.append(name)
    assert sorted({n for n in importers if not n.startswith("e2e.commands")}) == []


FACES = {
    "e2e.results": [
        "AA_DIVERGES", "AS_AA", "AS_HISTORY", "ArmResult", "ArmSearch", "Baseline",
        "BisectOutcome", "BlockedChange", "BurstSummary", "Capacity", "CapacityResult", "CellKey",
        "CellVerdict", "ChangePoint", "ClientStats", "DuetInfo", "EXIT_CODES", "EvalInfo",
        "Evaluation", "FIRST_DIVERGENCE", "GPUDevice", "GPUProcess", "GPUState", "GSM8KAgreement",
        "GSM8K_METRIC", "GSM8K_REFERENCE_ARM", "GSM8K_SCHEMA_VERSION", "HISTORY_COLUMNS",
        "HISTORY_FILE", "HISTORY_SCHEMA_VERSION", "HistoryCell", "HostNoise", "IDENTICAL",
        "INTERFERENCE_SHARE", "Judgement", "LOOKS_FILE", "Looks", "MORE_THAN_AA",
        "MORE_THAN_HISTORY", "MarginRun", "NEW_DIVERGENCE", "NOT_RECORDED", "NO_AA", "NightCell",
        "NightInfo", "NightStatus", "Objective", "OutputsCheck", "OutputsHistory", "P99_FIELDS",
        "Placement", "PlacementInfo", "PluginInfo", "ProcessCPU", "ProcessPlacement", "REQUESTS",
        "RatioHistory", "RequestRecord", "RunMetrics", "RunRecord", "STORE_METADATA",
        "STORE_SCHEMA_VERSION", "SampleVerdict", "SegmentMetrics", "ServerInfo", "ServerMemory",
        "SpecCounters", "Step", "Store", "StoredChangePoint", "StoredNight", "StoredVerdict",
        "VERDICTS_FILE", "VerdictName", "WARN_SHARE", "WorkloadInfo", "arm_is_complete",
        "built_arm", "eval_dir_name", "finalize", "finalize_unit", "gsm8k_dir", "history_cells",
        "history_frame", "history_path", "interference_of", "is_relative", "last_look_confidence",
        "load_outputs", "load_records", "masked_text", "masked_url", "new_partial_dir",
        "next_attempt_dir", "next_repeat", "night_rows", "objective_of", "open_store", "read_arm",
        "read_eval_info", "read_evaluations", "read_history", "read_looks", "read_outputs",
        "read_requests", "read_run", "read_verdicts", "record_name", "relative_arm", "resolve_url",
        "resume_state", "stored_interference", "unit_dir", "unit_state", "utc_now", "worse_end",
        "write_eval_info", "write_looks", "write_requests", "write_run", "write_verdicts",
        "writing"],
    "e2e.analysis": [],
    "e2e.host": [
        "HostSnapshot", "cpu_model", "describe_affinity", "format_cpus", "gpu_state",
        "group_members", "group_placement", "memory_of", "noise", "parse_nvidia_smi",
        "parse_rocm_smi", "physical_core", "pin_process", "pinned_process", "port_holders",
        "repin_group", "require_quiet", "runqueue_wait_s", "snapshot", "spawn_pinned",
        "spread_cores", "strangers", "with_descendants"],
    "e2e.load": [
        "HOLD_S", "INTERFERENCE_SHARE", "LagProbe", "LoadOutcome", "LoadSpec", "LoadWorkload",
        "ProcessUsage", "SATURATED_LAG_MS", "SPREAD_THRESHOLD", "SSEStream", "StreamFailed",
        "Traffic", "WARMUP_NOTE", "WARN_SHARE", "arrival_times", "burst_summary", "check_usage",
        "client_stats", "combine_windows", "decode_reference_s", "decode_share", "drive",
        "hold_batch", "interference", "make_prompts", "merge_shards", "output_ids",
        "reset_prefix_cache", "retried_warning", "run_measured_load", "split_requests",
        "stream_spread", "traffic", "vocabulary"],
    "e2e.session": [
        "ExternalServer", "SERVER_ENV", "Servers", "SessionOptions", "Workloads", "applied_fields",
        "build_tiny_llama", "check_plugin", "check_units", "describe_source", "free_port",
        "group_alive", "managed_env_dir", "model_context", "model_path", "parse_base_url",
        "plugin_check", "plugin_tree", "prepare", "project_root", "provenance", "python_path",
        "redacted_config", "resolve_git", "resolve_model", "resolve_python", "run_duet", "run_unit",
        "serve", "server_launch", "server_lock", "server_pythonpath", "shared_cores", "shielded",
        "source_facts", "speculative_config", "start", "stop_group"],
    "e2e.render": [
        "COMMENT_LIMIT", "COMMENT_MARKER", "ReportOutput", "SCHEMA_VERSION",
        "STEP_SUMMARY_LIMIT", "SiteData", "SummaryContext", "build_report",
        "cell_history_text", "comparison_plot_names", "csv_safe", "dumps", "fit_comment", "forest_figure",
        "format_advice", "format_cell", "format_headline_comparison", "format_pct", "format_value", "gsm8k_csv",
        "gsm8k_json", "gsm8k_markdown", "history_nights_text", "host_cost_markdown", "md_text", "metric_label",
        "micro_markdown", "micro_plot", "read_summary", "render_capacity_plot", "render_csv",
        "render_github", "render_html", "render_markdown", "render_plots", "render_summary",
        "render_summary_github", "render_trends", "report_json", "report_link", "run_json", "said",
        "site_files", "steps_markdown", "toml_text", "unit_markdown", "verdict_icon",
        "write_gsm8k_report", "write_micro", "write_site", "write_steps"],
    "e2e.execute": [
        "Executor", "FAILURE_JSON", "LocalExecutor", "OnUnit", "Outcome", "RayExecutor",
        "SessionUnit", "blocks", "build_line", "check_host_plugin", "describe_arms",
        "describe_cluster_plan", "describe_plan", "driver_plugin", "executor_from", "format_eta",
        "keep_failed_attempt", "plan_header"],
    "e2e.commands": [
        "app", "nightly_command"],
}


def test_each_face_exports_what_it_says():
    import importlib

    for package in (f"e2e.{s}" for s in STAGES):
        module = importlib.import_module(package)
        assert module.__all__ == sorted(set(module.__all__)), f"{package}: __all__ sorted, once"
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert missing == [], f"{package} exports names it lacks: {missing}"
        private = [n for n in module.__all__ if n.startswith("_")]
        assert private == [], f"{package} exports private names: {private}"
    for package, names in FACES.items():
        assert importlib.import_module(package).__all__ == names


# Test files that import a private module or name of e2e (``e2e.x._y``, ``from e2e.x import
# _y``) reach past a stage's face: what they need should become public or move to a face. The
# ceiling only goes down.
PRIVATE_IMPORT_CEILING = 14


def private_importers() -> list[str]:
    importers = []
    for path in sorted((PACKAGE.parent / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            # e2e.x._y, and a private module or name taken from a face (from e2e.x import _y)
            names = ([f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n.split(".")[0] == "e2e" and any(p.startswith("_") for p in n.split(".")[1:])
                   for n in names):
                importers.append(path.name)
                break
    return importers


def test_tests_reaching_private_modules_do_not_grow():
    importers = private_importers()
    assert len(importers) <= PRIVATE_IMPORT_CEILING, (
        f"{len(importers)} test files import a private module of e2e (ceiling "
        f"{PRIVATE_IMPORT_CEILING}): reach e2e through a stage's face")

