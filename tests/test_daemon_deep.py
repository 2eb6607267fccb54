"""Trees deeper than the watch can follow: moved in, arriving between a scan and the watch, present at
start; the daemon keeps seeing the inbox and kb ingest walks them."""

import os
import threading
import time
from pathlib import Path

import pytest

from daemon.main import open_daemon
from daemon.service import PROBE_S, _Events
from knowledge.model.tokenizer import ApproxCounter
from tests.conftest import make_settings
from tests.test_daemon import SETTLE, found, log_events, remove_tree, start_daemon, wait_for

DEEP = 1_100  # legal on ext4 and APFS; Python's own os.walk and watchdog's recursive watch fail past ~1,000


def make_deep_tree(top: Path, levels: int = DEEP, files: dict[int, str] | None = None) -> None:
    """A chain of ``levels`` folders named d under top, built by folder handle (paths would pass PATH_MAX),
    with a Markdown file at the levels named in files."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(1, levels + 1):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            if files and level in files:
                out = os.open(f"level{level}.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(out, f"# Level {level}\n\n{files[level]}\n".encode())
                os.close(out)
    finally:
        os.close(fd)


@pytest.fixture
def quiet_kb(tmp_path):
    """A daemon whose rescans are far apart (so only its watch finds new files) and whose watch is probed often."""
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE, KB_RESCAN_S="300")
    with open_daemon(settings, ApproxCounter()) as daemon:
        daemon.probe_s = 0.5
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        assert daemon.started.wait(30)
        try:
            yield daemon, settings
        finally:
            daemon.stop()
            thread.join(30)
            remove_tree(tmp_path)


@pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning"
)  # watchdog's thread dies of it
def test_a_tree_a_thousand_levels_deep_moved_in_does_not_blind_the_watch(quiet_kb, tmp_path):
    daemon, s = quiet_kb
    daemon.probe_s = PROBE_S  # the watch's own thread is watched: no probe is needed to notice its death
    outside = tmp_path / "deep"
    outside.mkdir()
    make_deep_tree(outside, files={3: "the okapi file near the top", DEEP: "the gecko file at the bottom"})
    time.sleep(1.0)  # the fixture's quick probe is past; the next one is PROBE_S away
    os.rename(outside, s.inbox / "deep")
    time.sleep(1.5)  # watchdog's recursive watch has met the tree (and its thread has died of it)
    (s.inbox / "later.md").write_text("# Later\n\nThe narwhal note arrived after the deep tree.\n")
    wait_for(lambda: found(s, "narwhal"), timeout_s=10, what="a file dropped after the deep tree, in seconds")
    wait_for(lambda: found(s, "okapi"), what="the file three levels down")
    assert daemon.watch_limited
    assert not found(s, "gecko")  # below the depth kb enters: left where it is
    reconciled = []
    reconcile = daemon.ingestor.reconcile_raw
    daemon.ingestor.reconcile_raw = lambda: reconciled.append(1) or reconcile()
    (s.inbox / "deep" / "d" / "wombat.md").write_text("# Wombat\n\nThe wombat note, in the deep tree.\n")
    wait_for(lambda: found(s, "wombat"), what="a file in the deep tree, by the inbox's frequent rescans")
    walked = daemon.inbox_rescans
    wait_for(
        lambda: daemon.inbox_rescans > walked, what="one more inbox rescan, besides the one that found it"
    )
    assert not reconciled  # the frequent rescans walk the inbox only: raw/ waits for KB_RESCAN_S (300 s here)
    # the tree gone, the whole inbox is watched again: a file in a new sub-folder is found without a rescan
    remove_tree(s.inbox / "deep")
    wait_for(lambda: not daemon.watch_limited, what="the full watch restored")
    (s.inbox / "sub").mkdir()
    time.sleep(0.5)
    (s.inbox / "sub" / "tapir.md").write_text("# Tapir\n\nThe tapir note in a sub-folder.\n")
    wait_for(lambda: found(s, "tapir"), timeout_s=10, what="a file in a sub-folder, by the watch")


def test_a_tree_too_deep_that_arrives_between_the_scan_and_the_watch_limits_the_watch(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE)
    settings.inbox.mkdir(parents=True)
    try:
        with open_daemon(settings, ApproxCounter()) as daemon:
            make_deep_tree(settings.inbox)  # after any scan: only setting up the watch meets it
            observer, _ = daemon._start_observer(_Events(daemon))
            try:
                assert daemon.watch_limited and observer.is_alive()
            finally:
                observer.stop()
                observer.join(10)
    finally:
        remove_tree(tmp_path)


def test_a_daemon_starts_with_such_a_tree_in_the_inbox_and_kb_ingest_walks_it(tmp_path, run_kb):
    home = tmp_path / "kb"
    settings = make_settings(home, KB_SETTLE_S=SETTLE)
    settings.inbox.mkdir(parents=True)
    try:
        make_deep_tree(settings.inbox, files={2: "the ibex file two levels down"})
        proc = start_daemon(home)
        try:
            wait_for(lambda: found(settings, "ibex"), timeout_s=60, what="a file in the deep tree, at start")
            (settings.inbox / "new").mkdir()
            (settings.inbox / "new" / "quokka.md").write_text("# Quokka\n\nThe quokka note.\n")
            wait_for(lambda: found(settings, "quokka"), what="a file in a new sub-folder, by the rescans")
            assert proc.poll() is None
        finally:
            proc.terminate()
            assert proc.wait(30) == 0, proc.stderr.read()
        assert {"inbox.too_deep", "daemon.watch_limited"} <= set(log_events(home))

        other = tmp_path / "other"
        other.mkdir()
        make_deep_tree(other, files={1: "the serval file one level down"})
        done = run_kb("--home", str(home), "ingest", str(other))
        assert done.returncode == 0, done.stderr
        assert found(settings, "serval")
    finally:
        remove_tree(tmp_path)
