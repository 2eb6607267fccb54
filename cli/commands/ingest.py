"""kb ingest and kb reindex: files converted and indexed under the writer lock, then given vectors."""

from __future__ import annotations

import argparse
import collections
import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

import structlog

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from cli.progress import CHUNKS, DOCUMENTS, EMBED, FILES, INGEST, REINDEX, Progress
from knowledge.config import Settings
from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConfigError, WriterLockHeld
from knowledge.ingest.files import iter_sources
from knowledge.ingest.lock import WriterLock, daemon_holder
from knowledge.ingest.names import readable_name
from knowledge.ingest.pipeline import Ingestor, Outcome
from knowledge.ingest.rawsync import warn_index_change
from knowledge.model.tokenizer import TokenCounter, configured_counter
from knowledge.report.status import columns, plural
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import EmbedderError, make_embedder
from knowledge.sources.registry import config_file, read_sources, source_of
from knowledge.store.index import Index
from knowledge.words.catalog import ENGLISH, LABELLED, N_, Words, terminal_words
from knowledge.words.reasons import not_read
from knowledge.words.sources import REFUSALS

log = structlog.get_logger()


def _ingest_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")


def load_tokenizer(settings: Settings, *, background: bool = False) -> TokenCounter:
    """The configured tokenizer, or the approximation (logged once); a hub fetch now, or in the
    background for the next start (``background``: the daemon must watch its inbox at once)."""
    return configured_counter(settings.tokenizer_spec, settings.tokenizer_dir, background=background)[0]


