"""A backup or a restore stopped by SIGTERM cleans up as one stopped by Ctrl-C does.

SIGINT already raises ``KeyboardInterrupt``; SIGTERM (a service manager, ``kill``) ends a process
without running its ``finally`` blocks, which would leave the private work folder beside DEST (with
its SQLite copies) or a restore's staging folder beside DIR for good. Inside
:func:`stopped_by_signals` SIGTERM raises ``KeyboardInterrupt`` too, once; the previous handlers are
put back on the way out. Only the main thread can take signals: elsewhere nothing changes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Within: SIGTERM and SIGINT raise KeyboardInterrupt in the main thread (the first one only, so
    the clean-up it starts runs to its end; one the process ignores stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    is_stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal is_stopping
        if is_stopping:
            return
        is_stopping = True
        raise KeyboardInterrupt(signal.Signals(signum).name)

    # A signal the process was started to ignore (SIGINT of a job started with & in a script) stays ignored.
    kept = [sig for sig in (signal.SIGTERM, signal.SIGINT) if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, stop) for sig in kept}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
