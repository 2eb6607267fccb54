"""The index's kept read-only connections: each question reads the latest commit, the file that is the index
now, and never a connection another caller is using."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.errors import IndexMissing
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.store.readers import Readers
from tests.conftest import ingest_texts, make_settings, subprocess_env

ZEBRAFISH = {"zebrafish.md": "# Zebrafish\n\nThe zebrafish sleeps at noon in the shallow pond.\n"}
HERON = {"heron.md": "# Heron\n\nThe grey heron waits motionless at the edge of the reeds.\n"}


def readers_of(path: Path) -> Readers:
    return Readers(path, lambda: Index(path, readonly=True))


def titles(readers: Readers, query: str) -> list[str]:
    with readers.borrowed() as index:
        return [r.title for r in search(index, query)]


def test_a_kept_connection_finds_what_was_written_after_the_last_question(settings):
    ingest_texts(settings, ZEBRAFISH)
    readers = readers_of(settings.index_path)
    assert titles(readers, "when does the zebrafish sleep") == ["Zebrafish"]
    with readers.borrowed() as first:
        pass
    ingest_texts(settings, HERON)
    with readers.borrowed() as second:
        assert second is first  # kept, not opened again
        assert [r.title for r in search(second, "where does the heron wait")] == ["Heron"]
    readers.close()


def test_an_index_file_put_in_its_place_is_read_and_the_old_one_forgotten(tmp_path):
    settings, other = make_settings(tmp_path / "kb"), make_settings(tmp_path / "other")
    ingest_texts(settings, ZEBRAFISH)
    ingest_texts(other, HERON)
    readers = readers_of(settings.index_path)
    assert titles(readers, "zebrafish") == ["Zebrafish"]
    os.replace(other.index_path, settings.index_path)  # as a restored backup is put in place
    assert titles(readers, "zebrafish") == []
    assert titles(readers, "heron") == ["Heron"]
    readers.close()


def test_no_index_yet_is_said_and_one_made_later_is_read(settings):
    readers = readers_of(settings.index_path)
    with pytest.raises(IndexMissing), readers.borrowed():
        pass
    ingest_texts(settings, ZEBRAFISH)
    assert titles(readers, "zebrafish") == ["Zebrafish"]
    settings.index_path.unlink()
    with pytest.raises(IndexMissing), readers.borrowed():
        pass


def test_two_callers_at_once_each_have_a_connection_of_their_own(settings):
    ingest_texts(settings, ZEBRAFISH)
    readers = readers_of(settings.index_path)
    with readers.borrowed() as one, readers.borrowed() as two:
        assert one is not two
        assert [r.title for r in search(one, "zebrafish")] == [r.title for r in search(two, "zebrafish")]
    with readers.borrowed() as again:
        assert again in (one, two)
    readers.close()


def test_a_connection_left_by_an_error_is_closed_not_lent_again(settings):
    ingest_texts(settings, ZEBRAFISH)
    readers = readers_of(settings.index_path)
    with pytest.raises(RuntimeError), readers.borrowed() as broken:
        raise RuntimeError("the caller failed")
    with readers.borrowed() as fresh:
        assert fresh is not broken
        assert [r.title for r in search(fresh, "zebrafish")] == ["Zebrafish"]
    readers.close()


KEPT_AS_IS = """
import json, sys
from pathlib import Path
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.store.readers import Readers
path = Path(sys.argv[1])
readers = Readers(path, lambda: Index(path, readonly=True))
with readers.borrowed() as first:
    found = [r.title for r in search(first, "zebrafish")]
with readers.borrowed() as second:
    pass
print(json.dumps({"found": found, "kept": second is first}))
"""


def no_file_grows() -> None:
    """In the child: no file may grow past 16 KiB, so SQLite cannot make the index's -shm (a full disk)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))


def test_a_connection_reading_the_file_as_it_is_on_a_full_disk_is_never_kept(settings):
    """On a full disk the index is read as it is on disk: such a connection would never see a later write."""
    ingest_texts(settings, ZEBRAFISH)
    assert not Path(f"{settings.index_path}-shm").exists()
    done = subprocess.run(
        [sys.executable, "-c", KEPT_AS_IS, str(settings.index_path)], capture_output=True, text=True,
        timeout=120, env=subprocess_env(), preexec_fn=no_file_grows,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"found": ["Zebrafish"], "kept": False}
