"""Removing and restoring documents: the trash on real files, the index in real SQLite, and requests
carried out by a real daemon."""

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from daemon.main import background
from knowledge.ingest import requests, trash
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.test_daemon import wait_for

T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
DAY = timedelta(days=1)
HERON = "# Heron\n\nThe heron count at pond 6 was 42 birds in March.\n"
OTTER = "# Otter\n\nOtters at the weir hold hands while they sleep.\n"


@pytest.fixture
def kb(tmp_path):
    """(settings, ingestor) over a fresh knowledge base; the index is closed afterwards."""
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2")
    with Index(settings.index_path) as index:
        yield settings, Ingestor(settings, index, ApproxCounter(), clock=lambda: T0)


def add(settings, ingestor, name: str, text: str, sidecar: dict | None = None):
    """Drop a file into the inbox and ingest it; its outcome."""
    path = settings.inbox / name
    path.write_text(text, encoding="utf-8")
    if sidecar is not None:
        (settings.inbox / (name + ".source.json")).write_text(json.dumps(sidecar))
    return ingestor.ingest(path)


def passages(index: Index, query: str) -> list[str]:
    return [r.text for r in search(index, query, k=3)]


def chunk_texts(index: Index, doc_id: str) -> list[str]:
    return [
        r[0]
        for r in index.conn.execute("SELECT text FROM chunks WHERE document_id = ? ORDER BY seq", (doc_id,))
    ]


def test_removed_document_leaves_search_and_its_files_wait_in_the_trash(kb):
    settings, ingestor = kb
    heron = add(settings, ingestor, "heron.md", HERON, {"source_url": "https://birds.example/heron"})
    add(settings, ingestor, "otter.md", OTTER)
    index = ingestor.index
    rowids = [
        r[0] for r in index.conn.execute("SELECT rowid FROM chunks WHERE document_id = ?", (heron.doc_id,))
    ]
    vec = np.ones(4, dtype=np.float32).tobytes()
    index.store_vectors(
        "m", [(r, index.chunks_by_rowid([r])[r][0].text_sha256, "latin", vec) for r in rowids]
    )
    raw_bytes = (settings.raw / Path(heron.raw_path).name).read_bytes()

    with capture_logs() as logs:
        entry = trash.remove(ingestor, heron.doc_id, now=T0)

    assert not any("42 birds" in p for p in passages(index, "heron count at pond 6"))
    assert [d.title for d in index.documents()] == ["Otter"]
    assert index.vector_count("m") == 0
    assert not (settings.raw / Path(heron.raw_path).name).exists()
    assert (
        not (settings.processed / "heron.md").exists()
        and not (settings.processed / "heron.md.source.json").exists()
    )
    assert (settings.processed / "otter.md").exists()
    folder = settings.trash / entry.trash_id
    assert (folder / "raw" / Path(heron.raw_path).name).read_bytes() == raw_bytes
    assert (folder / "original" / "heron.md").read_text() == HERON
    assert json.loads((folder / "original" / "heron.md.source.json").read_text())["source_url"].endswith(
        "/heron"
    )
    assert entry.doc_id == heron.doc_id and entry.title == "Heron" and entry.original == "heron.md"
    assert (
        entry.removed_at == "2025-03-01T09:30:00+00:00" and entry.source_url == "https://birds.example/heron"
    )
    assert trash.trashed(settings) == [entry]
    assert [e for e in logs if e["event"] == "trash.removed"][0]["trash_id"] == entry.trash_id
    assert index.last_ingests(1)[0].status == "removed"


def test_a_restored_document_is_searchable_again_with_the_same_text(kb):
    settings, ingestor = kb
    heron = add(settings, ingestor, "heron.md", HERON, {"source_url": "https://birds.example/heron"})
    index = ingestor.index
    before = chunk_texts(index, heron.doc_id)
    raw_bytes = (settings.raw / Path(heron.raw_path).name).read_bytes()
    entry = trash.remove(ingestor, heron.doc_id, now=T0)

    with capture_logs() as logs:
        back = trash.restore(ingestor, entry.trash_id)

    assert back.doc_id == heron.doc_id and back.title == "Heron" and back.raw_path == heron.raw_path
    assert chunk_texts(index, heron.doc_id) == before
    assert any("42 birds" in p for p in passages(index, "heron count at pond 6"))
    assert (settings.raw / Path(heron.raw_path).name).read_bytes() == raw_bytes
    assert (settings.processed / "heron.md").read_text() == HERON
    assert (settings.processed / "heron.md.source.json").exists()
    assert not (settings.trash / entry.trash_id).exists() and trash.trashed(settings) == []
    assert [e["event"] for e in logs if e["event"].startswith("trash.")] == ["trash.restored"]


