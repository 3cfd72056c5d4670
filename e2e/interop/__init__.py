"""Meeting other tools' files: ``vllm bench serve`` results in and out of e2e's results store,
AIPerf's and GuideLLM's in.

    vllm_bench  import (``to_run``, ``import_file``) and export (``to_result``, ``export_dir``)
    aiperf      import of AIPerf's profile_export.jsonl (``import_export``)
    guidellm    import of GuideLLM's benchmark report (``import_report``)
    command     the typer commands ``e2e import vllm-bench`` and ``e2e export``
"""
