"""Scanned PDFs: pages without a text layer read by real RapidOCR, page by page, within time limits."""

import pytest
import structlog

from knowledge.convert import Limits, convert_source
from knowledge.convert.isolate import IsolatedRunner
from knowledge.convert.ocr import OcrSpec
from knowledge.convert.pdf import pdf_to_markdown
from knowledge.errors import ConversionError
from knowledge.ingest import raw as rawfile
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests import ocr_images
from tests.clocks import VirtualClock
from tests.conftest import subprocess_env
from tests.ocr_stand_ins import ClockedEngine, ScriptedEngine, StuckEngine
from tests.terminal import Terminal

RAPIDOCR = OcrSpec(kind="rapidocr")
PAGE_1 = ["The harbour of Quillan opens at nine.", "臺北的港口九點開放，渡輪每小時一班。"]
PAGE_2 = ["Lake Quillan is 317 metres deep.", "It never freezes in winter."]


def page(lines: list[str]):
    return ocr_images.a4_page(lines, size_pt=14)[0]


@pytest.fixture(scope="module")
def scan() -> bytes:
    return ocr_images.scanned_pdf([page(PAGE_1), page(PAGE_2)])


def test_each_scanned_page_is_a_section_with_a_line_per_text_line(scan) -> None:
    told = []
    converted = pdf_to_markdown(scan, ocr=RAPIDOCR, progress=lambda done, total: told.append((done, total)))
    assert (
        converted.markdown
        == "## Page 1\n\n" + "\n".join(PAGE_1) + "\n\n## Page 2\n\n" + "\n".join(PAGE_2) + "\n"
    )
    assert converted.title == PAGE_1[0]
    assert converted.ocr.pages == (1, 2) and converted.ocr.illegible_pages == ()
    assert converted.ocr.confidence > 0.9
    assert told == [(0, 2), (1, 2), (2, 2)]


def test_a_mixed_pdf_keeps_the_text_layer_and_reads_only_the_scanned_page() -> None:
    typed = ["Minutes of the harbour board, 3 May.", "Present: the harbour master and two pilots."]
    pdf = ocr_images.mixed_pdf(typed, page(PAGE_2))
    converted = pdf_to_markdown(pdf, ocr=RAPIDOCR)
    assert (
        converted.markdown
        == "## Page 1\n\n" + " ".join(typed) + "\n\n## Page 2\n\n" + "\n".join(PAGE_2) + "\n"
    )
    assert converted.ocr.pages == (2,)


def test_a_scan_with_a_scanning_apps_stamp_is_read_from_the_picture() -> None:
    pdf = ocr_images.mixed_pdf(["A typed first page."], page(PAGE_2), stamp="Scanned with PocketScan")
    converted = pdf_to_markdown(pdf, ocr=RAPIDOCR)
    assert converted.markdown.split("## Page 2\n\n")[1].splitlines()[:2] == PAGE_2
    assert converted.ocr.pages == (2,)


def test_a_blank_page_is_reported_and_the_rest_is_indexed(settings) -> None:
    settings.inbox.mkdir(parents=True)
    path = settings.inbox / "board-minutes.pdf"
    path.write_bytes(ocr_images.scanned_pdf([page(PAGE_1), ocr_images.blank_page(), page(PAGE_2)]))
    with structlog.testing.capture_logs() as logs, Index(settings.index_path) as index:
        outcome = Ingestor(settings, index, ApproxCounter(), ocr=RAPIDOCR).ingest(path)
        assert outcome.status == "indexed", outcome.message
        [hit] = search(index, "how deep is Lake Quillan", k=1)
    raw = settings.raw / outcome.raw_path.removeprefix("raw/")
    text = raw.read_text(encoding="utf-8")
    meta = rawfile.parse(text, fallback_name="x", sha256="").meta
    assert (meta.ocr_pages, meta.ocr_illegible_pages) == ("1,3", "2")
    assert meta.ocr_engine.startswith("rapidocr") and 0.9 < float(meta.ocr_confidence) <= 1
    assert "## Page 2" not in text and "## Page 3\n\n" + "\n".join(PAGE_2) in text
    lines = text.split("\n")
    assert hit.citation.endswith(f"{outcome.raw_path}:{hit.start_line}-{hit.end_line}")
    assert PAGE_2[0] in lines[hit.start_line - 1 : hit.end_line]
    [illegible] = [entry for entry in logs if entry["event"] == "ocr.illegible"]
    assert illegible["pages"] == "2" and illegible["file"] == "board-minutes.pdf"


