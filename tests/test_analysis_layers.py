"""e2e.analysis' sub-packages stand in layers, the shared estimators at the bottom: a module
imports its own sub-package and those below it, never one above (imports inside functions and
under ``TYPE_CHECKING`` count too), and no sub-package reaches another's private name."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1] / "e2e" / "analysis"
# bottom first; a sub-package may import those before it
LAYERS = ("estimators", "sweep", "outputs", "capacity", "planning", "nightly")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every ``from e2e.analysis... import name`` and ``import e2e.analysis...``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("e2e.analysis"):
            found += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("e2e.analysis")]
    return found


def _subpackage(module: str, name: str = "") -> str | None:
    parts = module.split(".")
    if len(parts) > 2:
        return parts[2]
    return name if name in LAYERS else None  # from e2e.analysis import sweep


def test_every_subpackage_has_a_layer():
    found = sorted(p.name for p in ANALYSIS.iterdir() if (p / "__init__.py").exists())
    assert found == sorted(LAYERS)
    assert sorted(p.name for p in ANALYSIS.glob("*.py")) == ["__init__.py"]


def test_subpackages_import_only_downward():
    upward, private = [], []
    for path in sorted(ANALYSIS.rglob("*.py")):
        own = path.relative_to(ANALYSIS).parts[0]
        if own not in LAYERS:
            continue
        for module, name in _imports(path):
            other = _subpackage(module, name)
            if other is None or other == own:
                continue
            if LAYERS.index(other) > LAYERS.index(own):
                upward.append(f"{path.relative_to(ANALYSIS)} imports {module}")
            if name.startswith("_"):
                private.append(f"{path.relative_to(ANALYSIS)} imports {module}.{name}")
    assert upward == []
    assert private == []


def test_the_rule_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from e2e.analysis.nightly.judge import judge_night\n")
    (module, name), = _imports(bad)
    assert LAYERS.index(_subpackage(module, name)) > LAYERS.index("sweep")