def cmd_ingest(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb ingest PATH..."""
    given, missing = [], []
    for p in args.paths:
        (given if p.exists() or p.is_symlink() else missing).append(p)
    words = terminal_words(settings)
    for p in missing:  # said first; the paths that are there are ingested all the same
        said = words.tr("no such file or folder: {path}", path=str(p))
        print(f"kb: {said}", file=err)
    if not given:
        return EXIT_USAGE
    paths = list(iter_sources(given, skip=[settings.processed, settings.failed]))
    paths, in_sources = outside_sources(settings, paths, err=err)
    outcomes = run_ingest(settings, paths, out=out, err=err) if paths or not in_sources else []
    if missing:
        return EXIT_USAGE
    return EXIT_FAILED if in_sources or any(o.status == "failed" for o in outcomes) else EXIT_OK


def outside_sources(settings: Settings, paths: list[Path], *, err: TextIO) -> tuple[list[Path], int]:
    """The files that are in no folder source, and how many were (each source said once): a source's
    files are indexed where they are and kept in sync, never copied."""
    sources = read_sources(config_file(settings.home))
    if not sources:
        return paths, 0
    kept, told, left = [], set(), 0
    for path in paths:
        found = source_of(sources, path)
        if found is None:
            kept.append(path)
            continue
        left += 1
        if found[0].name not in told:
            told.add(found[0].name)
            words = terminal_words(settings)
            print(f"kb: {words.tr(REFUSALS['inside-source'], path=str(path), name=found[0].name)}", file=err)
    return kept, left


def run_ingest(settings: Settings, paths: list[Path], *, out: TextIO, err: TextIO) -> list[Outcome]:
    """Ingest files under the writer lock: a progress bar on a terminal, a line per file, a summary.

    With the bar up and ``out`` a terminal too, files indexed without trouble get no line of their
    own (the bar counts them); piped output keeps a line for every file.
    """
    t0 = time.perf_counter()
    words = terminal_words(settings)
    lock = WriterLock(settings.lock_path, role="kb ingest")
    try:
        lock.acquire()
    except WriterLockHeld:
        running = daemon_holder(settings.lock_path)
        if running is not None:  # the daemon is the writer: it indexes them, kb ingest reports
            return hand_to_daemon(settings, paths, running, out=out, err=err, t0=t0)
        lock.acquire(wait_s=settings.lock_wait_s)  # another kb ingest or kb reindex: wait for it
    counter = load_tokenizer(settings)
    outcomes: list[Outcome] = []
    try:
        with (
            Index(settings.index_path) as index,
            IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20) as runner,
            Progress(
                len(paths), label=words.tr(INGEST), unit=words.tr(FILES), stream=err, words=words
            ) as bar,
        ):
            warn_index_change(index, counter, settings.chunking)

            def pages_read(*, name: str, sha256: str, stage: str, done: int, total: int) -> None:
                """Scanned pages read by OCR, shown beside the file's name while it is read."""
                bar.describe(f"{name} · OCR page {done}/{total}" if stage == "ocr" else name)
                bar.around(lambda: None)  # redraw now: the bar itself moves only once per file

            ingestor = Ingestor(settings, index, counter, runner=runner, progress=pages_read)
            is_each_line_shown = not (bar.is_on and out.isatty())
            waiting = collections.deque(paths)
            while waiting:
                path = waiting.popleft()
                bar.describe(path.name)
                outcome = ingestor.ingest(path)
                if outcome.status == "later":  # a long scan's turn is over: the other files first
                    waiting.append(path)
                    continue
                outcomes.append(outcome)
                bar.advance()
                if is_each_line_shown or outcome.status != "indexed":
                    bar.print(describe_outcome(outcome, words), out=out)
            if any(o.status == "indexed" for o in outcomes):
                embed_index(settings, index, out=out, err=err)
    finally:
        lock.release()
    summarise(outcomes, t0, out=out, words=words)
    return outcomes


def hand_to_daemon(
    settings: Settings, paths: list[Path], running: str, *, out: TextIO, err: TextIO, t0: float
) -> list[Outcome]:
    """kb ingest while the daemon runs: the files go into its inbox and their results are reported as
    the daemon records them (the same lines as when kb ingest indexes them itself)."""
    from knowledge.ingest.handoff import hand_over

    words = terminal_words(settings)
    handing = f"the daemon is running ({running}): handing {len(paths)} file(s) to its inbox"
    if words.language != "en":
        handing = words.ntr(
            "the daemon is running ({running}): {n} file handed to its inbox",
            "the daemon is running ({running}): {n} files handed to its inbox",
            len(paths),
            running=running,
        )
    print(handing, file=out, flush=True)
    with Progress(len(paths), label=words.tr(INGEST), unit=words.tr(FILES), stream=err, words=words) as bar:
        is_each_line_shown = not (bar.is_on and out.isatty())

        def shown(outcome: Outcome) -> None:
            bar.advance()
            if is_each_line_shown or outcome.status != "indexed":
                bar.print(describe_outcome(outcome, words), out=out)

        outcomes = hand_over(settings, paths, idle_s=max(settings.import_wait_s, 1.0), shown=shown)
    summarise(outcomes, t0, out=out, words=words)
    return outcomes


def summarise(outcomes: list[Outcome], t0: float, *, out: TextIO, words: Words = ENGLISH) -> None:
    """The last lines of kb ingest: a count per status, the time, and the reasons of failures."""
    if words.language != "en":
        print("\n".join(summary_text(outcomes, time.perf_counter() - t0, words)), file=out)
        return
    counts = Counter(o.status for o in outcomes)
    parts = [
        f"{counts[s]} {s}" for s in ("indexed", "duplicate", "failed", "skipped", "waiting") if counts[s]
    ]
    print(f"{', '.join(parts) or 'nothing to do'} in {time.perf_counter() - t0:.1f} s", file=out)
    if reasons := Counter(o.reason for o in outcomes if o.status == "failed"):
        listed = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
        print(f"failed by reason: {listed} (originals and NAME.error.json in inbox/failed/)", file=out)


def embed_index(settings: Settings, index: Index, *, out: TextIO, err: TextIO) -> None:
    """Give every chunk without a vector one (kb ingest and kb reindex, before they return); said in the
    terminal's language (English says the embedder's error itself, another language where to read it)."""
    words = terminal_words(settings)
    is_english = words.language == "en"
    try:
        embedder = make_embedder(settings)
    except EmbedderError as exc:
        print(f"vectors: not made: {exc}" if is_english else words.tr(VECTORS_NOT_MADE), file=out)
        return
    if embedder is None:
        return
    missing = index.chunk_total() - index.vector_count(embedder.name)
    if missing <= 0:
        return
    t0 = time.perf_counter()
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        bar.advance(n)

    with Progress(missing, label=words.tr(EMBED), unit=words.tr(CHUNKS), stream=err, words=words) as bar:
        try:
            embed_missing(index, embedder, batch=settings.embed_batch, progress=advance)
        except EmbedderError as exc:
            log.warning("embed.unavailable", model=embedder.name, reason=str(exc))
            stopped = f"vectors: stopped after {done} of {missing} chunks: {exc}"
            bar.print(stopped if is_english else words.tr(VECTORS_STOPPED, done=done, total=missing), out=out)
            return
    seconds = f"{time.perf_counter() - t0:.1f}"
    if is_english:
        print(f"embedded {done} chunks in {seconds} s ({embedder.name})", file=out)
    else:
        embedded = words.ntr(
            "embedded {n} chunk in {seconds} s ({name})",
            "embedded {n} chunks in {seconds} s ({name})",
            done,
            seconds=seconds,
            name=embedder.name,
        )
        print(embedded, file=out)


VECTORS_NOT_MADE = N_("vectors not made: the embedder cannot be used (kb doctor says why)")
VECTORS_STOPPED = N_("vectors stopped after {done} of {total} chunks (kb doctor says why)")


def describe_outcome(o: Outcome, words: Words = ENGLISH) -> str:
    """One line for a file: what happened and where things are (a name that is not UTF-8, readably); in
    the terminal's language when it is not English."""
    if words.language != "en":
        return described(o, words)
    o = Outcome(**{**o.__dict__, "source": o.source.with_name(readable_name(o.source.name))})
    if o.status == "indexed":
        unread = (
            f"; OCR time ran out, pages {o.unread_pages} not read (KB_OCR_BUDGET_S)" if o.unread_pages else ""
        )
        return f"indexed    {o.source.name} → {o.raw_path} ({plural(o.chunks, 'chunk')}, {o.title!r}){unread}"
    if o.status == "duplicate":
        kept = f"kept as {_rel(o.kept_at)}" if o.kept_at else "not copied again"
        return f"duplicate  {o.source.name} = {o.duplicate_of} ({o.title!r}), {kept}"
    if o.status == "skipped":
        return f"skipped    {o.source.name}: {o.message}"
    if o.status == "waiting":
        return f"waiting    {o.source.name}: {o.message} ({_rel(o.kept_at)})"
    return f"failed     {o.source.name}: {o.reason}: {o.message} → {_rel(o.kept_at)}"


# What happened to a file (the first column of its line) and why one was left out, in words
OUTCOMES = {"indexed": N_("indexed"), "duplicate": N_("duplicate"), "skipped": N_("skipped"),
            "waiting": N_("waiting"), "failed": N_("failed")}  # fmt: skip
SKIPPED = {
    "missing": N_("the file is gone"),
    "not-regular": N_("it is a link or not a regular file; kb does not follow it"),
    "link": N_("it is a symbolic link; kb does not follow links"),
}
STATUS_COLUMNS = 11  # the width of the first column, as the English lines have it


def described(o: Outcome, words: Words) -> str:
    """A file's line in another language than English: what happened in words (why a file failed as the
    bot says it, the error itself being the log's), its names and paths as they are."""
    name, kept = readable_name(o.source.name), _rel(o.kept_at)
    head = words.tr(OUTCOMES.get(o.status, OUTCOMES["failed"]))
    head += " " * max(1, STATUS_COLUMNS - columns(head))
    if o.status == "indexed":
        chunks = words.ntr("{n} chunk", "{n} chunks", o.chunks)
        rest = words.tr("{name} → {path} ({chunks}, {title})", name=name, path=o.raw_path, chunks=chunks,
                        title=repr(o.title))  # fmt: skip
        if o.unread_pages:
            rest += words.tr(
                "; OCR time ran out, pages {pages} not read (KB_OCR_BUDGET_S)", pages=o.unread_pages
            )
    elif o.status == "duplicate":
        if o.kept_at is None:
            rest = words.tr("{name} = {other} ({title}), not copied again", name=name, other=o.duplicate_of,
                            title=repr(o.title))  # fmt: skip
        else:
            rest = words.tr("{name} = {other} ({title}), kept as {kept}", name=name, other=o.duplicate_of,
                            title=repr(o.title), kept=kept)  # fmt: skip
    elif o.status == "skipped":
        why = words.tr(SKIPPED[o.reason]) if o.reason in SKIPPED else not_read(o.reason, words)
        rest = words.tr(LABELLED, name=name, what=why)
    elif o.status == "waiting":
        rest = words.tr("{name}: in the inbox, the daemon is still on it ({kept})", name=name, kept=kept)
    else:
        rest = words.tr("{name}: {why} → {kept}", name=name, why=not_read(o.reason, words), kept=kept)
    return head + rest


def summary_text(outcomes: list[Outcome], seconds: float, words: Words) -> list[str]:
    """kb ingest's last lines in another language than English: a count per status and the time, then
    why files failed (each reason in words, with its count)."""
    counts = Counter(o.status for o in outcomes)
    parts = [f"{words.tr(OUTCOMES[s])} {words.number(counts[s])}" for s in OUTCOMES if counts[s]]
    done = " · ".join(parts) or words.tr("nothing to do")
    lines = [words.tr("{counts} in {seconds} s", counts=done, seconds=f"{seconds:.1f}")]
    if reasons := Counter(o.reason for o in outcomes if o.status == "failed"):
        listed = " · ".join(
            f"{not_read(reason, words)} {words.number(n)}" for reason, n in reasons.most_common()
        )
        lines.append(words.tr("why files failed: {reasons} (the originals and NAME.error.json are in inbox/failed/)",
                              reasons=listed))  # fmt: skip
    return lines


def _rel(path: Path | None) -> str:
    if path is None:
        return "-"
    parts = path.parts
    return "/".join(parts[parts.index("inbox") :]) if "inbox" in parts else str(path)


def cmd_reindex(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb reindex"""
    from cli.commands.sources import walk_each  # it pulls the converters in
    from knowledge.sources.sync import SourceSync

    words = terminal_words(settings)
    counter = load_tokenizer(settings)
    try:
        sources, unread = read_sources(config_file(settings.home)), ""
    except ConfigError as exc:  # the documents of knowledge/raw/ are rebuilt all the same
        sources, unread = [], str(exc)
    t0 = time.perf_counter()
    total = len(list(settings.raw.glob("*.md"))) if settings.raw.is_dir() else 0
    with contextlib.ExitStack() as stack:
        stack.enter_context(WriterLock(settings.lock_path, role="kb reindex"))
        index = stack.enter_context(Index(settings.index_path))
        runner = (  # the folder sources' files are converted again
            stack.enter_context(IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20))
            if sources
            else None
        )
        ingestor = Ingestor(settings, index, counter, runner=runner)
        label, unit = words.tr(REINDEX), words.tr(DOCUMENTS)
        with Progress(total, label=label, unit=unit, stream=err, words=words) as bar:
            docs, chunks = ingestor.reindex(progress=lambda n, total: bar.advance())
        print(words.tr("reindexed {documents} documents, {chunks} chunks with {name} in {seconds} s",
                       documents=docs, chunks=chunks, name=counter.name,
                       seconds=f"{time.perf_counter() - t0:.1f}"), file=out)  # fmt: skip
        # Each folder source's files read again, so that their passages too are cut as kb cuts them now;
        # the index records the new cut only once every file of every source was.
        tallies = walk_each(SourceSync(ingestor), sources, words, out=out, err=err, again=True)
        whole = not unread and all(t.whole and not t.failed for t in tallies)
        if whole:
            index.set_meta("chunking", settings.chunking)
        elif unread:
            print(words.tr(SOURCES_UNREAD, why=unread), file=err)
        else:
            print(words.tr(SOURCES_PARTLY), file=err)
        embed_index(settings, index, out=out, err=err)
    return EXIT_OK if whole else EXIT_FAILED


SOURCES_UNREAD = N_("kb: the folder sources were not read again: {why}")
SOURCES_PARTLY = N_(
    "kb: some files of the folder sources could not be read again (see above): their notes keep their "
    "passages as they were; run kb reindex again once they can be read"
)


COMMANDS = {
    "ingest": Command(
        cmd_ingest,
        help="convert and index files or folders now",
        description="Convert files (HTML, PDF, text, Markdown) and index them. Originals are kept under "
        "knowledge/inbox/processed/ (or failed/ with NAME.error.json); files from outside the inbox are copied, "
        "never moved (one whose bytes kb already holds is recorded as a duplicate and not copied again). A file "
        "that fails does not stop the others; the end lists failures by reason. "
        "Exit status: 0 all succeeded, 1 any failed.",
        arguments=_ingest_arguments,
    ),
    "reindex": Command(
        cmd_reindex,
        help="rebuild the index from knowledge/raw/ and the folder sources",
        description="Rebuild every document from knowledge/raw/ inside the live index, in one transaction "
        "(searches see the old index until the new one is complete). Deterministic: same ids, same hashes. "
        "Then each folder source's files are read and converted again, one at a time (never written; scans "
        "are read by OCR again, which can take long), so that their passages too are cut as kb cuts them now "
        "(after a change of KB_CHUNK_MAX_TOKENS or KB_CHUNK_OVERLAP_TOKENS); a file that cannot be read now "
        "keeps its passages. Exit status: 0 done, 1 when a folder source could not be read again whole.",
    ),
}
