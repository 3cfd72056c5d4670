"""GSM8K's store lives in ``e2e.results`` (``read_arm``, ``read_verdicts``,
``arm_is_complete``, ``read_evaluations``, ...); this module only hands on to
``e2e.nightly`` the names it still imports here."""

from e2e.results import VERDICTS_FILE, read_arm, read_verdicts
from e2e.results import arm_is_complete as is_complete

__all__ = ["VERDICTS_FILE", "is_complete", "read_arm", "read_verdicts"]
