"""kb backup, --verify and restore-backup: a backup taken while the daemon ingests a burst and the bot
removes and restores documents, restored elsewhere, holds every document indexed when it began;
a damaged archive is refused with the file named; the token is never in one."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.main import background
from knowledge.backup import BackupError, backup, restore, verify
from knowledge.backup.archive import MANIFEST_NAME
from knowledge.backup.restore import check_home
from knowledge.backup.settings_files import is_secret_name, secret_values, without_secrets
from knowledge.conversation.store import Conversations
from knowledge.ingest import requests, trash
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings

TOKEN = "7301234567:AAHf-SECRET-telegram-TOKEN-value"
BRAVE_KEY = "BSA-brave-secret-key-0123456789"
SEEDS = 30
BURST = 200
WAIT_S = 60.0


def seed_text(i: int) -> str:
    return f"# Seed {i}\n\nThe kestrel{i}x nests on the cliff above the harbour, seed number {i}.\n"


def burst_text(i: int) -> str:
    return f"# Burst {i}\n\nThe plover{i}y came with the burst of files, number {i}.\n"


def unique_word(source_name: str) -> str:
    """The word only this seed or burst file holds (seed-7.md: kestrel7x, burst-7.md: plover7y)."""
    kind, _, n = source_name.removesuffix(".md").partition("-")
    return f"kestrel{n}x" if kind == "seed" else f"plover{n}y"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def documents(settings) -> dict[str, object]:
    with Index(settings.index_path, readonly=True) as index:
        return {d.id: d for d in index.documents()}


def ask(settings, op: str, target: str) -> requests.Change:
    """What the bot does for Delete and Undo: a request to the running daemon, and its answer."""
    change = requests.ask_daemon(settings, op, target, wait_s=WAIT_S, is_running=True)
    assert change.status == "done", change.message
    return change


@pytest.fixture(scope="module")
def taken(tmp_path_factory):
    """One knowledge base, backed up (tar.gz and folder) while its daemon ingests 200 files and the
    bot removes and restores documents; what was indexed at the start, and what was done when."""
    root = tmp_path_factory.mktemp("backup")
    home = root / "kb"
    home.mkdir()
    (home / ".env").write_text(f"KB_TELEGRAM_TOKEN={TOKEN}\nKB_SETTLE_S=0.05\n# the old token: {TOKEN}\n")
    (home / "kb.toml").write_text(f'brave_api_key = "{BRAVE_KEY}"\nsearch_k = 7\n')
    settings = make_settings(home)
    assert settings.telegram_token == TOKEN and settings.settle_s == 0.05
    ingest_texts(settings, {f"seed-{i}.md": seed_text(i) for i in range(SEEDS)})
    by_name = {d.source_name: d for d in documents(settings).values()}
    with Index(settings.index_path) as index:  # removed before the backup: in the trash when it begins
        earlier = trash.remove(
            Ingestor(settings, index, ApproxCounter()), by_name["seed-0.md"].id, now=datetime.now(UTC)
        )
    store = Conversations(settings.conversations_path)
    store.add_turn(
        store.current("tg:1").id,
        message="Where is the kestrel?",
        standalone="kestrel",
        answer="On the cliff.",
        cited=(),
    )
    (settings.runs / "web-search.json").write_text('{"tg:1": []}')
    log_dir = settings.runs / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "kb.jsonl").write_text('{"event": "not in a backup"}\n')

    staged = root / "burst"
    staged.mkdir()
    for i in range(BURST):
        (staged / f"burst-{i}.md").write_text(burst_text(i))
    dest, folder = root / "out" / "kb.tar.gz", root / "out" / "kb-folder"
    dest.parent.mkdir()
    steps: list[str] = []
    done_by_step: dict[str, str] = {}
    churn: dict[str, object] = {"cycles": 0}
    bounced: list[requests.Change] = []
    stop = threading.Event()

    def churn_one(doc_id: str) -> None:
        """The bot's Delete then Undo of one document, again and again while the backup runs."""
        while not stop.is_set():
            removed = ask(settings, "remove", doc_id)
            ask(settings, "restore", removed.trashed.trash_id)
            churn["cycles"] += 1

    churner = threading.Thread(target=churn_one, args=(by_name["seed-4.md"].id,))

    def hook(step: str) -> None:
        steps.append(step)
        assert not dest.exists()  # nothing half-written at DEST, ever
        assert dest.with_name(dest.name + ".part").exists()
        if step == "snapshot":
            done_by_step[step] = ask(settings, "remove", by_name["seed-1.md"].id).doc_id  # only in the trash
            churner.start()
        elif step == "trash":
            done_by_step[step] = ask(settings, "restore", earlier.trash_id).doc_id  # back from the trash
            bounced.append(
                ask(settings, "remove", by_name["seed-5.md"].id)
            )  # out of raw/ while it is copied…
        elif step == "raw":
            done_by_step[step] = ask(
                settings, "remove", by_name["seed-2.md"].id
            ).doc_id  # raw copied, then removed
            ask(
                settings, "restore", bounced[0].trashed.trash_id
            )  # …and back before the trash is copied again
        elif step == "originals":
            done_by_step[step] = ask(
                settings, "remove", by_name["seed-3.md"].id
            ).doc_id  # and its original too

    with background(settings, ApproxCounter()) as daemon:
        for i in range(BURST):
            os.rename(staged / f"burst-{i}.md", settings.inbox / f"burst-{i}.md")
        deadline = time.monotonic() + WAIT_S
        while len(documents(settings)) < SEEDS - 1 + 20 and time.monotonic() < deadline:
            time.sleep(0.01)  # the backup begins in the middle of the burst
        at_start = documents(settings)  # indexed before the backup begins: each must come back
        t0 = time.perf_counter()
        made = backup(settings, dest, hook=hook, pause_s=0.005, pages=8)
        seconds = time.perf_counter() - t0
        stop.set()
        churner.join(WAIT_S)
        assert not churner.is_alive()
        assert daemon.wait_idle(WAIT_S)
        folder_made = backup(settings, folder)
        at_end = documents(settings)
    return {
        "root": root, "settings": settings, "dest": dest, "folder": folder, "made": made, "seconds": seconds,
        "at_start": at_start, "at_end": at_end, "steps": steps, "done": done_by_step, "churn": churn,
        "earlier": earlier, "folder_made": folder_made,
    }  # fmt: skip


