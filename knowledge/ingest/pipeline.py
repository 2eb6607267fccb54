"""The ingest pipeline: a source file in, a raw Markdown file and indexed chunks out.

Per file, in this order (a crash between steps loses nothing: the next start finds either
the original still in the inbox, or a raw file that is indexed again):

1. check it is a regular file within the size limit, read it, hash it;
2. the same bytes already indexed → record a duplicate, keep the original, stop;
3. convert (with its ``NAME.source.json`` sidecar, when there is one);
4. write ``raw/<slug>-<hash8>.md`` atomically;
5. keep the original (and sidecar) under ``processed/``;
6. chunk the raw file and replace the document's rows in one transaction;
7. record the ingest.

A failure at any step leaves the index as it was, puts the original under ``failed/`` next
to ``NAME.error.json`` (stage, reason, exception type, time) and is recorded too.

Photos and scanned PDF pages are read by OCR during step 3; a ``progress`` callback given to the
Ingestor hears about every page read (stage ``ocr``, pages done of total) and, once the file is
done or failed, a last call with stage ``finished``.
Originals are moved when they sit in the inbox and copied when they come from elsewhere:
nothing the owner gave kb is ever deleted.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import structlog

from knowledge.config import Settings
from knowledge.convert import Converted, Limits, convert_source, pagestore
from knowledge.convert.isolate import InternalError, IsolatedRunner
from knowledge.convert.ocr import OcrSpec, ocr_spec, ocr_warnings, parse_langs
from knowledge.errors import ConversionError, ConversionInterrupted, IndexVanished, KbError
from knowledge.ingest import raw as rawfile
from knowledge.ingest.chunking import chunk_lines
from knowledge.ingest.names import readable_name, shorten_name, split_ext, stored_path
from knowledge.ingest.safepath import (
    LinkRefused,
    file_identity,
    link_below,
    open_beneath,
    parts_below,
    walk_files,
)
from knowledge.model.tokenizer import TokenCounter
from knowledge.store.analysis import ANALYZER_VERSION
from knowledge.store.index import Index
from knowledge.store.records import ChunkRecord, DocumentRecord, IngestRecord
from knowledge.text import clean_text

log = structlog.get_logger()

SIDECAR_SUFFIX = ".source.json"
ERROR_SUFFIX = ".error.json"
# A file refused as too large is hashed (for whoever waits for its record) only up to this size:
# the bot and web imports send at most a few tens of MB; a sparse 16 TiB file would take hours.
HASH_REFUSED_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Outcome:
    """What happened to one source file."""

    source: Path
    status: str  # indexed | duplicate | failed | skipped | retry | later (a long scan's turn ended)
    doc_id: str | None = None
    title: str | None = None
    chunks: int = 0
    raw_path: str | None = None
    kept_at: Path | None = None
    duplicate_of: str | None = None
    stage: str | None = None
    reason: str | None = None
    message: str | None = None
    unread_pages: str | None = None  # scanned pages left unread: the file's OCR time ran out ("421-2000")
    ms: float = 0.0

    @property
    def is_ok(self) -> bool:
        return self.status in ("indexed", "duplicate", "skipped")


class IngestProgress(Protocol):
    """Told how far the file in hand has got: stage ``ocr`` (pages read of total), then ``finished``."""

    def __call__(self, *, name: str, sha256: str, stage: str, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class Sidecar:
    """Trusted fields of a ``NAME.source.json`` written by kb (a web import, the bot)."""

    source_url: str | None
    charset: str | None
    origin_type: str | None = None  # something kept from the chat: where it came from…
    origin_name: str | None = None
    origin_date: str | None = None
    comment: str | None = None  # …and the comment or caption that came with it


class _Failure(Exception):
    def __init__(self, stage: str, reason: str, message: str, exc: BaseException | None = None) -> None:
        super().__init__(message)
        self.stage, self.reason, self.message = stage, reason, message
        self.exc_type = type(exc).__name__ if exc is not None else "ConversionError"
        self.sha256: str | None = None
        self.is_transient = exc is not None and is_transient(exc)


# errno values that say "try again later" rather than "this file is bad".
_TRANSIENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EBUSY, errno.EAGAIN, errno.ENOSPC, errno.EDQUOT,
                               errno.EIO, errno.ETXTBSY, errno.EMFILE, errno.ENFILE})  # fmt: skip


def is_transient(exc: BaseException) -> bool:
    """A locked or unreadable file, a full disk, a busy database: worth retrying later."""
    if isinstance(exc, OSError):
        return exc.errno in _TRANSIENT_ERRNOS
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return any(word in text for word in ("locked", "busy", "disk", "full", "i/o"))
    return isinstance(exc.__cause__, OSError | sqlite3.OperationalError) and is_transient(exc.__cause__)


def utc_now() -> datetime:
    """The current time in UTC (the default clock)."""
    return datetime.now(UTC)


class Ingestor:
    """Runs the pipeline for one knowledge base; the caller holds the writer lock.

    ``ocr`` overrides the OCR settings (KB_OCR, KB_OCR_LANGS, KB_OCR_DPI); ``progress`` hears how far
    a file read by OCR has got (see IngestProgress).
    """

    def __init__(
        self,
        settings: Settings,
        index: Index,
        counter: TokenCounter,
        *,
        runner: IsolatedRunner | None = None,
        clock: Callable[[], datetime] = utc_now,
        progress: IngestProgress | None = None,
        ocr: OcrSpec | None = None,
    ) -> None:
        self.settings = settings
        self.index = index
        self.counter = counter
        self.runner = runner
        self.clock = clock
        self.progress = progress
        self.limits = Limits(
            max_source_bytes=settings.max_source_bytes,
            pdf_max_pages=settings.pdf_max_pages,
            convert_timeout_s=settings.convert_timeout_s,
            ocr_page_timeout_s=settings.ocr_page_timeout_s,
            ocr_budget_s=settings.ocr_budget_s,
            ocr_turn_s=settings.ocr_turn_s,
        )
        self.ocr = ocr_spec(settings) if ocr is None else ocr
        if self.ocr.engine is None:
            for note in ocr_warnings(self.ocr, parse_langs(settings.ocr_langs)[1]):
                log.warning("ocr.limited", reason=note)
        self._reported: tuple[str, str] | None = None  # (name, sha256) of the file whose progress was told
        for folder in (settings.inbox, settings.processed, settings.failed, settings.raw):
            folder.mkdir(parents=True, exist_ok=True)
        self._inbox = settings.inbox.resolve()
        pagestore.drop_stale(settings.ocr_pages_dir)
        pagestore.mark_waiting(settings.ocr_pages_dir, False)  # a marker a killed daemon left behind
        self._index_identity = file_identity(settings.index_path)
        if index.meta("tokenizer") is None:
            index.set_meta("tokenizer", counter.name)

    # -- sources ----------------------------------------------------------------------------

    def ingest(self, path: Path, *, may_retry: bool = False) -> Outcome:
        """Run the whole pipeline on one file and report what happened.

        With ``may_retry``, a transient failure (locked file, full disk, busy database) leaves
        the file where it is and returns status ``retry``; the caller tries again later.
        """
        self.check_index()
        t0 = time.perf_counter()
        started = self._now()
        structlog.contextvars.bind_contextvars(file=readable_name(path.name))
        try:
            outcome = self._ingest(path, started)
        except ConversionInterrupted:
            self._finish_progress()
            raise  # kb is stopping: the file stays where it is and is taken again on the next start
        except Exception as exc:
            if isinstance(exc, _Failure):
                failure = exc
            else:  # a bug in kb, or a database error: the file must still end somewhere, never in limbo
                log.exception(
                    "ingest.internal_error",
                    file=readable_name(path.name),
                    error=f"{type(exc).__name__}: {exc}",
                )
                failure = _Failure("ingest", "internal-error", _internal_message(exc), exc)
            if may_retry and failure.is_transient:
                outcome = Outcome(
                    path, "retry", stage=failure.stage, reason=failure.reason, message=failure.message
                )
            else:
                outcome = self._fail(path, failure, started)
        finally:
            structlog.contextvars.unbind_contextvars("file")
        self._finish_progress()
        ms = round((time.perf_counter() - t0) * 1000, 1)
        outcome = Outcome(**{**outcome.__dict__, "ms": ms})
        _log_outcome(outcome)
        return outcome

    def _root_of(self, path: Path) -> Path:
        """The folder a file was found under: the inbox for inbox files, else the file's own folder."""
        path = path.absolute()
        for inbox in (self.settings.inbox.absolute(), self._inbox):
            if parts_below(inbox, path):
                return inbox
        return path.parent

    def _ingest(self, path: Path, started: str) -> Outcome:
        root = self._root_of(path)
        link = link_below(root, path.absolute())
        if link is not None:
            return _link_skipped(path, link)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return Outcome(path, "skipped", reason="missing", message="the file is gone")
        if not stat.S_ISREG(st.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            return Outcome(
                path,
                "skipped",
                reason="not-regular",
                message=f"{readable_name(path.name)} is {what}; kb does not follow it",
            )
        if st.st_size > self.limits.max_source_bytes:
            failure = _Failure(
                "read",
                "too-large",
                f"the file is {st.st_size / 2**20:.1f} MiB, over the {self.limits.max_source_bytes / 2**20:g} MiB"
                " limit (KB_MAX_SOURCE_MB)",
            )
            if (
                st.st_size <= HASH_REFUSED_MAX_BYTES
            ):  # so a waiter (the bot, a hand-off) can tell its own file;
                failure.sha256 = _hash_regular(root, path.absolute())  # a huge one no waiter sent is not read
            raise failure
        try:
            data = read_regular(root, path.absolute(), self.limits.max_source_bytes)
        except LinkRefused as exc:
            return _link_skipped(path, exc.part)
        except OSError as exc:
            raise _Failure("read", "unreadable", f"cannot read the file: {exc.strerror or exc}", exc) from exc
        sha = rawfile.sha256_hex(data)
        try:
            return self._ingest_bytes(path, data, sha, root, started)
        except _Failure as failure:
            failure.sha256 = sha  # the record says which bytes failed, so a waiter can tell its own file
            raise

    def _ingest_bytes(self, path: Path, data: bytes, sha: str, root: Path, started: str) -> Outcome:
        dup = self.index.document_by_source_sha256(sha)
        if dup is not None:
            kept = self._keep(path, self.settings.processed)
            self.index.record_ingest(
                IngestRecord(
                    stored_path(path),
                    sha,
                    "duplicate",
                    started,
                    self._now(),
                    doc_id=dup.id,
                    duplicate_of=dup.id,
                )
            )
            return Outcome(
                path, "duplicate", doc_id=dup.id, title=dup.title, kept_at=kept, duplicate_of=dup.id
            )
        sidecar = read_sidecar(sidecar_path(path), root=root)

        def report(done: int, total: int) -> None:
            self._report(readable_name(path.name), sha, done, total)

        pages = pagestore.page_store(self.settings.ocr_pages_dir, sha, self.ocr)
        try:
            converted = convert_source(
                data,
                name=readable_name(path.name),
                limits=self.limits,
                declared_charset=sidecar.charset,
                source_url=sidecar.source_url,
                runner=self.runner,
                ocr=self.ocr,
                progress=report,
                pages=pages,
            )
        except ConversionError as exc:
            if exc.reason == "ocr-paused":  # not a failure: the pages read are kept, the rest later
                return Outcome(path, "later", stage="convert", reason=exc.reason, message=str(exc))
            pages.remove()
            raise self._conversion_failure(path, exc) from exc
        except ConversionInterrupted:
            raise  # the pages read so far are kept for the next start
        except Exception as exc:  # a converter run in-process (no runner) failed unexpectedly
            pages.remove()
            log.exception(
                "ingest.internal_error", file=readable_name(path.name), error=f"{type(exc).__name__}: {exc}"
            )
            raise _Failure("convert", "internal-error", _internal_message(exc), exc) from exc
        # What a damaged file yields may hold lone surrogates (a CMap mapping a glyph to U+D800):
        # made writable once, here, for the raw file, the index and the logs.
        converted = replace(
            converted, title=clean_text(converted.title), markdown=clean_text(converted.markdown)
        )
        _log_ocr(readable_name(path.name), converted)
        outcome = self._store(path, data, sha, converted, sidecar, started)
        pages.remove()
        return outcome

    def _conversion_failure(self, path: Path, exc: ConversionError) -> _Failure:
        if isinstance(exc, InternalError):
            log.error(
                "ingest.internal_error", file=readable_name(path.name), error=str(exc), traceback=exc.details
            )
        return _Failure("convert", exc.reason, str(exc), exc)

    def _report(self, name: str, sha: str, done: int, total: int) -> None:
        """Pass OCR progress on; a failure to publish it never fails the file."""
        if self.progress is None:
            return
        self._reported = (name, sha)
        try:
            self.progress(name=name, sha256=sha, stage="ocr", done=done, total=total)
        except OSError as exc:
            log.warning("ingest.progress_failed", file=name, error=str(exc))

    def _finish_progress(self) -> None:
        """Tell the progress listener the file it heard about is done (or failed, or put back)."""
        if self.progress is None or self._reported is None:
            return
        (name, sha), self._reported = self._reported, None
        try:
            self.progress(name=name, sha256=sha, stage="finished", done=0, total=0)
        except OSError as exc:
            log.warning("ingest.progress_failed", file=name, error=str(exc))

    def _store(
        self, path: Path, data: bytes, sha: str, converted: Converted, sidecar: Sidecar, started: str
    ) -> Outcome:
        processed_name = unique_name(self.settings.processed, readable_name(path.name))
        ocr = converted.ocr
        meta = rawfile.RawMeta(
            title=converted.title,
            source_name=readable_name(path.name),
            source_sha256=sha,
            converter=converted.converter,
            source_snapshot=f"inbox/processed/{processed_name}",
            source_url=sidecar.source_url,
            author=converted.author,
            published=converted.published,
            ocr_engine=ocr.engine if ocr else None,
            ocr_confidence=f"{ocr.confidence:.2f}" if ocr and ocr.confidence is not None else None,
            ocr_pages=rawfile.page_ranges(ocr.pages) if ocr and ocr.pages else None,
            ocr_illegible_pages=rawfile.page_ranges(ocr.illegible_pages)
            if ocr and ocr.illegible_pages
            else None,
            ocr_unread_pages=rawfile.page_ranges(ocr.unread_pages) if ocr and ocr.unread_pages else None,
            origin_type=sidecar.origin_type,
            origin_name=sidecar.origin_name,
            origin_date=sidecar.origin_date,
            comment=sidecar.comment,
        )
        text = rawfile.render(meta, converted.markdown)
        try:
            raw_rel = "raw/" + self._claim_raw(readable_name(path.name), sha, text.encode("utf-8"))
        except OSError as exc:
            raw_rel = "raw/" + rawfile.raw_name(readable_name(path.name), sha)
            raise _Failure(
                "store", "write-failed", f"cannot write {raw_rel}: {exc.strerror or exc}", exc
            ) from exc
        raw_path = self.settings.raw / raw_rel.removeprefix("raw/")
        try:
            kept = self._keep(path, self.settings.processed, name=processed_name)
            doc_id, chunks = self.index_raw(raw_rel, text)
        except (OSError, KbError, ValueError, sqlite3.Error) as exc:
            if self.index.document(rawfile.document_id(raw_rel)) is None:
                raw_path.unlink(missing_ok=True)
            processed = self.settings.processed / processed_name
            if processed.exists() and not path.exists():
                os.replace(processed, path)  # put the original back, so the failure path can file it
            raise _Failure("index", "index-failed", f"cannot index the document: {exc}", exc) from exc
        self.index.record_ingest(
            IngestRecord(
                stored_path(path), sha, "indexed", started, self._now(), doc_id=doc_id, chunks=chunks
            )
        )
        return Outcome(
            path, "indexed", doc_id=doc_id, title=meta.title, chunks=chunks, raw_path=raw_rel, kept_at=kept,
            unread_pages=meta.ocr_unread_pages,
        )  # fmt: skip

    def _claim_raw(self, source_name: str, sha: str, data: bytes) -> str:
        """Write the raw file under the first of its names that is free or holds this same source.

        A name held by another document (a slug and 8 hex digits can be made to clash) is never
        written over: the next, longer name is taken instead.
        """
        for name in rawfile.raw_names(source_name, sha):
            dest = self.settings.raw / name
            if not os.path.lexists(dest):
                if write_new(dest, data, staging=self.settings.staging):
                    return name
            elif self._raw_source_sha256(name) == sha:
                write_atomic(dest, data, staging=self.settings.staging)
                return name
            log.warning("raw.name_taken", file=name, source=source_name)
        raise OSError(errno.EEXIST, f"no free raw file name for {source_name}")

    def _raw_source_sha256(self, name: str) -> str | None:
        try:
            text = self.read_raw(name).decode("utf-8", errors="replace")
        except OSError:
            return None
        return rawfile.parse(text, fallback_name=name, sha256="").meta.source_sha256 or None

    def _fail(self, path: Path, failure: _Failure, started: str) -> Outcome:
        kept: Path | None = None
        if path.exists() or path.is_symlink():
            name = unique_name(self.settings.failed, readable_name(path.name))
            record = {
                "file": readable_name(path.name),
                "stage": failure.stage,
                "reason": failure.reason,
                "message": failure.message,
                "exception": failure.exc_type,
                "time": self._now(),
            }
            try:
                # The record first: a crash between the two leaves the original in the inbox, to be
                # tried again, rather than an original in failed/ without its reason.
                write_atomic(
                    self.settings.failed / (name + ERROR_SUFFIX),
                    json.dumps(record, indent=2).encode(),
                    staging=self.settings.staging,
                )
                kept = self._keep(path, self.settings.failed, name=name)
            except OSError as exc:
                log.error("ingest.quarantine_failed", file=readable_name(path.name), error=str(exc))
        self.record(
            IngestRecord(
                stored_path(path),
                failure.sha256,
                "failed",
                started,
                self._now(),
                stage=failure.stage,
                error=failure.message,
            )
        )
        return Outcome(
            path, "failed", kept_at=kept, stage=failure.stage, reason=failure.reason, message=failure.message
        )

    def record(self, record: IngestRecord) -> None:
        """Append an ingest record; a busy database must not turn a done file into a failure."""
        try:
            self.index.record_ingest(record)
        except sqlite3.Error as exc:
            log.error(
                "ingest.record_failed", file=Path(record.path).name, status=record.status, error=str(exc)
            )

    def _keep(self, path: Path, folder: Path, *, name: str | None = None) -> Path:
        """Move an inbox file (copy any other) and its sidecar into folder, never overwriting; a name
        that is not UTF-8 is kept under its readable form."""
        name = name or unique_name(folder, readable_name(path.name))
        dest = folder / name
        is_inbox = _is_within(path, self._inbox)
        transfer = os.replace if is_inbox else _copy_no_follow
        transfer(path, dest)
        side = sidecar_path(path)
        if is_regular(side):  # a linked sidecar is never copied: its target is not the owner's gift
            transfer(side, folder / (name + SIDECAR_SUFFIX))
        return dest

    def check_index(self) -> None:
        """Raise IndexVanished when the index file was deleted or replaced since this writer opened it.

        Rows written to a deleted file are lost: a writer stops instead, before it moves anything.
        """
        if file_identity(self.settings.index_path) != self._index_identity:
            raise IndexVanished(
                f"the index {self.settings.index_path} was deleted or replaced while this process was "
                "writing to it; nothing more is written — start kb again and it rebuilds the index from raw/"
            )

    # -- raw files --------------------------------------------------------------------------

    def index_raw(self, raw_rel: str, text: str | None = None) -> tuple[str, int]:
        """Chunk a raw file and replace its document in the index; (doc_id, chunk count)."""
        doc, chunks = self.prepare_raw(raw_rel, text)
        self.index.upsert_document(doc, chunks)
        return doc.id, len(chunks)

    def prepare_raw(self, raw_rel: str, text: str | None = None) -> tuple[DocumentRecord, list[ChunkRecord]]:
        """The rows a raw file becomes (no writing)."""
        data = self.read_raw(raw_rel.removeprefix("raw/")) if text is None else text.encode("utf-8")
        text = data.decode("utf-8", errors="replace").replace("\x00", "")
        return build_rows(
            raw_rel,
            text,
            raw_sha256=rawfile.sha256_hex(data),
            counter=self.counter,
            max_tokens=self.settings.chunk_max_tokens,
            overlap_tokens=self.settings.chunk_overlap_tokens,
            indexed_at=self._now(),
        )

    def raw_names(self) -> list[str]:
        """The raw files, sorted: regular ``*.md`` files only; links are skipped and logged, never read."""
        names = []
        for path in sorted(self.settings.raw.glob("*.md")):
            if not is_candidate_name(path.name):
                continue
            if is_regular(path):
                names.append(path.name)
            elif path.is_symlink():
                log.warning("raw.skipped", file=path.name, reason="a symbolic link; kb does not follow links")
        return names

    def read_raw(self, name: str) -> bytes:
        """A raw file's bytes, never through a link (LinkRefused) nor from a FIFO."""
        fd = open_beneath(self.settings.raw, self.settings.raw / name, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise LinkRefused(self.settings.raw / name, name)
            return fh.read()

    def sync_raw(self, name: str) -> str:
        """Bring one raw file's document in line with the file: 'indexed', 'deleted' or 'unchanged'.

        Content decides, not events: a raw file kb itself just wrote hashes the same as its
        document and is left alone.
        """
        self.check_index()
        raw_rel = "raw/" + name
        doc_id = rawfile.document_id(raw_rel)
        try:
            data = self.read_raw(name)
        except (FileNotFoundError, LinkRefused):  # a link is no raw file: its target is not kb's
            if self.index.delete_document(doc_id):
                log.info("raw.deleted", file=name, doc_id=doc_id)
                return "deleted"
            return "unchanged"
        doc = self.index.document(doc_id)
        if doc is not None and doc.raw_sha256 == rawfile.sha256_hex(data):
            return "unchanged"
        doc_id, chunks = self.index_raw(raw_rel)
        log.info("raw.changed", file=name, doc_id=doc_id, chunks=chunks)
        return "indexed"

    def reconcile_raw(self) -> dict[str, int]:
        """Index new and changed raw files, drop documents whose raw file is gone; counts by outcome."""
        on_disk = set(self.raw_names())
        indexed = {d.raw_path.removeprefix("raw/") for d in self.index.documents()}
        counts = {"indexed": 0, "deleted": 0, "unchanged": 0}
        for name in sorted(on_disk | indexed):
            counts[self.sync_raw(name)] += 1
        return counts

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """Rebuild every document from raw/ inside the live database, in one transaction."""
        names = self.raw_names()
        rows = []
        for n, name in enumerate(names, 1):
            rows.append(self.prepare_raw("raw/" + name))
            if progress:
                progress(n, len(names))
        self.index.replace_all(rows)
        self.index.set_meta("tokenizer", self.counter.name)
        self.index.set_meta("analyzer", ANALYZER_VERSION)  # every term is now this analyzer's
        return len(rows), sum(len(c) for _, c in rows)

    def _now(self) -> str:
        return self.clock().isoformat(timespec="seconds")


def _internal_message(exc: BaseException) -> str:
    """The owner's sentence for an unexpected exception: what broke and what to do."""
    detail = " ".join(str(exc).split())[:200]
    return (
        f"kb failed on this file ({type(exc).__name__}: {detail}); this is a bug in kb, please report it "
        "with the log (kb logs --event ingest.)"
    )


_PROBLEM_EVENTS = {
    "retry": "ingest.retry", "failed": "ingest.failed", "skipped": "ingest.skipped", "later": "ingest.paused",
}  # fmt: skip


def _log_ocr(name: str, converted: Converted) -> None:
    """What OCR read in a converted file, and which scanned pages had nothing legible."""
    ocr = converted.ocr
    if ocr is None:
        return
    confidence = round(ocr.confidence, 3) if ocr.confidence is not None else None
    log.info("ocr.read", file=name, engine=ocr.engine, confidence=confidence, pages=len(ocr.pages) or None)
    if ocr.illegible_pages:
        log.warning("ocr.illegible", file=name, pages=rawfile.page_ranges(ocr.illegible_pages))
    if ocr.unread_pages:
        log.warning("ocr.budget_spent", file=name, unread=rawfile.page_ranges(ocr.unread_pages))


def _log_outcome(o: Outcome) -> None:
    """One log line per file, under a stable event name."""
    if o.status == "indexed":
        log.info("ingest.done", file=o.source.name, doc_id=o.doc_id, chunks=o.chunks, ms=o.ms)
    elif o.status == "duplicate":
        log.info("ingest.duplicate", file=o.source.name, duplicate_of=o.duplicate_of, ms=o.ms)
    else:
        emit = log.warning if o.status == "failed" else log.info
        emit(_PROBLEM_EVENTS[o.status], file=o.source.name, stage=o.stage, reason=o.reason, error=o.message)


def build_rows(
    raw_rel: str,
    text: str,
    *,
    raw_sha256: str,
    counter: TokenCounter,
    max_tokens: int,
    overlap_tokens: int,
    indexed_at: str,
) -> tuple[DocumentRecord, list[ChunkRecord]]:
    """Document and chunk rows of a raw file's text (a pure function of its inputs)."""
    parsed = rawfile.parse(text, fallback_name=Path(raw_rel).stem, sha256=raw_sha256)
    doc_id = rawfile.document_id(raw_rel)
    chunks = chunk_lines(
        parsed.body_lines,
        counter,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        first_line=parsed.first_body_line,
    )
    records = [
        ChunkRecord(
            id=rawfile.chunk_id(doc_id, c.seq),
            document_id=doc_id,
            seq=c.seq,
            start_line=c.start_line,
            end_line=c.end_line,
            token_count=c.token_count,
            text=c.text,
            text_sha256=rawfile.sha256_hex(c.text.encode("utf-8")),
        )
        for c in chunks
    ]
    m = parsed.meta
    doc = DocumentRecord(
        id=doc_id,
        raw_path=raw_rel,
        title=m.title,
        source_name=m.source_name,
        source_url=m.source_url,
        source_snapshot=m.source_snapshot,
        source_sha256=m.source_sha256,
        converter=m.converter,
        raw_sha256=raw_sha256,
        chunk_count=len(records),
        indexed_at=indexed_at,
    )
    return doc, records


def sidecar_path(path: Path) -> Path:
    """``NAME.source.json`` beside ``NAME``."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path, *, root: Path | None = None) -> Sidecar:
    """The trusted fields of a sidecar; a missing, linked or malformed one gives no metadata (logged)."""
    if not is_regular(path):
        if _is_link(path):
            log.warning("ingest.sidecar_ignored", sidecar=path.name, reason="a symbolic link")
        return Sidecar(None, None)
    try:
        fd = open_beneath(root or path.parent.absolute(), path.absolute(), os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(65536).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ingest.sidecar_ignored", sidecar=path.name, reason=f"unreadable: {exc}")
        return Sidecar(None, None)
    if not isinstance(data, dict):
        log.warning("ingest.sidecar_ignored", sidecar=path.name, reason="not a JSON object")
        return Sidecar(None, None)
    url = data.get("source_url")
    if not (isinstance(url, str) and url.startswith(("http://", "https://")) and len(url) <= 4096):
        if url is not None:
            log.warning(
                "ingest.sidecar_ignored", sidecar=path.name, reason="source_url is not an http(s) URL"
            )
        url = None
    charset = data.get("charset")
    if not (isinstance(charset, str) and 0 < len(charset) <= 40):
        charset = None
    kept = {key: _sidecar_text(data.get(key), limit) for key, limit in _KEPT_FIELDS.items()}
    return Sidecar(url, charset, **kept)


_KEPT_FIELDS = {"origin_type": 100, "origin_name": 500, "origin_date": 40, "comment": 4000}


def _sidecar_text(value: object, limit: int) -> str | None:
    """A sidecar's string field as written to the raw front matter: text, cut to ``limit``, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    return clean_text(value.strip())[:limit]


def unique_name(folder: Path, name: str) -> str:
    """``name``, or ``stem-2.ext``, ``stem-3.ext``… whichever is free in folder (with its sidecar).

    An error record without its original does not hold a name: it is the trace of an attempt
    that was interrupted, and the next attempt writes over it.
    """
    name = shorten_name(name)  # room for "-N" and ".source.json" within the 255-byte limit
    stem, ext = split_ext(name)
    n = 1
    candidate = name
    while any(os.path.lexists(folder / (candidate + s)) for s in ("", SIDECAR_SUFFIX)):
        n += 1
        candidate = f"{stem}-{n}{ext}"
    return candidate


def write_atomic(path: Path, data: bytes, *, staging: Path | None = None) -> None:
    """Write through a temporary file and rename, so readers see the old or the new file.

    ``staging`` (same file system) keeps the temporary file out of a watched folder.
    """
    tmp = _write_temporary(path, data, staging)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new(path: Path, data: bytes, *, staging: Path | None = None) -> bool:
    """Write a file that must not exist yet, atomically; False (nothing written) when the name is taken."""
    tmp = _write_temporary(path, data, staging)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _write_temporary(path: Path, data: bytes, staging: Path | None) -> Path:
    """data in a synced temporary file beside path (or in staging), ready to be renamed or linked.

    Its name is made by mkstemp (created with O_EXCL): two writers of the same name, threads of one
    process or two processes, never share a temporary file. Hidden and ``.tmp``: never taken as a source.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if staging is not None:
        staging.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=f".{shorten_name(path.name, 160)}.", suffix=".tmp", dir=staging or path.parent
    )
    tmp = Path(name)
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def iter_sources(paths: Iterable[Path], *, skip: Iterable[Path] = ()) -> Iterator[Path]:
    """Files named or found under folders, sorted, without sidecars, hidden or temporary names."""
    skipped = [p.resolve() for p in skip]
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            for here, dirs, files in walk_files(path):
                links = sorted(d for d in dirs if os.path.islink(here / d))
                yield from (here / d for d in links)  # reported as skipped, never entered
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if d not in links and not d.startswith(".") and (here / d).resolve() not in skipped
                )
                for name in sorted(files):
                    if is_candidate_name(name):
                        yield here / name
        else:
            yield path


_TEMP_SUFFIXES = (
    ".part",
    ".crdownload",
    ".tmp",
    ".download",
    ".filepart",
    ".swp",
    "~",
    ERROR_SUFFIX,
    SIDECAR_SUFFIX,
)
_JUNK_NAMES = frozenset({"thumbs.db", "desktop.ini", ".ds_store"})


def inbox_name(name: str) -> str:
    """A name the inbox takes, for a file kb hands off itself (an upload, an import).

    The sender's name may be hidden (``.x.md``), a lock file's (``~$x.md``), carry control
    characters or be too long: such a file would wait in the inbox forever or fail to be written.
    """
    name = "".join("_" if ch < " " or ch in "\x7f/\\" else ch for ch in name)
    name = name.lstrip(".~$ ") or "upload"
    if not is_candidate_name(name):
        name = "upload-" + name
    return shorten_name(name)


def is_candidate_name(name: str) -> bool:
    """False for hidden, temporary, lock and OS-junk names, and for kb's own sidecars."""
    lower = name.lower()
    return not (name.startswith((".", "~$", "~")) or lower.endswith(_TEMP_SUFFIXES) or lower in _JUNK_NAMES)


def _link_skipped(path: Path, part: str) -> Outcome:
    return Outcome(
        path, "skipped", reason="link", message=f"{part} is a symbolic link; kb does not follow links"
    )


def is_regular(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:  # gone, or a name too long to exist
        return False


def _copy_no_follow(src: Path, dest: Path) -> None:
    shutil.copy2(src, dest, follow_symlinks=False)


def _hash_regular(root: Path, path: Path) -> str | None:
    """SHA-256 of a file read in pieces through real folders only; None when it cannot be read."""
    try:
        fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            digest = hashlib.sha256()
            while piece := fh.read(1 << 20):
                digest.update(piece)
    except OSError:
        return None
    return digest.hexdigest()


def read_regular(root: Path, path: Path, limit: int) -> bytes:
    """Read a regular file through real folders only, without blocking on a FIFO swapped in."""
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(
            f"{path.name} is over the size limit ({limit:,} bytes; it may have grown while being read)"
        )
    return data


def _is_within(path: Path, folder: Path) -> bool:
    """Is path inside folder (an already resolved path)?"""
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True