def test_a_scan_with_nothing_legible_at_all_fails_as_no_text() -> None:
    with pytest.raises(ConversionError) as caught:
        pdf_to_markdown(ocr_images.scanned_pdf([ocr_images.blank_page()] * 2), ocr=RAPIDOCR)
    assert caught.value.reason == "pdf-no-text"
    assert "OCR found no readable text on its 2 scanned page(s)" in str(caught.value)


def test_with_ocr_off_a_scan_fails_as_before_and_says_how_to_read_it(scan) -> None:
    for off in (None, OcrSpec(kind="off")):
        with pytest.raises(ConversionError) as caught:
            pdf_to_markdown(scan, ocr=off)
        assert caught.value.reason == "pdf-no-text" and "KB_OCR=auto" in str(caught.value)


def test_the_page_limit_is_checked_before_any_page_is_read(scan) -> None:
    with pytest.raises(ConversionError) as caught:
        pdf_to_markdown(scan, ocr=OcrSpec(engine=StuckEngine()), max_pages=1)
    assert caught.value.reason == "pdf-too-many-pages"


def test_a_page_that_takes_too_long_stops_the_conversion(scan) -> None:
    slow = OcrSpec(engine=ScriptedEngine(["slow"], delay_s=0.3))
    with pytest.raises(ConversionError) as caught:
        pdf_to_markdown(scan, ocr=slow, page_timeout_s=0.1)
    assert caught.value.reason == "timeout" and "KB_OCR_PAGE_TIMEOUT_S" in str(caught.value)


# -- in the conversion worker -----------------------------------------------------------------


def test_a_long_scan_keeps_going_past_the_conversion_timeout_while_pages_are_read() -> None:
    pdf = ocr_images.scanned_pdf([page([f"Page {n} of the scan."]) for n in range(1, 7)])
    told = []
    clock = VirtualClock()  # the runner's

    def progress(done: int, total: int) -> None:
        told.append((done, total))
        clock.advance(1.0)  # a page read each second

    with IsolatedRunner(clock=clock) as runner:
        converted = convert_source(
            pdf,
            name="scan.pdf",
            limits=Limits(convert_timeout_s=0.5, ocr_page_timeout_s=3),  # 6 pages × 1 s > 0.5 + 5 s
            ocr=OcrSpec(engine=ScriptedEngine(["A page read slowly."])),
            runner=runner,
            progress=progress,
        )
    assert clock.now > 0.5 + 5  # past the conversion timeout and the runner's backstop
    assert converted.ocr.pages == (1, 2, 3, 4, 5, 6)
    assert told == [(n, 6) for n in range(7)]


def test_a_stuck_page_is_stopped_by_the_worker_timeout() -> None:
    pdf = ocr_images.scanned_pdf([page(PAGE_1), page(PAGE_2)])
    clock = VirtualClock()  # the runner's
    with IsolatedRunner(clock=clock) as runner:
        with pytest.raises(ConversionError) as caught:
            convert_source(
                pdf,
                name="scan.pdf",
                limits=Limits(convert_timeout_s=1, ocr_page_timeout_s=1),
                ocr=OcrSpec(engine=StuckEngine()),
                runner=runner,
                progress=lambda done, total: clock.advance(6.5),  # before page 1, which never ends
            )
        assert runner.pid is None  # the stuck worker was killed
    assert caught.value.reason == "timeout"
    assert "reading a scanned page took longer than 6 s" in str(
        caught.value
    ) and "(0 of 2 pages read)" in str(caught.value)