def test_the_same_file_again_after_removal_is_indexed_and_then_the_old_entry_is_not_restored(kb):
    settings, ingestor = kb
    first = add(settings, ingestor, "heron.md", HERON)
    entry = trash.remove(ingestor, first.doc_id, now=T0)

    again = add(settings, ingestor, "heron.md", HERON)  # forwarded once more
    assert again.status == "indexed" and again.duplicate_of is None
    assert any("42 birds" in p for p in passages(ingestor.index, "heron count at pond 6"))

    with pytest.raises(trash.RestoreRefused) as refused:
        trash.restore(ingestor, entry.trash_id)
    assert refused.value.doc_id == again.doc_id and again.doc_id in str(refused.value)
    assert "kept" in str(refused.value)
    assert trash.trashed(settings) == [entry]  # the entry is kept, whole
    assert (settings.trash / entry.trash_id / "original" / "heron.md").exists()
    assert len(ingestor.index.documents()) == 1


def test_a_restore_whose_names_were_taken_meanwhile_takes_free_names(kb):
    settings, ingestor = kb
    heron = add(settings, ingestor, "heron.md", HERON)
    entry = trash.remove(ingestor, heron.doc_id, now=T0)
    other = add(settings, ingestor, "heron.md", "# Heron II\n\nA second heron note, about nests.\n")
    raw_name = Path(heron.raw_path).name
    (settings.raw / raw_name).write_text("# Someone's own notes\n\nwritten by hand under the old name\n")
    ingestor.sync_raw(raw_name)

    back = trash.restore(ingestor, entry.trash_id)

    assert back.raw_path != heron.raw_path and back.original == "heron-2.md"
    restored = (settings.raw / Path(back.raw_path).name).read_text()
    assert 'source_snapshot: "inbox/processed/heron-2.md"' in restored
    assert (settings.processed / "heron-2.md").read_text() == HERON
    assert (settings.processed / "heron.md").read_text().startswith("# Heron II")  # the other's, untouched
    titles = sorted(d.title for d in ingestor.index.documents())
    assert titles == ["Heron", "Heron II", "Someone's own notes"]
    assert ingestor.index.document(other.doc_id) is not None


def test_purge_drops_entries_after_30_days_and_keeps_younger_ones(kb):
    settings, ingestor = kb
    old = trash.remove(ingestor, add(settings, ingestor, "heron.md", HERON).doc_id, now=T0)
    counts = [trash.purge(settings, now=T0 + k * DAY) for k in range(1, 21)]  # the daemon's daily purge
    young = trash.remove(ingestor, add(settings, ingestor, "otter.md", OTTER).doc_id, now=T0 + 20 * DAY)
    counts += [trash.purge(settings, now=T0 + k * DAY) for k in range(21, 30)]
    with capture_logs() as logs:
        counts.append(trash.purge(settings, now=T0 + 30 * DAY))

    assert counts == [0] * 29 + [1]
    assert [e.trash_id for e in trash.trashed(settings)] == [young.trash_id]
    assert not (settings.trash / old.trash_id).exists()
    assert [e for e in logs if e["event"] == "trash.purged"][0]["entries"] == 1
    with pytest.raises(trash.NotFound):
        trash.restore(ingestor, old.trash_id)


def test_a_clock_a_month_ahead_at_one_start_purges_nothing_removed_a_minute_ago(kb):
    settings, ingestor = kb
    entry = trash.remove(ingestor, add(settings, ingestor, "heron.md", HERON).doc_id, now=T0)
    stray = settings.trash / "20250301-093000-abcdef"  # a folder whose manifest cannot be read
    stray.mkdir()
    (stray / "manifest.json").write_text("{not json")
    os.utime(stray, (T0.timestamp(), T0.timestamp()))

    assert trash.purge(settings, now=T0 + timedelta(minutes=1) + 31 * DAY) == 0  # the clock jumped ahead
    assert trash.purge(settings, now=T0 + timedelta(minutes=2)) == 0  # and NTP set it right

    assert [e.trash_id for e in trash.trashed(settings)] == [entry.trash_id] and stray.exists()
    assert trash.restore(ingestor, entry.trash_id).title == "Heron"


