"""IsolatedRunner: results and errors come back, hangs and crashes stay in the worker."""

from __future__ import annotations

import os
import resource
import select
import signal
import threading
from collections.abc import Iterator

import pytest

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConversionError, ConversionInterrupted
from tests import isolate_targets as targets
from tests.clocks import TickingClock
from tests.conftest import is_reaped
from tests.ocr_stand_ins import counted_steps


@pytest.fixture
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(memory_bytes=256 * 1024**2) as r:
        yield r


def test_call_returns_the_value_computed_in_another_process(runner):
    assert runner.call(targets.add, 2, 3, c=4, timeout_s=10) == 9
    assert runner.call(targets.worker_pid, timeout_s=10) != os.getpid()


def test_worker_is_reused_across_calls(runner):
    pids = {runner.call(targets.worker_pid, timeout_s=10) for _ in range(5)}
    assert pids == {runner.pid}


def test_conversion_error_keeps_reason_and_message(runner):
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.refuse, "pdf-encrypted", "the PDF is protected by a password", timeout_s=10)
    assert caught.value.reason == "pdf-encrypted"
    assert str(caught.value) == "the PDF is protected by a password"


def test_foreign_exception_becomes_internal_error_with_its_traceback(runner):
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.explode, timeout_s=10)
    assert caught.value.reason == "internal-error"
    assert "KeyError" in str(caught.value) and "no such thing" in str(caught.value)
    assert "Traceback" in caught.value.details and "isolate_targets.py" in caught.value.details
    assert runner.call(targets.add, 1, 1, timeout_s=10) == 2


def test_unpicklable_result_becomes_internal_error(runner):
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.unpicklable_result, timeout_s=10)
    assert caught.value.reason == "internal-error"
    assert runner.call(targets.add, 1, 2, timeout_s=10) == 3


def test_hang_is_killed_after_the_timeout_and_the_next_call_works():
    clock = TickingClock(0.125)
    with IsolatedRunner(memory_bytes=256 * 1024**2, clock=clock) as runner:
        first_pid = runner.call(targets.worker_pid, timeout_s=10)
        mark = len(clock.readings)
        with pytest.raises(ConversionError) as caught:
            runner.call(targets.sleep, 60, timeout_s=0.5)
        read = clock.readings[mark:]  # the call's start, then its looks at the time
        assert caught.value.reason == "timeout"
        assert "0.5 s" in str(caught.value)
        assert 0.5 <= read[-1] - read[0] <= 0.5 + 2 * clock.step_s  # stopped once the timeout was past
        assert is_reaped(first_pid)
        assert runner.call(targets.sleep, 0, timeout_s=10) == "slept"
        assert runner.pid != first_pid


def test_interrupt_stops_a_running_call_at_once():
    # The runner's clock stands still: the timeout never comes, only the interrupt can end the call.
    with IsolatedRunner(memory_bytes=256 * 1024**2, clock=lambda: 0.0) as runner:
        pid = runner.call(targets.worker_pid, timeout_s=10)
        running = threading.Event()
        stopper = threading.Thread(target=lambda: running.wait(10) and runner.interrupt())
        stopper.start()
        with pytest.raises(ConversionInterrupted, match="was stopped"):  # not "was not started"
            runner.call(
                counted_steps, b"", steps=1, step_s=60, timeout_s=30, progress_timeout_s=30,
                on_progress=lambda done, total: running.set(),  # the worker is in its 60 s step
            )  # fmt: skip
        stopper.join()
        assert is_reaped(pid)
        with pytest.raises(ConversionInterrupted):  # a stopping kb starts no new conversion
            runner.call(targets.add, 1, 1, timeout_s=10)


def test_allocation_beyond_the_memory_limit_fails_without_harming_the_parent(runner):
    parent_limit = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.allocate, 1024**3, timeout_s=10)
    assert caught.value.reason in {"converter-error", "converter-crashed"}
    assert "memory" in str(caught.value)
    assert resource.getrlimit(resource.RLIMIT_AS) == parent_limit
    assert runner.call(targets.allocate, 16 * 1024**2, timeout_s=10) == 16 * 1024**2


def test_segfault_is_reported_as_crash_and_the_next_call_works(runner):
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.segfault, timeout_s=10)
    assert caught.value.reason == "converter-crashed"
    assert "SIGSEGV" in str(caught.value)
    assert runner.call(targets.add, 2, 2, timeout_s=10) == 4


def test_os_exit_is_reported_as_crash_and_the_next_call_works(runner):
    with pytest.raises(ConversionError) as caught:
        runner.call(targets.hard_exit, 3, timeout_s=10)
    assert caught.value.reason == "converter-crashed"
    assert "exit code 3" in str(caught.value)
    assert runner.call(targets.add, 3, 3, timeout_s=10) == 6


def test_worker_killed_while_idle_is_replaced(runner):
    pid = runner.call(targets.worker_pid, timeout_s=10)
    death = os.pidfd_open(pid)  # readable once the worker is dead (its parent is the fork server)
    try:
        os.kill(pid, signal.SIGKILL)
        select.select([death], [], [])
    finally:
        os.close(death)
    assert runner.call(targets.worker_pid, timeout_s=10) not in {pid, os.getpid()}


def test_call_interrupted_in_the_parent_does_not_leak_its_reply_into_the_next_call(runner):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):  # the signal comes while the worker is in the call
            runner.call(
                counted_steps, b"", steps=1, step_s=0.2, timeout_s=10, progress_timeout_s=10,
                on_progress=lambda done, total: done == 0 and signal.raise_signal(signal.SIGALRM),
            )  # fmt: skip
    finally:
        signal.signal(signal.SIGALRM, previous)
    # Had the worker been kept, its late answers (a report, then 1) would be read first here.
    assert runner.call(targets.add, 1, 2, timeout_s=10) == 3


def test_close_reaps_the_worker_and_refuses_further_calls():
    runner = IsolatedRunner()
    pid = runner.call(targets.worker_pid, timeout_s=10)
    runner.close()
    assert is_reaped(pid)
    assert runner.pid is None
    with pytest.raises(RuntimeError):
        runner.call(targets.add, 1, 1, timeout_s=10)
