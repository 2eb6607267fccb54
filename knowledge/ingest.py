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
Originals are moved when they sit in the inbox and copied when they come from elsewhere:
nothing the owner gave kb is ever deleted.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from knowledge import raw as rawfile
from knowledge.chunking import chunk_lines
from knowledge.config import Settings
from knowledge.convert import Limits, convert_source
from knowledge.convert.isolate import InternalError, IsolatedRunner
from knowledge.errors import ConversionError, ConversionInterrupted, KbError
from knowledge.index import ChunkRecord, DocumentRecord, Index, IngestRecord
from knowledge.tokenizer import TokenCounter

log = structlog.get_logger()

SIDECAR_SUFFIX = ".source.json"
ERROR_SUFFIX = ".error.json"


@dataclass(frozen=True)
class Outcome:
    """What happened to one source file."""

    source: Path
    status: str  # indexed | duplicate | failed | skipped | retry
    doc_id: str | None = None
    title: str | None = None
    chunks: int = 0
    raw_path: str | None = None
    kept_at: Path | None = None
    duplicate_of: str | None = None
    stage: str | None = None
    reason: str | None = None
    message: str | None = None
    ms: float = 0.0

    @property
    def is_ok(self) -> bool:
        return self.status in ("indexed", "duplicate", "skipped")


@dataclass(frozen=True)
class Sidecar:
    """Trusted fields of a ``NAME.source.json`` written by kb's web import."""

    source_url: str | None
    charset: str | None