def test_kb_ingest_on_a_terminal_shows_the_scanned_pages_being_read(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "scan.pdf").write_bytes(ocr_images.scanned_pdf([page(PAGE_1), page(PAGE_2), page(PAGE_1)]))
    with Terminal(tmp_path / "kb", "ingest", str(src), env=subprocess_env(KB_OCR="rapidocr")) as term:
        assert term.finish(timeout_s=180) == 0, term.screen
        drawn, screen = term.drawn, term.screen
    assert all(f"scan.pdf · OCR page {n}/3" in drawn for n in (1, 2))
    assert "1 indexed" in screen and "OCR page" not in screen.splitlines()[-1]


# -- long scans: a total budget, turns, and pages kept across a restart ---------------------------


def small_scan(pages: int) -> bytes:
    """An image-only PDF of small blank pages (the scripted engine "reads" any picture)."""
    from PIL import Image

    return ocr_images.scanned_pdf([Image.new("RGB", (120, 160), "white") for _ in range(pages)], dpi=72)


def test_a_scan_longer_than_the_files_ocr_budget_keeps_what_was_read_and_lists_the_rest() -> None:
    clock = VirtualClock()
    slow = OcrSpec(engine=ClockedEngine(["The pilots meet at nine."], clock, page_s=0.125), clock=clock)
    with IsolatedRunner() as runner:
        converted = convert_source(
            small_scan(60), name="scan.pdf", limits=Limits(ocr_budget_s=1.0), ocr=slow, runner=runner
        )
    read, unread = converted.ocr.pages, converted.ocr.unread_pages
    assert read == tuple(range(1, 9))  # 8 pages × 0.125 s spend the 1 s budget; 60 would take 7.5 s
    assert unread == tuple(range(9, 61))  # every page is either read or listed
    assert converted.markdown.count("The pilots meet at nine.") == len(read)


def test_the_runner_stops_a_worker_that_reports_progress_forever() -> None:
    from tests.ocr_stand_ins import counted_steps

    clock, told = VirtualClock(), []

    def progress(done: int, total: int) -> None:
        told.append(done)
        clock.advance(0.25)  # a step each 0.25 s, well inside the progress timeout

    with IsolatedRunner(clock=clock) as runner, pytest.raises(ConversionError) as caught:
        runner.call(counted_steps, b"", steps=1000, step_s=0, timeout_s=0.5, progress_timeout_s=1.0,
                    total_timeout_s=2.0, on_progress=progress)  # fmt: skip
    assert caught.value.reason == "timeout" and "all one file may have in one go" in str(caught.value)
    assert told == list(range(8)) and clock.now == 2.0  # stopped once the 2 s were spent, not before


def test_a_long_scan_is_read_in_turns_and_a_restart_goes_on_from_the_pages_read(settings) -> None:
    """The turn ends (status later, the file stays); a new Ingestor and worker, as after a restart,
    begin where it stopped; each page is read once in all; the kept pages go once it is indexed."""
    settings = type(settings)(**{**settings.__dict__, "ocr_turn_s": 0.5})
    settings.inbox.mkdir(parents=True)
    scan = settings.inbox / "harbour-ledger.pdf"
    scan.write_bytes(small_scan(24))
    clock = VirtualClock()
    spec = OcrSpec(engine=ClockedEngine(["Ledger entry: two ferries."], clock, page_s=0.125), clock=clock)
    firsts, statuses = [], []
    with Index(settings.index_path) as index:
        for _ in range(20):
            told: list[tuple[int, int]] = []

            def listen(*, name, sha256, stage, done, total, told=told):
                if stage == "ocr":
                    told.append((done, total))

            with IsolatedRunner() as runner:  # a fresh worker each time: nothing carried in memory
                outcome = Ingestor(
                    settings, index, ApproxCounter(), runner=runner, progress=listen, ocr=spec
                ).ingest(scan)
            statuses.append(outcome.status)
            firsts.append(told[0][0])
            if outcome.status != "later":
                break
            assert scan.exists() and outcome.reason == "ocr-paused"
    assert statuses == ["later"] * 5 + ["indexed"]  # turns of 0.5 s: 4 pages × 0.125 s each
    assert firsts == [0, 4, 8, 12, 16, 20]  # never page 1 again
    meta = rawfile.parse(
        (settings.raw / outcome.raw_path.removeprefix("raw/")).read_text(encoding="utf-8"),
        fallback_name="x",
        sha256="",
    ).meta
    assert meta.ocr_pages == "1-24" and meta.ocr_unread_pages is None
    assert list(settings.ocr_pages_dir.glob("*.jsonl")) == []  # the kept pages went with the file


