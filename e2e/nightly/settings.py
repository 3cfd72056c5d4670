"""The nightly config: a normal experiment config plus one ``[nightly]`` table.

``load_nightly`` reads the TOML, takes the ``[nightly]`` table out, validates the rest as an
``e2e.config.Experiment`` (unknown keys there stay errors) and the table as
``NightlySettings``. One file is one nightly: what to measure, and how to judge it. Tonight of
a config, resolved once before anything runs, is ``e2e.nightly.night``'s.

The **config hash** names what a night measures: the validated experiment and the resolved
plan (arms, concurrencies, spec modes, runs, GSM8K subset). Judgement settings (thresholds,
confidence, a pinned baseline) and operational ones (server start/stop timeouts, the lock
wait, arm descriptions, the GSM8K data path) are left out, so tuning them keeps the history
comparable. What a night's *build* carries (the engine's commit, ``--arm-setting``
overrides) is provenance, not config: it is recorded beside the hash, never in it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, ValidationError, field_validator, model_validator

from e2e.results.records import INTERFERENCE_SHARE, WARN_SHARE
from e2e.analysis.nightly import DEFAULT_NIGHT_ALPHA, NIGHTLY_METRICS, judged_threshold
from e2e.analysis.sweep import HEADLINE
from e2e.metrics import SERVER_VERIFY_STEP
from e2e.config import (MAX_CONCURRENCY, MAX_REPEATS, Date, Experiment, Table, parse_date,
                        parse_experiment)
from e2e.names import known_name
from e2e.console import describe_validation_error
from e2e.paths import read_toml
from e2e.errors import ConfigError

__all__ = ["NIGHTLY_CONFIG", "MAX_ATTEMPTS", "SpecMode", "GSM8KNightly",
           "ChangePointSettings", "NightlySettings", "NightlyConfig", "load_nightly",
           "parse_nightly", "parse_arm_settings", "default_nightly_path"]

NIGHTLY_CONFIG = "nightly.toml"
MAX_ATTEMPTS = 2  # an invalid run is retried once, then reported

SpecMode = Literal["base", "dspark"]

# The metrics a thresholds table may name (e2e.analysis.nightly.NIGHTLY_METRICS) and those that exist
# only with the speculator.
_LOAD_METRICS = {m.key for m in NIGHTLY_METRICS}
_SPEC_ONLY = {"acceptance_length", "ms_per_verify_step", SERVER_VERIFY_STEP}


class GSM8KNightly(Table):
    """An optional GSM8K subset: every nightly arm on ``repeats`` fresh servers."""

    enabled: bool = Field(False, description="Run the GSM8K subset every night and judge its "
                          "strict-match accuracy against the baseline night's.")
    limit: Annotated[int, Field(gt=0)] | None = Field(
        50, description="First N test documents (None: all 1319).")
    repeats: Annotated[int, Field(ge=2, le=MAX_REPEATS)] = Field(
        2, description="Fresh servers per arm; their spread is the repeat-of-main noise floor.")
    dspark: bool = Field(False, description="Run it with the speculator (the dspark profile, "
                         "which must not pin acceptance); false: without.")
    concurrency: Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)] = Field(
        8, description="Requests lm-eval keeps in flight against each server.")
    data: str | None = Field(
        None, description="Folder with train.jsonl and test.jsonl (relative to the config "
                          "file); None reads the hub dataset through lm-eval.")
    alpha: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.05, description="Level of the exact McNemar test on the documents whose verdict "
                          "changed against the baseline night.")
    min_drop_pp: Annotated[float, Field(ge=0, le=100)] = Field(
        2.0, description="Smallest strict-match drop (percentage points) that counts as a "
                         "regression (with p < alpha).")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "drop_pp" in data:
            raise ValueError(
                "drop_pp was the margin over the repeat-of-main noise floor; GSM8K is now "
                "judged per document (exact McNemar against the baseline night): replace it "
                "with min_drop_pp (smallest drop that counts, default 2.0) and alpha (default 0.05)")
        return data


class ChangePointSettings(Table):
    """Change points over each judged cell's history (``e2e.analysis.nightly.night_changes``)."""

    enabled: bool = Field(True, description="Seek change points (a step or a drift over "
                          "nights) in each judged cell's history; false: none are sought.")
    alpha: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.05, description="Level of the Welch t-test that confirms a change point (nights "
                          "before against nights after).")
    min_nights: Annotated[int, Field(ge=4)] = Field(
        6, description="Nights of history (tonight included) before change points are sought.")
    since: Date | None = Field(
        None, description="Ignore nights before this date (YYYY-MM-DD): accept a known step.")


