"""The ingest pipeline against bad and good inputs: every file converts or lands in failed/ with a reason."""

import json
import os
import random

import pytest

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import WriterLockHeld
from knowledge.ingest.files import unique_name
from knowledge.ingest.lock import WriterLock, holder
from knowledge.ingest.names import is_candidate_name
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests import pdfs
from tests.conftest import make_settings

GBK_TEXT = "朱镕基在北京会见了代表团。这份报告讨论了经济改革和对外开放的政策，以及未来五年的发展目标。" * 3


@pytest.fixture(scope="module")
def runner():
    """The real isolated converter process, shared by the tests of this module."""
    with IsolatedRunner(memory_bytes=1024 * 2**20) as runner:
        yield runner


@pytest.fixture
def kb(settings, runner):
    with Index(settings.index_path) as index:
        yield Ingestor(settings, index, ApproxCounter(), runner=runner)


def drop(settings, name: str, data: bytes):
    settings.inbox.mkdir(parents=True, exist_ok=True)
    path = settings.inbox / name
    path.write_bytes(data)
    return path


def snapshot(index: Index):
    return (
        index.conn.execute("SELECT id, raw_sha256 FROM documents ORDER BY id").fetchall(),
        index.conn.execute("SELECT id, text_sha256 FROM chunks ORDER BY id").fetchall(),
    )


def error_record(settings, name: str) -> dict:
    return json.loads((settings.failed / f"{name}.error.json").read_text())


def nested_divs(depth: int) -> bytes:
    return (
        b"<html><body>"
        + b"<div>" * depth
        + b"deep text survives here"
        + b"</div>" * depth
        + b"</body></html>"
    )


BAD = [
    ("empty.txt", lambda: b"", "empty"),
    ("junk.pdf", lambda: random.Random(1).randbytes(4096), {"binary", "no-content"}),
    ("truncated.pdf", lambda: pdfs.text_pdf([["some text"]])[:120], "pdf-malformed"),
    ("locked.pdf", lambda: pdfs.encrypted(pdfs.text_pdf([["secret"]]), user_password="pw"), "pdf-encrypted"),
    (
        "scan.pdf",
        lambda: pdfs.one_page(pdfs.DRAW_IMAGE, resources=pdfs.IMAGE),
        {"pdf-no-text", "pdf-malformed"},
    ),
    ("big.txt", lambda: b"a" * (25 * 1024 * 1024), "too-large"),
    (
        "app.html",
        lambda: (
            b"<html><head><script src=app.js></script></head><body><div id=root></div>"
            b"<noscript>You need to enable JavaScript to run this app.</noscript></body></html>"
        ),
        "requires-javascript",
    ),
    ("archive.docx", lambda: b"PK\x03\x04" + bytes(200), "binary"),
]