@pytest.mark.parametrize("turn_s", ["0.5", "120"])
def test_the_daemon_indexes_a_note_dropped_behind_a_long_scan_before_the_scan_is_done(
    tmp_path, turn_s
) -> None:
    """The scan's turn ends after the page being read once the note waits (and at the latest at
    KB_OCR_TURN_S): the note does not wait a whole turn."""
    import threading

    from daemon.service import Daemon
    from tests.conftest import make_settings
    from tests.test_daemon import wait_for

    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.2", KB_OCR_TURN_S=turn_s)
    settings.inbox.mkdir(parents=True)
    spec = OcrSpec(engine=ScriptedEngine(["Ledger entry: two ferries."], delay_s=0.1))
    with Index(settings.index_path) as index, IsolatedRunner() as runner:
        daemon = Daemon(settings, Ingestor(settings, index, ApproxCounter(), runner=runner, ocr=spec))
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        assert daemon.started.wait(30)
        try:
            (settings.inbox / "ledger.pdf").write_bytes(small_scan(40))  # 4 s of OCR, in turns of 0.5 s
            wait_for(lambda: any(settings.ocr_pages_dir.glob("*.jsonl")), what="a page of the scan read")
            (settings.inbox / "note.md").write_text("# Note\n\nThe narwhal count was 12.\n")
            assert daemon.wait_idle(60)
        finally:
            daemon.stop()
            thread.join(30)
        finished = {r.path.rsplit("/", 1)[-1]: r.finished_at for r in index.last_ingests(10)}
    assert finished["note.md"] < finished["ledger.pdf"]  # the note did not wait 4 s behind the scan
    assert (settings.processed / "ledger.pdf").exists()


def test_kb_ingest_and_the_bot_say_which_pages_the_budget_left_unread(settings) -> None:
    from bot.media import read_back, reading_text
    from cli.commands.ingest import describe_outcome
    from knowledge.words.catalog import Words

    settings = type(settings)(**{**settings.__dict__, "ocr_budget_s": 1.0})
    settings.inbox.mkdir(parents=True)
    scan = settings.inbox / "ledger.pdf"
    scan.write_bytes(small_scan(12))
    clock = VirtualClock()  # 8 pages × 0.125 s spend the 1 s budget, whatever the machine's speed
    spec = OcrSpec(engine=ClockedEngine(["Ledger entry: two ferries."], clock, page_s=0.125), clock=clock)
    with Index(settings.index_path) as index, IsolatedRunner() as runner:
        outcome = Ingestor(settings, index, ApproxCounter(), runner=runner, ocr=spec).ingest(scan)
    line = describe_outcome(outcome)
    assert line.startswith("indexed ") and line.endswith(
        "; OCR time ran out, pages 9-12 not read (KB_OCR_BUDGET_S)"
    )
    unread = "9-12"
    raw = settings.raw / outcome.raw_path.removeprefix("raw/")
    reply = reading_text(read_back(raw), Words("en"))
    assert f"Pages {unread} were not read: the OCR time for one file ran out" in reply
    chinese = reading_text(read_back(raw), Words("zh-Hant"))
    assert unread in chinese and "OCR" in chinese and "were not read" not in chinese
