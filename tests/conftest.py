"""Shared fixtures. Tests marked ``server`` start real vLLM CPU servers from the embedded
default's managed environment (built once per machine under $E2E_HOME, ~2 min)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e.config import Experiment, load_experiment

ROOT = Path(__file__).resolve().parent.parent
GSM8K_DATA = (ROOT.parent / "shared" / "data" / "gsm8k").resolve()


def small(experiment: Experiment, **load) -> Experiment:
    """The experiment with a lighter load and tighter timeouts, for tests."""
    defaults = dict(request_timeout_s=120.0, stall_timeout_s=30.0, warmup_requests=1)
    return experiment.model_copy(update={
        "load": experiment.load.model_copy(update={**defaults, **load}),
        # other e2e processes (a developer's run) may hold the server lock: wait for them
        "server": experiment.server.model_copy(update={"lock_wait_s": 900.0})})


def alone_nightly_raw() -> dict:
    """The embedded nightly without its reference arm: one arm, one server at a time, its
    cells judged against the baseline night and change points (the design a config without
    ``[nightly] reference`` still gets), on the matrix the embedded nightly had before it was
    a reference duet (concurrency 1 and 4, both spec modes, 6 runs, 2 % thresholds)."""
    import tomllib

    raw = tomllib.loads((ROOT / "configs" / "nightly.toml").read_text())
    raw["arms"].pop("reference")
    raw["duet"]["enabled"] = False
    raw.update(repeats=4)
    raw["server"]["cpus"] = "0"
    raw["load"].update(cpus="1", output_len=509, prompts_per_concurrency=32, concurrencies=[1, 4])
    raw["load"].pop("windows")
    night = raw["nightly"]
    for key in ("reference", "max_runs", "history_nights", "alpha"):
        night.pop(key)
    night.update(arms=["main"], concurrencies=[1, 4], spec_modes=["base", "dspark"], runs=6,
                 baseline="main", thresholds={"base": {"headline": 2.0},
                                              "dspark": {"headline": 2.0}},
                 changepoints={"enabled": True, "alpha": 0.05, "min_nights": 6})
    return raw


@pytest.fixture(scope="session", autouse=True)
def _ctrl_c_works():
    """Tests send themselves SIGINT (a Ctrl-C on a driver); a shell that ran the suite as a
    background job hands it down ignored, so put Python's own handler back."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def default_experiment() -> Experiment:
    return load_experiment()


@pytest.fixture(scope="session")
def server_python(default_experiment) -> Path:
    """The managed server environment (created on first use)."""
    from e2e.session._builds import resolve_python

    return resolve_python(default_experiment.server.build)


