"""Changes asked of the writer: remove a document, restore one from the trash.

Only the writer changes raw/ and the index. A process that is not the writer (the bot, or
``kb rm`` beside a running daemon) writes ``knowledge/requests/<id>.json`` atomically::

    {"op": "remove" | "restore", "target": "<doc id or trash id>", "asked_at": "<ISO time>"}

and waits for ``<id>.result.json``. The daemon looks at the folder at every tick, runs each
request on its one worker, in turn with the files it ingests, writes the result and deletes the
request. A request written while no daemon runs stays, and is done when one starts.

Requests are files on disk: anything malformed (not JSON, too large, a link, an unknown op, a
target that is not an id) is refused with a logged ``request.refused`` and a failed result,
never followed and never a crash. Results nobody collected are deleted after a day.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog

from knowledge.config import Settings
from knowledge.convert.ocr import OcrSpec
from knowledge.errors import NO_ROOM, KbError, WriterLockHeld
from knowledge.ingest import trash
from knowledge.ingest.files import read_regular, write_atomic
from knowledge.ingest.lock import WriterLock, daemon_holder
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import TokenCounter
from knowledge.store.index import Index

log = structlog.get_logger()

OPS = ("remove", "restore")
REQUEST_MAX_BYTES = 4096
RESULT_MAX_BYTES = 64 * 1024
RESULT_KEEP_S = 86400.0
SUFFIX = ".json"
RESULT_SUFFIX = ".result.json"


@dataclass(frozen=True)
class Change:
    """What became of a remove or restore: done, failed (message says why) or waiting for the daemon.

    A removal carries its trash entry (``trashed``); a restore the document's id and title.
    """

    status: Literal["done", "failed", "waiting"]
    message: str
    trashed: trash.Trashed | None = None
    doc_id: str | None = None
    title: str | None = None
    disk_full: bool = False  # failed because the request could not be written: no room on the disk
    # why, as a stable code: the trash's (no-document, no-entry, already-indexed, tampered…), bad-request,
    # unwritten, daemon-off and daemon-busy (waiting), error (the disk or the database), unreadable
    reason: str = ""


# -- asking -------------------------------------------------------------------------------------


def change(
    settings: Settings,
    op: str,
    targets: Sequence[str],
    *,
    make_counter: Callable[[], TokenCounter],
    wait_s: float,
) -> list[Change]:
    """Remove or restore each target now, in this process, when the writer lock is free (taken once,
    the index opened once); else ask the daemon. A Change per target, in order.

    For the command line. Another writer that is not the daemon (kb ingest, kb reindex) is waited
    for, up to KB_LOCK_WAIT_S. ``make_counter`` loads the tokenizer: called only when this process
    chunks (a restore), never when the daemon does the work.
    """
    lock = WriterLock(settings.lock_path, role=f"kb {'rm' if op == 'remove' else op}")
    try:
        lock.acquire()
    except WriterLockHeld:
        if daemon_holder(settings.lock_path) is not None:
            return [ask_daemon(settings, op, t, wait_s=wait_s, is_running=True) for t in targets]
        lock.acquire(wait_s=settings.lock_wait_s)
    try:
        if op == "remove" and not settings.index_path.exists():  # nothing to remove: create nothing
            return [Change("failed", f"no document {t!r}: the knowledge base is empty", reason="no-document")
                    for t in targets]  # fmt: skip
        with Index(settings.index_path) as index:
            # Removing and restoring convert nothing: no OCR engine, and no warnings about one.
            ingestor = Ingestor(settings, index, _LazyCounter(make_counter), ocr=OcrSpec(kind="off"))
            return [_checked_perform(ingestor, op, t) for t in targets]
    finally:
        lock.release()


class _LazyCounter:
    """A TokenCounter loaded on first use: a removal never chunks, so never loads the tokenizer."""

    def __init__(self, load: Callable[[], TokenCounter]) -> None:
        self._load = load
        self._counter: TokenCounter | None = None

    def __getattr__(self, name: str) -> object:  # name, spans, count_many
        if self._counter is None:
            self._counter = self._load()
        return getattr(self._counter, name)


def _checked_perform(ingestor: Ingestor, op: str, target: str) -> Change:
    problem = check_request(op, target)
    if problem is not None:
        return Change("failed", problem, reason="bad-request")
    return perform(ingestor, op, target)


def ask_daemon(
    settings: Settings, op: str, target: str, *, wait_s: float, is_running: bool | None = None
) -> Change:
    """Ask the running daemon to remove or restore, and wait up to ``wait_s`` for its answer.

    Blocking (run it in a thread from async code). "waiting" when no daemon runs or it has not
    answered in time: the request stays, and is done when the daemon gets to it or starts.
    ``is_running``: the caller just saw the daemon hold the writer lock (None: look now).
    """
    problem = check_request(op, target)
    if problem is not None:
        return Change("failed", problem, reason="bad-request")
    request_id = new_request_id()
    body = {"op": op, "target": target, "asked_at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        write_atomic(settings.requests / (request_id + SUFFIX), json.dumps(body).encode("utf-8"))
    except OSError as exc:  # ENOSPC above all: nothing was asked, nothing changed
        full = exc.errno in NO_ROOM
        log.warning("request.unwritten", op=op, target=target, error=str(exc))
        why = "the disk is full — free some space and try again" if full else "check the disk it is on"
        said = f"cannot ask kb's daemon to {op} {target} ({exc}): {why}"
        return Change("failed", said, disk_full=full, reason="unwritten")
    if is_running is None:
        is_running = daemon_holder(settings.lock_path) is not None
    deadline = time.monotonic() + (wait_s if is_running else 0.0)
    result_path = settings.requests / (request_id + RESULT_SUFFIX)
    while True:
        if os.path.lexists(result_path):
            found = read_result(result_path)
            result_path.unlink(missing_ok=True)  # collected: nobody else reads it
            return found
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if not is_running:
        return Change(
            "waiting",
            f"kb's daemon is not running: the {op} of {target} is saved and will be done when it starts "
            "(kb daemon, or kb service install)",
            reason="daemon-off",
        )
    return Change(
        "waiting",
        f"the daemon has not done the {op} of {target} yet (it may be busy with other files); "
        "it will be done in turn",
        reason="daemon-busy",
    )


def new_request_id() -> str:
    """A request id: sortable by time, unique."""
    return f"{time.time_ns()}-{secrets.token_hex(4)}"


def check_request(op: object, target: object) -> str | None:
    """Why a request cannot be done as asked (None when it is well-formed)."""
    if op not in OPS:
        return f"unknown request {str(op)[:40]!r}: kb removes or restores"
    if not trash.is_id(target):
        return f"{str(target)[:80]!r} is not a document or trash id (letters, digits, '-' and '_' only)"
    return None


def read_result(path: Path) -> Change:
    """The daemon's answer in a result file; a failed Change when it cannot be read."""
    try:
        data = read_regular(path.parent, path, RESULT_MAX_BYTES)
        found = json.loads(data.decode("utf-8"))
        status, message = found["status"], found["message"]
        entry = found.get("trashed")
        if status not in ("done", "failed") or not isinstance(message, str):
            raise ValueError(f"bad status {status!r}")
        return Change(
            status,
            message,
            trashed=trash.Trashed(**entry) if isinstance(entry, dict) else None,
            doc_id=found.get("doc_id"),
            title=found.get("title"),
            reason=str(found.get("reason") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Change(
            "failed", f"the daemon's answer {path.name} could not be read: {exc}", reason="unreadable"
        )


# -- doing (the writer) -------------------------------------------------------------------------


def perform(ingestor: Ingestor, op: str, target: str) -> Change:
    """Remove or restore under the writer lock the caller holds; KbErrors become a failed Change.

    The caller has checked the request (check_request); the trash still refuses a target that is
    not an id.
    """
    try:
        if op == "remove":
            entry = trash.remove(ingestor, target, now=ingestor.clock())
            return Change(
                "done",
                f"removed {entry.doc_id} ({entry.title!r}); undo with: kb restore {entry.trash_id}",
                trashed=entry,
                doc_id=entry.doc_id,
                title=entry.title,
            )
        back = trash.restore(ingestor, target)
    except KbError as exc:
        return Change("failed", str(exc), reason=getattr(exc, "reason", "") or "error")
    except (OSError, sqlite3.Error) as exc:  # a full disk, a busy database: said, not a crash
        log.error("request.error", op=op, target=target, error=f"{type(exc).__name__}: {exc}")
        return Change(
            "failed", f"the {op} of {target} failed: {exc} (nothing is lost; try again)", reason="error"
        )
    return Change(
        "done",
        f"restored {back.doc_id} ({back.title!r}) from the trash as {back.raw_path}",
        doc_id=back.doc_id,
        title=back.title,
    )


def pending(settings: Settings) -> list[Path]:
    """Request files waiting in the folder, oldest first (hidden and temporary names, results left out)."""
    try:
        names = os.listdir(settings.requests)
    except (FileNotFoundError, NotADirectoryError):
        return []
    wanted = [n for n in names if n.endswith(SUFFIX) and not n.endswith(RESULT_SUFFIX) and n[0] != "."]
    return [settings.requests / n for n in sorted(wanted)]


def handle(ingestor: Ingestor, path: Path) -> Change | None:
    """Do one request file: refuse or perform it, write its result, delete it (the daemon's worker).

    None when there is nothing to answer (the file is gone, or its result was written before a crash).
    """
    settings = ingestor.settings
    request_id = path.name.removesuffix(SUFFIX)
    if request_id == path.name or not trash.is_id(request_id):
        # No id to answer under: dropped (it is a name in kb's own folder, never followed).
        _refuse(path.name, "not a request name")
        _drop(path)
        return None
    result_path = settings.requests / (request_id + RESULT_SUFFIX)
    if os.path.lexists(result_path):  # done before a crash that left the request behind
        _drop(path)
        return None
    try:
        body = json.loads(read_regular(settings.requests, path, REQUEST_MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        outcome = _refused_change(request_id, f"unreadable: {exc}")
    else:
        if not isinstance(body, dict):
            outcome = _refused_change(request_id, "not a JSON object")
        elif (problem := check_request(body.get("op"), body.get("target"))) is not None:
            outcome = _refused_change(request_id, problem)
        else:
            outcome = perform(ingestor, body["op"], body["target"])
            event = "request.done" if outcome.status == "done" else "request.failed"
            emit = log.info if outcome.status == "done" else log.warning
            emit(event, request=request_id, op=body["op"], target=body["target"], message=outcome.message)
    write_result(settings, request_id, outcome, now=ingestor.clock())
    _drop(path)
    return outcome


def write_result(settings: Settings, request_id: str, outcome: Change, *, now: datetime) -> None:
    """``<id>.result.json``, written atomically."""
    record = {**asdict(outcome), "request": request_id, "done_at": now.isoformat(timespec="seconds")}
    data = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8")
    write_atomic(settings.requests / (request_id + RESULT_SUFFIX), data)


def clean_results(settings: Settings) -> int:
    """Delete results nobody collected within a day (and temporary files a killed writer left); how many."""
    cutoff = time.time() - RESULT_KEEP_S
    removed = 0
    try:
        entries = list(os.scandir(settings.requests))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for entry in entries:
        is_leftover = entry.name.endswith(RESULT_SUFFIX) or (
            entry.name[0] == "." and entry.name.endswith(".tmp")
        )
        try:
            is_old = entry.stat(follow_symlinks=False).st_mtime < cutoff
        except OSError:
            continue
        if is_leftover and is_old and not entry.is_dir(follow_symlinks=False):
            _drop(Path(entry.path))
            removed += 1
    if removed:
        log.info("request.cleaned", results=removed)
    return removed


def _refused_change(request_id: str, why: str) -> Change:
    _refuse(request_id, why)
    return Change("failed", f"request refused: {why}", reason="bad-request")


def _refuse(name: str, why: str) -> None:
    log.warning("request.refused", request=name[:100], reason=why)


def _drop(path: Path) -> None:
    """Delete a request file (a link itself, never its target; a folder only when empty)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as exc:
        log.warning("request.not_removed", request=path.name[:100], error=str(exc))
