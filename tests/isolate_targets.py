"""Functions the isolation tests run in the worker; they must live in an importable module."""

from __future__ import annotations

import ctypes
import os
import time

from knowledge.errors import ConversionError


def add(a: int, b: int, *, c: int = 0) -> int:
    """Return a + b + c."""
    return a + b + c


def worker_pid() -> int:
    """Return the process id the call ran in."""
    return os.getpid()


def refuse(reason: str, message: str) -> None:
    """Raise a ConversionError, as a converter does for a bad file."""
    raise ConversionError(reason, message)


def explode() -> None:
    """Raise an exception that is not ours."""
    raise KeyError("no such thing")


def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    time.sleep(seconds)
    return "slept"


def allocate(n_bytes: int) -> int:
    """Allocate and touch ``n_bytes``."""
    block = bytearray(n_bytes)
    return len(block)


def segfault() -> None:
    """Read address 0: the interpreter dies with SIGSEGV."""
    ctypes.string_at(0)


def hard_exit(code: int) -> None:
    """Leave the process without any cleanup."""
    os._exit(code)


def unpicklable_result() -> object:
    """Return something that cannot travel back through the pipe."""
    return lambda: None