def test_a_removal_stamped_by_a_clock_behind_is_not_purged_once_the_clock_is_right(kb):
    settings, ingestor = kb
    # fake-hwclock before NTP: the removal is stamped 40 days back (as an entry from before the age
    # was counted would look too: a manifest, no age yet)
    entry = trash.remove(ingestor, add(settings, ingestor, "heron.md", HERON).doc_id, now=T0 - 40 * DAY)

    assert trash.purge(settings, now=T0 + timedelta(minutes=1)) == 0

    [listed] = trash.trashed(settings)
    assert listed.aged_s == 86400 and listed.expires_at() == T0 + timedelta(minutes=1) + 29 * DAY
    assert trash.restore(ingestor, entry.trash_id).title == "Heron"


def test_a_removal_stamped_in_the_future_counts_as_now_and_goes_after_30_days(kb):
    settings, ingestor = kb
    trash.remove(ingestor, add(settings, ingestor, "heron.md", HERON).doc_id, now=T0 + 45 * DAY)

    kept = [trash.purge(settings, now=T0 + k * DAY) for k in range(30)]

    assert kept == [0] * 30 and len(trash.trashed(settings)) == 1
    assert trash.purge(settings, now=T0 + 30 * DAY) == 1 and trash.trashed(settings) == []


def test_the_counted_age_says_truly_when_an_entry_goes_and_one_jump_adds_one_day(kb):
    settings, ingestor = kb
    entry = trash.remove(ingestor, add(settings, ingestor, "heron.md", HERON).doc_id, now=T0)
    assert entry.expires_at() == T0 + 30 * DAY
    for k in range(1, 11):
        trash.purge(settings, now=T0 + k * DAY)
    assert trash.trashed(settings)[0].expires_at() == T0 + 30 * DAY

    assert trash.purge(settings, now=T0 + 41 * DAY) == 0  # one start with the clock a month ahead
    assert trash.purge(settings, now=T0 + 11 * DAY) == 0  # a day later, the clock right again

    [listed] = trash.trashed(settings)
    assert listed.aged_s == 11 * 86400 and listed.expires_at() == T0 + 30 * DAY
    folder = settings.trash / entry.trash_id
    assert sorted(os.listdir(folder)) == ["age.json", "manifest.json", "original", "raw"]  # no temp file
    assert [trash.purge(settings, now=T0 + k * DAY) for k in range(12, 31)] == [0] * 18 + [1]


@pytest.mark.parametrize(
    ("aged_s", "since", "now", "expected_s"),
    [
        (0.0, T0, T0 + timedelta(hours=3), 3 * 3600.0),  # the gap since the last reading
        (100.0, T0, T0 + 31 * DAY, 100.0 + 86400),  # one jump ahead adds one day
        (100.0, T0 + 31 * DAY, T0, 100.0),  # a reading behind the last adds nothing
        (0.0, T0 + 45 * DAY, T0 + 45 * DAY, 0.0),
    ],
)
def test_added_age_is_the_gap_at_most_a_day_and_never_negative(aged_s, since, now, expected_s):
    assert trash.added_age(aged_s, since, now) == expected_s


@pytest.mark.parametrize("part", ["its folder", "raw/", "original/", "raw/<name>"])
def test_a_tampered_entry_is_refused_left_in_place_and_nothing_outside_is_touched(kb, tmp_path, part):
    settings, ingestor = kb
    heron = add(settings, ingestor, "heron.md", HERON)
    entry = trash.remove(ingestor, heron.doc_id, now=T0)
    folder, raw_name = settings.trash / entry.trash_id, Path(heron.raw_path).name
    outside = tmp_path / "outside"
    outside.mkdir()
    if part == "its folder":
        os.replace(folder, outside / entry.trash_id)
        folder.symlink_to(outside / entry.trash_id, target_is_directory=True)
        kept = outside / entry.trash_id / "raw" / raw_name
    elif part in ("raw/", "original/"):
        sub = part.rstrip("/")
        os.replace(folder / sub, outside / sub)
        (folder / sub).symlink_to(outside / sub, target_is_directory=True)
        kept = outside / sub / (raw_name if sub == "raw" else "heron.md")
    else:  # a link where the raw file was, to a file of someone else's
        kept = outside / "secret.md"
        kept.write_text("# Secret\n\nThe safe's code is 1234.\n")
        (folder / "raw" / raw_name).unlink()
        (folder / "raw" / raw_name).symlink_to(kept)
    before = kept.read_bytes()

    with capture_logs() as logs, pytest.raises(trash.TrashError) as refused:
        trash.restore(ingestor, entry.trash_id)

    named = part.replace("<name>", raw_name)
    assert refused.value.reason == "tampered" and not isinstance(refused.value, trash.NotFound)
    assert entry.trash_id in str(refused.value) and f"{named} is a symbolic link" in str(refused.value)
    assert kept.read_bytes() == before  # the file outside the knowledge base is still there
    assert ingestor.index.documents() == [] and list(settings.raw.iterdir()) == []  # nothing indexed
    assert not (settings.processed / "heron.md").exists()
    assert [e["trash_id"] for e in logs if e["event"] == "trash.refused"] == [entry.trash_id]
    assert trash.purge(settings, now=T0 + DAY) == 0 and os.path.lexists(folder / "manifest.json")