@pytest.fixture(scope="module")
def restored(taken):
    """The tar.gz backup restored into a new home."""
    home = taken["root"] / "restored"
    result = restore(taken["dest"], home)
    return result, make_settings(home)


def test_the_backup_overlapped_the_burst_and_the_removals(taken):
    made = taken["made"]
    assert taken["steps"] == [
        "inbox",
        "snapshot",
        "trash",
        "raw",
        "originals",
        "trash-again",
        "state",
        "settings",
    ]
    assert SEEDS - 1 + 20 <= len(taken["at_start"]) < SEEDS - 1 + BURST  # it began in the middle of the burst
    assert made.index.documents >= len(taken["at_start"])  # the snapshot came after at_start
    assert taken["churn"]["cycles"] >= 1
    assert made.dest == taken["dest"] and made.files > SEEDS and not made.skipped
    assert not list(taken["dest"].parent.glob(".*")), "no temporary file left beside the archive"


def test_every_document_indexed_when_the_backup_began_is_restored_searchable_with_its_original(
    taken, restored
):
    result, settings = restored
    assert result.settled.missing == []
    # the removals made while the backup ran, undone in the copy (the churned one may be one of them)
    assert {taken["done"][s] for s in ("snapshot", "raw", "originals")} <= set(result.settled.put_back)
    docs = documents(settings)
    with Index(settings.index_path, readonly=True) as index:
        for doc_id, before in taken["at_start"].items():
            doc = docs.get(doc_id)
            assert doc is not None, f"{before.source_name} ({doc_id}) is not in the restored index"
            raw = settings.home / "knowledge" / doc.raw_path
            assert raw.is_file(), doc.raw_path
            original = settings.home / "knowledge" / doc.source_snapshot
            assert original.is_file() and sha256_of(original) == doc.source_sha256, doc.source_snapshot
            word = unique_word(before.source_name)
            hits = search(index, word, k=3)
            assert hits and hits[0].document_id == doc_id, (word, hits[:1])
    for entry in trash.trashed(settings):  # the removals undone are not in the restored trash
        assert entry.doc_id not in taken["at_start"]


def test_the_restored_home_serves_kb_search_at_once_and_its_daemon_catches_up(taken, restored, run_kb):
    result, settings = restored
    found = run_kb("--home", str(settings.home), "search", "--json", "kestrel2x")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["document_id"] == taken["done"]["raw"]
    with background(settings, ApproxCounter()) as daemon:
        assert daemon.wait_idle(WAIT_S)
        docs = documents(settings)
    names = {d.source_name for d in docs.values()}
    # nothing lost: every seed and every file of the burst is indexed in the restored home, the document
    # restored from the trash during the backup included (reconciled from its raw file)
    assert {f"burst-{i}.md" for i in range(BURST)} <= names
    assert {f"seed-{i}.md" for i in range(SEEDS)} <= names
    assert set(taken["at_start"]) <= set(docs)
    assert taken["earlier"].doc_id in docs


