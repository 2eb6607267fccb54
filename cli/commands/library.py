"""kb rm, kb restore, kb backup and kb restore-backup: what leaves the knowledge base, and what comes back."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, Command
from cli.commands.ingest import load_tokenizer
from cli.errors import Said
from cli.progress import BACKUP, FILES, Progress
from knowledge.config import Settings
from knowledge.words.catalog import LABELLED, N_, Words, terminal_words

if TYPE_CHECKING:
    from knowledge.ingest.requests import Change


def add_wait(p: argparse.ArgumentParser) -> None:
    """The --wait option of a command the running daemon carries out: how long to wait for it."""
    p.add_argument(
        "--wait", type=float, default=30.0, metavar="S", help="how long to wait for a running daemon (30 s)"
    )


def _rm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    add_wait(p)


def _restore_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trash_id", nargs="?", metavar="TRASH_ID")
    add_wait(p)


def _backup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", type=Path, metavar="DEST", help="the archive to write (with --verify: to check)")
    p.add_argument("--verify", action="store_true", help="check the archive DEST instead of writing one")


def _restore_backup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("archive", type=Path, metavar="ARCHIVE")
    p.add_argument(
        "--home",
        dest="restore_home",
        type=Path,
        required=True,
        metavar="DIR",
        help="the new knowledge base folder",
    )


def cmd_rm(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb rm DOC_ID..."""
    from knowledge.ingest.requests import change

    words = terminal_words(settings)
    results = change(
        settings, "remove", args.doc_ids, make_counter=lambda: load_tokenizer(settings), wait_s=args.wait
    )
    failed = 0
    for doc_id, result in zip(args.doc_ids, results, strict=True):
        if result.status == "done" and result.trashed is not None:
            t = result.trashed
            print(words.tr("removed  {doc_id}  {title} → trash {trash_id}; undo with: kb restore {trash_id}",
                           doc_id=t.doc_id, title=repr(t.title), trash_id=t.trash_id), file=out)  # fmt: skip
        elif result.status == "waiting":
            print(
                words.tr("waiting  {id}: {why}", id=doc_id, why=change_said(result, doc_id, words)), file=out
            )
        else:
            failed += 1
            said = change_said(result, doc_id, words)
            removed = _in_trash(settings, doc_id) if result.reason == "no-document" else None
            if removed is not None:  # removed before: say where it is rather than only that it is not here
                said = words.tr("{doc_id} was removed already; kb restore {trash_id} brings it back",
                                doc_id=doc_id, trash_id=removed)  # fmt: skip
            print(f"kb: {said}", file=err)
    return EXIT_FAILED if failed else EXIT_OK


def _in_trash(settings: Settings, doc_id: str) -> str | None:
    """The trash entry of a document removed before (the newest), or None."""
    from knowledge.ingest import trash

    return next((e.trash_id for e in trash.trashed(settings) if e.doc_id == doc_id), None)


def change_said(result: Change, target: str, words: Words) -> str:
    """Why a removal or a restore failed or waits: English says the message itself, another language
    what its reason means."""
    if words.language == "en":
        return result.message
    return words.tr(CHANGE_REASONS.get(result.reason, CHANGE_REASONS["error"]), target=target)


# Why a kb rm or kb restore of {target} failed or is waiting (knowledge.ingest.requests.Change.reason)
CHANGE_REASONS = {
    "no-document": N_("no document {target} in the knowledge base (kb ls lists them)"),
    "no-entry": N_("no trash entry {target} (kb restore lists them)"),
    "in-source": N_("{target} is a file of a folder source, which kb never moves or deletes: delete or move "
                    "it in its folder"),
    "already-indexed": N_("{target} was not restored: the same source is in the knowledge base again "
                          "(remove that document first)"),
    "raw-taken": N_("a file took {target}'s place while restoring; try kb restore {target} again"),
    "tampered": N_("trash entry {target} is refused: it is not as kb left it (it is left in place)"),
    "bad-request": N_("{target} is not a document or trash id (letters, digits, '-' and '_' only)"),
    "unwritten": N_("cannot ask kb's daemon to change {target}: the disk is full or cannot be written"),
    "daemon-off": N_("kb's daemon is not running: the change of {target} is saved and will be done when it "
                     "starts (kb daemon, or kb service install)"),
    "daemon-busy": N_("the daemon has not changed {target} yet (it may be busy with other files); it will "
                      "be done in turn"),
    "unreadable": N_("the daemon's answer about {target} could not be read (kb logs says why)"),
    "error": N_("the change of {target} failed; nothing is lost, try again (kb logs says why)"),
}  # fmt: skip


