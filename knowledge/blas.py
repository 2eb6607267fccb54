"""numpy's BLAS threads, for a process that answers one short question at a time.

numpy's OpenBLAS parallelises a product over its own worker threads, which then spin, waiting for the
next one, for a long while after it ends. A search makes a few small products (the second embedder's
forward pass over a dozen tokens, its cosines): each woke the workers, which then burnt a core each
while the question went on, so a warm search cost 80-120 ms of CPU on a 2-core machine instead of 45,
and took longer while they spun. One thread gives the same vectors, bit for bit: a product over so few
rows is computed the same way whoever computes it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

# The thread setters of OpenBLAS builds: numpy's own wheels (symbols with a scipy_ prefix and a 64_ suffix)
# and a system OpenBLAS.
_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads_64_",
    "openblas_set_num_threads",
)
_GETTERS = (
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads_64_",
    "openblas_get_num_threads",
)


def _openblas_files() -> Iterator[Path]:
    """The OpenBLAS libraries numpy loaded: bundled beside it (Linux and macOS wheels)."""
    import numpy  # loads its BLAS, when it is not loaded yet

    package = Path(numpy.__file__).parent
    for folder in (package.parent / "numpy.libs", package / ".dylibs", package.parent / "numpy" / ".libs"):
        if folder.is_dir():
            yield from sorted(p for p in folder.iterdir() if "openblas" in p.name.lower())


def _libraries() -> list[ctypes.CDLL]:
    """Handles on those libraries (already loaded: opening them again gives the same library)."""
    out = []
    for path in _openblas_files():
        try:
            out.append(ctypes.CDLL(str(path)))
        except OSError:
            continue
    return out


def _first(lib: ctypes.CDLL, names: tuple[str, ...]) -> ctypes._CFuncPtr | None:
    for name in names:
        func = getattr(lib, name, None)
        if func is not None:
            return func
    return None


def limit_blas_threads(threads: int) -> int:
    """Let numpy's OpenBLAS use at most ``threads`` threads from now on; how many libraries were set
    (0: numpy's BLAS is not an OpenBLAS of its own, e.g. Apple's Accelerate: nothing to do)."""
    done = 0
    for lib in _libraries():
        setter = _first(lib, _SETTERS)
        if setter is not None:
            setter.argtypes = [ctypes.c_int]
            setter(int(threads))
            done += 1
    return done


def blas_threads() -> int | None:
    """The threads numpy's OpenBLAS uses now (None when it cannot be asked)."""
    for lib in _libraries():
        getter = _first(lib, _GETTERS)
        if getter is not None:
            getter.restype = ctypes.c_int
            return int(getter())
    return None
