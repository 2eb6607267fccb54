"""A backup's copies stay private and are gone when it is stopped; DEST.part is kb's own or left alone;
an archive from elsewhere is read with a budget: a sparse member declaring a tebibyte, 100,000 empty
members, sizes beyond the disk, a manifest nested too deep or of the wrong shape — each refused by
name, before anything is written."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from knowledge.backup import BackupError, Limits, backup, restore, verify
from knowledge.backup.archive import MANIFEST_NAME
from knowledge.conversation.store import Conversations
from tests.conftest import ingest_texts, make_settings, subprocess_env

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 60.0
TIB = 2**40
INDEX = "knowledge/index/kb.sqlite3"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A knowledge base of 20 documents and one conversation; its settings."""
    home = tmp_path_factory.mktemp("small") / "kb"
    settings = make_settings(home)
    ingest_texts(
        settings,
        {f"note-{i}.md": f"# Note {i}\n\nThe heron{i}q waits by the weir, note {i}.\n" for i in range(20)},
    )
    store = Conversations(settings.conversations_path)
    store.add_turn(
        store.current("tg:1").id, message="Where?", standalone="heron", answer="The weir.", cited=()
    )
    return settings


@pytest.fixture(scope="module")
def archive(small, tmp_path_factory):
    """A sound .tar.gz backup of the small knowledge base."""
    return backup(small, tmp_path_factory.mktemp("archive") / "kb.tar.gz").dest


def wait_for(found: Callable[[], object]) -> object:
    """The first true value of found(), asked again and again (a safety-net deadline only)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if value := found():
            return value
        time.sleep(0.002)
    raise AssertionError("never happened")


def tree(root: Path) -> dict[str, object]:
    """Everything under root, links not followed: path → the bytes of a file, a link's target, or 'folder'."""
    found: dict[str, object] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = "folder"
            else:
                found[rel] = path.read_bytes()
    return found


