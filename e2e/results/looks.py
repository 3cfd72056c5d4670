"""``<experiment>/looks.json``: the sequential looks ``e2e sweep --until-settled`` took in a
results folder (the alpha they spent), so that a second invocation continues the spending and
``e2e report`` renders at the last look's confidence. Written atomically; an unreadable file is
an error, never a silent restart (its alpha is spent)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.errors import ConfigError
from e2e.paths import atomic_write_text, read_bounded

__all__ = ["LOOKS_FILE", "read_looks", "write_looks", "last_look_confidence"]

LOOKS_FILE = "looks.json"


def read_looks(folder: Path) -> list[dict]:
    """The looks of ``folder``, oldest first ([] without ``looks.json``); each a dict with
    rounds, max_rounds, alpha, cumulative, confidence, decisions, stop."""
    path = Path(folder) / LOOKS_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(read_bounded(path, 16 << 20, expect="the looks.json e2e wrote"))
        looks = [dict(x) for x in data["looks"]]
        for x in looks:
            for key in ("rounds", "max_rounds", "alpha", "cumulative", "confidence", "decisions",
                        "stop"):
                x[key]  # noqa: B018 (every key present)
        return looks
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: unreadable ({exc}); it records the alpha already spent by "
                          "--until-settled, so it is not ignored: restore it or use a new "
                          "--results folder") from None


def write_looks(folder: Path, looks: list[dict], *, confidence: float, spending: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    doc = {"spending": spending, "confidence": confidence, "looks": looks}
    atomic_write_text(Path(folder) / LOOKS_FILE, json.dumps(doc, indent=2) + "\n")


def last_look_confidence(folder: Path) -> float | None:
    """The confidence of the last look in ``folder`` (None: no looks)."""
    looks = read_looks(folder)
    return float(looks[-1]["confidence"]) if looks else None
