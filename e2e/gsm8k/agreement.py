"""GSM8K's agreement statistics live in ``e2e.analysis`` (``compare_verdicts``, ``Agreement``,
``mcnemar_exact``); this module only hands ``compare`` on to ``e2e.nightly``, which still
imports it here."""

from e2e.analysis import compare_verdicts as compare

__all__ = ["compare"]
