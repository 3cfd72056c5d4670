"""GSM8K accuracy for every arm through lm-eval, and per-sample verdict agreement with main.

    task       the stock lm-eval gsm8k task, or e2e's local twin over train/test JSONL
    lmeval     lm-eval 0.4.13 as a subprocess against one arm's server
    agreement  pure: sample logs -> verdicts -> agreement, exact McNemar, acceptance length
    summary    pure: one evaluation folder's arms -> a report section
    store      the results layout, reading and writing records
    render     the report as Markdown / CSV bytes
    run        the pipeline (plan -> per arm: server, lm-eval, verdicts -> report)
    command    the typer command ``e2e gsm8k``
"""

from e2e.gsm8k.agreement import Agreement, compare, mcnemar_exact, parse_samples
from e2e.gsm8k.render import render_csv, render_markdown
from e2e.gsm8k.store import load_report
from e2e.gsm8k.summary import GSM8KReport, Section

__all__ = ["Agreement", "compare", "mcnemar_exact", "parse_samples", "render_csv",
           "render_markdown", "load_report", "GSM8KReport", "Section"]
