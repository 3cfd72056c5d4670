"""Meeting other tools' files: ``vllm bench serve`` results in and out of e2e's results store.

    vllm_bench  import (``to_run``, ``import_file``) and export (``to_result``, ``export_dir``)
    command     the typer commands ``e2e import vllm-bench`` and ``e2e export``
"""
