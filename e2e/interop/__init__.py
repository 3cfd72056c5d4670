"""Meeting other tools' files: ``vllm bench serve`` results in and out of e2e's results store,
AIPerf's and GuideLLM's in. Each tool's format is a reader and, where e2e writes it, a writer,
registered once in ``formats`` (``READERS``, ``WRITERS``); the commands look them up there.

    formats             the registry: ``e2e import <name>`` and ``e2e export --format <name>``
    importing           what every import shares: ``Reader``, ``ImportOptions``, ``import_file``
    vllm_bench          vllm bench serve's keys and its reader (``read_results``, ``to_run``)
    vllm_bench_writer   its writer (``to_result``, ``export_dir``)
    aiperf              AIPerf's profile_export.jsonl, read (``read_export``, ``to_run``)
    guidellm            GuideLLM's benchmark report, read (``read_report``, ``to_run``)
"""