def test_state_is_kept_and_secrets_are_not(taken, restored):
    result, settings = restored
    assert TOKEN not in (settings.home / ".env").read_text()
    assert (settings.home / ".env").read_text() == "KB_SETTLE_S=0.05\n"
    assert (settings.home / "kb.toml").read_text() == "search_k = 7\n"
    assert settings.telegram_token == "" and settings.brave_api_key == "" and settings.search_k == 7
    assert result.verified.manifest["settings_dropped"] == {
        ".env": ["KB_TELEGRAM_TOKEN", "line 3"],
        "kb.toml": ["brave_api_key"],
    }
    store = Conversations(settings.conversations_path)
    assert [t.message for t in store.current("tg:1").turns] == ["Where is the kestrel?"]
    assert (settings.conversations_path.stat().st_mode & 0o077) == 0  # still the owner's only
    assert (settings.runs / "web-search.json").read_text() == '{"tg:1": []}'
    listed = result.verified.manifest["files"]
    assert "runs/conversations.sqlite3" in listed and not any(
        name.startswith("runs/logs/") for name in listed
    )
    assert not any(name.startswith(("knowledge/requests/", "knowledge/writer.lock")) for name in listed)


def test_the_token_is_nowhere_in_either_archive(taken):
    data = taken["dest"].read_bytes()
    for secret in (TOKEN, BRAVE_KEY):
        assert secret.encode() not in data
        assert secret.encode() not in gzip.decompress(data)
        for path in taken["folder"].rglob("*"):
            assert not path.is_file() or secret.encode() not in path.read_bytes(), path
    assert taken["made"].secret_in == []


def test_verify_accepts_both_archives(taken):
    (taken["folder"] / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # a file manager looked at it: no harm
    for archive in (taken["dest"], taken["folder"]):
        found = verify(archive)
        assert found.files == taken["made" if archive == taken["dest"] else "folder_made"].files
        assert (
            found.index.documents
            == taken["made" if archive == taken["dest"] else "folder_made"].index.documents
        )


# -- refusals -------------------------------------------------------------------------------------


def refused(archive: Path, reason: str) -> BackupError:
    with pytest.raises(BackupError) as caught:
        verify(archive)
    assert caught.value.reason == reason, str(caught.value)
    assert caught.value.member and caught.value.member in str(caught.value)  # the file is named
    return caught.value


def repacked(src: Path, dest: Path, change) -> Path:
    """A copy of a tar.gz archive with its members passed through change(info, data) -> [(info, data)]."""
    with (
        tarfile.open(src, "r:gz") as tar_in,
        tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT) as tar_out,
    ):
        for info in tar_in:
            data = tar_in.extractfile(info).read() if info.isreg() else b""
            for out_info, out_data in change(info, data):
                out_info.size = len(out_data) if out_info.isreg() else 0
                tar_out.addfile(out_info, io.BytesIO(out_data) if out_info.isreg() else None)
    return dest


def test_a_truncated_archive_is_refused_naming_where_it_breaks(taken, tmp_path):
    data = taken["dest"].read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        short = tmp_path / f"short-{cut}.tar.gz"
        short.write_bytes(data[:cut])
        error = refused(short, "truncated")
        assert "cut short" in str(error)


def test_a_changed_byte_is_refused_naming_the_file(taken, tmp_path):
    with tarfile.open(taken["dest"], "r:gz") as tar:
        listed = json.load(tar.extractfile(MANIFEST_NAME))["files"]
    some_raw = next(name for name in listed if name.startswith("knowledge/raw/seed-"))

    def flip(info, data):
        if info.name == some_raw:
            data = data.replace(b"The ", b"Thy ", 1)
        return [(info, data)]

    error = refused(repacked(taken["dest"], tmp_path / "changed.tar.gz", flip), "changed")
    assert error.member == some_raw
    copy = tmp_path / "folder"
    shutil.copytree(taken["folder"], copy)
    target = copy / some_raw
    target.write_bytes(target.read_bytes().replace(b"The ", b"Thy ", 1))
    assert refused(copy, "changed").member == some_raw


