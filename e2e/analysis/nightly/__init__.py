"""The night's judgement: a night against its baseline or its ratio's history, the history,
change points, the outputs check, bisect's verdicts and what a nightly design resolves."""