def test_unknown_or_unsafe_ids_are_clear_errors_and_touch_nothing(kb, tmp_path):
    settings, ingestor = kb
    add(settings, ingestor, "heron.md", HERON)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "manifest.json").write_text("{}")
    for doc_id in ("doc-0000000000000000", "../../etc", "raw/heron.md", ""):
        with pytest.raises(trash.NotFound, match="no document"):
            trash.remove(ingestor, doc_id, now=T0)
    for trash_id in ("20250101-000000-abcdef", "../../etc", "..", "a/b"):
        with pytest.raises(trash.NotFound, match="no trash entry"):
            trash.restore(ingestor, trash_id)
    assert len(ingestor.index.documents()) == 1 and (tmp_path / "etc" / "manifest.json").exists()


def test_change_removes_several_at_once_without_a_tokenizer_and_restore_loads_it(tmp_path):
    settings = make_settings(tmp_path / "kb")
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter(), clock=lambda: T0)
        heron, otter = add(settings, ingestor, "heron.md", HERON), add(settings, ingestor, "otter.md", OTTER)
    loads: list[str] = []

    def load():
        loads.append("loaded")
        return ApproxCounter()

    removed = requests.change(
        settings, "remove", [heron.doc_id, "../../etc", otter.doc_id], make_counter=load, wait_s=0
    )
    assert [c.status for c in removed] == ["done", "failed", "done"] and loads == []
    assert "not a document or trash id" in removed[1].message
    [back] = requests.change(settings, "restore", [removed[0].trashed.trash_id], make_counter=load, wait_s=0)
    assert back.status == "done" and back.title == "Heron" and loads == ["loaded"]
    assert doc_titles(settings) == ["Heron"]


# -- requests to the daemon ---------------------------------------------------------------------


def doc_titles(settings) -> list[str]:
    with Index(settings.index_path, readonly=True) as index:
        return sorted(d.title for d in index.documents())


def doc_id_of(settings, title: str) -> str:
    with Index(settings.index_path, readonly=True) as index:
        return next(d.id for d in index.documents() if d.title == title)


def test_the_running_daemon_removes_and_restores_on_request(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2")
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "heron.md").write_text(HERON)
    (settings.inbox / "otter.md").write_text(OTTER)
    with background(settings, ApproxCounter()):
        wait_for(
            lambda: settings.index_path.exists() and len(doc_titles(settings)) == 2, what="two documents"
        )
        heron_id = doc_id_of(settings, "Heron")

        removed = requests.ask_daemon(settings, "remove", heron_id, wait_s=20)
        assert removed.status == "done" and removed.trashed is not None, removed
        assert removed.doc_id == heron_id and removed.title == "Heron"
        assert f"kb restore {removed.trashed.trash_id}" in removed.message
        assert doc_titles(settings) == ["Otter"]
        assert trash.trashed(settings)[0].trash_id == removed.trashed.trash_id

        restored = requests.ask_daemon(settings, "restore", removed.trashed.trash_id, wait_s=20)
        assert restored.status == "done" and restored.doc_id == heron_id and restored.title == "Heron"
        assert doc_titles(settings) == ["Heron", "Otter"]
        with Index(settings.index_path, readonly=True) as index:
            assert any("42 birds" in p for p in passages(index, "heron count at pond 6"))

        missing = requests.ask_daemon(settings, "restore", removed.trashed.trash_id, wait_s=20)
        assert missing.status == "failed" and "no trash entry" in missing.message

        # kb rm beside the daemon: the daemon does the work, so no tokenizer is loaded here.
        otter_id = doc_id_of(settings, "Otter")
        [by_cli] = requests.change(
            settings, "remove", [otter_id], make_counter=lambda: pytest.fail("tokenizer loaded"), wait_s=20
        )
        assert by_cli.status == "done" and doc_titles(settings) == ["Heron"]
    assert list(settings.requests.iterdir()) == []  # every request done, every answer collected


