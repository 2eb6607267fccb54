"""kb rm, kb restore, kb backup and kb restore-backup: what leaves the knowledge base, and what comes back."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, Command
from cli.commands.ingest import load_tokenizer
from cli.progress import Progress
from knowledge.config import Settings
from knowledge.report.status import plural


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

    results = change(
        settings, "remove", args.doc_ids, make_counter=lambda: load_tokenizer(settings), wait_s=args.wait
    )
    failed = 0
    for doc_id, result in zip(args.doc_ids, results, strict=True):
        if result.status == "done" and result.trashed is not None:
            t = result.trashed
            print(
                f"removed  {t.doc_id}  {t.title!r} → trash {t.trash_id}; undo with: kb restore {t.trash_id}",
                file=out,
            )
        elif result.status == "waiting":
            print(f"waiting  {doc_id}: {result.message}", file=out)
        else:
            failed += 1
            print(f"kb: {result.message}", file=err)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_restore(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb restore [TRASH_ID]"""
    from knowledge.ingest import trash
    from knowledge.ingest.requests import change

    if args.trash_id is None:
        entries = trash.trashed(settings)
        if not entries:
            print("the trash is empty", file=out)
            return EXIT_OK
        for e in entries:
            until = e.expires_at().strftime("%Y-%m-%d")
            print(
                f"{e.trash_id}  removed {e.removed_at[:16].replace('T', ' ')}  {e.title}  ({e.doc_id}, kept until {until})",
                file=out,
            )
        print("restore one with: kb restore TRASH_ID", file=out)
        return EXIT_OK
    [result] = change(
        settings, "restore", [args.trash_id], make_counter=lambda: load_tokenizer(settings), wait_s=args.wait
    )
    if result.status == "failed":
        print(f"kb: {result.message}", file=err)
        return EXIT_FAILED
    print(
        f"restored  {result.doc_id}  {result.title!r}"
        if result.status == "done"
        else f"waiting  {result.message}",
        file=out,
    )
    return EXIT_OK


def cmd_backup(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb backup DEST | kb backup --verify ARCHIVE"""
    from knowledge.backup import backup, verify

    if args.verify:
        v = verify(args.dest)
        print(
            f"verified  {v.archive}: {v.files:,} files, {v.bytes / 1e6:.1f} MB, each as its manifest lists; index "
            f"sound: {v.index.documents:,} documents, {v.index.chunks:,} chunks (made {v.created_at} by kb {v.kb_version})",
            file=out,
        )
        return EXIT_OK
    bar = _BackupBar(err)
    try:
        done = backup(settings, args.dest, progress=bar)
    finally:
        bar.close()
    dropped = _dropped_secrets(done.settings_dropped)
    print(
        f"backup  {done.dest}: {done.files:,} files, {done.bytes / 1e6:.1f} MB, index {done.index.documents:,} "
        f"documents / {done.index.chunks:,} chunks, {done.seconds:.1f} s"
        + (f"; left out: {dropped}" if dropped else ""),
        file=out,
    )
    for name in done.secret_in:
        print(
            f"kb: warning: {name} holds a secret's value (kept as it is: it is one of your files)",
            file=err,
        )
    return EXIT_OK


def _dropped_secrets(dropped: dict[str, list[str]]) -> str:
    """'KB_TELEGRAM_TOKEN, HF_TOKEN and 1 other line holding a secret' from what each settings file lost."""
    found = [key for keys in dropped.values() for key in keys if isinstance(key, str)]
    names = sorted({key for key in found if not key.startswith("line ")})
    lines = len(found) - sum(1 for key in found if not key.startswith("line "))
    other = f"{plural(lines, 'other line')} holding a secret" if lines else ""
    return " and ".join(part for part in (", ".join(names), other) if part)


class _BackupBar:
    """kb backup's progress on a terminal: files copied of those found, and megabytes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bar: Progress | None = None
        self.shown = 0

    def __call__(self, files: int, expected: int, nbytes: int) -> None:
        if self.bar is None:
            self.bar = Progress(expected, label="backup", unit="files", stream=self.stream)
        self.bar.advance(files - self.shown)
        self.bar.describe(f"{nbytes / 1e6:,.0f} MB")
        self.shown = files

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_restore_backup(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb restore-backup ARCHIVE --home DIR"""
    from knowledge.backup import restore

    done = restore(args.archive, args.restore_home)
    v = done.verified
    print(
        f"restored  {v.archive} → {done.home}: {v.files:,} files, index "
        f"{v.index.documents - len(done.settled.missing):,} documents / {v.index.chunks:,} chunks, {done.seconds:.1f} s",
        file=out,
    )
    if done.settled.put_back:
        print(
            f"  put back {plural(len(done.settled.put_back), 'document')} removed while the backup ran",
            file=out,
        )
    if done.settled.missing:
        print(
            f"  {plural(len(done.settled.missing), 'document')} of the index copy had no raw file in the archive: left out",
            file=out,
        )
    dropped = _dropped_secrets(v.manifest.get("settings_dropped") or {})
    if dropped:
        print(f"  not in the backup: {dropped} — set them again in {done.home / '.env'}", file=out)
    print(
        f"  next: kb --home {done.home} daemon (it indexes what the backup caught after its index copy)",
        file=out,
    )
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
