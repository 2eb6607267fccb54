"""Progress of long conversions, published by the daemon for other processes (the bot, kb status)."""

import hashlib
import json
import re
import time
from datetime import UTC, datetime

import pytest

from daemon.main import background
from knowledge.convert.ocr import OcrSpec
from knowledge.ingest import working
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.report.status import activity_facts, status_report
from knowledge.store.index import Index
from tests import ocr_images
from tests.conftest import make_settings
from tests.ocr_stand_ins import ScriptedEngine

SHA = hashlib.sha256(b"scan").hexdigest()


def test_published_progress_is_read_back_and_cleared(tmp_path) -> None:
    folder = tmp_path / "working"
    assert working.read(folder, SHA) is None
    clock = lambda: datetime(2025, 3, 1, 9, 30, tzinfo=UTC)  # noqa: E731
    working.publish(folder, SHA, name="scan.pdf", stage="ocr", done=3, total=20, clock=clock)
    assert working.read(folder, SHA) == working.Working(
        "scan.pdf", SHA, "ocr", 3, 20, "2025-03-01T09:30:00+00:00"
    )
    assert [p.name for p in folder.iterdir()] == [f"{SHA}.json"]  # no temporary file left beside it
    working.publish(folder, SHA, name="scan.pdf", stage="ocr", done=4, total=20)
    assert working.read(folder, SHA).done == 4
    working.clear(folder, SHA)
    working.clear(folder, SHA)  # clearing twice is harmless
    assert working.read(folder, SHA) is None and not list(folder.iterdir())


def test_a_damaged_progress_file_reads_as_nothing(tmp_path) -> None:
    (tmp_path / f"{SHA}.json").write_text('{"name": "scan.pdf", "done": ')
    assert working.read(tmp_path, SHA) is None
    (tmp_path / f"{SHA}.json").write_text(json.dumps({"name": "scan.pdf"}))
    assert working.read(tmp_path, SHA) is None


@pytest.mark.parametrize("bad", ["../../etc/passwd", "ABC", SHA.upper(), SHA + ".json", ""])
def test_only_a_sha256_names_a_progress_file(tmp_path, bad) -> None:
    with pytest.raises(ValueError):
        working.read(tmp_path, bad)
    with pytest.raises(ValueError):
        working.publish(tmp_path, bad, name="x", stage="ocr", done=0, total=1)


def test_the_folder_sits_beside_the_index(settings) -> None:
    assert working.folder(settings) == settings.index_path.parent / "working"


def test_the_ingestor_tells_each_page_read_then_that_the_file_is_finished(settings) -> None:
    settings.inbox.mkdir(parents=True)
    heard = []

    def listen(**report) -> None:
        heard.append((report["name"], report["stage"], report["done"], report["total"], report["sha256"]))

    pages = [ocr_images.a4_page([f"Page {n}."])[0] for n in (1, 2, 3)]
    scan, blank = settings.inbox / "scan.pdf", settings.inbox / "blank.pdf"
    scan.write_bytes(ocr_images.scanned_pdf(pages))
    blank.write_bytes(ocr_images.scanned_pdf([ocr_images.blank_page()]))
    spec = OcrSpec(engine=ScriptedEngine(["A line of the page."]))
    nothing = OcrSpec(engine=ScriptedEngine([]))
    with Index(settings.index_path) as index:
        assert (
            Ingestor(settings, index, ApproxCounter(), progress=listen, ocr=spec).ingest(scan).status
            == "indexed"
        )
        assert (
            Ingestor(settings, index, ApproxCounter(), progress=listen, ocr=nothing).ingest(blank).status
            == "failed"
        )
    sha = hashlib.sha256((settings.processed / "scan.pdf").read_bytes()).hexdigest()
    assert heard[:5] == [("scan.pdf", "ocr", n, 3, sha) for n in range(4)] + [
        ("scan.pdf", "finished", 0, 0, sha)
    ]
    assert [(name, stage) for name, stage, *_ in heard[5:]] == [("blank.pdf", "ocr")] * 2 + [
        ("blank.pdf", "finished")
    ]


def test_the_daemon_publishes_a_long_scans_progress_and_clears_it(tmp_path) -> None:
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2", KB_OCR="rapidocr")
    folder = working.folder(settings)
    stale = hashlib.sha256(b"left by a killed daemon").hexdigest()
    working.publish(folder, stale, name="old.pdf", stage="ocr", done=1, total=9)
    pages = [
        ocr_images.a4_page([f"Page {n} of the harbour report.", "Ferries leave on the hour."])[0]
        for n in range(1, 5)
    ]
    data = ocr_images.scanned_pdf(pages)
    sha = hashlib.sha256(data).hexdigest()
    seen, shown = [], []  # (done, total) as read here; what kb status said meanwhile
    with background(settings, ApproxCounter()) as daemon:
        assert working.read(folder, stale) is None  # a new daemon starts with nothing in hand
        (settings.inbox / "report.pdf.part").write_bytes(data)
        (settings.inbox / "report.pdf.part").rename(settings.inbox / "report.pdf")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (settings.processed / "report.pdf").exists():
            if (now := working.read(folder, sha)) is not None and (now.done, now.total) not in seen:
                seen.append((now.done, now.total))
                shown += [fact for fact in activity_facts(status_report(settings)) if fact[0] == "reading"]
            time.sleep(0.02)
        assert daemon.wait_idle(30)
        assert working.read(folder, sha) is None and not list(folder.glob("*.json"))
    assert (settings.processed / "report.pdf").exists()
    assert seen and all(total == 4 for _, total in seen) and seen == sorted(seen)
    assert len(seen) >= 2  # the file moved on while it was watched
    assert shown and all(re.fullmatch(r"report\.pdf: page [0-4] of 4", fact) for _, fact in shown), shown
