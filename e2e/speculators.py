"""A speculator profile's rules (a ``[speculators.<name>]`` table, vLLM's speculative_config
plus e2e's ``pinned`` key): which profile runs without ``--spec``, and the acceptance length
a profile may pin.

    default_profile(speculators)        -> 'dspark', else the first profile, else None
    check_pin(value, profile, where)    a ConfigError unless ``value`` is a pin the profile allows
"""

from __future__ import annotations

import math
from typing import Any

from e2e.errors import ConfigError

__all__ = ["PIN_KEY", "PIN_BASELINE", "check_pin", "default_profile"]

PIN_KEY = "pinned"
"""e2e's key in a speculator profile: hold acceptance at this length (docs/explanation/
statistics.md, "Acceptance held fixed")."""
PIN_BASELINE = "baseline"


def check_pin(value: Any, profile: dict[str, Any], where: str) -> None:
    """A pinned acceptance length is a number in [1, num_speculative_tokens + 1] (vLLM's own
    range for ``synthetic_acceptance_length``) or "baseline"; and the profile must not set
    vLLM's synthetic keys itself. Raises ConfigError."""
    clash = [k for k in ("rejection_sample_method", "synthetic_acceptance_length",
                         "synthetic_acceptance_rates") if k in profile]
    if clash:
        raise ConfigError(f"{where}: the profile also sets {', '.join(clash)}; give either "
                          f"{PIN_KEY} (e2e sets vLLM's synthetic sampling from it) or vLLM's keys")
    if value == PIN_BASELINE:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} = {value!r}: give an acceptance length (a number such as "
                          f"3.2) or \"{PIN_BASELINE}\" (the baseline arm's measured one)")
    k = profile.get("num_speculative_tokens")
    top = float(k) + 1.0 if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
    if value < 1.0 or (top is not None and value > top):
        span = f"[1, {top:g}] (num_speculative_tokens + 1)" if top else "at least 1"
        raise ConfigError(f"{where} = {value!r}: an acceptance length is {span}")


def default_profile(speculators: dict[str, Any]) -> str | None:
    """The profile a speculator spec mode runs without ``--spec``: ``dspark`` where there is
    one (the reference experiment's name, and every config before ``--spec``), else the first
    table; None without any."""
    if "dspark" in speculators:
        return "dspark"
    return next(iter(speculators), None)
