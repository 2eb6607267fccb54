"""The inbox daemon with real watchdog events on a real folder, as a user drops files into it."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.main import background
from knowledge.errors import IndexError_
from knowledge.ingest.pipeline import Ingestor, is_transient
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests import pdfs
from tests.conftest import make_settings, subprocess_env

SETTLE = "0.2"


def wait_for(predicate, timeout_s: float = 120.0, what: str = "condition") -> None:
    """Waits for ``predicate()`` to hold; the timeout is a safety net for a wedged run, never a measure."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def documents(settings) -> list:
    try:
        index = Index(settings.index_path, readonly=True)
    except IndexError_:
        return []
    with index:
        return index.documents()


def ingest_records(settings, name: str) -> list:
    with Index(settings.index_path, readonly=True) as index:
        return [r for r in index.last_ingests(10_000) if Path(r.path).name == name]


def found(settings, query: str) -> list:
    try:  # the daemon may have made the file and not yet its tables ("not ready")
        index = Index(settings.index_path, readonly=True)
    except IndexError_:
        return []
    with index:
        return search(index, query, k=3)


@pytest.fixture
def kb(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE, KB_RESCAN_S="2", KB_ORPHAN_SIDECAR_S="1")
    with background(settings, ApproxCounter()) as daemon:
        daemon.settings_ = settings
        yield daemon


def idle(daemon) -> None:
    time.sleep(float(SETTLE) * 2)
    assert daemon.wait_idle(30), "the daemon did not settle"


def test_a_dropped_file_is_indexed_and_kept(kb):
    s = kb.settings_
    (s.inbox / "note.md").write_text("# Note\n\nThe zebrafish sleeps at noon.\n")
    wait_for(lambda: documents(s), what="the note to be indexed")
    assert (s.processed / "note.md").is_file() and not (s.inbox / "note.md").exists()
    assert "zebrafish" in found(s, "when does the zebrafish sleep")[0].text


def test_copy_and_same_filesystem_move_in(kb, tmp_path):
    s = kb.settings_
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("# A\n\nalpha copied in\n")
    (outside / "b.md").write_text("# B\n\nbeta moved in\n")
    shutil.copy(outside / "a.md", s.inbox / "a.md")
    os.rename(outside / "b.md", s.inbox / "b.md")  # a same-filesystem mv: only a "created" event
    wait_for(lambda: len(documents(s)) == 2, what="both files")
    assert {d.source_name for d in documents(s)} == {"a.md", "b.md"}


def test_a_slowly_written_file_is_taken_once_complete(kb):
    s = kb.settings_
    path = s.inbox / "slow.md"
    with open(path, "w") as fh:
        fh.write("# Slow\n\nfirst part ")
        fh.flush()
        for n in range(8):  # writing for about five settle times, never pausing for a whole one
            time.sleep(float(SETTLE) * 0.6)
            fh.write(f"more text {n} ")
            fh.flush()
        fh.write("final words\n")
    wait_for(lambda: documents(s), what="the slow file")
    idle(kb)
    raw = (s.raw / documents(s)[0].raw_path.removeprefix("raw/")).read_text()
    assert "first part" in raw and "more text 7 final words" in raw
    assert [r.status for r in ingest_records(s, "slow.md")] == ["indexed"]
    assert (s.processed / "slow.md").read_text().endswith("final words\n")


def test_a_browser_download_renamed_from_part_is_taken_once(kb):
    s = kb.settings_
    part = s.inbox / "paper.pdf.crdownload"
    part.write_bytes(pdfs.text_pdf([["downloaded paper text"]])[:200])
    time.sleep(float(SETTLE) * 2)
    part.write_bytes(pdfs.text_pdf([["downloaded paper text"]]))
    os.rename(part, s.inbox / "paper.pdf")
    wait_for(lambda: documents(s), what="the download")
    idle(kb)
    assert [r.status for r in ingest_records(s, "paper.pdf")] == ["indexed"]
    assert not list(s.failed.iterdir())
    assert "downloaded paper text" in found(s, "downloaded paper")[0].text


