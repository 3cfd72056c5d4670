"""GSM8K accuracy for every arm through lm-eval, and per-sample verdict agreement with main.

    task       the stock lm-eval gsm8k task, or e2e's local twin over train/test JSONL
    lmeval     lm-eval 0.4.13 as a subprocess against one arm's server; its sample log
               read into per-document verdicts
    store      the results layout, reading and writing records
    render     the report as Markdown / CSV bytes
    run        the pipeline (plan -> per arm: server, lm-eval, verdicts -> report)

The records are ``e2e.results``' (``SampleVerdict``, ``ArmResult``, ``EvalInfo``), the
agreement and the report's sections ``e2e.analysis``' (``compare_verdicts``,
``summarize_gsm8k``); the command is ``e2e.commands``' ``e2e gsm8k``.
"""

from e2e.gsm8k.lmeval import parse_samples
from e2e.gsm8k.render import render_csv, render_markdown
from e2e.gsm8k.store import load_report

__all__ = ["parse_samples", "render_csv", "render_markdown", "load_report"]
