"""A pytest plugin for `e2e unit`'s mutants: ``E2E_UNIT_NOOP="module:function"`` replaces that
function with one that does nothing and returns None, before any test runs (``-p
e2e.commands._unit_noop``). Code that looks the name up at call time (a module global) sees
the no-op."""

from __future__ import annotations

import importlib
import os


def pytest_configure(config) -> None:
    spec = os.environ.get("E2E_UNIT_NOOP")
    if not spec:
        return
    module_name, _, name = spec.partition(":")
    module = importlib.import_module(module_name)
    if not callable(getattr(module, name, None)):
        raise RuntimeError(f"E2E_UNIT_NOOP={spec}: {module_name} has no function {name}")
    setattr(module, name, lambda *args, **kwargs: None)