def test_sidecar_first_gives_provenance(kb):
    s = kb.settings_
    (s.inbox / "page.html.source.json").write_text(json.dumps({"source_url": "https://example.org/p"}))
    time.sleep(float(SETTLE) * 2)
    assert not documents(s)  # a sidecar alone is never converted
    (s.inbox / "page.html").write_text(
        "<html><body><p>Imported from the web with its sidecar.</p></body></html>"
    )
    wait_for(lambda: documents(s), what="the page")
    assert documents(s)[0].source_url == "https://example.org/p"
    assert (s.processed / "page.html.source.json").is_file()


def test_sidecar_arriving_with_its_file_and_an_orphan_sidecar(kb):
    s = kb.settings_
    (s.inbox / "doc.md").write_text("# Doc\n\nwith a late sidecar\n")
    (s.inbox / "doc.md.source.json").write_text(json.dumps({"source_url": "https://example.org/doc"}))
    wait_for(lambda: documents(s), what="the doc")
    assert documents(s)[0].source_url == "https://example.org/doc"
    (s.inbox / "lost.pdf.source.json").write_text(json.dumps({"source_url": "https://example.org/lost"}))
    wait_for(lambda: (s.failed / "lost.pdf.source.json.error.json").exists(), what="the orphan to be filed")
    assert (
        json.loads((s.failed / "lost.pdf.source.json.error.json").read_text())["reason"] == "orphan-sidecar"
    )


def test_duplicates_are_recorded_once_and_moved(kb):
    s = kb.settings_
    data = pdfs.text_pdf([["same bytes twice"]])
    (s.inbox / "a.pdf").write_bytes(data)
    wait_for(lambda: documents(s), what="the first copy")
    (s.inbox / "a (1).pdf").write_bytes(data)
    wait_for(lambda: (s.processed / "a (1).pdf").exists(), what="the duplicate")
    idle(kb)
    assert len(documents(s)) == 1
    assert [r.status for r in ingest_records(s, "a (1).pdf")] == ["duplicate"]


def test_a_failed_file_and_a_retry_after_fixing_it(kb):
    s = kb.settings_
    (s.inbox / "broken.md").write_bytes(b"")
    # the record is written first, the original moved after it (knowledge.ingest.files.quarantine)
    wait_for(
        lambda: (s.failed / "broken.md.error.json").exists() and (s.failed / "broken.md").exists(),
        what="the failure record and the original beside it",
    )
    record = json.loads((s.failed / "broken.md.error.json").read_text())
    assert record["reason"] == "empty" and record["stage"] == "convert"
    assert not documents(s)
    (s.failed / "broken.md").write_text("# Fixed\n\nnow with content\n")
    os.rename(s.failed / "broken.md", s.inbox / "broken.md")
    wait_for(lambda: documents(s), what="the retried file")
    assert documents(s)[0].title == "Fixed"


def test_editing_and_deleting_a_raw_file_updates_the_index(kb):
    s = kb.settings_
    (s.inbox / "r.md").write_text("# R\n\noriginal wording here\n")
    wait_for(lambda: documents(s), what="the file")
    raw = s.raw / documents(s)[0].raw_path.removeprefix("raw/")
    idle(kb)
    raw.write_text(raw.read_text().replace("original wording", "edited phrasing"))
    wait_for(lambda: found(s, "edited phrasing"), what="the edit")
    assert not found(s, "original wording")
    raw.unlink()
    wait_for(lambda: not documents(s), what="the deletion")


def test_files_written_by_the_daemon_are_not_indexed_twice(kb):
    s = kb.settings_
    (s.inbox / "once.md").write_text("# Once\n\njust once\n")
    wait_for(lambda: documents(s), what="the file")
    idle(kb)
    with Index(s.index_path, readonly=True) as index:
        indexed_at = index.documents()[0].indexed_at
        rowids = index.conn.execute("SELECT rowid FROM chunks").fetchall()
    time.sleep(float(SETTLE) * 3)
    with Index(s.index_path, readonly=True) as index:
        assert index.conn.execute("SELECT rowid FROM chunks").fetchall() == rowids
        assert index.documents()[0].indexed_at == indexed_at


