"""Run a callback on a module as soon as it is imported (or now, if it already is).

vLLM imports its model runner and attention builders late, inside the process that uses
them; the plugin is called earlier. A meta-path finder wraps the loader of the named
modules so the callback runs right after the module body, before anyone reads its classes.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable
from types import ModuleType

__all__ = ["when_imported"]

_callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}
_lock = threading.Lock()


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once ``name`` is imported in this process."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            with _lock:
                callbacks = _callbacks.pop(fullname, [])
            for callback in callbacks:
                callback(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
