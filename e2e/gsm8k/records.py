"""Typed, immutable GSM8K records: one document's verdict, one arm's evaluation, one eval.

``arm.json`` and ``eval.json`` carry ``schema_version``; bump it when a field changes meaning.
  1: first version.
  2: arm.json is a unit record like run.json: ``spec``, ``config``, ``arm_settings``,
     ``server`` (argv, environment), ``provenance``, ``plugin``, ``valid`` and
     ``invalid_reasons``. An invalid arm is written too (and retried); version 1 files read
     as valid arms without those blocks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from e2e.plan import EvalSpec
from e2e.redact import scrub
from e2e.results import PluginInfo, ServerInfo, SpecCounters

__all__ = ["GSM8K_SCHEMA_VERSION", "REFERENCE_ARM", "SampleVerdict", "EvalInfo", "ArmResult",
           "arm_label", "label_occurrence"]

GSM8K_SCHEMA_VERSION = 2
REFERENCE_ARM = "main"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SampleVerdict(_Record):
    """One GSM8K document as one arm answered it (from lm-eval's sample log)."""

    doc_id: int = Field(ge=0)
    prompt_hash: str = Field(min_length=1, description="sha256 of the prompt lm-eval sent.")
    strict: bool = Field(description="strict-match exact_match: the '#### N' answer is right.")
    flexible: bool | None = Field(None, description="flexible-extract exact_match, if logged.")


class EvalInfo(_Record):
    """What one GSM8K evaluation folder holds: every arm in it ran on this data and limit."""

    schema_version: int = GSM8K_SCHEMA_VERSION
    experiment: str
    spec_mode: str
    limit: int | None
    data: dict[str, Any]
    lm_eval_version: str
    arms: tuple[str, ...] = Field((), description="Arm labels in the order they were first asked for.")


class ArmResult(_Record):
    """Everything ``arm.json`` holds about one arm's GSM8K evaluation on one fresh server."""

    schema_version: int = GSM8K_SCHEMA_VERSION
    experiment: str
    label: str = Field(description="Folder name: the arm, or '<arm>.r<k>' for its k-th server.")
    arm: str
    occurrence: int = Field(ge=1)
    spec_mode: str
    limit: int | None
    concurrency: int = Field(gt=0)
    data: dict[str, Any]
    lm_eval_version: str
    lm_eval_argv: list[str] = Field(default_factory=list,
                                    description="The lm-eval command, secrets left out.")
    base_url: str
    model: str
    n: int = Field(0, ge=0)
    accuracy_strict: float = 0.0
    accuracy_flexible: float | None = None
    lm_eval_results: dict[str, Any] = Field(
        default_factory=dict, description="lm-eval's own aggregate numbers for the task.")
    counters_before: SpecCounters | None = None
    counters_after: SpecCounters | None = None
    acceptance_length: float | None = None
    started_at: str
    finished_at: str
    wall_s: float
    warnings: list[str] = Field(default_factory=list)
    spec: EvalSpec | None = None
    config: dict[str, Any] = Field(default_factory=dict,
                                   description="Snapshot of the experiment config (redacted).")
    arm_settings: dict[str, Any] = Field(default_factory=dict)
    server: ServerInfo | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    plugin: PluginInfo | None = None
    valid: bool = True
    invalid_reasons: list[str] = Field(default_factory=list)

    @field_validator("invalid_reasons", "warnings")
    @classmethod
    def _scrubbed(cls, value: list[str]) -> list[str]:  # no secret in a reason (e2e.redact)
        return [scrub(v) for v in value]


def arm_label(arm: str, occurrence: int) -> str:
    """``main`` for the first server of an arm, ``main.r2`` for its second, and so on."""
    return arm if occurrence == 1 else f"{arm}.r{occurrence}"


def label_occurrence(label: str) -> tuple[str, int]:
    """Inverse of :func:`arm_label`."""
    arm, sep, rest = label.rpartition(".r")
    if sep and arm and rest.isdigit() and int(rest) >= 2:
        return arm, int(rest)
    return label, 1