def test_links_fifos_and_junk_names_are_skipped_without_blocking(kb, tmp_path):
    s = kb.settings_
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    (s.inbox / "link.md").symlink_to(secret)
    os.mkfifo(s.inbox / "pipe.md")
    for junk in ("x.pdf.part", ".hidden.md", "~$lock.docx", "Thumbs.db", "notes.md.swp"):
        (s.inbox / junk).write_text("junk")
    (s.inbox / "real.md").write_text("# Real\n\nthis one counts\n")
    wait_for(lambda: documents(s), what="the real file")
    idle(kb)
    assert [d.source_name for d in documents(s)] == ["real.md"]
    assert (s.inbox / "x.pdf.part").exists() and (s.inbox / "pipe.md").exists()
    assert not list(s.failed.iterdir())


def test_a_folder_moved_in_is_taken_whole(kb, tmp_path):
    s = kb.settings_
    folder = tmp_path / "batch"
    folder.mkdir()
    for n in range(20):
        (folder / f"f{n}.md").write_text(f"# F{n}\n\nfile number {n}\n")
    (folder / "deeper").mkdir()
    (folder / "deeper" / "last.md").write_text("# Last\n\nthe deepest file\n")
    os.rename(folder, s.inbox / "batch")
    wait_for(lambda: len(documents(s)) == 21, what="21 files")
    # emptied, the dropped folder goes too; kb's own folders stay
    wait_for(lambda: not (s.inbox / "batch").exists(), what="the emptied folder removed")
    assert s.processed.is_dir() and s.inbox.is_dir()


def remove_tree(path: Path) -> None:
    """rm -rf PATH (shutil.rmtree recurses once per level), run again while it says a folder is not
    empty: the daemon's watch probe may appear in the inbox between rm's listing and its rmdir."""
    for _ in range(50):
        if subprocess.run(["rm", "-rf", str(path)]).returncode == 0:
            return
    raise AssertionError(f"rm -rf {path} kept failing")


def test_a_replaced_inbox_is_watched_again(kb):
    s = kb.settings_
    remove_tree(s.inbox)  # as rm -rf does: the daemon's watch probe may come and go meanwhile
    time.sleep(0.5)
    s.inbox.mkdir(parents=True, exist_ok=True)
    time.sleep(0.5)
    (s.inbox / "after.md").write_text("# After\n\nwritten into the new inbox\n")
    wait_for(lambda: documents(s), timeout_s=30, what="a file in the replaced inbox")


def test_restart_picks_up_files_that_arrived_while_down(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE)
    settings.inbox.mkdir(parents=True)
    for n in range(20):
        (settings.inbox / f"w{n}.md").write_text(f"# W{n}\n\nwaiting file {n}\n")
    with background(settings, ApproxCounter()):
        wait_for(lambda: len(documents(settings)) == 20, what="the waiting files")


