"""GSM8K accuracy for every arm through lm-eval, and per-sample verdict agreement with main:
what to plan and what to run.

    task       the stock lm-eval gsm8k task, or e2e's local twin over train/test JSONL
    lmeval     lm-eval 0.4.13 as a subprocess against one arm's server; its sample log
               read into per-document verdicts
    workload   one arm's evaluation as a server-session workload (lm-eval, verdicts, arm.json)
    run        the pipeline: plan one unit per arm server, run them, write the report

Each stage holds its part: the records and their folders are ``e2e.results``' (``ArmResult``,
``SampleVerdict``, ``read_evaluations``), the agreement and the report's sections
``e2e.analysis``' (``compare_verdicts``, ``gsm8k_report``), the Markdown and CSV
``e2e.render``' (``write_gsm8k_report``); the command is ``e2e gsm8k`` (``e2e.commands``).
"""