# -- the SQLite copies: private from the start, gone when the backup is stopped -----------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_database_copies_are_private_from_the_start_and_removed_when_stopped(small, tmp_path, sig):
    out = tmp_path / "nas"
    out.mkdir(mode=0o755)
    dest = out / "kb.tar.gz"
    seen: dict[Path, tuple[int, int]] = {}  # each copy seen: its mode and its folder's

    def watch() -> None:
        """Look at the copies as they are written; once the first one is there (made before SQLite copies
        a page into it, and there until the copy has been checked and archived: seconds at one page a
        step), stop the backup. Its journal lives in the same private folder."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for path in out.rglob("*.sqlite3*"):
                with contextlib.suppress(FileNotFoundError):
                    st = path.stat()
                    seen[path] = (st.st_mode & 0o777, path.parent.stat().st_mode & 0o777)
                    if path.name.endswith(".sqlite3"):
                        os.kill(os.getpid(), sig)
                        return
            time.sleep(0.001)

    unhandled: list[int] = []

    def fallback(*_: object) -> None:  # without kb's own handler the signal must not end the test run
        unhandled.append(1)

    previous = signal.signal(signal.SIGTERM, fallback)
    # Ctrl-C as a terminal delivers it: a test worker may have been started with SIGINT ignored, and kb
    # rightly leaves a signal its process was told to ignore ignored.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    umask = os.umask(0o022)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # Half a second a page: the copy stays there for many seconds, long enough for the watcher to
            # see it on a machine too busy to run its thread for a while (the signal ends the wait at once).
            backup(small, dest, pages=1, pause_s=0.5)
        assert signal.getsignal(signal.SIGTERM) is fallback  # kb put the handler it found back
    finally:
        watcher.join(WAIT_S)
        os.umask(umask)
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    assert seen and not unhandled
    for path, (mode, folder_mode) in seen.items():
        assert mode & 0o077 == 0, f"{path} was {oct(mode)}: readable by others"
        assert path.parent == out or folder_mode & 0o077 == 0, f"{path.parent} is {oct(folder_mode)}"
    assert list(out.iterdir()) == [], "nothing is left beside DEST: no copy, no journal, no DEST.part"


# -- DEST.part: kb's own (a marker kb wrote), or left alone --------------------------------------------


def _plant_folder(part: Path) -> None:
    (part / "episode-12").mkdir(parents=True)
    (part / "episode-12" / "video.mkv").write_bytes(b"someone's download")


def _plant_file(part: Path) -> None:
    part.write_bytes(b"half a download of someone else's\n")


def _plant_link(part: Path) -> None:
    (part.parent / "precious").mkdir()
    (part.parent / "precious" / "thesis.tex").write_text("\\chapter{One}\n")
    part.symlink_to(part.parent / "precious")


def _plant_forged_marker(part: Path) -> None:
    part.mkdir()
    (part / "kb-backup.part").write_text("not what kb writes\n")
    (part / "notes.md").write_text("mine\n")


def _plant_marker_of_another(part: Path) -> None:
    part.mkdir()
    (part / "kb-backup.part").write_text(json.dumps({"format": "kb-backup-part", "dest": "other.tar.gz"}))
    (part / "notes.md").write_text("mine\n")


@pytest.mark.parametrize("dest_name", ["kb.tar.gz", "kb-folder"])
@pytest.mark.parametrize(
    "plant",
    [_plant_folder, _plant_file, _plant_link, _plant_forged_marker, _plant_marker_of_another],
    ids=["folder-of-files", "file", "link", "forged-marker", "marker-of-another-dest"],
)
def test_something_at_dest_part_that_kb_did_not_make_is_left_alone(small, tmp_path, dest_name, plant):
    dest = tmp_path / dest_name
    part = tmp_path / f"{dest_name}.part"
    plant(part)
    before = tree(tmp_path)
    with pytest.raises(BackupError) as caught:
        backup(small, dest)
    assert caught.value.reason == "part-not-ours", str(caught.value)
    assert str(part) in str(caught.value) and "kb leaves it as it is" in str(caught.value)
    assert tree(tmp_path) == before


def test_a_killed_backups_leftover_is_taken_over_and_a_running_one_is_refused(small, tmp_path):
    dest = tmp_path / "kb.tar.gz"
    part = tmp_path / "kb.tar.gz.part"
    script = (
        "import sys; from pathlib import Path; from knowledge.backup import backup; "
        "from tests.conftest import make_settings; "
        "backup(make_settings(Path(sys.argv[1])), Path(sys.argv[2]), pages=1, pause_s=0.05)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(small.home), str(dest)],
        cwd=REPO,
        env=subprocess_env(PYTHONPATH=str(REPO)),
    )
    try:
        wait_for(lambda: any(part.rglob("*.sqlite3")))  # the child is copying the index
        with pytest.raises(BackupError) as caught:
            backup(small, dest)
        assert caught.value.reason == "dest-busy"
    finally:
        child.kill()
        child.wait()
    assert part.is_dir() and (part / "kb-backup.part").is_file()  # what a killed backup leaves
    made = backup(small, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.tar.gz"]
    assert verify(dest).files == made.files


# -- archives read with a budget -----------------------------------------------------------------------


@contextlib.contextmanager
def creations(folder: Path) -> Iterator[list[str]]:
    """Every file and folder created under folder meanwhile (real inotify events); filled on the way out,
    once a file the test makes last has been seen (events arrive in order)."""
    created: list[str] = []
    last = folder / "zz-the-test-is-done"
    arrived = threading.Event()

    class Seen(FileSystemEventHandler):
        def on_created(self, event) -> None:
            if event.src_path == str(last):
                arrived.set()
            else:
                created.append(event.src_path)

    observer = Observer()
    observer.schedule(Seen(), str(folder), recursive=True)
    observer.start()
    try:
        yield created
    finally:
        last.write_text("")
        assert arrived.wait(WAIT_S)
        observer.stop()
        observer.join(WAIT_S)
        last.unlink()


def refused_before_writing(
    tmp_path: Path,
    monkeypatch,
    hostile: Path,
    *,
    doing: tuple[str, ...] = ("verify", "restore"),
    **limits: int,
) -> list[BackupError]:
    """kb backup --verify and restore-backup of a hostile archive: each refuses it, and nothing is created
    where they would write (the temporary folder, beside DIR); the refusals."""
    watched = tmp_path / f"watched-{len(list(tmp_path.glob('watched-*')))}"
    watched.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(watched))  # where verify makes its scratch copies
    runs = {"verify": lambda: verify(hostile, limits=Limits(**limits)),
            "restore": lambda: restore(hostile, watched / "home", limits=Limits(**limits))}  # fmt: skip
    errors = []
    with creations(watched) as created:
        for run in doing:
            with pytest.raises(BackupError) as caught:
                runs[run]()
            assert caught.value.member and caught.value.member in str(caught.value)  # the file is named
            errors.append(caught.value)
    assert created == [], "nothing is written before the archive is refused"
    assert [p.name for p in watched.iterdir()] == []
    return errors


def gzipped(*blocks: bytes) -> bytes:
    """A .tar.gz of these tar blocks and the two empty blocks that end a tar."""
    return gzip.compress(b"".join(blocks) + bytes(1024), compresslevel=1, mtime=0)


def sparse_member(name: str, declared: int) -> bytes:
    """A GNU sparse member (type 'S') storing 512 bytes, placed at the end of the ``declared`` bytes it claims."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 512
    buf = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    buf[386:398] = tarfile.itn(declared - 512, 12, tarfile.GNU_FORMAT)  # the one region: offset …
    buf[398:410] = tarfile.itn(512, 12, tarfile.GNU_FORMAT)  # … and length
    buf[483:495] = tarfile.itn(declared, 12, tarfile.GNU_FORMAT)  # the size it claims to have
    buf[148:156] = b" " * 8
    buf[148:155] = b"%06o\0" % sum(buf[:512])
    return bytes(buf) + b"\x01" * 512