def test_an_extra_or_missing_member_is_refused_naming_it(taken, tmp_path):
    def extra(info, data):
        out = [(info, data)]
        if info.name == MANIFEST_NAME:
            out.insert(0, (tarfile.TarInfo("knowledge/raw/planted.md"), b"# Planted\n"))
        return out

    assert (
        refused(repacked(taken["dest"], tmp_path / "extra.tar.gz", extra), "extra").member
        == "knowledge/raw/planted.md"
    )
    gone = "runs/web-search.json"
    without = repacked(
        taken["dest"], tmp_path / "missing.tar.gz", lambda i, d: [] if i.name == gone else [(i, d)]
    )
    assert refused(without, "missing").member == gone
    copy = tmp_path / "folder"
    shutil.copytree(taken["folder"], copy)
    (copy / gone).unlink()
    (copy / "knowledge" / "raw" / "planted.md").write_text("# Planted\n")
    assert refused(copy, "missing").member == gone


@pytest.mark.parametrize(
    "make",
    [
        lambda: (tarfile.TarInfo("../escaped.md"), b"x"),
        lambda: (tarfile.TarInfo("/tmp/kb-absolute.md"), b"x"),
        lambda: _link("knowledge/raw/link.md", "/etc/passwd"),
        lambda: _device("knowledge/raw/null"),
    ],
    ids=["dot-dot", "absolute", "symlink", "device"],
)
def test_unsafe_members_are_refused_and_nothing_is_written(taken, tmp_path, make):
    bad_info, bad_data = make()

    def plant(info, data):
        return [(bad_info, bad_data), (info, data)] if info.name == MANIFEST_NAME else [(info, data)]

    archive = repacked(taken["dest"], tmp_path / "unsafe.tar.gz", plant)
    assert refused(archive, "unsafe").member == bad_info.name
    home = tmp_path / "home"
    with pytest.raises(BackupError):
        restore(archive, home)
    assert (
        not home.exists()
        and not (tmp_path / "escaped.md").exists()
        and not Path("/tmp/kb-absolute.md").exists()
    )
    assert [p.name for p in tmp_path.iterdir()] == ["unsafe.tar.gz"]  # no staging folder left behind


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, b""


def _device(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info, b""


def test_a_home_that_is_not_empty_is_refused_and_left_as_it_was(taken, tmp_path):
    home = tmp_path / "busy"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    with pytest.raises(BackupError) as caught:
        restore(taken["dest"], home)
    assert caught.value.reason == "home-not-empty" and "notes.txt" in str(caught.value)
    assert [p.name for p in home.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]
    only_logs = tmp_path / "logs-only"
    (only_logs / "runs" / "logs").mkdir(parents=True)
    check_home(only_logs)  # kb's own log, opened by the very command that restores: allowed


def test_a_backup_that_fails_leaves_nothing_at_dest(taken, tmp_path):
    settings = taken["settings"]
    dest = tmp_path / "failed.tar.gz"

    def fail(step: str) -> None:
        if step == "raw":
            raise OSError(28, "No space left on device")

    with pytest.raises(BackupError) as caught:
        backup(settings, dest, hook=fail)
    assert caught.value.reason == "no-room" and "disk is full" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BackupError) as caught:
        backup(settings, taken["dest"])
    assert caught.value.reason == "dest-exists"
    with pytest.raises(BackupError) as caught:
        backup(settings, settings.raw / "inside.tar.gz")
    assert caught.value.reason == "dest-inside"


def test_an_earlier_removal_of_a_document_added_again_stays_in_the_trash(tmp_path):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, {"heron.md": seed_text(99)})
    [doc] = documents(settings).values()
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        entry = trash.remove(ingestor, doc.id, now=datetime.now(UTC) - timedelta(days=2))
        path = settings.inbox / "heron.md"
        path.write_text(seed_text(99))
        assert ingestor.ingest(path).status == "indexed"
    done = restore(backup(settings, tmp_path / "b.tar.gz").dest, tmp_path / "new")
    assert done.settled.put_back == [] and done.settled.missing == []
    restored_settings = make_settings(tmp_path / "new")
    assert [e.trash_id for e in trash.trashed(restored_settings)] == [entry.trash_id]
    assert set(documents(restored_settings)) == {doc.id}