@pytest.mark.parametrize(("name", "build", "reason"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_lands_in_failed_with_its_reason_and_changes_nothing(settings, kb, name, build, reason):
    good = drop(settings, "good.md", b"# Good\n\nThe index already holds this.\n")
    assert kb.ingest(good).status == "indexed"
    before = snapshot(kb.index)
    data = build()
    outcome = kb.ingest(drop(settings, name, data))
    assert outcome.status == "failed"
    assert outcome.reason in (reason if isinstance(reason, set) else {reason})
    assert (settings.failed / name).read_bytes() == data  # the original is kept, byte for byte
    record = error_record(settings, name)
    assert record["reason"] == outcome.reason and record["stage"] in ("read", "convert") and record["message"]
    assert record["exception"] and record["time"]
    assert snapshot(kb.index) == before
    assert not (settings.inbox / name).exists()
    assert kb.index.last_ingests(1)[0].status == "failed"


def test_gbk_text_without_declaration_is_decoded(settings, kb):
    outcome = kb.ingest(drop(settings, "report.txt", GBK_TEXT.encode("gbk")))
    assert outcome.status == "indexed"
    assert "朱镕基" in search(kb.index, "朱镕基 经济改革", k=1)[0].text


def test_nul_bytes_are_removed_and_the_words_stay_findable(settings, kb):
    kb.ingest(drop(settings, "nul.txt", b"alpha\x00beta gamma\nsecond line with delta\x00\x00epsilon\n"))
    raw = next(settings.raw.glob("nul-*.md")).read_text()
    assert "\x00" not in raw
    hit = search(kb.index, "beta", k=1)[0]
    assert "beta gamma" in hit.text and "\x00" not in hit.text


def test_a_5mb_single_line_is_chunked(settings, kb):
    line = ("The quick brown fox jumps over the lazy dog. " * 120_000)[:5_000_000] + "Unique zebra ending."
    outcome = kb.ingest(drop(settings, "long.txt", line.encode()))
    assert outcome.status == "indexed" and outcome.chunks > 1000
    hit = search(kb.index, "unique zebra ending", k=1)[0]
    assert "zebra" in hit.text and hit.start_line == hit.end_line


def test_html_nested_100000_divs_deep_converts(settings, kb):
    outcome = kb.ingest(drop(settings, "deep.html", nested_divs(100_000)))
    assert outcome.status == "indexed"
    assert "deep text survives" in search(kb.index, "deep text survives", k=1)[0].text


@pytest.mark.parametrize(
    "name", ["my notes.md", "🙂 emoji 🙂.md", "a..b.md", "..hidden-ish.md", "-dash.md", "ü-ä.md"]
)
def test_awkward_file_names(settings, kb, name):
    outcome = kb.ingest(drop(settings, name, f"# Notes\n\nContent of {name!r} here.\n".encode()))
    assert outcome.status == "indexed"
    assert (settings.processed / name).is_file()
    raw = settings.raw / outcome.raw_path.removeprefix("raw/")
    assert raw.parent == settings.raw and raw.is_file()
    assert "/" not in raw.name and not raw.name.startswith(".")


def test_pdf_and_html_convert_with_citations(settings, kb):
    pdf = kb.ingest(
        drop(settings, "paper.pdf", pdfs.text_pdf([["Intro page"], ["Results on page two"]], title="Paper"))
    )
    assert pdf.status == "indexed" and pdf.title == "Paper"
    html = (
        b"<html><head><title>Guide</title></head><body><nav>Home | Menu</nav><main><h1>Guide</h1>"
        b"<p>Install the widget with pip.</p></main><footer>Copyright</footer></body></html>"
    )
    page = kb.ingest(drop(settings, "guide.html", html))
    assert page.title == "Guide"
    hit = search(kb.index, "results page two", k=1)[0]
    assert hit.source_name == "paper.pdf" and "Results on page two" in hit.text
    raw = (settings.raw / pdf.raw_path.removeprefix("raw/")).read_text().split("\n")
    assert "Results on page two" in "\n".join(raw[hit.start_line - 1 : hit.end_line])
    assert "Menu" not in (settings.raw / page.raw_path.removeprefix("raw/")).read_text()


def test_front_matter_and_deterministic_raw_bytes(settings, kb, tmp_path):
    data = b"# Title here\n\nBody text.\n"
    outcome = kb.ingest(drop(settings, "a.md", data))
    raw = (settings.raw / outcome.raw_path.removeprefix("raw/")).read_text()
    assert raw.startswith(
        '---\ntitle: "Title here"\nsource_name: "a.md"\nsource_snapshot: "inbox/processed/a.md"\n'
    )
    assert 'converter: "markdown"' in raw and "source_url" not in raw
    other = make_settings(tmp_path / "second")
    with Index(other.index_path) as index:
        second = Ingestor(other, index, ApproxCounter()).ingest(drop(other, "a.md", data))
    assert (other.raw / second.raw_path.removeprefix("raw/")).read_bytes() == raw.encode()
    assert second.doc_id == outcome.doc_id


def test_a_sidecar_gives_the_source_url_and_travels_with_the_file(settings, kb):
    path = drop(
        settings,
        "page.html",
        b"<html><head><title>T</title></head><body><p>Hello from the web, a page with enough words to keep.</p></body></html>",
    )
    (settings.inbox / "page.html.source.json").write_text(
        json.dumps({"source_url": "https://example.org/page", "charset": "utf-8"})
    )
    outcome = kb.ingest(path)
    assert (settings.processed / "page.html.source.json").is_file()
    assert search(kb.index, "hello web", k=1)[0].source_url == "https://example.org/page"
    assert 'source_url: "https://example.org/page"' in (settings.raw / outcome.raw_path[4:]).read_text()


def test_a_sidecar_with_a_bad_url_is_not_trusted(settings, kb):
    path = drop(settings, "x.md", b"# X\n\ntext\n")
    (settings.inbox / "x.md.source.json").write_text(json.dumps({"source_url": "file:///etc/passwd"}))
    kb.ingest(path)
    assert search(kb.index, "text", k=1)[0].source_url is None


def test_markdown_claiming_a_source_in_its_front_matter_changes_no_provenance(settings, kb):
    kb.ingest(
        drop(settings, "c.md", b"---\ntitle: Claimed\nsource_url: https://evil.example/\n---\n# C\n\nbody\n")
    )
    hit = search(kb.index, "body", k=1)[0]
    assert hit.title == "Claimed" and hit.source_url is None


def test_duplicates_are_recorded_not_indexed_twice(settings, kb):
    first = kb.ingest(drop(settings, "a.pdf", pdfs.text_pdf([["same bytes"]])))
    second = kb.ingest(drop(settings, "a (1).pdf", pdfs.text_pdf([["same bytes"]])))
    assert second.status == "duplicate" and second.duplicate_of == first.doc_id
    assert kb.index.document_count() == 1
    assert (settings.processed / "a (1).pdf").is_file()
    assert kb.index.last_ingests(1)[0].status == "duplicate"


def test_a_file_from_elsewhere_ingested_again_is_not_copied_again(settings, kb, tmp_path):
    from cli.commands.ingest import describe_outcome

    outside = tmp_path / "elsewhere" / "lease.md"
    outside.parent.mkdir()
    outside.write_bytes(b"# Lease\n\nThe rent is 1,200 a month, due on the 5th.\n")
    assert kb.ingest(outside).status == "indexed"
    for _ in range(3):  # kb ingest ~/Documents run every day
        again = kb.ingest(outside)
        assert again.status == "duplicate" and again.kept_at is None
    assert describe_outcome(again).endswith("('Lease'), not copied again")
    assert sorted(p.name for p in settings.processed.iterdir()) == ["lease.md"]
    assert outside.read_bytes().startswith(b"# Lease")  # the owner's file is left as it was


def test_same_name_different_content_keeps_both(settings, kb):
    kb.ingest(drop(settings, "a.md", b"# One\n\nfirst\n"))
    kb.ingest(drop(settings, "a.md", b"# Two\n\nsecond\n"))
    assert (settings.processed / "a.md").read_bytes() == b"# One\n\nfirst\n"
    assert (settings.processed / "a-2.md").read_bytes() == b"# Two\n\nsecond\n"
    assert kb.index.document_count() == 2


def test_files_from_outside_the_inbox_are_copied_not_moved(settings, kb, tmp_path):
    outside = tmp_path / "mine.md"
    outside.write_bytes(b"# Mine\n\nkeep me\n")
    assert kb.ingest(outside).status == "indexed"
    assert outside.read_bytes() == b"# Mine\n\nkeep me\n"
    assert (settings.processed / "mine.md").read_bytes() == outside.read_bytes()


def test_symlinks_and_fifos_are_skipped_without_blocking(settings, kb, tmp_path):
    target = tmp_path / "secret.txt"
    target.write_text("do not read")
    settings.inbox.mkdir(parents=True, exist_ok=True)
    (settings.inbox / "link.txt").symlink_to(target)
    os.mkfifo(settings.inbox / "pipe.md")
    assert kb.ingest(settings.inbox / "link.txt").status == "skipped"
    assert kb.ingest(settings.inbox / "pipe.md").status == "skipped"
    assert kb.index.document_count() == 0 and target.read_text() == "do not read"


def test_reindex_rebuilds_identical_ids_and_hashes(settings, kb):
    for n in range(5):
        kb.ingest(drop(settings, f"d{n}.md", f"# Doc {n}\n\n".encode() + b"Some words here. " * 200))
    before = snapshot(kb.index)
    settings.index_path.unlink()
    for suffix in ("-wal", "-shm"):
        settings.index_path.with_name(settings.index_path.name + suffix).unlink(missing_ok=True)
    with Index(settings.index_path) as index:
        docs, chunks = Ingestor(settings, index, ApproxCounter()).reindex()
        assert snapshot(index) == before and docs == 5 and chunks == len(before[1])


def test_reindex_replaces_inside_the_live_database(settings, kb):
    kb.ingest(drop(settings, "d.md", b"# D\n\nalpha text\n"))
    raw = next(settings.raw.glob("d-*.md"))
    raw.write_text(raw.read_text().replace("alpha", "omega"))
    with Index(settings.index_path, readonly=True) as reader:
        kb.reindex()
        assert search(reader, "omega", k=1) and not search(reader, "alpha", k=1)
    assert kb.index.integrity_errors() == []


def test_writer_lock_refuses_a_second_writer_and_names_the_holder(settings):
    with WriterLock(settings.lock_path, role="kb daemon"):
        assert holder(settings.lock_path) == f"pid {os.getpid()}, kb daemon"
        with pytest.raises(WriterLockHeld, match=f"pid {os.getpid()}, kb daemon"):
            WriterLock(settings.lock_path, role="kb ingest").acquire(wait_s=0.2)
    assert holder(settings.lock_path) is None


@pytest.mark.parametrize(
    ("name", "ok"),
    [("a.pdf", True), ("Rechnung.pdf", True), ("a..pdf", True), ("_.pdf", True), (".a.pdf", False), ("._x", False),
     ("x.pdf.part", False), ("x.crdownload", False), ("~$report.docx", False), (".DS_Store", False),
     ("Thumbs.db", False), ("a.md.source.json", False), ("a.md.error.json", False), ("notes.md~", False),
     (".notes.md.swp", False), ("x.tmp", False)],
)  # fmt: skip
def test_candidate_names(name, ok):
    assert is_candidate_name(name) is ok


def test_unique_name(tmp_path):
    (tmp_path / "a.md").write_text("x")
    (tmp_path / "b").write_text("x")
    (tmp_path / "c.md.error.json").write_text("x")
    assert unique_name(tmp_path, "a.md") == "a-2.md"
    assert unique_name(tmp_path, "b") == "b-2"
    assert unique_name(tmp_path, "c.md") == "c.md"  # a stray error record does not hold the name
    (tmp_path / "d.md.source.json").write_text("x")
    assert unique_name(tmp_path, "d.md") == "d-2.md"
    assert unique_name(tmp_path, "new.md") == "new.md"


def test_a_pdf_taking_too_long_is_stopped_and_filed(tmp_path, runner):
    slow = make_settings(tmp_path / "slow", KB_CONVERT_TIMEOUT_S="0.1", KB_PDF_MAX_PAGES="5000")
    with Index(slow.index_path) as index:
        ingestor = Ingestor(slow, index, ApproxCounter(), runner=runner)
        outcome = ingestor.ingest(
            drop(slow, "long.pdf", pdfs.text_pdf([[f"page {n} text"] for n in range(3000)]))
        )
    assert outcome.status == "failed" and outcome.reason == "timeout"
    assert "KB_CONVERT_TIMEOUT_S" in outcome.message
    assert error_record(slow, "long.pdf")["reason"] == outcome.reason


def test_a_pdf_over_the_page_limit_is_refused(tmp_path, runner):
    small = make_settings(tmp_path / "small", KB_PDF_MAX_PAGES="3")
    with Index(small.index_path) as index:
        outcome = Ingestor(small, index, ApproxCounter(), runner=runner).ingest(
            drop(small, "four.pdf", pdfs.text_pdf([["a"], ["b"], ["c"], ["d"]]))
        )
    assert outcome.reason == "pdf-too-many-pages" and "4 pages" in outcome.message


def test_a_word_of_a_thousand_ys_is_indexed_searched_and_reindexed(settings, kb):
    word = "y" * 1_100 + "ed"
    outcome = kb.ingest(drop(settings, "ys.md", f"# Ys\n\nThe word {word} and walruses.\n".encode()))
    assert outcome.status == "indexed"
    assert search(kb.index, word, k=1)[0].title == "Ys"
    assert kb.reindex() == (1, 1)
    assert kb.reconcile_raw()["unchanged"] == 1


def test_a_raw_name_clash_never_overwrites_another_document(settings, kb):
    from knowledge.ingest.raw import raw_name, sha256_hex

    first = b"# First\n\nThe first document is about otters.\n"
    second = b"# Second\n\nThe second document is about beavers.\n"
    kb.ingest(drop(settings, "notes.md", first))
    # A second source whose raw name (slug + 8 hex digits) is already taken by another document:
    # rename the first document's raw file to the name the second one will ask for.
    taken = settings.raw / raw_name("notes.md", sha256_hex(second))
    (settings.raw / raw_name("notes.md", sha256_hex(first))).rename(taken)
    kb.reconcile_raw()
    before = taken.read_bytes()
    outcome = kb.ingest(drop(settings, "notes.md", second))
    assert outcome.status == "indexed" and outcome.raw_path != f"raw/{taken.name}"
    assert taken.read_bytes() == before  # the first document is untouched
    titles = sorted(d.title for d in kb.index.documents())
    assert titles == ["First", "Second"]
    assert search(kb.index, "otters", k=1)[0].title == "First"
    assert search(kb.index, "beavers", k=1)[0].title == "Second"


@pytest.mark.parametrize(
    "name",
    [
        "ก" * 82 + ".md",
        "中" * 84 + ".md",
        "한" * 83 + ".txt",
        "a" * 251 + ".md",
        "ก" * 40 + "a" * 130 + ".md",
    ],
)
def test_names_of_any_script_up_to_255_bytes_are_indexed_kept_and_failed_cleanly(settings, kb, name):
    assert len(name.encode()) <= 255
    outcome = kb.ingest(drop(settings, name, b"# Long\n\nA long named file about manatees.\n"))
    assert outcome.status == "indexed" and outcome.kept_at.is_file()
    again = kb.ingest(drop(settings, name, b"# Long\n\nA long named file about manatees.\n"))
    assert again.status == "duplicate" and again.kept_at.is_file()
    failed = kb.ingest(drop(settings, name, b""))
    assert failed.status == "failed" and failed.kept_at.is_file()
    assert (
        json.loads(failed.kept_at.with_name(failed.kept_at.name + ".error.json").read_text())["reason"]
        == "empty"
    )
    assert not list(settings.inbox.glob("*.*.md"))


def test_failed_records_carry_the_hash_of_the_bytes_that_failed(tmp_path):
    from knowledge.ingest.raw import sha256_hex

    settings = make_settings(tmp_path / "kb", KB_MAX_SOURCE_MB="0.001")
    big, empty = b"x" * 4096, b""
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        assert ingestor.ingest(drop(settings, "big.md", big)).reason == "too-large"
        assert ingestor.ingest(drop(settings, "empty.md", empty)).reason == "empty"
        records = {r.path.rsplit("/", 1)[-1]: r for r in index.last_ingests()}
    assert records["big.md"].sha256 == sha256_hex(big) and records["empty.md"].sha256 == sha256_hex(empty)


def test_a_huge_file_is_refused_without_being_read(settings):
    """A sparse 1 TiB file (no disk used): refused from its size; hashing it would take twenty minutes."""
    settings.inbox.mkdir(parents=True, exist_ok=True)
    huge = settings.inbox / "huge.txt"
    with open(huge, "wb") as fh:
        fh.truncate(2**40)
    with Index(settings.index_path) as index:
        outcome = Ingestor(settings, index, ApproxCounter()).ingest(huge)
        record = index.conn.execute("SELECT status, sha256 FROM ingests").fetchone()
    assert outcome.reason == "too-large" and "1048576.0 MiB" in outcome.message
    assert record == ("failed", None)  # no hash: its bytes were never read
    assert (settings.failed / "huge.txt").exists()  # kept, as every refused original
