"""The ingest pipeline: a source file in, a raw Markdown file and indexed chunks out.

Per file, in this order (a crash between steps loses nothing: the next start finds either
the original still in the inbox, or a raw file that is indexed again):

1. check it is a regular file within the size limit, read it, hash it;
2. the same bytes already indexed → record a duplicate, keep an inbox original (one from elsewhere is
   not copied again), stop;
3. convert (with its ``NAME.source.json`` sidecar, when there is one);
4. write ``raw/<slug>-<hash8>.md`` atomically (a page imported again from the same URL: over the raw
   file of its earlier version, so the document stays one and its old text never answers again);
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
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
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
from knowledge.ingest.files import (
    copy_no_follow,
    hash_regular,
    is_regular,
    is_within,
    quarantine,
    read_regular,
    unique_name,
    write_atomic,
    write_new,
)
from knowledge.ingest.names import SIDECAR_SUFFIX, readable_name, stored_path
from knowledge.ingest.rawsync import RawSync
from knowledge.ingest.safepath import (
    LinkRefused,
    file_identity,
    link_below,
    parts_below,
)
from knowledge.ingest.sidecar import Sidecar, read_sidecar, sidecar_path
from knowledge.model.tokenizer import TokenCounter
from knowledge.store.index import Index
from knowledge.store.records import IngestRecord
from knowledge.text import clean_text

log = structlog.get_logger()


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


class Ingestor(RawSync):
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
        super().__init__(settings, index, counter)
        self.runner = runner
        self.clock = clock
        self.progress = progress
        # each bound is the setting of the same name
        self.limits = Limits(**{f.name: getattr(settings, f.name) for f in fields(Limits)})
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
        # Passages are cut as kb cuts them now from the first one on (an index that holds passages but
        # no record of their cut was made by a kb that did not record it).
        if not index.has_chunks() and index.meta("chunking") != settings.chunking:
            index.set_meta("chunking", settings.chunking)
        # A page imported twice before a new import replaced the old: merged once, by the first writer.
        from knowledge.ingest.duplicates import merge_web_duplicates  # it builds on this module

        merge_web_duplicates(self, now=clock())

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
                failure.sha256 = hash_regular(root, path.absolute())  # a huge one no waiter sent is not read
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
        if dup is not None:  # an inbox file is moved out of the way; the owner's own is left where it is
            kept = self._keep(path, self.settings.processed) if is_within(path, self._inbox) else None
            self.index.record_ingest(
                self._inbox_record(path, sha, "duplicate", started, doc_id=dup.id, duplicate_of=dup.id)
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
        log_front_matter(readable_name(path.name), converted)
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
            aliases=converted.aliases,
            description=converted.description or None,
            tags=converted.tags,
            **dict(converted.dates),
        )
        text = rawfile.render(meta, converted.markdown)
        older = self.index.document_by_source_url(sidecar.source_url) if sidecar.source_url else None
        try:
            if older is not None:  # a page imported again: its new text replaces the old, same document
                write_atomic(self.settings.raw / Path(older.raw_path).name, text.encode("utf-8"),
                             staging=self.settings.staging)  # fmt: skip
                raw_rel = older.raw_path
                log.info("ingest.replaced", url=sidecar.source_url, doc_id=older.id, was=older.source_sha256)
            else:
                raw_rel = "raw/" + self._claim_raw(readable_name(path.name), sha, text.encode("utf-8"))
        except OSError as exc:
            raw_rel = older.raw_path if older else "raw/" + rawfile.raw_name(readable_name(path.name), sha)
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
            self._inbox_record(path, sha, "indexed", started, doc_id=doc_id, chunks=chunks)
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
            record = error_record(readable_name(path.name), failure.stage, failure.reason, failure.message,
                                  failure.exc_type, self._now())  # fmt: skip
            try:
                kept = quarantine(
                    path, self.settings.failed, record, keep=self._keep, staging=self.settings.staging
                )
            except OSError as exc:
                log.error("ingest.quarantine_failed", file=readable_name(path.name), error=str(exc))
        self.record(
            self._inbox_record(
                path, failure.sha256, "failed", started, stage=failure.stage, error=failure.message
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

    def _keep(self, path: Path, folder: Path, name: str | None = None) -> Path:
        """Move an inbox file (copy any other) and its sidecar into folder, never overwriting; a name
        that is not UTF-8 is kept under its readable form."""
        name = name or unique_name(folder, readable_name(path.name))
        dest = folder / name
        is_inbox = is_within(path, self._inbox)
        transfer = os.replace if is_inbox else copy_no_follow
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

    def _now(self) -> str:
        return self.clock().isoformat(timespec="seconds")

    def _inbox_record(
        self, path: Path, sha: str | None, status: str, started: str, **outcome: str | int | None
    ) -> IngestRecord:
        """The ingest record of an inbox file whose ingest began at ``started`` and ends now."""
        return IngestRecord(stored_path(path), sha, status, started, self._now(), **outcome)


def error_record(file: str, stage: str, reason: str, message: str, exception: str | None, when: str) -> dict:
    """What ``NAME.error.json`` in failed/ says: the file, the stage and reason, the sentence, the time."""
    return {
        "file": file,
        "stage": stage,
        "reason": reason,
        "message": message,
        "exception": exception,
        "time": when,
    }


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


def log_front_matter(name: str, converted: Converted) -> None:
    """What of a note's front matter was ignored, and why (its text is indexed all the same)."""
    if converted.front_matter_problems:
        log.warning("ingest.front_matter_ignored", file=name, problems=list(converted.front_matter_problems))


def _log_outcome(o: Outcome) -> None:
    """One log line per file, under a stable event name."""
    if o.status == "indexed":
        log.info("ingest.done", file=o.source.name, doc_id=o.doc_id, chunks=o.chunks, ms=o.ms)
    elif o.status == "duplicate":
        log.info("ingest.duplicate", file=o.source.name, duplicate_of=o.duplicate_of, ms=o.ms)
    else:
        emit = log.warning if o.status == "failed" else log.info
        emit(_PROBLEM_EVENTS[o.status], file=o.source.name, stage=o.stage, reason=o.reason, error=o.message)


def _link_skipped(path: Path, part: str) -> Outcome:
    return Outcome(
        path, "skipped", reason="link", message=f"{part} is a symbolic link; kb does not follow links"
    )