def test_a_sparse_member_declaring_a_tebibyte_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    hostile = tmp_path / "tiny.tar.gz"
    hostile.write_bytes(gzipped(sparse_member(INDEX, TIB)))
    assert hostile.stat().st_size < 512
    with tarfile.open(hostile) as tar:  # what it claims: a one-tebibyte file
        assert tar.getmember(INDEX).size == TIB and tar.getmember(INDEX).issparse()
    for error in refused_before_writing(tmp_path, monkeypatch, hostile):
        assert error.reason == "unsafe" and error.member == INDEX and "sparse" in str(error)


def empty_members(count: int) -> bytes:
    """The tar headers of ``count`` empty files (knowledge/raw/n0.sqlite3, …), made from one template."""
    template = bytearray(tarfile.TarInfo("x").tobuf(format=tarfile.GNU_FORMAT))
    headers = []
    for i in range(count):
        block = bytearray(template)
        block[0:100] = f"knowledge/raw/n{i}.sqlite3".encode().ljust(100, b"\0")
        block[148:156] = b" " * 8
        block[148:155] = b"%06o\0" % sum(block)
        headers.append(bytes(block))
    return b"".join(headers)


def test_100000_empty_members_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    hostile = tmp_path / "flood.tar.gz"
    hostile.write_bytes(gzipped(empty_members(100_000)))
    assert hostile.stat().st_size < 2**20
    # restore-backup writes every member: it reads all 100,000 headers (no manifest after them) and
    # writes nothing. (verify reads them the same way; once is enough for the suite's time.)
    [error] = refused_before_writing(tmp_path, monkeypatch, hostile, doing=("restore",))
    assert error.reason == "truncated" and error.member == MANIFEST_NAME
    for error in refused_before_writing(tmp_path, monkeypatch, hostile, members=1_000):
        assert error.reason == "too-many" and error.member == "knowledge/raw/n1000.sqlite3"
        assert "more than 1,000 files" in str(error)


def declaring(name: str, size: int) -> bytes:
    """A plain member's header that declares ``size`` bytes, and none of them."""
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.PAX_FORMAT)


def test_sizes_beyond_the_cap_or_the_free_space_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    hostile = tmp_path / "huge.tar.gz"
    hostile.write_bytes(gzipped(declaring(INDEX, 2 * TIB)))
    for error in refused_before_writing(tmp_path, monkeypatch, hostile):
        assert error.reason == "too-large" and error.member == INDEX and "1,024 GiB" in str(error)
    free = shutil.disk_usage(tmp_path).free
    hostile.write_bytes(gzipped(declaring(INDEX, free + 2**30)))
    for error in refused_before_writing(tmp_path, monkeypatch, hostile, total_bytes=free + 2**31):
        assert error.reason == "no-room" and error.member == INDEX and "free some space" in str(error)


