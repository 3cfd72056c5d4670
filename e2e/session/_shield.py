"""Finishing work that a second Ctrl-C must not cut short.

After a first Ctrl-C (or SIGTERM) e2e still has to stop the server and write what finished.
An impatient second Ctrl-C arriving in the middle of that would leave a server running or a
unit folder without its record. Inside ``shielded()`` SIGINT and SIGTERM are noted, not
acted on; when the block ends they are raised as one KeyboardInterrupt (unless the block is
already ending with one).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["shielded"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals (and may set handlers)
        return
    seen: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: seen.append(signum)) for s in _SIGNALS}
    unwinding = False
    try:
        yield
    except BaseException:
        unwinding = True
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if seen and not unwinding:
            raise KeyboardInterrupt
