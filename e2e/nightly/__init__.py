"""``e2e nightly``: the reference matrix every night, judged against the last passing night.

    settings  the nightly config: an experiment TOML plus a [nightly] table; the config hash
    night     tonight of it, resolved once: its experiment on this host, its folders, the
              plan of each look, the cells it expects and judges, the judge's rules; every
              later stage (and the dry run) reads this value, never the config
    measure   builds, night.json (resume check), the sweep with its looks, the GSM8K subset,
              the night's cells
    assess    against the store's history: baseline night, verdict files, judgement, change
              points, outputs, what the design resolves, bisect lines (after the cells)
    write     the night's writes, at its end: report, store, trends, summaries, judgement.json
    run       the pipeline: night -> measure -> assess -> write, each called once
    bisect    e2e bisect: git builds of midpoints, each measured like a sweep

The nights are kept in the results stage's store (``e2e.results.open_store``: SQLite by default
or PostgreSQL, one transaction per night, versioned migrations; the old history.parquet is
imported once), which answers the history a night is judged against as typed records
(``Store.cells``). The statistics are the analysis stage's (``e2e.analysis``): the baseline
night and a ratio's history selected from those records (``select_baseline``,
``ratio_history``), the judge (a night's cells against a baseline night's, or a ratio's
history -> verdicts, status, exit code; GSM8K per document: exact McNemar; tonight's greedy
outputs against the reference arm's, prompt by prompt: ``check_outputs``), change points
(steps in a cell's history: ruptures Pelt + permutation confirmation) and what a nightly
design resolves. The records they pass (cells, verdicts,
baseline, ratio history, change points, judgement) are the results stage's (``e2e.results``).
The night's summary, trend plots and the dashboard of the store are written by ``e2e.render``
(``render_summary``, ``render_trends``, ``site_files``). The typer commands are
``e2e.commands`` (``nightly``, ``history``, ``dashboard``, ``bisect``).
"""
