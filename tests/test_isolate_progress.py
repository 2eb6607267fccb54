"""The conversion worker's heartbeat: a long job that reports progress keeps going, a stuck step is stopped."""

import time

import pytest

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConversionError
from tests.ocr_stand_ins import counted_steps


def test_progress_reaches_the_caller_and_each_report_moves_the_deadline() -> None:
    told = []
    with IsolatedRunner() as runner:
        started = time.monotonic()
        done = runner.call(
            counted_steps,
            b"",
            steps=5,
            step_s=0.4,
            timeout_s=1.0,  # the whole job takes 2 s: only the heartbeat lets it finish
            progress_timeout_s=1.0,
            on_progress=lambda done, total: told.append((done, total)),
        )
        assert time.monotonic() - started > 2.0
    assert done == 5 and told == [(n, 5) for n in range(6)]


def test_a_step_that_takes_longer_than_the_progress_timeout_is_stopped() -> None:
    with IsolatedRunner() as runner:
        started = time.monotonic()
        with pytest.raises(ConversionError) as caught:
            runner.call(counted_steps, b"", steps=3, step_s=30, timeout_s=2.0, progress_timeout_s=1.0)
        assert time.monotonic() - started < 5
        assert "(0 of 3 pages read)" in str(caught.value) and caught.value.reason == "timeout"
        assert runner.call(counted_steps, b"", steps=1, step_s=0, timeout_s=30, progress_timeout_s=1) == 1


def test_without_a_progress_timeout_a_job_gets_no_reporter_and_the_plain_timeout() -> None:
    with IsolatedRunner() as runner, pytest.raises(ConversionError) as caught:
        runner.call(counted_steps, b"", steps=1, step_s=0, timeout_s=10)
    assert caught.value.reason == "internal-error" and "progress" in str(caught.value)
