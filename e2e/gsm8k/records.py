"""GSM8K's records live in ``e2e.results`` (``SampleVerdict``, ``ArmResult``, ``EvalInfo``);
this module only hands ``SampleVerdict`` on to ``e2e.nightly``, which still imports it here."""

from e2e.results import SampleVerdict

__all__ = ["SampleVerdict"]
