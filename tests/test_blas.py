"""numpy's BLAS threads: kept to what kb mcp asks, and the products the same, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.blas import blas_threads, limit_blas_threads


@pytest.fixture
def threads():
    """numpy's BLAS thread count, put back after the test (skipped where it cannot be asked: not OpenBLAS)."""
    before = blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS here is not an OpenBLAS of its own")
    yield before
    limit_blas_threads(before)


def test_one_thread_is_kept_to_and_gives_the_same_products(threads):
    rng = np.random.default_rng(3)
    tokens, weights = (
        rng.standard_normal((24, 512), dtype=np.float32),
        rng.standard_normal((512, 768), dtype=np.float32),
    )
    rows, vector = (
        rng.standard_normal((600, 512), dtype=np.float32),
        rng.standard_normal(512, dtype=np.float32),
    )
    limit_blas_threads(2)
    before = (tokens @ weights, rows @ vector)
    assert limit_blas_threads(1) >= 1
    assert blas_threads() == 1
    after = (tokens @ weights, rows @ vector)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
