"""kb sources: the owner's folders indexed where they are (add, rm, rescan, and what each one holds)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from cli.progress import FILES, Progress
from knowledge.config import Settings
from knowledge.errors import SourceRefused, WriterLockHeld
from knowledge.ingest.lock import WriterLock, daemon_holder
from knowledge.sources import registry
from knowledge.sources.registry import Source
from knowledge.sources.report import reports
from knowledge.store.index import Index
from knowledge.words.catalog import LABELLED, N_, Words, terminal_words
from knowledge.words.sources import REFUSALS, SAID, counts_line, forgot, left_out

if TYPE_CHECKING:
    from knowledge.sources.sync import SourceSync, Tally

ACTIONS = ("add", "rm", "rescan")
USAGE = N_("usage: {usage}")  # a command line written wrong: how it is written
RESCAN_PREFIX = "rescan."  # knowledge/requests/rescan.NAME: the running daemon walks NAME again


def _sources_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "words", nargs="*", metavar="[ACTION] [ARG]", help="add PATH, rm NAME, rescan [NAME], or NAME"
    )
    p.add_argument("--name", help="the source's name (add): letters, digits, - _ . ; cited as NAME:path")
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help="take only matching files")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="leave matching files out")
    p.add_argument("--json", action="store_true", help="print the sources as JSON (with every file left out)")


def cmd_sources(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb sources [add PATH --name NAME | rm NAME | rescan [NAME] | NAME] [--json]"""
    words = terminal_words(settings)
    action, rest = (
        (args.words[0], args.words[1:]) if args.words and args.words[0] in ACTIONS else ("", args.words)
    )
    try:
        if action == "add":
            if len(rest) != 1 or not args.name:
                usage = "kb sources add PATH --name NAME [--include GLOB]... [--exclude GLOB]..."
                print(words.tr(USAGE, usage=usage), file=err)
                return EXIT_USAGE
            return _add(settings, Path(rest[0]).expanduser().absolute(), args, words, out=out, err=err)
        if action == "rm":
            if len(rest) != 1:
                print(words.tr(USAGE, usage="kb sources rm NAME"), file=err)
                return EXIT_USAGE
            return _rm(settings, rest[0], words, out=out, err=err)
        if action == "rescan":
            if len(rest) > 1:
                print(words.tr(USAGE, usage="kb sources rescan [NAME]"), file=err)
                return EXIT_USAGE
            return _rescan(settings, rest[0] if rest else None, words, out=out, err=err)
        if len(rest) > 1:
            print(words.tr(USAGE, usage="kb sources [NAME] [--json]"), file=err)
            return EXIT_USAGE
        return _show(settings, rest[0] if rest else None, words, as_json=args.json, out=out)
    except SourceRefused as exc:
        print(f"kb: {words.tr(REFUSALS[exc.reason], **exc.facts)}", file=err)
        return EXIT_FAILED


def _sources(settings: Settings) -> list[Source]:
    return registry.read_sources(registry.config_file(settings.home))


def _add(
    settings: Settings, path: Path, args: argparse.Namespace, words: Words, *, out: TextIO, err: TextIO
) -> int:
    existing = _sources(settings)
    source = Source(args.name, path, tuple(args.include), tuple(args.exclude))
    registry.check_new(source, existing, settings.home)
    registry.write_sources(registry.config_file(settings.home), [*existing, source])
    shown = f" → {source.root}" if source.is_linked else ""
    print(words.tr(SAID["added"], name=source.name, path=f"{source.path}{shown}"), file=out)
    return _sync(settings, [source], words, out=out, err=err)


def _rm(settings: Settings, name: str, words: Words, *, out: TextIO, err: TextIO) -> int:
    existing = _sources(settings)
    source = registry.find(existing, name)
    registry.write_sources(registry.config_file(settings.home), [s for s in existing if s.name != name])
    print(words.tr(SAID["removed"], name=name), file=out)
    writer = _writer(settings)
    if writer is None:
        print(words.tr(SAID["daemon-forgets"]), file=out)
        return EXIT_OK
    try:
        with writer as sync:
            n = sync.forget_source(source.name)
    finally:
        writer.release()
    print(forgot(words, n), file=out)
    return EXIT_OK


def _rescan(settings: Settings, name: str | None, words: Words, *, out: TextIO, err: TextIO) -> int:
    existing = _sources(settings)
    chosen = [registry.find(existing, name)] if name else existing
    return _sync(settings, chosen, words, out=out, err=err)


def _sync(settings: Settings, sources: list[Source], words: Words, *, out: TextIO, err: TextIO) -> int:
    """Walk these sources now in this process, or ask the running daemon to."""
    writer = _writer(settings)
    if writer is None:
        settings.requests.mkdir(parents=True, exist_ok=True)
        for s in sources:
            (settings.requests / (RESCAN_PREFIX + s.name)).touch()
            print(words.tr(SAID["daemon-indexes"], name=s.name),
                  file=out)  # fmt: skip
        return EXIT_OK
    try:
        with writer as sync:
            walk_each(sync, sources, words, out=out, err=err)
            from cli.commands.ingest import embed_index

            embed_index(settings, sync.index, out=out, err=err)
    finally:
        writer.release()
    return EXIT_OK


