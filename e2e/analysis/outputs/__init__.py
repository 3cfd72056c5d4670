"""Outputs compared prompt by prompt, whether an arm is safe to merge, and GSM8K agreement."""

from __future__ import annotations

from e2e.analysis.outputs.compare import (
    CellCache, OutputAgreement, OutputComparison, summarize_outputs
)
from e2e.analysis.outputs.gsm8k import (
    Agreement, GSM8KArm, GSM8KReport, GSM8KSection, acceptance_length, gsm8k_report,
    verdict_accuracy
)
from e2e.analysis.outputs.merge import AA, NOT_SAFE, NOT_SHOWN, SAFE, MergeCall, merge_calls

__all__ = [
    "AA", "Agreement", "CellCache", "GSM8KArm", "GSM8KReport", "GSM8KSection", "MergeCall",
    "NOT_SAFE", "NOT_SHOWN", "OutputAgreement", "OutputComparison", "SAFE", "acceptance_length",
    "gsm8k_report", "merge_calls", "summarize_outputs", "verdict_accuracy"
]