class _Failure(Exception):
    def __init__(self, stage: str, reason: str, message: str, exc: BaseException | None = None) -> None:
        super().__init__(message)
        self.stage, self.reason, self.message = stage, reason, message
        self.exc_type = type(exc).__name__ if exc is not None else "ConversionError"
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
    """Runs the pipeline for one knowledge base; the caller holds the writer lock."""

    def __init__(
        self,
        settings: Settings,
        index: Index,
        counter: TokenCounter,
        *,
        runner: IsolatedRunner | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.index = index
        self.counter = counter
        self.runner = runner
        self.clock = clock
        self.limits = Limits(
            max_source_bytes=settings.max_source_bytes,
            pdf_max_pages=settings.pdf_max_pages,
            convert_timeout_s=settings.convert_timeout_s,
        )
        for folder in (settings.inbox, settings.processed, settings.failed, settings.raw):
            folder.mkdir(parents=True, exist_ok=True)
        self._inbox = settings.inbox.resolve()
        if index.meta("tokenizer") is None:
            index.set_meta("tokenizer", counter.name)

    # -- sources ----------------------------------------------------------------------------

    def ingest(self, path: Path, *, may_retry: bool = False) -> Outcome:
        """Run the whole pipeline on one file and report what happened.

        With ``may_retry``, a transient failure (locked file, full disk, busy database) leaves
        the file where it is and returns status ``retry``; the caller tries again later.
        """
        t0 = time.perf_counter()
        started = self._now()
        structlog.contextvars.bind_contextvars(file=path.name)
        try:
            outcome = self._ingest(path, started)
        except ConversionInterrupted:
            raise  # kb is stopping: the file stays where it is and is taken again on the next start
        except Exception as exc:
            if isinstance(exc, _Failure):
                failure = exc
            else:  # a bug in kb, or a database error: the file must still end somewhere, never in limbo
                log.exception("ingest.internal_error", file=path.name, error=f"{type(exc).__name__}: {exc}")
                failure = _Failure("ingest", "internal-error", _internal_message(exc), exc)
            if may_retry and failure.is_transient:
                outcome = Outcome(
                    path, "retry", stage=failure.stage, reason=failure.reason, message=failure.message
                )
            else:
                outcome = self._fail(path, failure, started)
        finally:
            structlog.contextvars.unbind_contextvars("file")
        ms = round((time.perf_counter() - t0) * 1000, 1)
        outcome = Outcome(**{**outcome.__dict__, "ms": ms})
        _log_outcome(outcome)
        return outcome

    def _ingest(self, path: Path, started: str) -> Outcome:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return Outcome(path, "skipped", reason="missing", message="the file is gone")
        if not stat.S_ISREG(st.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            return Outcome(
                path, "skipped", reason="not-regular", message=f"{path.name} is {what}; kb does not follow it"
            )
        if st.st_size > self.limits.max_source_bytes:
            raise _Failure(
                "read",
                "too-large",
                f"the file is {st.st_size / 2**20:.1f} MiB, over the {self.limits.max_source_bytes / 2**20:g} MiB"
                " limit (KB_MAX_SOURCE_MB)",
            )
        try:
            data = _read_regular(path, self.limits.max_source_bytes)
        except OSError as exc:
            raise _Failure("read", "unreadable", f"cannot read the file: {exc.strerror or exc}", exc) from exc
        sha = rawfile.sha256_hex(data)
        dup = self.index.document_by_source_sha256(sha)
        if dup is not None:
            kept = self._keep(path, self.settings.processed)
            self.index.record_ingest(
                IngestRecord(
                    str(path), sha, "duplicate", started, self._now(), doc_id=dup.id, duplicate_of=dup.id
                )
            )
            return Outcome(
                path, "duplicate", doc_id=dup.id, title=dup.title, kept_at=kept, duplicate_of=dup.id
            )
        sidecar = read_sidecar(sidecar_path(path))
        try:
            converted = convert_source(
                data,
                name=path.name,
                limits=self.limits,
                declared_charset=sidecar.charset,
                source_url=sidecar.source_url,
                runner=self.runner,
            )
        except InternalError as exc:
            log.error("ingest.internal_error", file=path.name, error=str(exc), traceback=exc.details)
            raise _Failure("convert", exc.reason, str(exc), exc) from exc
        except ConversionError as exc:
            raise _Failure("convert", exc.reason, str(exc), exc) from exc
        except ConversionInterrupted:
            raise
        except Exception as exc:  # a converter run in-process (no runner) failed unexpectedly
            log.exception("ingest.internal_error", file=path.name, error=f"{type(exc).__name__}: {exc}")
            raise _Failure("convert", "internal-error", _internal_message(exc), exc) from exc
        return self._store(path, data, sha, converted, sidecar, started)

    def _store(self, path: Path, data: bytes, sha: str, converted, sidecar: Sidecar, started: str) -> Outcome:
        processed_name = unique_name(self.settings.processed, path.name)
        meta = rawfile.RawMeta(
            title=converted.title,
            source_name=path.name,
            source_sha256=sha,
            converter=converted.converter,
            source_snapshot=f"inbox/processed/{processed_name}",
            source_url=sidecar.source_url,
        )
        text = rawfile.render(meta, converted.markdown)
        raw_rel = "raw/" + rawfile.raw_name(path.name, sha)
        raw_path = self.settings.raw / raw_rel.removeprefix("raw/")
        try:
            write_atomic(raw_path, text.encode("utf-8"), staging=self.settings.staging)
        except OSError as exc:
            raise _Failure(
                "store", "write-failed", f"cannot write {raw_rel}: {exc.strerror or exc}", exc
            ) from exc
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
            IngestRecord(str(path), sha, "indexed", started, self._now(), doc_id=doc_id, chunks=chunks)
        )
        return Outcome(
            path, "indexed", doc_id=doc_id, title=meta.title, chunks=chunks, raw_path=raw_rel, kept_at=kept
        )

    def _fail(self, path: Path, failure: _Failure, started: str) -> Outcome:
        kept: Path | None = None
        if path.exists() or path.is_symlink():
            name = unique_name(self.settings.failed, path.name)
            record = {
                "file": path.name,
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
                log.error("ingest.quarantine_failed", file=path.name, error=str(exc))
        self._record(
            IngestRecord(
                str(path), None, "failed", started, self._now(), stage=failure.stage, error=failure.message
            )
        )
        return Outcome(
            path, "failed", kept_at=kept, stage=failure.stage, reason=failure.reason, message=failure.message
        )

    def _record(self, record: IngestRecord) -> None:
        """Append an ingest record; a busy database must not turn a done file into a failure."""
        try:
            self.index.record_ingest(record)
        except sqlite3.Error as exc:
            log.error(
                "ingest.record_failed", file=Path(record.path).name, status=record.status, error=str(exc)
            )

    def _keep(self, path: Path, folder: Path, *, name: str | None = None) -> Path:
        """Move an inbox file (copy any other) and its sidecar into folder, never overwriting."""
        name = name or unique_name(folder, path.name)
        dest = folder / name
        is_inbox = _is_within(path, self._inbox)
        transfer = os.replace if is_inbox else shutil.copy2
        transfer(path, dest)
        side = sidecar_path(path)
        if side.is_file():
            transfer(side, folder / (name + SIDECAR_SUFFIX))
        return dest

    # -- raw files --------------------------------------------------------------------------

    def index_raw(self, raw_rel: str, text: str | None = None) -> tuple[str, int]:
        """Chunk a raw file and replace its document in the index; (doc_id, chunk count)."""
        doc, chunks = self.prepare_raw(raw_rel, text)
        self.index.upsert_document(doc, chunks)
        return doc.id, len(chunks)

    def prepare_raw(self, raw_rel: str, text: str | None = None) -> tuple[DocumentRecord, list[ChunkRecord]]:
        """The rows a raw file becomes (no writing)."""
        path = self.settings.raw / raw_rel.removeprefix("raw/")
        data = path.read_bytes() if text is None else text.encode("utf-8")
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

    def sync_raw(self, name: str) -> str:
        """Bring one raw file's document in line with the file: 'indexed', 'deleted' or 'unchanged'.

        Content decides, not events: a raw file kb itself just wrote hashes the same as its
        document and is left alone.
        """
        raw_rel = "raw/" + name
        doc_id = rawfile.document_id(raw_rel)
        path = self.settings.raw / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
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
        on_disk = {
            p.name for p in self.settings.raw.glob("*.md") if p.is_file() and is_candidate_name(p.name)
        }
        indexed = {d.raw_path.removeprefix("raw/") for d in self.index.documents()}
        counts = {"indexed": 0, "deleted": 0, "unchanged": 0}
        for name in sorted(on_disk | indexed):
            counts[self.sync_raw(name)] += 1
        return counts

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """Rebuild every document from raw/ inside the live database, in one transaction."""
        names = sorted(p.name for p in self.settings.raw.glob("*.md") if p.is_file())
        rows = []
        for n, name in enumerate(names, 1):
            rows.append(self.prepare_raw("raw/" + name))
            if progress:
                progress(n, len(names))
        self.index.replace_all(rows)
        self.index.set_meta("tokenizer", self.counter.name)
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


_PROBLEM_EVENTS = {"retry": "ingest.retry", "failed": "ingest.failed", "skipped": "ingest.skipped"}


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


def read_sidecar(path: Path) -> Sidecar:
    """The trusted fields of a sidecar; a missing or malformed one gives no metadata (logged)."""
    if not path.is_file():
        return Sidecar(None, None)
    try:
        data = json.loads(path.read_bytes()[:65536].decode("utf-8"))
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
    return Sidecar(url, charset)


def unique_name(folder: Path, name: str) -> str:
    """``name``, or ``stem-2.ext``, ``stem-3.ext``… whichever is free in folder (with its sidecar).

    An error record without its original does not hold a name: it is the trace of an attempt
    that was interrupted, and the next attempt writes over it.
    """
    stem, dot, ext = name.rpartition(".") if "." in name.lstrip(".") else (name, "", "")
    n = 1
    candidate = name
    while any(os.path.lexists(folder / (candidate + s)) for s in ("", SIDECAR_SUFFIX)):
        n += 1
        candidate = f"{stem}-{n}{dot}{ext}"
    return candidate


def write_atomic(path: Path, data: bytes, *, staging: Path | None = None) -> None:
    """Write through a temporary file and rename, so readers see the old or the new file.

    ``staging`` (same file system) keeps the temporary file out of a watched folder.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if staging is not None:
        staging.mkdir(parents=True, exist_ok=True)
    tmp = (staging or path.parent) / f".{path.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def iter_sources(paths: Iterable[Path], *, skip: Iterable[Path] = ()) -> Iterator[Path]:
    """Files named or found under folders, sorted, without sidecars, hidden or temporary names."""
    skipped = [p.resolve() for p in skip]
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                here = Path(root)
                dirs[:] = sorted(
                    d for d in dirs if not d.startswith(".") and (here / d).resolve() not in skipped
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


def is_candidate_name(name: str) -> bool:
    """False for hidden, temporary, lock and OS-junk names, and for kb's own sidecars."""
    lower = name.lower()
    return not (name.startswith((".", "~$", "~")) or lower.endswith(_TEMP_SUFFIXES) or lower in _JUNK_NAMES)


def _read_regular(path: Path, limit: int) -> bytes:
    """Read a regular file without following symlinks or blocking on a FIFO swapped in."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{path.name} grew past the size limit while being read")
    return data


def _is_within(path: Path, folder: Path) -> bool:
    """Is path inside folder (an already resolved path)?"""
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True
