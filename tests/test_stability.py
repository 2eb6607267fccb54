from pathlib import Path

from daemon.stability import NOT_REGULAR, StabilityTracker, lstat_signature

A, B = Path("/in/a.pdf"), Path("/in/b.md")


def test_a_file_is_ready_once_it_held_still_for_the_settle_time():
    sizes = {A: (10, 1)}
    t = StabilityTracker(settle_s=1.0)
    t.touch(A, now=0.0)
    assert t.check(0.0, sizes.get).ready == []  # first look: nothing to compare with yet
    assert t.check(0.5, sizes.get).ready == []
    assert t.check(1.0, sizes.get).ready == [A]
    assert t.check(5.0, sizes.get).ready == []  # handed out exactly once
    assert len(t) == 0


def test_a_growing_file_keeps_waiting_and_is_taken_once():
    t = StabilityTracker(settle_s=1.0)
    t.touch(A, now=0.0)
    for step in range(10):
        assert t.check(step * 0.6, {A: (step * 100, step)}.get).ready == []
    assert t.check(6.0, {A: (900, 9)}.get).ready == []
    assert t.check(7.1, {A: (900, 9)}.get).ready == [A]


def test_an_event_restarts_the_settle_time():
    t = StabilityTracker(settle_s=1.0)
    stat = {A: (1, 1)}.get
    t.touch(A, 0.0)
    t.check(0.0, stat)
    t.touch(A, 0.9)  # "modified" with the same size and mtime (e.g. a touch within the same tick)
    assert t.check(1.5, stat).ready == []
    assert t.check(2.0, stat).ready == [A]


def test_arrival_order_gone_and_not_regular():
    t = StabilityTracker(settle_s=0.0)
    t.touch(B, 0.0)
    t.touch(A, 0.1)
    t.touch(Path("/in/fifo"), 0.2)
    t.touch(Path("/in/vanished"), 0.3)
    stat = {A: (1, 1), B: (2, 2), Path("/in/fifo"): NOT_REGULAR}.get
    first = t.check(1.0, stat)
    assert first.not_regular == [Path("/in/fifo")] and first.gone == [Path("/in/vanished")]
    assert t.check(2.0, stat).ready == [B, A]


def test_lstat_signature_on_real_things(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    (tmp_path / "link").symlink_to(f)
    assert lstat_signature(f)[0] == 3
    assert lstat_signature(tmp_path / "link") == NOT_REGULAR
    assert lstat_signature(tmp_path) == NOT_REGULAR
    assert lstat_signature(tmp_path / "missing") is None
