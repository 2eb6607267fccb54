"""Files for the running daemon: put into the inbox whole, then followed to their ingest records.

The daemon is the one writer. A process that wants files indexed while it runs (``kb ingest``
with the daemon up, the bot, a web import) writes each one to a private temporary file and links it
into the inbox under a name no other file holds (a link never replaces a file: two writers of the
same name each get their own), so the daemon never takes half a file, and then reads the daemon's
ingest record for that name and content hash. A file is taken back only if the bytes at its name
are still the ones delivered: the name may have been given to a newer file once the daemon moved
the first one on.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from knowledge.config import Settings
from knowledge.errors import IndexError_
from knowledge.ingest.files import unique_name, write_new
from knowledge.ingest.names import ERROR_SUFFIX, SIDECAR_SUFFIX, inbox_name, readable_name, stored_path
from knowledge.ingest.pipeline import Outcome
from knowledge.ingest.raw import sha256_hex
from knowledge.ingest.sidecar import sidecar_path
from knowledge.store.index import Index


def deliver(
    inbox: Path,
    name: str,
    data: bytes,
    sidecar: dict[str, object] | None = None,
    *,
    staging: Path | None = None,
) -> Path:
    """Write ``data`` into the inbox under a free name derived from ``name``, claimed atomically; its path.

    With a ``sidecar`` (where the file came from), that is claimed first, through ``staging``: the
    daemon reads it with the file, which it sees only once whole. A name another writer claimed
    meanwhile is passed over for the next free one; nothing already in the inbox is replaced.
    """
    inbox.mkdir(parents=True, exist_ok=True)
    wanted = inbox_name(name)
    side = None if sidecar is None else json.dumps(sidecar, ensure_ascii=False, indent=1).encode()
    for _ in range(CLAIM_TRIES):
        name = unique_name(inbox, wanted)
        if side is not None and not write_new(inbox / (name + SIDECAR_SUFFIX), side, staging=staging):
            continue
        if write_new(inbox / name, data, staging=staging):
            return inbox / name
        if side is not None:  # the file's name was taken after its sidecar's: give the sidecar up
            (inbox / (name + SIDECAR_SUFFIX)).unlink(missing_ok=True)
    raise OSError(errno.EEXIST, f"no free name for {wanted} in {inbox} after {CLAIM_TRIES} tries")


CLAIM_TRIES = 100


def withdraw(inbox_path: Path, sha256: str, *, staging: Path) -> bool:
    """Take a delivered file out of the inbox, with its sidecar, if the bytes at its name are still
    ``sha256``'s; False when they are gone (the daemon took them) or another file holds the name now.

    The file is first moved aside in one rename (so nothing can take its place while it is read),
    hashed there, and deleted only if it is the one delivered; another file is put back.
    """
    staging.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=".take-back.", dir=staging)) / inbox_path.name
    try:
        try:
            os.rename(inbox_path, aside)
        except FileNotFoundError:
            return False
        if os.path.isfile(aside) and not os.path.islink(aside) and sha256_hex(aside.read_bytes()) == sha256:
            os.unlink(aside)
            sidecar_path(inbox_path).unlink(missing_ok=True)
            return True
        _put_back(aside, inbox_path)
        return False
    finally:
        shutil.rmtree(aside.parent, ignore_errors=True)


def _put_back(aside: Path, inbox_path: Path) -> None:
    """Another file was at the name: back under it, or under a free one if a writer claimed the name
    meanwhile (which it can only have done if that file had no sidecar holding the name: none to move)."""
    try:
        os.link(aside, inbox_path)
    except FileExistsError:
        os.link(aside, inbox_path.parent / unique_name(inbox_path.parent, inbox_path.name))


def ingest_records(
    index_path: Path, wanted: Iterable[tuple[str, str]], *, after: int = 0
) -> dict[tuple[str, str], dict]:
    """The latest ingest record of each (inbox path, sha256) that has one (``after``: among the records
    written after that one, see last_ingest), with its document's title and raw path; the index is
    opened once for all of them."""
    found: dict[tuple[str, str], dict] = {}
    try:
        with Index(index_path, readonly=True) as index:
            for path, sha256 in wanted:
                row = index.conn.execute(
                    "SELECT status, doc_id, chunks, error, stage, duplicate_of FROM ingests"
                    " WHERE path = ? AND sha256 = ? AND id > ? ORDER BY id DESC LIMIT 1",
                    (stored_path(path), sha256, after),  # as the pipeline wrote it
                ).fetchone()
                if row is None:
                    continue
                status, doc_id, chunks, error, stage, duplicate_of = row
                doc = index.document(doc_id) if doc_id else None
                found[(path, sha256)] = {
                    "status": status,
                    "doc_id": doc_id,
                    "chunks": chunks,
                    "error": error,
                    "stage": stage,
                    "duplicate_of": duplicate_of,
                    "title": doc.title if doc else None,
                    "raw_path": doc.raw_path
                    if doc
                    else None,  # e.g. raw/photo-….md, to read what was indexed
                }
    except IndexError_:  # not known yet: the caller keeps waiting, then says it is still being indexed
        pass
    return found


def ingest_record(index_path: Path, path: str, sha256: str, *, after: int = 0) -> dict | None:
    """The latest ingest record of these bytes at this inbox path (see ingest_records)."""
    return ingest_records(index_path, [(path, sha256)], after=after).get((path, sha256))


def last_ingest(index_path: Path) -> int:
    """The number of the latest ingest record (0: none yet): a file handed over after it has its record
    among the later ones, never an earlier file's of the same name and bytes."""
    try:
        with Index(index_path, readonly=True) as index:
            return index.conn.execute("SELECT coalesce(max(id), 0) FROM ingests").fetchone()[0]
    except IndexError_:
        return 0