def _default_thresholds() -> dict[str, dict[str, float]]:
    return {"base": {HEADLINE: 2.0}, "dspark": {HEADLINE: 2.0}}


class NightlySettings(Table):
    """The ``[nightly]`` table. ``None`` means "as the experiment says"."""

    arms: list[str] | None = Field(None, description="Arms to run (default: every arm).")
    concurrencies: list[Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]] | None = Field(
        None, description="Concurrencies measured every night (default: load.concurrencies).")
    spec_modes: list[SpecMode] = Field(
        default_factory=lambda: ["base", "dspark"], min_length=1,
        description="Spec modes measured every night: 'base', without a speculator; "
        "'dspark', with the [speculators.dspark] profile.")
    runs: Annotated[int, Field(gt=0, le=MAX_REPEATS)] | None = Field(
        None, description="Rounds each night runs (default: the experiment's repeats); the "
        "first report_from_run - 1 are warmups.")
    confidence: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.95, description="Confidence level of the intervals a night is judged by (each cell "
        "against the baseline night's, a relative cell's against its history, the outputs "
        "check).")
    thresholds: dict[SpecMode, dict[str, Annotated[float, Field(ge=0)]]] = Field(
        default_factory=_default_thresholds,
        description="Per spec mode: metric key -> minimum change in % that counts; 'headline' "
                    "is each cell's headline metric (e2e.analysis.sweep.headline_metric).")
    baseline: str = Field(
        "main", description="The arm every comparison between arms is made against (the "
                            "full report, GSM8K agreement).")
    reference: str | None = Field(
        None, description="An arm measured every night beside tonight's build (a pinned "
        "build: its own [arms.<name>.build], a wheel, an env or a git ref). When set, every "
        "other arm's load cells are judged as arm / reference measured the same night (paired "
        "by duet or round; '<arm>-vs-<reference>' cells), so the host's drift between nights "
        "cancels; the absolute cells are recorded and plotted, not judged. Run it in duets "
        "(e2e nightly --duet, or [duet] enabled) where the host has slots.")
    history_nights: Annotated[int, Field(ge=3, le=100)] = Field(
        10, description="With a reference arm: a relative cell is judged against its ratio's "
        "history, the first this many nights since it started (the config's first night, a "
        "pinned baseline night, or a confirmed improvement; judged from 3 nights on), a "
        "prediction interval that counts the nights' spread. Once full the history is the "
        "level every later night is judged against: no later night joins it, so a change "
        "is never absorbed (e2e.analysis.nightly.ratio_history).")
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = Field(
        DEFAULT_NIGHT_ALPHA, description="With a reference arm: the chance that a night of an "
        "unchanged build is called regressed, all its judged ratio cells together (split "
        "evenly over them) and spent over the night's looks (max_runs); 0.002 keeps a series "
        "of 40 unchanged nights free of a false regression at least 90 % of the time.")
    max_runs: Annotated[int, Field(gt=0, le=MAX_REPEATS)] | None = Field(
        None, description="With a reference arm: a night whose ratio cell is not resolved "
        "after `runs` (a call, or no change beyond the threshold) runs as many more rounds "
        "again, up to this many in all, looking again after each step with its error spent "
        "(group-sequential); None: never more than `runs`.")
    baseline_night: Date | None = Field(
        None, description="Pin the baseline night (YYYY-MM-DD); default: the last passing "
                          "night with the same config hash.")
    verify_step_from: Literal["client", "server"] = Field(
        "client", description="TPOT the headline is built from: 'client' (the client's TPOT, "
                              "unless a run's client stream is flagged as burst-affected) or "
                              "'server' (the server's own mean TPOT).")
    burst_share_max: Annotated[float, Field(gt=0, le=1)] = Field(
        WARN_SHARE, description="A run whose burst_share exceeds this has a burst-affected "
        "client TPOT: its cell's ms per verify step is built from the server's TPOT (default: "
        "where the run's own record warns of it, e2e.results.records.WARN_SHARE).")
    interference_max: Annotated[float, Field(gt=0)] = Field(
        INTERFERENCE_SHARE, description="A change measured while other processes took at "
        "least this many cores' worth (the median run's host_noise.other_cpu_share) is judged "
        "undecided, not regressed or improved (default: where a run warns of interference, "
        "0.25). Raise it only where the host is never quiet and you accept its false calls.")
    store: str | None = Field(
        None, description="Where the nights are kept: a SQLAlchemy URL; default "
        "sqlite:///nightly/history.db (a relative SQLite path is under the results folder); "
        "a team's PostgreSQL: postgresql+psycopg://user@host/db, the password from "
        "PGPASSWORD or a ${VAR} in the URL, never written in the config (e2e.results.open_store).")
    outputs_fail: StrictBool = Field(
        True, description="Tonight's greedy outputs are compared prompt by prompt with the "
        "reference arm's (e2e.analysis.nightly.check_outputs); a night whose outputs diverge from the "
        "reference more than its yardstick allows (an A/A arm of the night, else the earlier "
        "nights) is a finding in its summary and judgement.json. true: the finding also makes "
        "the night a regression (exit 1); false: it is reported only.")
    gsm8k: GSM8KNightly = Field(
        default_factory=GSM8KNightly, description="The optional GSM8K subset (the "
        "[nightly.gsm8k] table).")
    changepoints: ChangePointSettings = Field(
        default_factory=ChangePointSettings, description="Change points over each cell's "
        "history (the [nightly.changepoints] table).")

    @field_validator("thresholds")
    @classmethod
    def _known_metrics(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for mode, table in value.items():
            unknown = sorted(set(table) - _LOAD_METRICS - {HEADLINE})
            if unknown:
                raise ValueError(f"thresholds.{mode}: unknown metric(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(m.key for m in NIGHTLY_METRICS)}")
            spec_only = sorted(set(table) & _SPEC_ONLY)
            if mode == "base" and spec_only:
                raise ValueError(f"thresholds.base: {', '.join(spec_only)} exist only with the "
                                 "speculator; put them under thresholds.dspark")
        return value

    @field_validator("baseline")
    @classmethod
    def _arm_name(cls, value: str) -> str:
        try:
            parse_date(value)
        except ValueError:
            return value  # not a date: an arm's name
        raise ValueError(
            f"baseline now names the baseline arm (default 'main'); to pin the baseline "
            f"night write baseline_night = \"{value}\" instead")

    @model_validator(mode="after")
    def _looks(self) -> NightlySettings:
        if self.max_runs is not None and self.runs is not None and self.max_runs < self.runs:
            raise ValueError(f"max_runs ({self.max_runs}) is below runs ({self.runs}): give at "
                             "least as many (the night first makes `runs`)")
        return self

    @model_validator(mode="after")
    def _no_duplicates(self) -> NightlySettings:
        for name in ("arms", "concurrencies", "spec_modes"):
            items = getattr(self, name) or []
            if len(set(items)) != len(items):
                raise ValueError(f"{name} names a value twice: {items}")
        return self


@dataclass(frozen=True)
class NightlyConfig:
    """A nightly config resolved once: what to run, how to judge, and its hash."""

    experiment: Experiment
    settings: NightlySettings
    arms: tuple[str, ...]
    concurrencies: tuple[int, ...]
    spec_modes: tuple[SpecMode, ...]
    runs: int
    config_hash: str
    source: str
    gsm8k_data: Path | None

    @property
    def reference(self) -> str | None:
        """The arm every other arm is judged relative to within the night (``[nightly]
        reference``), or None."""
        return self.settings.reference

    @property
    def built_arms(self) -> tuple[str, ...]:
        """The arms tonight's build changes (``--arm-setting`` reaches them): every nightly arm
        but the reference, which stays as pinned."""
        return tuple(a for a in self.arms if a != self.reference)

    @property
    def looks(self):
        """The night's looks at its ratio cells (``e2e.results.Looks``): after the
        reported rounds of ``runs``, then as many more at a time up to ``max_runs``."""
        from e2e.results import Looks

        first = max(self.runs - self.experiment.report_from_run + 1, 1)
        top = self.settings.max_runs or self.runs
        return Looks(first=first, step=first,
                     last=max(top - self.experiment.report_from_run + 1, first))

    def rounds_for(self, reported: int) -> int:
        """The plan's runs (rounds, warmups included) that give ``reported`` reported ones."""
        return reported + self.experiment.report_from_run - 1

    @property
    def baseline_arm(self) -> str:
        """The arm comparisons between arms are made against (``[nightly] baseline``)."""
        return self.settings.baseline

    def threshold(self, spec_mode: str, metric_key: str, concurrency: int = 1) -> float | None:
        """The judging threshold in % for a load metric, None if it is not judged."""
        return judged_threshold(self.settings.thresholds, spec_mode, metric_key, concurrency)


def default_nightly_path() -> Path:
    return Path(str(resources.files("e2e") / "configs" / NIGHTLY_CONFIG))


def config_hash(experiment: Experiment, plan: dict[str, Any]) -> str:
    """sha256 of what a night measures (see the module docstring for what is left out)."""
    data = experiment.model_dump(mode="json")
    for key in ("startup_timeout_s", "stop_grace_s", "lock_wait_s", "require_quiet",
                "quiet_sample_s", "quiet_wait_s"):
        data["server"].pop(key, None)
    for key in ("max_schedule_s", "max_prompt_tokens"):  # bounds on a run, not what it measures
        data["load"].pop(key, None)
    for arm in data["arms"].values():
        arm.pop("description", None)
    text = json.dumps({"experiment": data, "plan": plan}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def parse_nightly(raw: dict[str, Any], *, source: str = "<config>",
                  base_dir: Path | None = None) -> NightlyConfig:
    """Split ``raw`` into the experiment and its ``[nightly]`` table, validate both."""
    raw = dict(raw)
    table = raw.pop("nightly", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [nightly] must be a table")
    experiment = parse_experiment(raw, source=source)
    try:
        settings = NightlySettings.model_validate(table)
    except ValidationError as exc:
        text = describe_validation_error(exc, source, NightlySettings).replace("\n  ", "\n  nightly.")
        raise ConfigError(text) from None
    arms = tuple(settings.arms or experiment.arms)
    for arm in arms:
        experiment.arm(arm)
    if "dspark" in settings.spec_modes or settings.gsm8k.dspark:
        experiment.speculator("dspark")
    if settings.gsm8k.enabled and settings.gsm8k.dspark:
        experiment.refuse_pinned("the nightly's GSM8K")
    ref = settings.reference
    if ref is not None:
        known_name(ref, arms, "reference arm", f"{source}: nightly.reference names one of the "
                   "nightly arms")
        if len(arms) < 2:
            raise ConfigError(f"{source}: the reference arm {ref!r} (nightly.reference) needs "
                              "another nightly arm beside it: each other arm is judged against "
                              "it, measured the same night")
    if len(arms) > 1 or settings.gsm8k.enabled:  # every comparison between arms is against it
        known_name(settings.baseline, arms, "baseline arm",
                   f"{source}: nightly.baseline names one of the nightly arms")
    concurrencies = tuple(settings.concurrencies or experiment.load.concurrencies)
    runs = settings.runs or experiment.repeats
    if runs < experiment.report_from_run:
        raise ConfigError(f"{source}: nightly.runs {runs} is below report_from_run "
                          f"{experiment.report_from_run}: no round of the night would be "
                          f"judged; give runs of at least {experiment.report_from_run}")
    gsm8k = settings.gsm8k.model_dump(mode="json", exclude={"data", "alpha", "min_drop_pp"})
    plan = {"arms": list(arms), "concurrencies": list(concurrencies),
            "spec_modes": list(settings.spec_modes), "runs": runs,
            "gsm8k": gsm8k if settings.gsm8k.enabled else None}
    data = None
    if settings.gsm8k.enabled and settings.gsm8k.data:
        data = Path(settings.gsm8k.data).expanduser()
        if not data.is_absolute() and base_dir is not None:
            data = (base_dir / data).resolve()
    return NightlyConfig(experiment=experiment, settings=settings, arms=arms,
                         concurrencies=concurrencies, spec_modes=tuple(settings.spec_modes),
                         runs=runs, config_hash=config_hash(experiment, plan), source=source,
                         gsm8k_data=data)


def load_nightly(path: Path | str | None = None) -> NightlyConfig:
    """Read a nightly TOML; ``None`` means the embedded ``configs/nightly.toml``."""
    path = Path(path) if path is not None else default_nightly_path()
    raw = read_toml(path)
    return parse_nightly(raw, source=str(path), base_dir=path.resolve().parent)


def parse_arm_settings(items: list[str]) -> dict[str, Any]:
    """``["step_delay_us=500", "packing=main"]`` -> ``{"step_delay_us": 500, "packing": "main"}``.
    A value is read as JSON when it parses (numbers, true/false), else kept as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--arm-setting {item!r}: give KEY=VALUE, e.g. step_delay_us=500")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        except RecursionError:
            raise ConfigError(f"--arm-setting {key}: its value nests too deeply; a plugin "
                              "setting is a number, true/false, a string or a short list") from None
        out[key] = value
    return out