def cmd_restore(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb restore [TRASH_ID]"""
    from knowledge.ingest import trash
    from knowledge.ingest.requests import change

    words = terminal_words(settings)
    if args.trash_id is None:
        entries = trash.trashed(settings)
        if not entries:
            print(words.tr("the trash is empty"), file=out)
            return EXIT_OK
        for e in entries:
            print(words.tr("{trash_id}  removed {when}  {title}  ({doc_id}, kept until {until})",
                           trash_id=e.trash_id, when=e.removed_at[:16].replace("T", " "), title=e.title,
                           doc_id=e.doc_id, until=e.expires_at().strftime("%Y-%m-%d")), file=out)  # fmt: skip
        print(words.tr("restore one with: kb restore TRASH_ID"), file=out)
        return EXIT_OK
    [result] = change(
        settings, "restore", [args.trash_id], make_counter=lambda: load_tokenizer(settings), wait_s=args.wait
    )
    if result.status == "failed":
        print(f"kb: {change_said(result, args.trash_id, words)}", file=err)
        return EXIT_FAILED
    if result.status == "done":
        said = words.tr("restored  {doc_id}  {title}", doc_id=result.doc_id, title=repr(result.title))
    else:
        said = words.tr("waiting  {why}", why=change_said(result, args.trash_id, words))
    print(said, file=out)
    return EXIT_OK


def cmd_backup(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb backup DEST | kb backup --verify ARCHIVE"""
    from knowledge.backup import backup, verify

    w = terminal_words(settings)
    if args.verify:
        with backup_said(w, args.dest):
            v = verify(args.dest)
        print(w.tr("verified  {archive}: {files} files, {mb} MB, each as its manifest lists; index sound: "
                   "{documents} documents, {chunks} chunks (made {made} by kb {version})",
                   archive=v.archive, files=w.number(v.files), mb=f"{v.bytes / 1e6:.1f}",
                   documents=w.number(v.index.documents), chunks=w.number(v.index.chunks), made=v.created_at,
                   version=v.kb_version), file=out)  # fmt: skip
        return EXIT_OK
    bar = _BackupBar(err, w)
    try:
        with backup_said(w, args.dest):
            done = backup(settings, args.dest, progress=bar)
    finally:
        bar.close()
    dropped = _dropped_secrets(done.settings_dropped, w)
    line = w.tr("backup  {dest}: {files} files, {mb} MB, index {documents} documents / {chunks} chunks, {seconds} s",
                dest=done.dest, files=w.number(done.files), mb=f"{done.bytes / 1e6:.1f}",
                documents=w.number(done.index.documents), chunks=w.number(done.index.chunks),
                seconds=f"{done.seconds:.1f}")  # fmt: skip
    print(line + (w.tr("; left out: {secrets}", secrets=dropped) if dropped else ""), file=out)
    for name in done.secret_in:
        said = w.tr(
            "warning: {name} holds a secret's value (kept as it is: it is one of your files)", name=name
        )
        print(f"kb: {said}", file=err)
    return EXIT_OK


@contextlib.contextmanager
def backup_said(words: Words, path: Path) -> Iterator[None]:
    """A refused or failed backup (BackupError) said in ``words``: English says the error itself (kb's
    top level prints it), another language what its reason means, with the file it is about."""
    from knowledge.backup.errors import BackupError

    try:
        yield
    except BackupError as exc:
        if words.language == "en":
            raise
        said = words.tr(BACKUP_REASONS.get(exc.reason, N_("{path}: the backup failed (kb logs says why)")),
                        path=str(path))  # fmt: skip
        if exc.member:
            said = words.tr(LABELLED, name=said, what=exc.member)
        raise Said(said) from exc


# Why kb backup, kb backup --verify or kb restore-backup refused ({path}: DEST, the archive or DIR)
BACKUP_REASONS = {
    "dest-exists": N_("{path} already exists: kb never writes a backup over it"),
    "dest-inside": N_("{path} is inside the knowledge base: write the backup somewhere else"),
    "dest-busy": N_("another backup is being written to {path}"),
    "dest-folder": N_("the folder to write {path} in does not exist"),
    "part-not-ours": N_("something that is not kb's is in the way of {path} (its .part folder): move it away"),
    "no-index": N_("there is no index to back up yet (add documents first); nothing was written to {path}"),
    "unreadable": N_("a file of the knowledge base could not be read; nothing was written to {path}"),
    "no-room": N_("the disk is full: {path} could not be written — free some space"),
    "unwritable": N_("{path} could not be written"),
    "index-damaged": N_("the copy of the index in {path} failed SQLite's checks"),
    "not-a-backup": N_("{path} is not a kb backup (a .tar.gz file or a folder)"),
    "truncated": N_("{path} is cut short: the archive is damaged"),
    "changed": N_("{path} is damaged: a file's size or hash is not the one its manifest lists"),
    "missing": N_("{path} is damaged: a file its manifest lists is missing"),
    "extra": N_("{path} holds a file its manifest does not list"),
    "unsafe": N_("{path} holds a link, a device or a sparse file: refused"),
    "too-many": N_("{path} holds more files than kb reads"),
    "too-large": N_("{path} needs more space than the disk has free"),
    "bad-manifest": N_("{path} has a manifest (kb-backup.json) kb cannot read"),
    "newer-format": N_("{path} was written by a newer kb: update kb to restore it"),
    "home-not-empty": N_("{path} is not empty: restore a backup into a new or empty folder"),
}  # fmt: skip


def _dropped_secrets(dropped: dict[str, list[str]], words: Words) -> str:
    """'KB_TELEGRAM_TOKEN, HF_TOKEN and 1 other line holding a secret' from what each settings file lost."""
    found = [key for keys in dropped.values() for key in keys if isinstance(key, str)]
    names = ", ".join(sorted({key for key in found if not key.startswith("line ")}))
    lines = len(found) - sum(1 for key in found if not key.startswith("line "))
    other = (
        words.ntr("{n} other line holding a secret", "{n} other lines holding a secret", lines)
        if lines
        else ""
    )
    return words.tr("{names} and {others}", names=names, others=other) if names and other else names or other


class _BackupBar:
    """kb backup's progress on a terminal: files copied of those found, and megabytes."""

    def __init__(self, stream: TextIO, words: Words) -> None:
        self.stream, self.words = stream, words
        self.bar: Progress | None = None
        self.shown = 0

    def __call__(self, files: int, expected: int, nbytes: int) -> None:
        if self.bar is None:
            w = self.words
            self.bar = Progress(expected, label=w.tr(BACKUP), unit=w.tr(FILES), stream=self.stream, words=w)
        self.bar.advance(files - self.shown)
        self.bar.describe(f"{nbytes / 1e6:,.0f} MB")
        self.shown = files

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_restore_backup(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb restore-backup ARCHIVE --home DIR"""
    from knowledge.backup import restore

    w = terminal_words(settings)
    with backup_said(w, args.archive):
        done = restore(args.archive, args.restore_home)
    v, settled = done.verified, done.settled
    print(w.tr("restored  {archive} → {home}: {files} files, index {documents} documents / {chunks} chunks, "
               "{seconds} s", archive=v.archive, home=done.home, files=w.number(v.files),
               documents=w.number(v.index.documents - len(settled.missing)), chunks=w.number(v.index.chunks),
               seconds=f"{done.seconds:.1f}"), file=out)  # fmt: skip
    if settled.put_back:
        back = w.ntr("put back {n} document removed while the backup ran",
                     "put back {n} documents removed while the backup ran", len(settled.put_back))  # fmt: skip
        print(f"  {back}", file=out)
    if settled.missing:
        missing = w.ntr("{n} document of the index copy had no raw file in the archive: left out",
                        "{n} documents of the index copy had no raw file in the archive: left out",
                        len(settled.missing))  # fmt: skip
        print(f"  {missing}", file=out)
    dropped = _dropped_secrets(v.manifest.get("settings_dropped") or {}, w)
    if dropped:
        again = w.tr("not in the backup: {secrets} — set them again in {path}", secrets=dropped,
                     path=done.home / ".env")  # fmt: skip
        print(f"  {again}", file=out)
    nxt = w.tr("next: kb --home {home} daemon (it indexes what the backup caught after its index copy)",
               home=done.home)  # fmt: skip
    print(f"  {nxt}", file=out)
    return EXIT_OK


COMMANDS = {
    "rm": Command(
        cmd_rm,
        help="remove documents (kept in the trash for 30 days; kb restore brings one back)",
        description="Remove documents by id (kb ls shows ids): the raw file and the original go to "
        "knowledge/trash/ for 30 days, and the document leaves the index (its passages, vectors and search "
        "results). Each line says how to undo it: kb restore TRASH_ID. While the daemon runs, it does the "
        "removal (kb asks it through knowledge/requests/); when it does not answer within --wait seconds, the "
        "request stays and is done in turn. Exit status: 0 removed (or waiting for the daemon), 1 an id was "
        "not found or the removal failed.",
        arguments=_rm_arguments,
    ),
    "restore": Command(
        cmd_restore,
        help="bring a removed document back from the trash, or list the trash",
        description="Without TRASH_ID: list the trash (id, date removed, title, document id); entries are "
        "deleted 30 days after their removal. With TRASH_ID: put the raw file and original back (under a free "
        "name when theirs was taken meanwhile) and index the document again; its vectors follow within "
        "minutes. Refused, and the entry kept, when the same source was added again since: remove that "
        "document first. Exit status: 0 restored (or waiting for the daemon), 1 not found or refused.",
        arguments=_restore_arguments,
    ),
    "backup": Command(
        cmd_backup,
        help="write one archive of this knowledge base (or check one with --verify)",
        description="Write one archive of everything needed to rebuild this knowledge base elsewhere, while the "
        "daemon runs (the backup only reads). DEST ending in .tar.gz or .tgz is a compressed tar, any other DEST a "
        "folder; it is written inside DEST.part (a private folder kb marks as its own: anything else there is left "
        "alone and the backup refused) and renamed when complete, never over an existing DEST; stopped (Ctrl-C, "
        "SIGTERM), it leaves nothing. In it: the index "
        "(a consistent copy made with SQLite's online backup API), knowledge/raw/, the inbox with processed/ (the "
        "originals) and failed/, the trash, what the bot and the chats remember (runs/conversations.sqlite3, "
        "runs/web-search.json), .env and kb.toml without their secrets, and kb-backup.json: every file's size and "
        "SHA-256. Not in it: KB_TELEGRAM_TOKEN, HF_TOKEN and every *_TOKEN, *_KEY, *_SECRET, *_PASSWORD setting, "
        "logs, downloaded models and tokenizers, requests waiting for the daemon, files being written. With "
        "--verify, check the archive DEST instead (every file's size and hash, nothing missing or extra, the index's "
        "integrity) without restoring it; its file list and manifest are checked before anything of it is written "
        "(no links, devices or sparse files, at most 1,000,000 files, sizes within the free space). Exit status: 0 "
        "written (or sound), 1 refused or failed.",
        arguments=_backup_arguments,
    ),
    "restore-backup": Command(
        cmd_restore_backup,
        help="rebuild a knowledge base in a new folder from an archive of kb backup",
        description="Rebuild a knowledge base in DIR (a new or empty folder) from an archive written by kb backup. "
        "The archive is verified first, as kb backup --verify does (its file list and manifest before anything is "
        "written); the files are written beside DIR and renamed "
        "into place at the end, so DIR never holds half a knowledge base. Documents removed while the backup ran are "
        "put back: DIR holds every document that was indexed when the backup began, with its original, and kb "
        "search works there at once; start kb --home DIR daemon to index what arrived while the backup ran. "
        "Secrets were left out of the archive: set them again in DIR/.env. Exit status: 0 restored, 1 refused "
        "(DIR not empty, the archive damaged: the file is named).",
        arguments=_restore_backup_arguments,
    ),
}