# The fast tier, ``pytest -m "not server and not slow"``: every test that starts a Ray cluster,
# a PostgreSQL server, Chromium, a managed environment or real vLLM kernels, or that took more
# than about 1.5 s on the 2-core development host (``pytest -m "not server" --durations=0``,
# 2026-12-01), is marked ``slow`` here, by module, by the fixture that makes it slow, or by
# name. A new slow test belongs here (or gets ``@pytest.mark.slow``); CI runs everything.
SLOW_MODULES = {
    "test_rocm_real", "test_ray_executor", "test_ray_host_plugin", "test_store_nightly",
    "test_unit_command", "test_windows", "test_builds", "test_micro", "test_load_openloop",
    "test_load_workers", "test_dashboard", "test_gsm8k_task", "test_faults",
    "test_report_github", "test_render",
}
SLOW_FIXTURES = {"postgres", "hostile_site", "world", "site", "windowed", "real_python"}
SLOW_PARAMS = ("postgresql",)  # a test parametrized over stores: its PostgreSQL case
SLOW_TESTS = {
    "test_scripted_server_burst_is_flagged_and_paced_stream_is_not",
    "test_only_reports_one_workload_and_never_mixes",
    "test_a_fixed_step_stops_failing_and_a_pinned_night_accepts_it",
    "test_a_one_night_outlier_is_not_a_change_point",
    "test_an_outlier_tonight_is_judged_night_against_night_only",
    "test_slow_drift_is_a_change_point_at_its_first_night_and_a_regression",
    "test_every_arm_on_its_own_server_and_report",
    "test_resume_skips_finished_arms_and_redoes_a_failed_one",
    "test_a_run_writes_no_planted_secret_anywhere",
    "test_an_external_server_that_echoes_the_key_leaks_nothing",
    "test_the_same_result_imported_again_leaves_the_verdict_unchanged",
    "test_every_import_goes_down_the_layers", "test_nothing_imports_the_command_line",
    "test_only_the_commands_import_typer", "test_the_graph_sees_lazy_imports",
    "test_report_renders_an_imported_run_beside_e2e_runs",
    "test_fused_multi_program_and_chunked", "test_random_shapes",
    "test_a_signal_mid_load_interrupts_it", "test_a_run_records_its_retried_requests",
    "test_gsm8k_subset_gives_one_value_per_server", "test_the_whole_chain_flags_a_slower_build",
    "test_importing_the_plugin_from_the_copy_loads_nothing_else_of_e2e",
    "test_require_quiet_refuses_before_any_server_naming_the_hog",
    "test_gsm8k_and_load_records_carry_the_same_blocks",
    "test_gsm8k_arm_without_applied_settings_is_refused_like_a_load_run",
    "test_a_a_3_vs_3_at_1_percent_noise_is_not_over_confident",
    "test_why_not_a_bootstrap_of_medians_scipy_is_over_confident_at_3_vs_3",
    "test_mde_gives_about_80_percent_power_by_simulation",
    "test_a_nightly_with_a_store_it_cannot_reach_fails_before_running",
    "test_a_writer_killed_mid_night_leaves_the_store_as_it_was",
    "test_history_command_on_the_default_sqlite_store",
    "test_two_writers_at_once_both_land_and_nothing_doubles",
    "test_one_launch_matches_its_reference", "test_random_batches_match_their_reference",
    "test_looks_persist_and_a_second_invocation_continues_the_spending",
    "test_noise_too_large_to_settle_stops_at_max_runs",
    "test_the_pipeline_plans_executes_and_reports",
    "test_busy_client_is_flagged", "test_the_baseline_is_main_whatever_the_arm_order",
    "test_arm_order_is_baseline_then_config_order",
    "test_an_infinite_metric_is_left_out_with_a_warning_naming_the_run",
    "test_every_command_help_reads_as_sentences", "test_two_nights_of_gsm8k_judged_per_document",
    "test_dspark_records_acceptance_length",
    "test_an_unusable_e2e_home_is_bad_input_without_a_traceback",
    "test_many_unknown_keys_print_a_screen",
}


def pytest_terminal_summary(terminalreporter):
    """Which browser the dashboard's tests drove (Chromium's DevTools rules change between
    versions: a failure there reads differently with the version beside it). Printed under
    ``-q`` too, where pytest's header is not."""
    import chromium

    for binary, product in sorted(chromium.DRIVEN):
        terminalreporter.write_line(f"browser tests drove {binary} ({product})")


def _slow(item) -> bool:
    if "chromium" in item.name:
        return True
    if item.module.__name__ in SLOW_MODULES or item.originalname in SLOW_TESTS:
        return True
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    spec = getattr(item, "callspec", None)
    return spec is not None and any(p in str(v) for p in SLOW_PARAMS
                                    for v in (spec.id, *spec.params.values()))


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if "slow" not in item.keywords and _slow(item):
            item.add_marker(slow)
    if os.environ.get("E2E_SKIP_SERVER_TESTS"):
        skip = pytest.mark.skip(reason="E2E_SKIP_SERVER_TESTS is set")
        for item in items:
            if "server" in item.keywords:
                item.add_marker(skip)