def hand_over(
    settings: Settings,
    paths: Iterable[Path],
    *,
    idle_s: float,
    shown: Callable[[Outcome], None],
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.2,
) -> list[Outcome]:
    """Deliver files to the daemon and wait for what it made of each (``shown`` as each is done).

    A file whose record does not come while the daemon is idle ``idle_s`` (no record for any of
    them) stays in the inbox, to be indexed when the daemon gets to it: its outcome is "waiting".
    """
    pending: dict[Path, tuple[Path, str]] = {}
    outcomes: list[Outcome] = []
    inbox = settings.inbox.resolve()
    for source in paths:
        try:
            size = source.stat().st_size
            if size > settings.max_source_bytes:  # the daemon would refuse it: refused here, unread
                outcome = Outcome(
                    source, "failed", stage="read", reason="too-large",
                    message=f"the file is {size / 2**20:.1f} MiB, over the {settings.max_source_bytes / 2**20:g} MiB"
                    " limit (KB_MAX_SOURCE_MB)",
                )  # fmt: skip
                outcomes.append(outcome)
                shown(outcome)
                continue
            data = source.read_bytes()
        except OSError as exc:
            outcome = Outcome(source, "failed", stage="read", reason="unreadable", message=str(exc))
            outcomes.append(outcome)
            shown(outcome)
            continue
        if source.resolve().parent == inbox or inbox in source.resolve().parents:  # already the daemon's
            pending[source] = (source, sha256_hex(data))
        else:
            pending[source] = (deliver(settings.inbox, source.name, data), sha256_hex(data))
    last = clock()
    while pending and clock() - last < idle_s:
        records = ingest_records(settings.index_path, [(str(p), sha) for p, sha in pending.values()])
        for source, (inbox_path, sha) in list(pending.items()):
            record = records.get((str(inbox_path), sha))
            if record is None:
                continue
            outcome = outcome_of(settings, source, inbox_path, record)
            outcomes.append(outcome)
            shown(outcome)
            del pending[source]
            last = clock()
        if pending:
            time.sleep(poll_s)
    for source, (inbox_path, _) in pending.items():
        outcome = Outcome(
            source, "waiting", kept_at=inbox_path, message="in the inbox; the daemon is still on it"
        )
        outcomes.append(outcome)
        shown(outcome)
    return outcomes


def outcome_of(settings: Settings, source: Path, inbox_path: Path, record: dict) -> Outcome:
    """The Outcome ``kb ingest`` reports, from the daemon's record of a delivered file."""
    if record["status"] == "indexed":
        kept = settings.processed / inbox_path.name
        return Outcome(
            source, "indexed", doc_id=record["doc_id"], title=record["title"], chunks=record["chunks"] or 0,
            raw_path=record["raw_path"], kept_at=kept,
        )  # fmt: skip
    if record["status"] == "duplicate":
        return Outcome(
            source, "duplicate", doc_id=record["doc_id"], title=record["title"],
            duplicate_of=record["duplicate_of"], kept_at=settings.processed / inbox_path.name,
        )  # fmt: skip
    reason, kept = failure_reason(settings.failed, inbox_path.name)
    return Outcome(
        source, "failed", stage=record["stage"], reason=reason, message=record["error"], kept_at=kept
    )


def failure_reason(failed: Path, name: str) -> tuple[str, Path | None]:
    """(reason code, where the original is kept) from the newest error record written for ``name``."""
    newest: tuple[float, str, Path | None] = (-1.0, "failed", None)
    wanted = readable_name(name)  # as the pipeline wrote it
    for error_file in failed.glob(f"*{ERROR_SUFFIX}"):
        try:
            found = json.loads(error_file.read_text(encoding="utf-8"))
            when = error_file.stat().st_mtime
        except (OSError, ValueError):
            continue
        if isinstance(found, dict) and found.get("file") == wanted and when > newest[0]:
            original = failed / error_file.name.removesuffix(ERROR_SUFFIX)
            newest = (when, str(found.get("reason") or "failed"), original)
    return newest[1], newest[2]