def test_a_folder_sources_notes_are_searchable_at_once_after_a_restore(tmp_path, run_kb):
    home, notes = tmp_path / "kb", tmp_path / "notes"
    notes.mkdir()
    (notes / "boiler.md").write_text("# Boiler\n\nThe boiler was serviced by Harlow Heating in March.\n")
    assert run_kb("--home", str(home), "sources", "add", str(notes), "--name", "notes").returncode == 0
    assert run_kb("--home", str(home), "backup", str(tmp_path / "b.tar.gz")).returncode == 0
    back = run_kb("restore-backup", str(tmp_path / "b.tar.gz"), "--home", str(tmp_path / "new"))
    assert back.returncode == 0 and "no raw file" not in back.stdout, back.stdout
    found = run_kb("--home", str(tmp_path / "new"), "search", "--json", "Harlow Heating")
    assert [r["source_name"] for r in json.loads(found.stdout)][:1] == ["boiler.md"], found.stdout
    listed = run_kb("--home", str(tmp_path / "new"), "sources")
    assert "1 indexed" in listed.stdout, listed.stdout


@pytest.mark.parametrize(
    ("name", "is_secret"),
    [("KB_TELEGRAM_TOKEN", True), ("HF_TOKEN", True), ("KB_BRAVE_API_KEY", True), ("brave_api_key", True),
     ("OPENAI_API_KEY", True), ("KB_SMTP_PASSWORD", True), ("KB_CLIENT_SECRET", True),
     ("KB_SETTLE_S", False), ("KB_TOKENIZER", False), ("search_k", False), ("KB_KEYWORDS", False)],
)  # fmt: skip
def test_which_settings_are_secrets(name, is_secret):
    assert is_secret_name(name) is is_secret


def test_settings_files_lose_every_secret_line():
    env = 'export KB_TELEGRAM_TOKEN="abc123456"\nKB_MODEL=m\n# was abc123456\nHF_TOKEN=hf_zzzzzzzz\n'
    secrets = secret_values(env, "", known=("short",))
    assert secrets == ["hf_zzzzzzzz", "abc123456"]
    assert without_secrets(env, toml=False, secrets=secrets) == (
        "KB_MODEL=m\n",
        ["KB_TELEGRAM_TOKEN", "line 3", "HF_TOKEN"],
    )
    toml = 'telegram_token = """\nabcdef123\n"""\nsearch_k = 3\n"brave_api_key" = "k1234567"\n'
    assert without_secrets(toml, toml=True, secrets=secret_values("", toml)) == (
        "search_k = 3\n",
        ["telegram_token", "brave_api_key"],
    )


# -- the command line -------------------------------------------------------------------------------


def test_the_commands(taken, tmp_path, run_kb, monkeypatch):
    settings = taken["settings"]

    def kb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)  # without --home, kb's home is the working folder
        return run_kb(*args)

    made = kb("--home", str(settings.home), "backup", str(tmp_path / "cli.tar.gz"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    [line] = made.stdout.splitlines()
    assert (
        line.startswith(f"backup  {tmp_path / 'cli.tar.gz'}: ")
        and " documents / " in line
        and " MB, " in line
    )
    assert "left out: KB_TELEGRAM_TOKEN, brave_api_key and 1 other line holding a secret" in line
    verified = kb("backup", "--verify", str(tmp_path / "cli.tar.gz"), cwd=tmp_path)
    assert verified.returncode == 0 and verified.stdout.startswith("verified  "), verified.stderr
    short = tmp_path / "short.tar.gz"
    short.write_bytes((tmp_path / "cli.tar.gz").read_bytes()[:-10])
    broken = kb("backup", "--verify", str(short), cwd=tmp_path)
    assert broken.returncode == 1 and "cut short" in broken.stderr and MANIFEST_NAME in broken.stderr
    new = tmp_path / "new"
    new.mkdir()  # restored from inside the new folder itself: kb's own log there is no obstacle
    back = kb("restore-backup", str(tmp_path / "cli.tar.gz"), "--home", ".", cwd=new)
    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith(f"restored  {tmp_path / 'cli.tar.gz'} → {new}: ")
    assert "set them again in" in back.stdout
    again = kb("restore-backup", str(tmp_path / "cli.tar.gz"), "--home", str(new), cwd=tmp_path)
    assert again.returncode == 1 and "is not empty" in again.stderr
    found = kb("--home", str(new), "search", "--json", "kestrel5x", cwd=tmp_path)
    assert found.returncode == 0 and json.loads(found.stdout)[0]["source_name"] == "seed-5.md"
    helped = kb("backup", "--help", cwd=tmp_path)
    assert "KB_TELEGRAM_TOKEN" in helped.stdout and "conversations.sqlite3" in helped.stdout
