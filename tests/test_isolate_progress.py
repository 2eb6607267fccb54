"""The conversion worker's heartbeat: a long job that reports progress keeps going, a stuck step is stopped.

The runner reads its deadlines from a clock the test moves (virtual seconds), so what is checked does
not depend on how fast this machine runs the worker.
"""

from collections.abc import Callable

import pytest

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConversionError
from tests.clocks import VirtualClock
from tests.ocr_stand_ins import counted_steps


def refused(
    runner: IsolatedRunner,
    *,
    steps: int,
    step_s: float,
    timeout_s: float,
    on_progress: Callable[[int, int], None],
) -> ConversionError:
    """The error of a counted_steps job run with a 1 s progress timeout, which must fail."""
    with pytest.raises(ConversionError) as caught:
        runner.call(
            counted_steps,
            b"",
            steps=steps,
            step_s=step_s,
            timeout_s=timeout_s,
            progress_timeout_s=1.0,
            on_progress=on_progress,
        )
    return caught.value


def test_progress_reaches_the_caller_and_each_report_moves_the_deadline() -> None:
    told = []
    clock = VirtualClock()

    def on_progress(done: int, total: int) -> None:
        told.append((done, total))
        clock.advance(0.6)  # each step takes 0.6 virtual seconds

    with IsolatedRunner(clock=clock) as runner:
        done = runner.call(
            counted_steps,
            b"",
            steps=5,
            step_s=0,
            timeout_s=1.0,  # the whole job takes 3.6 s: only the heartbeat lets it finish
            progress_timeout_s=1.0,
            on_progress=on_progress,
        )
    assert done == 5 and told == [(n, 5) for n in range(6)]
    assert clock.now == pytest.approx(3.6)  # well past timeout_s


def test_the_same_time_without_reports_in_between_is_stopped_at_the_timeout() -> None:
    clock = VirtualClock()

    def on_progress(done: int, total: int) -> None:
        if done == 0:
            clock.advance(3.6)  # the job's whole time passes before its next report

    with IsolatedRunner(clock=clock) as runner:
        error = refused(runner, steps=5, step_s=0, timeout_s=1.0, on_progress=on_progress)
        assert "(0 of 5 pages read)" in str(error) and error.reason == "timeout"


def test_a_step_that_takes_longer_than_the_progress_timeout_is_stopped() -> None:
    clock = VirtualClock()
    told = []

    def on_progress(done: int, total: int) -> None:
        told.append(done)
        clock.advance(2.5)  # past timeout_s and the progress timeout: the first 30 s step is still running

    with IsolatedRunner(clock=clock) as runner:
        assert runner.call(counted_steps, b"", steps=1, step_s=0, timeout_s=30, progress_timeout_s=1) == 1
        first_pid = runner.pid
        error = refused(runner, steps=3, step_s=30, timeout_s=2.0, on_progress=on_progress)
        assert "(0 of 3 pages read)" in str(error) and error.reason == "timeout"
        assert told == [0] and runner.pid is None  # stopped during its first step, the worker killed
        assert runner.call(counted_steps, b"", steps=1, step_s=0, timeout_s=30, progress_timeout_s=1) == 1
        assert runner.pid != first_pid


def test_without_a_progress_timeout_a_job_gets_no_reporter_and_the_plain_timeout() -> None:
    with IsolatedRunner() as runner, pytest.raises(ConversionError) as caught:
        runner.call(counted_steps, b"", steps=1, step_s=0, timeout_s=10)
    assert caught.value.reason == "internal-error" and "progress" in str(caught.value)