def test_a_request_made_while_the_daemon_is_down_is_done_when_it_starts(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2")
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "heron.md").write_text(HERON)
    with background(settings, ApproxCounter()):
        wait_for(
            lambda: settings.index_path.exists() and doc_titles(settings) == ["Heron"], what="the document"
        )
    heron_id = doc_id_of(settings, "Heron")

    asked = requests.ask_daemon(settings, "remove", heron_id, wait_s=20)
    assert asked.status == "waiting" and "not running" in asked.message  # said at once, not after 20 s
    assert doc_titles(settings) == ["Heron"] and len(requests.pending(settings)) == 1

    with background(settings, ApproxCounter()):
        wait_for(lambda: doc_titles(settings) == [], what="the removal")
        wait_for(lambda: not requests.pending(settings), what="the request to be done")
    results = list(settings.requests.glob("*.result.json"))
    assert len(results) == 1 and requests.read_result(results[0]).status == "done"
    assert trash.trashed(settings)[0].doc_id == heron_id


def drop(folder: Path, name: str, data: bytes) -> None:
    """Put a file into the requests folder whole, as any writer could."""
    (folder / ("." + name + ".tmp")).write_bytes(data)
    os.replace(folder / ("." + name + ".tmp"), folder / name)


def test_hostile_request_files_are_refused_and_the_daemon_goes_on(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2")
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "heron.md").write_text(HERON)
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "passwd").write_text('{"op": "remove", "target": "x"}')
    with background(settings, ApproxCounter()), capture_logs() as logs:
        wait_for(
            lambda: settings.index_path.exists() and doc_titles(settings) == ["Heron"], what="the document"
        )
        folder = settings.requests
        folder.mkdir(parents=True, exist_ok=True)
        drop(folder, "path.json", json.dumps({"op": "remove", "target": "../../etc"}).encode())
        drop(folder, "op.json", json.dumps({"op": "rm -rf", "target": "doc-1"}).encode())
        drop(folder, "bad.json", b"{not json")
        drop(folder, "list.json", b"[1, 2]")
        drop(folder, "huge.json", b'{"op": "remove", "target": "' + b"a" * (8 * 2**20) + b'"}')
        os.symlink(outside / "passwd", folder / "link.json")
        drop(
            folder, "x.y.json", json.dumps({"op": "remove", "target": doc_id_of(settings, "Heron")}).encode()
        )

        wait_for(lambda: not requests.pending(settings), what="the requests to be handled")
        # The daemon still answers a good request afterwards.
        done = requests.ask_daemon(settings, "remove", doc_id_of(settings, "Heron"), wait_s=20)

    results = {
        p.name.removesuffix(".result.json"): requests.read_result(p) for p in folder.glob("*.result.json")
    }
    assert set(results) == {"path", "op", "bad", "list", "huge", "link"}
    assert all(r.status == "failed" and r.message.startswith("request refused") for r in results.values())
    assert "not a document or trash id" in results["path"].message
    assert (
        outside / "passwd"
    ).read_text() == '{"op": "remove", "target": "x"}'  # the link's target untouched
    refused = [e for e in logs if e["event"] == "request.refused"]
    assert len(refused) == 7 and {e["request"] for e in refused} >= {"path", "huge", "x.y.json"}
    assert done.status == "done" and done.title == "Heron"


def test_a_restore_cut_short_is_finished_by_the_next_one(kb, monkeypatch):
    settings, ingestor = kb
    heron = add(settings, ingestor, "heron.md", HERON)
    entry = trash.remove(ingestor, heron.doc_id, now=T0)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(trash, "write_new", disk_full)
        with pytest.raises(OSError):
            trash.restore(ingestor, entry.trash_id)
    assert (settings.processed / "heron.md").exists()  # the original went back first
    assert trash.trashed(settings) == [entry]  # the raw file is still in the trash: nothing lost

    back = trash.restore(ingestor, entry.trash_id)
    assert back.doc_id == heron.doc_id and back.original == "heron.md"  # its own name, not heron-2.md
    assert (
        'source_snapshot: "inbox/processed/heron.md"' in (settings.raw / Path(back.raw_path).name).read_text()
    )
    assert not (settings.processed / "heron-2.md").exists() and trash.trashed(settings) == []