def test_a_busy_database_is_retried_not_failed(settings):
    settings.inbox.mkdir(parents=True)
    path = settings.inbox / "busy.md"
    path.write_text("# Busy\n\ntext\n")
    with Index(settings.index_path) as index:
        index.conn.execute("PRAGMA busy_timeout = 50")
        ingestor = Ingestor(settings, index, ApproxCounter())
        with Index(settings.index_path) as other:
            other.conn.execute("BEGIN IMMEDIATE")
            outcome = ingestor.ingest(path, may_retry=True)
            other.conn.execute("ROLLBACK")
        assert outcome.status == "retry" and path.exists() and not list(settings.failed.iterdir())
        assert ingestor.ingest(path, may_retry=True).status == "indexed"


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (OSError(13, "Permission denied"), True),
        (OSError(28, "No space left on device"), True),
        (OSError(2, "No such file"), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_errors(exc, transient):
    assert is_transient(exc) is transient


# -- the daemon as a process ----------------------------------------------------------------


def start_daemon(home: Path, **env: str) -> subprocess.Popen:
    full = subprocess_env(KB_SETTLE_S=SETTLE, **env)
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "--home", str(home), "daemon"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


@contextlib.contextmanager
def running_daemon(home: Path, **env: str) -> Iterator[subprocess.Popen]:
    """A daemon for the ``with`` block; killed (if still running) at its end."""
    proc = start_daemon(home, **env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.stderr.close()


def _children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children, as /proc lists them per thread."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in children.read_text().split()]
    return found


def has_conversion_worker(pid: int) -> bool:
    """True once process ``pid`` runs a conversion worker: its fork server forks one for its first
    conversion."""
    for child in _children(pid):
        with contextlib.suppress(OSError):
            if b"forkserver" in Path(f"/proc/{child}/cmdline").read_bytes() and _children(child):
                return True
    return False


def log_events(home: Path) -> list[str]:
    path = home / "runs" / "logs" / "kb.jsonl"
    return [json.loads(line)["event"] for line in path.read_text().splitlines()] if path.exists() else []


def test_sigterm_stops_cleanly_and_a_second_daemon_is_refused(tmp_path):
    home = tmp_path / "kb"
    with running_daemon(home) as first:
        wait_for(lambda: "daemon.start" in log_events(home), what="the daemon to start")
        second = start_daemon(home)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 1 and "another kb process is writing" in err and "kb daemon" in err
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=10)
    assert first.returncode == 0
    assert log_events(home)[-1] == "daemon.stop"


def mixed_files(n: int) -> dict[str, bytes | None]:
    """name → bytes (None: a temporary name that must be ignored)."""
    files: dict[str, bytes | None] = {}
    for i in range(n):
        kind = i % 10
        if kind in (0, 1, 2):
            files[f"t{i}.md"] = f"# Text {i}\n\nplain note number {i} about item{i}\n".encode()
        elif kind == 3:
            body = f"<p>web page {i} body text for item{i}</p>"
            files[f"h{i}.html"] = (
                f"<html><head><title>Page {i}</title></head><body>{body}</body></html>".encode()
            )
        elif kind == 4:
            files[f"p{i}.pdf"] = pdfs.text_pdf([[f"pdf document {i} item{i}"]])
        elif kind == 5:
            files[f"bad{i}.pdf"] = b"%PDF-1.4 truncated " + bytes(50)
        elif kind == 6:
            files[f"empty{i}.txt"] = b""
        elif kind == 7:
            files[f"dup{i}.md"] = b"# Shared\n\nthe same bytes in many files\n"
        elif kind == 8:
            files[f"tmp{i}.md.part"] = None
        else:
            files[f"s{i}.md"] = f"# Slow {i}\n\nslowly written note {i} item{i}\n".encode()
    return files


@pytest.mark.parametrize("count", [300, pytest.param(1000, marks=pytest.mark.soak)])
def test_a_burst_of_files_and_a_sigkill_lose_nothing(tmp_path, count):
    home = tmp_path / "kb"
    inbox = home / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    files = mixed_files(count)
    with running_daemon(home) as first:
        wait_for(lambda: "daemon.start" in log_events(home), what="the daemon to start")

        def writer() -> None:
            for name, data in files.items():
                if data is None:
                    (inbox / name).write_bytes(b"partial download")
                elif name.startswith("s"):
                    with open(inbox / name, "wb") as fh:
                        fh.write(data[:10])
                        fh.flush()
                        fh.write(data[10:])
                else:
                    tmp = inbox / f".{name}.tmp"
                    tmp.write_bytes(data)
                    os.rename(tmp, inbox / name)

        thread = threading.Thread(target=writer)
        thread.start()
        settings = make_settings(home)
        wait_for(
            lambda: len(list(settings.processed.iterdir())) > count // 6, timeout_s=60, what="some progress"
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        thread.join()
    with running_daemon(home) as second:
        valid = {n for n, d in files.items() if d is not None and not n.startswith(("bad", "empty"))}
        invalid = {n for n, d in files.items() if d is not None and n.startswith(("bad", "empty"))}
        wait_for(
            lambda: (
                {p.name for p in settings.processed.iterdir()} >= valid
                and {p.name for p in settings.failed.iterdir()} >= invalid
            ),
            timeout_s=120,
            what="every file to be processed or failed",
        )
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    processed = {p.name for p in settings.processed.iterdir()}
    failed = {p.name for p in settings.failed.iterdir()}
    assert processed == valid, "every valid original is kept once under processed/"
    assert failed == invalid | {n + ".error.json" for n in invalid}, (
        "every invalid one is in failed/ with its record"
    )
    assert all(json.loads((settings.failed / f"{n}.error.json").read_text())["reason"] for n in invalid)
    remaining = {p.name for p in inbox.iterdir() if p.is_file()}
    assert remaining == {n for n, d in files.items() if d is None}, "only temporary names stay in the inbox"
    with Index(settings.index_path) as index:
        docs = index.documents()
        unique_sources = {n for n in valid if not n.startswith("dup")} | {"dup"}
        assert len(docs) == len(unique_sources), (
            "each valid file indexed exactly once (duplicates once in all)"
        )
        assert len({d.source_sha256 for d in docs}) == len(docs)
        raws = {p.name for p in settings.raw.glob("*.md")}
        assert raws == {d.raw_path.removeprefix("raw/") for d in docs}
        assert index.integrity_errors() == []


def test_deleting_the_index_under_a_running_daemon_stops_it_and_keeps_the_lock(tmp_path):
    from knowledge.errors import IndexVanished, WriterLockHeld
    from knowledge.ingest.lock import WriterLock

    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE)
    with background(settings, ApproxCounter()) as daemon:
        (settings.inbox / "first.md").write_text("# First\n\nThe first note mentions otters.\n")
        wait_for(lambda: documents(settings), what="the first note")
        shutil.rmtree(settings.index_path.parent)  # what kb doctor advises for a damaged index
        wait_for(lambda: daemon.failure is not None, what="the daemon to notice")
        assert isinstance(daemon.failure, IndexVanished)
        with pytest.raises(WriterLockHeld):  # a second writer still cannot start
            WriterLock(settings.lock_path, role="kb ingest").acquire(wait_s=0.2)
        (settings.inbox / "second.md").write_text("# Second\n\nThe second note mentions seals.\n")
        time.sleep(float(SETTLE) * 4)
        assert (settings.inbox / "second.md").exists() and not list(settings.failed.iterdir())
    with background(settings, ApproxCounter()) as daemon:  # restarted: the index is rebuilt from raw/
        wait_for(lambda: len(documents(settings)) == 2, what="both notes")
        assert daemon.failure is None
    assert sorted(d.title for d in documents(settings)) == ["First", "Second"]


def test_names_of_82_thai_or_chinese_characters_are_indexed_or_failed_once(kb):
    s = kb.settings_
    good, bad = "ก" * 82 + ".md", "中" * 84 + ".md"  # 249 and 255 bytes
    (s.inbox / good).write_text("# Thai name\n\nA file with a long Thai name about dugongs.\n")
    (s.inbox / bad).write_bytes(b"")
    wait_for(lambda: documents(s) and list(s.failed.glob("*.error.json")), what="both files handled")
    idle(kb)
    assert [d.source_name for d in documents(s)] == [good]
    assert not (s.inbox / good).exists() and not (s.inbox / bad).exists()
    (kept,) = s.processed.iterdir()  # its name cut by bytes, leaving room for "-2" and ".source.json"
    assert kept.name.startswith("ก" * 70) and kept.name.endswith(".md") and len(kept.name.encode()) <= 237
    (record,) = s.failed.glob("*.error.json")
    assert json.loads(record.read_text())["reason"] == "empty"
    assert len(ingest_records(s, bad)) == 1  # failed once, not again at every rescan


def test_sigterm_during_a_long_conversion_stops_at_once_and_keeps_the_file(tmp_path):
    home = tmp_path / "kb"
    inbox = home / "knowledge" / "inbox"
    with running_daemon(home, KB_CONVERT_TIMEOUT_S="300") as first:
        wait_for(lambda: "daemon.start" in log_events(home), what="the daemon to start")
        # 1,500 pages of text: about ten seconds of conversion on this machine.
        book = pdfs.text_pdf(
            [[f"line {i} of page {p} with some words" for i in range(40)] for p in range(1500)]
        )
        (inbox / "book.pdf.part").write_bytes(book)
        (inbox / "book.pdf.part").rename(inbox / "book.pdf")
        wait_for(lambda: "ingest.queued" in log_events(home), what="the book to be taken")
        wait_for(lambda: has_conversion_worker(first.pid), what="the book's conversion to start")
        first.send_signal(signal.SIGTERM)
        # A safety net: the log below says the conversion was interrupted, not finished.
        first.wait(timeout=120)
    assert first.returncode == 0
    assert (inbox / "book.pdf").is_file()  # not failed, not processed: taken again on the next start
    assert not list((inbox / "failed").glob("book*"))
    assert "daemon.conversion_interrupted" in log_events(home)