def repacked(src: Path, dest: Path, change: Callable[[tarfile.TarInfo, bytes], list]) -> Path:
    """A copy of a tar.gz archive with its members passed through change(info, data) -> [(info, data)]."""
    with (
        tarfile.open(src, "r:gz") as tar_in,
        tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT) as tar_out,
    ):
        for info in tar_in:
            for out_info, out_data in change(info, tar_in.extractfile(info).read()):
                out_info.size = len(out_data)
                tar_out.addfile(out_info, io.BytesIO(out_data))
    return dest


def test_a_member_larger_than_its_manifest_says_is_refused_before_anything_is_written(
    archive, tmp_path, monkeypatch
):
    def grow(info, data):
        return [(info, data + b"\0" * 4096 if info.name == INDEX else data)]

    hostile = repacked(archive, tmp_path / "grown.tar.gz", grow)
    for error in refused_before_writing(tmp_path, monkeypatch, hostile):
        assert error.reason == "changed" and error.member == INDEX


# -- the manifest: its shape and depth, one clear refusal -----------------------------------------------


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _set(key: str, value: object) -> Callable[[dict], str]:
    return lambda m: json.dumps({**m, key: value})


def _entry(field: str, value: object) -> Callable[[dict], str]:
    def change(m: dict) -> str:
        name = next(iter(m["files"]))
        return json.dumps({**m, "files": {**m["files"], name: {**m["files"][name], field: value}}})

    return change


BAD_MANIFESTS = {
    "nested-100000-deep": lambda m: json.dumps(m)[:-1] + f', "extra": {_nested(100_000)}}}',
    "nested-50-deep": lambda m: json.dumps(m)[:-1] + f', "extra": {_nested(50)}}}',
    "files-a-list": _set("files", []),
    "negative-size": _entry("size", -1),
    "size-true": _entry("size", True),
    "sha256-not-hex": _entry("sha256", "z" * 64),
    "index-a-list": _set("index", []),
    "index-path-a-list": _set("index", {"path": [INDEX]}),
    "database-kind-a-number": _set("databases", {INDEX: 1}),
    "settings-dropped-a-list": _set("settings_dropped", ["KB_TELEGRAM_TOKEN"]),
    "created-at-an-object": _set("created_at", {"year": 2025}),
}


def with_manifest(archive: Path, dest: Path, write: Callable[[dict], str]) -> Path:
    def change(info, data):
        return [(info, write(json.loads(data)).encode() if info.name == MANIFEST_NAME else data)]

    return repacked(archive, dest, change)


@pytest.mark.parametrize("bad", list(BAD_MANIFESTS))
def test_a_manifest_of_the_wrong_shape_or_nested_too_deep_is_one_clear_refusal(
    archive, tmp_path, monkeypatch, bad
):
    hostile = with_manifest(archive, tmp_path / "bad.tar.gz", BAD_MANIFESTS[bad])
    for error in refused_before_writing(tmp_path, monkeypatch, hostile):
        assert error.reason == "bad-manifest" and error.member == MANIFEST_NAME, str(error)
        assert "nested too deeply" in str(error) or "nested" not in bad
    folder = tmp_path / "folder"
    with tarfile.open(hostile) as tar:
        tar.extractall(folder, filter="data")
    with pytest.raises(BackupError) as caught:
        verify(folder)
    assert caught.value.reason == "bad-manifest"


def test_the_commands_refuse_a_bad_manifest_in_a_sentence(archive, tmp_path, run_kb):
    deep = with_manifest(archive, tmp_path / "deep.tar.gz", BAD_MANIFESTS["nested-100000-deep"])
    checked = run_kb("backup", "--verify", str(deep))
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    assert (
        checked.stderr.startswith("kb: ")
        and f"its manifest {MANIFEST_NAME} is nested too deeply" in checked.stderr
    )
    odd = with_manifest(archive, tmp_path / "odd.tar.gz", BAD_MANIFESTS["settings-dropped-a-list"])
    back = run_kb("restore-backup", str(odd), "--home", str(tmp_path / "new"))
    assert back.returncode == 1 and "Traceback" not in back.stderr, back.stderr
    assert "lists the settings left out wrongly" in back.stderr and not (tmp_path / "new").exists()