def walk_each(
    sync: SourceSync, sources: list[Source], words: Words, *, out: TextIO, err: TextIO, again: bool = False
) -> list[Tally]:
    """Walk each source in this process, a progress bar each on a terminal, and say what each walk did
    (``again``: every file read again, as kb reindex does)."""
    tallies = []
    for s in sources:
        bars: list[Progress] = []  # made at the first step: the walk tells how many files there are

        def step(done: int, total: int, bars: list[Progress] = bars, name: str = s.name) -> None:
            if not bars:
                bars.append(Progress(total, label=name, unit=words.tr(FILES), stream=err, words=words))
            bars[0].advance()

        try:
            tally = sync.sync_source(s, progress=step, again=again)
        finally:
            for bar in bars:
                bar.close()
        said = words.tr(SAID["synced"], name=s.name, indexed=tally.indexed,
                        moved=tally.moved, forgotten=tally.forgotten, unchanged=tally.unchanged + tally.touched,
                        skipped=tally.skipped, failed=tally.failed)  # fmt: skip
        if tally.missing:  # nothing walked, nothing forgotten
            said = f"{said} {words.tr(SAID['absent'])}"
        print(said, file=out)
        tallies.append(tally)
    return tallies


class _Writer:
    """This process as the writer: the lock held, the index and a SourceSync open while in use."""

    def __init__(self, settings: Settings, lock: WriterLock) -> None:
        self.settings, self.lock = settings, lock
        self._index: Index | None = None

    def __enter__(self):  # noqa: ANN204 - a SourceSync, imported late (it pulls the converters in)
        from cli.commands.ingest import load_tokenizer
        from knowledge.convert.isolate import IsolatedRunner
        from knowledge.ingest.pipeline import Ingestor
        from knowledge.sources.sync import SourceSync

        self._index = Index(self.settings.index_path)
        self._runner = IsolatedRunner(memory_bytes=self.settings.convert_memory_mb * 2**20).__enter__()
        return SourceSync(
            Ingestor(self.settings, self._index, load_tokenizer(self.settings), runner=self._runner)
        )

    def __exit__(self, *exc: object) -> None:
        self._runner.__exit__(None, None, None)
        if self._index is not None:
            self._index.close()

    def release(self) -> None:
        """Let the lock go."""
        self.lock.release()


def _writer(settings: Settings) -> _Writer | None:
    """The writer lock taken by this process, or None when the daemon holds it (it does the work)."""
    lock = WriterLock(settings.lock_path, role="kb sources")
    try:
        lock.acquire()
    except WriterLockHeld:
        if daemon_holder(settings.lock_path) is not None:
            return None
        lock.acquire(wait_s=settings.lock_wait_s)  # kb ingest or kb reindex: wait for it
    return _Writer(settings, lock)


def _show(settings: Settings, name: str | None, words: Words, *, as_json: bool, out: TextIO) -> int:
    existing = _sources(settings)
    chosen = [registry.find(existing, name)] if name else existing
    found = reports(settings.index_path, chosen)
    if as_json:
        print(json.dumps([r.as_json() for r in found], ensure_ascii=False, indent=2), file=out)
        return EXIT_OK
    if not found:
        print(words.tr(SAID["none"]), file=out)
        return EXIT_OK
    for r in found:
        where = r.path if r.root == r.path else f"{r.path} → {r.root}"
        missing = "" if r.is_present else "  " + words.tr(SAID["absent"])
        print(f"{r.name:<12} {where}{missing}", file=out)
        print(f"{'':<12} {counts_line(words, r.counts)}", file=out)
        if name:
            for item in r.items:
                why = left_out(words, item.reason, error=item.message, rule=item.rule)
                print(f"  {words.tr(item.state):<8} {words.tr(LABELLED, name=item.path, what=why)}", file=out)
    return EXIT_OK


COMMANDS = {
    "sources": Command(
        cmd_sources,
        help="folders indexed where they are (a notes vault, Documents): list, add, rm, rescan",
        description="Folders kb indexes in place and keeps in sync, read-only: kb never writes, moves or deletes "
        "anything inside them; what it knows lives in its home. They are kept in KB_HOME/kb.toml as "
        "[[sources]] tables.\n\n"
        "  kb sources                      each source: its path and files indexed / waiting / skipped / failed\n"
        "  kb sources NAME                 one source, and every file left out with its reason\n"
        "  kb sources add PATH --name NAME [--include GLOB]... [--exclude GLOB]...\n"
        "                                  register a folder and index it (the running daemon does it)\n"
        "  kb sources rm NAME              forget its documents; its files stay as they are\n"
        "  kb sources rescan [NAME]        walk it (or every source) again now\n\n"
        "Left out by default: hidden files and folders (.obsidian/, .git/, .trash/, .stversions/), "
        "node_modules/, @eaDir/, __MACOSX/, sync conflict copies, temporary and lock files, iCloud placeholders, "
        "and links leading outside the source. GLOBs use gitignore syntax ('*.md', 'Templates/', '!keep.md'). "
        "Exit status: 0 done, 1 refused, 2 usage.",
        arguments=_sources_arguments,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ),
}
