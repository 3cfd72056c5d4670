"""An arm's plugin settings, parsed once from the JSON e2e writes into the server's
environment (``E2E_PLUGIN_SETTINGS``).

Below both its readers: the config checks an arm's settings with it (``e2e.names``) without
loading the plugin, and the plugin (``e2e.plugin``) applies them in every server, so it is one
of the plugin's files (``e2e.plugin.source.PARTS``): standard library only."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

__all__ = ["PluginSettings", "SettingsError", "PACKINGS", "canonical"]

PACKINGS = ("main", "inplace", "fused", "torch", "meta")
_KEYS = {"packing", "draft_update", "step_delay_us", "packs_per_step", "window", "perturb"}
MAX_PERTURB = 0.1


class SettingsError(ValueError):
    """The settings cannot be applied; the message says why."""


@dataclass(frozen=True)
class PluginSettings:
    packing: str = "main"          # which packing path the SWA builders use
    draft_update: bool = False     # supports_draft_decode_metadata_update
    step_delay_us: int = 0         # calibration: busy wait per decode step (inject mode)
    packs_per_step: int = 7        # packing calls per decode step (DeepSeek-V4.1: 7)
    window: int = 128              # SWA window (inject mode)
    perturb: float = 0.0           # calibration: scale the first layer's MLP output by 1 + this

    @classmethod
    def parse(cls, raw: str) -> tuple[PluginSettings, dict]:
        """``(settings, the JSON object as given)``; raises SettingsError."""
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SettingsError(f"E2E_PLUGIN_SETTINGS is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SettingsError(f"E2E_PLUGIN_SETTINGS must be a JSON object, got {raw!r}")
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            raise SettingsError(f"unknown plugin settings {unknown}; known: {sorted(_KEYS)}")
        packing = data.get("packing", "main")
        if packing not in PACKINGS:
            raise SettingsError(f"packing {packing!r} is not one of {', '.join(PACKINGS)}")
        draft_update = data.get("draft_update", False)
        if not isinstance(draft_update, bool):
            raise SettingsError(f"draft_update must be true or false, got {draft_update!r}")
        if draft_update and packing == "main":
            raise SettingsError("draft_update = true needs an in-place packing path "
                                "(inplace, fused, torch or meta): main packs into scratch")
        ints = {}
        for key, low in (("step_delay_us", 0), ("packs_per_step", 1), ("window", 1)):
            value = data.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise SettingsError(f"{key} must be an integer >= {low}, got {value!r}")
            ints[key] = value
        perturb = data.get("perturb", 0.0)
        if (isinstance(perturb, bool) or not isinstance(perturb, (int, float))
                or not math.isfinite(perturb) or not 0 <= perturb <= MAX_PERTURB):
            raise SettingsError(f"perturb must be a number from 0 to {MAX_PERTURB:g} (a "
                                f"relative change, e.g. 1e-3), got {perturb!r}")
        return cls(packing=packing, draft_update=draft_update, perturb=float(perturb),
                   **ints), data


def canonical(data: dict) -> str:
    """The settings as one compact, key-sorted JSON string (what the log line carries)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
