"""numpy's BLAS threads: kb mcp keeps them to one, and the answers stay the same: the same ranking of
passages, products equal to float32 rounding (how a product is split between threads may change its last bits)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits


def blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_one_thread_is_kept_to_and_gives_the_same_products():
    assert blas_threads()  # numpy's own OpenBLAS is there to be limited
    rng = np.random.default_rng(3)
    tokens, weights = (
        rng.standard_normal((24, 512), dtype=np.float32),
        rng.standard_normal((512, 768), dtype=np.float32),
    )
    rows, vector = (
        rng.standard_normal((600, 512), dtype=np.float32),
        rng.standard_normal(512, dtype=np.float32),
    )
    with threadpool_limits(limits=2, user_api="blas"):
        before = (tokens @ weights, rows @ vector)
    with threadpool_limits(limits=1, user_api="blas"):  # as kb mcp runs
        assert blas_threads() == [1] * len(blas_threads())
        after = (tokens @ weights, rows @ vector)
    # entries of size ~22: 1e-4 is float32's last bits
    assert np.allclose(before[0], after[0], rtol=1e-5, atol=1e-4)
    assert np.allclose(before[1], after[1], rtol=1e-5, atol=1e-4)
    assert list(np.argsort(-before[1])) == list(np.argsort(-after[1]))  # the passages come in the same order
