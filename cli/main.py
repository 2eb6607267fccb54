"""The ``kb`` command line. Output shapes of ``search --json`` and ``status --json`` are a contract."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

import structlog

from cli.commands.speaking import add_commands as add_speaking_commands
from cli.progress import Progress
from cli.terminal import SafeStream, neutralise
from knowledge import __version__
from knowledge.config import SETTINGS, Settings, describe, load_settings, read_dotenv
from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConfigError, KbError, WriterLockHeld
from knowledge.ingest.files import iter_sources
from knowledge.ingest.lock import WriterLock, daemon_holder
from knowledge.ingest.names import readable_name
from knowledge.ingest.pipeline import Ingestor, Outcome
from knowledge.logs import WarnOnce, configure_logging
from knowledge.model.tokenizer import TokenCounter, configured_counter
from knowledge.redact import redactor
from knowledge.report.status import (
    activity_facts,
    aligned,
    plural,
    probe_model,
    status_report,
    summary_facts,
    summary_lines,
)
from knowledge.retrieval.backfill import coverage, embed_missing
from knowledge.retrieval.embed import EmbedderError, make_embedder
from knowledge.retrieval.search import Found, Meaning, SearchResult, find
from knowledge.retrieval.sufficiency import Verdict
from knowledge.retrieval.translate import Translation, search_translated
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.words.catalog import ENGLISH, Words, terminal_words
from knowledge.words.replies import plain, text_and_note

if TYPE_CHECKING:
    from knowledge.speech.transcribe import Transcript
    from knowledge.wiring import Language

log = structlog.get_logger()

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_EPILOG = "settings (environment, KB_HOME/.env or KB_HOME/kb.toml):\n" + "\n".join(
    f"  {s.env:<26} {s.help} (default: {s.default or 'empty'})" for s in SETTINGS
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one sub-command per job."""
    parser = argparse.ArgumentParser(
        prog="kb",
        description="A self-hosted knowledge base: drop files into knowledge/inbox/, ask questions, get cited answers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--home", metavar="DIR", help="knowledge base folder (default: $KB_HOME or the current folder)"
    )
    parser.add_argument("--version", action="version", version=f"kb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="start kb: the inbox daemon and a search prompt in this terminal")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "daemon",
        help="watch knowledge/inbox/ and raw/ and keep the index up to date",
        description="Watch knowledge/inbox/: every complete file (unchanged for KB_SETTLE_S) is converted, kept "
        "under processed/ (or failed/ with NAME.error.json) and indexed, in arrival order. Edits and deletions "
        "in knowledge/raw/ update the index. Stops cleanly on SIGTERM/SIGINT. One daemon per knowledge base.",
    )
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser(
        "service",
        help="install, remove or show kb's background services (launchd on macOS, systemd on Linux)",
        description="kb's three services: mlx (the model server, KB_MODEL on KB_LLM_URL's port, thinking "
        "off), daemon (the inbox) and bot (Telegram; only when KB_TELEGRAM_TOKEN is set). On macOS they are "
        "launchd agents in ~/Library/LaunchAgents (local.kb.NAME.plist, logs in runs/logs/NAME.*.log); on "
        "Linux systemd user units in ~/.config/systemd/user (kb-NAME.service, journalctl --user -u kb-NAME). "
        "Settings come from ~/.config/kb/env (KEY=value lines). They run this checkout's .venv on this "
        "knowledge base (KB_HOME).",
    )
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument(
        "--only", metavar="NAMES", help="comma-separated: mlx, daemon, bot (default: all that apply)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the files install would write; change nothing"
    )
    p.set_defaults(func=cmd_service)

    p = sub.add_parser(
        "ask",
        help="answer one question from the knowledge base with the model",
        description="Answer a typed QUESTION, or the question spoken in an audio file (--audio: a voice note or "
        "MP3, M4A, OGG, WAV, FLAC; transcribed with KB_WHISPER_MODEL, then answered like a typed question). "
        "Exit status: 0 answered, 1 the audio could not be transcribed (nothing heard, too long, unreadable, "
        "timed out: the reason on stderr) or another failure, 2 usage.",
    )
    p.add_argument("question", nargs="*")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"text","mode","citations":[...],"note","door":{"taken","by","why"},"candidates":[...],'
        '"translations":[{"language","text"}],"searched_as":[...],"passages":[...]} (door: local, web or none, '
        "decided by retrieval, the model or you; translations: the question as also searched in the index's "
        "other languages; searched_as: the queries searched, the standalone question first; passages: what "
        "retrieval ranked for it, best first: rank, chunk_id, document_id, source_name, title, lines; "
        'with --audio also "heard": {"text","language","duration_s"})',
    )
    p.add_argument(
        "--conversation",
        metavar="NAME",
        help="ask within the conversation NAME: a follow-up is understood from its earlier questions and "
        "answers (kept in runs/conversations.sqlite3; it ends after KB_CONVERSATION_IDLE_S of silence)",
    )
    p.add_argument("--new", action="store_true", help="with --conversation: start it afresh")
    p.add_argument("--audio", type=Path, metavar="FILE", help="ask the question spoken in this audio file")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("chat", help="a terminal chat with the knowledge base (/help inside)")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser(
        "measure",
        help="exact prompt sizes for evidence budgets (and timings from the server)",
        description="For each evidence budget: the evidence tokens actually packed and the exact input tokens "
        "(system prompt, question, evidence and chat template, counted with the model's tokenizer). "
        "Without --dry-run each prompt is also sent: elapsed ms, output tokens and the server's own count.",
    )
    p.add_argument("question", nargs="*")
    # Strings, not ints: "--evidence-tokens 160 320 640 QUESTION" must leave the question's words alone.
    p.add_argument("--evidence-tokens", nargs="+", default=["160", "320", "640"], metavar="N")
    p.add_argument("--dry-run", action="store_true", help="count only; no model server needed")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser(
        "websearch",
        help="search the web for a question and list candidates (nothing is imported)",
        description="Plan queries, search (DuckDuckGo Lite, or Brave with KB_BRAVE_API_KEY), filter, and store up to "
        "five candidates web-1…web-5 for the terminal's chat. Exit status: 0 with or without candidates, 3 when every "
        "provider is rate-limited, 1 on other failures.",
    )
    p.add_argument("question", nargs="+")
    p.add_argument(
        "--json", action="store_true", help="print the plan, candidates, summary and drops as JSON"
    )
    p.add_argument("--explain", action="store_true", help="also list every dropped result and why")
    p.set_defaults(func=cmd_websearch)

    p = sub.add_parser(
        "import",
        help="import a web candidate (web-1 … web-5) of the latest search",
        description="Download the candidate through the SSRF guard, hand it to the daemon through the inbox, wait "
        "until it is indexed (KB_IMPORT_WAIT_S), then answer the original question again. Exit status: 0 indexed "
        "(or already imported, or queued for a daemon that is not running), 2 refused by the guard or the "
        "selection, 1 any other failure.",
    )
    p.add_argument("source_id", metavar="web-N")
    p.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "import-url",
        help="import one web page or PDF by URL (your explicit choice)",
        description="The URL becomes a one-candidate list and is imported as web-1. With --check, only print the "
        "guard's verdict (DNS resolution included) without connecting. Exit status as for kb import.",
    )
    p.add_argument("url")
    p.add_argument(
        "--check", action="store_true", help="say whether the guard allows the URL; do not connect"
    )
    p.set_defaults(func=cmd_import_url)

    p = sub.add_parser(
        "doctor", help="check the model server, tokenizer, index, inbox, OCR, voice and Telegram settings"
    )
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser(
        "checkpoint",
        help="run fixed cases against the model server: does this model work with kb?",
        description="Builds a small throw-away knowledge base and asks fixed questions: answered from the right "
        "document with citations, a question it cannot answer, arithmetic, a prompt-injection document. "
        "Prints pass/fail per case with timings; exit 1 when any case fails.",
    )
    p.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser(
        "bot",
        help="the Telegram bot (long polling): answers, web candidates as buttons, files, photos and voice notes",
        description="Serve the owner's Telegram chats. Needs KB_TELEGRAM_TOKEN and KB_TELEGRAM_ALLOWED_USERS "
        "(numeric user ids); KB_TELEGRAM_API_URL points at another Bot API server. Stops cleanly on SIGTERM.",
    )
    p.set_defaults(func=cmd_bot)

    p = sub.add_parser("logs", help="show the structured log readably (runs/logs/kb.jsonl)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines as they come")
    p.add_argument(
        "-n", type=int, default=50, metavar="N", help="how many recent lines to show first (default 50)"
    )
    p.add_argument("--event", metavar="PREFIX", help="only events starting with PREFIX (e.g. ingest.)")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser(
        "ingest",
        help="convert and index files or folders now",
        description="Convert files (HTML, PDF, text, Markdown) and index them. Originals are kept under "
        "knowledge/inbox/processed/ (or failed/ with NAME.error.json); files from outside the inbox are copied, "
        "never moved. A file that fails does not stop the others; the end lists failures by reason. "
        "Exit status: 0 all succeeded, 1 any failed.",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "search",
        help="find passages for a question",
        description="Rank passages for a question (any text is a valid query) and say whether they answer it. "
        "With --json each result is "
        '{"rank","score","chunk_id","document_id","title","source_name","source_url","start_line","end_line","text",'
        '"relevance","answerable","translations"}: relevance is the probability (0-1) that the passage answers '
        "the question, answerable the verdict on the question (its best passage reaches KB_MIN_RELEVANCE), "
        'translations the question as also searched in the index\'s other languages ([{"language","text"}], '
        "from the model), both the same on every result.",
    )
    p.add_argument("query", nargs="*", help="the question (words are joined with spaces)")
    p.add_argument(
        "-k", type=int, default=None, metavar="N", help="number of passages (default: KB_SEARCH_K)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--no-translate",
        action="store_true",
        help="search with the question as written only (by default, when the model server is up and the "
        "index holds other languages, the question translated by the model is searched too; KB_TRANSLATE)",
    )
    p.add_argument(
        "--batch",
        type=Path,
        metavar="FILE",
        help='one query per line; prints one line per query, in order: {"query": ..., "results": [...], '
        '"answerable": ..., "verdict": {"answerable","relevance","threshold","basis","why"}, "translations": [...]}',
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "reindex",
        help="rebuild the index from knowledge/raw/",
        description="Rebuild every document from knowledge/raw/ inside the live index, in one transaction "
        "(searches see the old index until the new one is complete). Deterministic: same ids, same hashes.",
    )
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser(
        "ls",
        help="list documents, newest first",
        description="List the documents in the knowledge base, newest first: id, date indexed, title and "
        "source (file name or URL). With WORDS, only documents whose title or source contains every word "
        "(any case). With --json, a list of "
        '{"id","title","indexed_at","source_name","source_url","raw_path","chunks"}. '
        "Exit status: 0 (also when nothing matches).",
    )
    p.add_argument("words", nargs="*", metavar="WORDS", help="words the title or source must contain")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--limit", type=int, default=50, metavar="N", help="show at most N documents (default 50; 0: all)"
    )
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser(
        "rm",
        help="remove documents (kept in the trash for 30 days; kb restore brings one back)",
        description="Remove documents by id (kb ls shows ids): the raw file and the original go to "
        "knowledge/trash/ for 30 days, and the document leaves the index (its passages, vectors and search "
        "results). Each line says how to undo it: kb restore TRASH_ID. While the daemon runs, it does the "
        "removal (kb asks it through knowledge/requests/); when it does not answer within --wait seconds, the "
        "request stays and is done in turn. Exit status: 0 removed (or waiting for the daemon), 1 an id was "
        "not found or the removal failed.",
    )
    p.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    p.add_argument(
        "--wait", type=float, default=30.0, metavar="S", help="how long to wait for a running daemon (30 s)"
    )
    p.set_defaults(func=cmd_rm)

    p = sub.add_parser(
        "restore",
        help="bring a removed document back from the trash, or list the trash",
        description="Without TRASH_ID: list the trash (id, date removed, title, document id); entries are "
        "deleted 30 days after their removal. With TRASH_ID: put the raw file and original back (under a free "
        "name when theirs was taken meanwhile) and index the document again; its vectors follow within "
        "minutes. Refused, and the entry kept, when the same source was added again since: remove that "
        "document first. Exit status: 0 restored (or waiting for the daemon), 1 not found or refused.",
    )
    p.add_argument("trash_id", nargs="?", metavar="TRASH_ID")
    p.add_argument(
        "--wait", type=float, default=30.0, metavar="S", help="how long to wait for a running daemon (30 s)"
    )
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser(
        "backup",
        help="write one archive of this knowledge base (or check one with --verify)",
        description="Write one archive of everything needed to rebuild this knowledge base elsewhere, while the "
        "daemon runs (the backup only reads). DEST ending in .tar.gz or .tgz is a compressed tar, any other DEST a "
        "folder; it is written as DEST.part and renamed when complete, never over an existing DEST. In it: the index "
        "(a consistent copy made with SQLite's online backup API), knowledge/raw/, the inbox with processed/ (the "
        "originals) and failed/, the trash, what the bot and the chats remember (runs/conversations.sqlite3, "
        "runs/web-search.json), .env and kb.toml without their secrets, and kb-backup.json: every file's size and "
        "SHA-256. Not in it: KB_TELEGRAM_TOKEN, HF_TOKEN and every *_TOKEN, *_KEY, *_SECRET, *_PASSWORD setting, "
        "logs, downloaded models and tokenizers, requests waiting for the daemon, files being written. With "
        "--verify, check the archive DEST instead (every file's size and hash, nothing missing or extra, the index's "
        "integrity) without restoring it. Exit status: 0 written (or sound), 1 refused or failed.",
    )
    p.add_argument("dest", type=Path, metavar="DEST", help="the archive to write (with --verify: to check)")
    p.add_argument("--verify", action="store_true", help="check the archive DEST instead of writing one")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser(
        "restore-backup",
        help="rebuild a knowledge base in a new folder from an archive of kb backup",
        description="Rebuild a knowledge base in DIR (a new or empty folder) from an archive written by kb backup. "
        "The archive is verified first, as kb backup --verify does; the files are written beside DIR and renamed "
        "into place at the end, so DIR never holds half a knowledge base. Documents removed while the backup ran are "
        "put back: DIR holds every document that was indexed when the backup began, with its original, and kb "
        "search works there at once; start kb --home DIR daemon to index what arrived while the backup ran. "
        "Secrets were left out of the archive: set them again in DIR/.env. Exit status: 0 restored, 1 refused "
        "(DIR not empty, the archive damaged: the file is named).",
    )
    p.add_argument("archive", type=Path, metavar="ARCHIVE")
    p.add_argument(
        "--home",
        dest="restore_home",
        type=Path,
        required=True,
        metavar="DIR",
        help="the new knowledge base folder",
    )
    p.set_defaults(func=cmd_restore_backup)

    add_speaking_commands(sub)  # summarize, digest

    p = sub.add_parser("status", help="documents, chunks, tokenizer, inbox and recent ingests")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("config", help="print every setting, its value and where it came from")
    p.set_defaults(func=cmd_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kb`` console script."""
    # The hub library logs its retries on its own handler, past kb's logging: errors only (the
    # reasons reach the owner as kb's own sentences). Set before anything imports it.
    os.environ.setdefault("HF_HUB_VERBOSITY", "error")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        settings = load_settings(home=args.home)
    except ConfigError as exc:
        print(f"kb: configuration error: {neutralise(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    # Everything printed from here on: no terminal control characters, no secrets.
    secrets = (settings.telegram_token, settings.brave_api_key)
    out, err = sys.stdout, sys.stderr
    sys.stdout = SafeStream(out, redactor(secrets))  # type: ignore[assignment]
    sys.stderr = SafeStream(err, redactor(secrets))  # type: ignore[assignment]
    try:
        if args.command != "config":
            is_quiet = is_quiet_console(args.command, settings)
            configure_logging(
                settings.log_path,
                console_level="warning" if is_quiet else settings.log_level,
                once=WarnOnce() if is_quiet else None,  # this run's memory of the warnings it has shown
                secrets=secrets,
            )
        return _run(args, settings)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        return args.func(args, settings)
    except KbError as exc:
        print(f"kb: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("kb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # `kb search … | head`: the reader left; not an error
        return EXIT_OK
    except Exception:  # a bug or a library's error: shown and logged, through the redacting streams
        log.exception("kb.crashed", command=args.command)
        traceback.print_exc(file=sys.stderr)
        return EXIT_FAILED


# Commands a person watches (a chat, a progress bar): on the console, warnings only, each once, in one short line.
QUIET_COMMANDS = frozenset(
    {
        "run",
        "chat",
        "ingest",
        "reindex",
        "ls",
        "rm",
        "restore",
        "backup",
        "restore-backup",
        "summarize",
        "digest",
    }
)


def is_quiet_console(command: str, settings: Settings) -> bool:
    """A quiet command, and KB_LOG_LEVEL not set (setting it brings back full log lines at that level)."""
    return command in QUIET_COMMANDS and settings.sources.get("KB_LOG_LEVEL", "default") == "default"


def load_tokenizer(settings: Settings, *, background: bool = False) -> TokenCounter:
    """The configured tokenizer, or the approximation (logged once); a hub fetch now, or in the
    background for the next start (``background``: the daemon must watch its inbox at once)."""
    return configured_counter(settings.tokenizer_spec, settings.tokenizer_dir, background=background)[0]


# -- ingest ---------------------------------------------------------------------------------


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    """kb ingest PATH..."""
    missing = [p for p in args.paths if not p.exists() and not p.is_symlink()]
    if missing:
        for p in missing:
            print(f"kb: no such file or folder: {p}", file=sys.stderr)
        return EXIT_USAGE
    paths = list(iter_sources(args.paths, skip=[settings.processed, settings.failed]))
    outcomes = run_ingest(settings, paths, out=sys.stdout)
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) else EXIT_OK


def run_ingest(settings: Settings, paths: list[Path], *, out: TextIO) -> list[Outcome]:
    """Ingest files under the writer lock: a progress bar on a terminal, a line per file, a summary.

    With the bar up and ``out`` a terminal too, files indexed without trouble get no line of their
    own (the bar counts them); piped output keeps a line for every file.
    """
    t0 = time.perf_counter()
    lock = WriterLock(settings.lock_path, role="kb ingest")
    try:
        lock.acquire()
    except WriterLockHeld:
        running = daemon_holder(settings.lock_path)
        if running is not None:  # the daemon is the writer: it indexes them, kb ingest reports
            return hand_to_daemon(settings, paths, running, out=out, t0=t0)
        lock.acquire(wait_s=settings.lock_wait_s)  # another kb ingest or kb reindex: wait for it
    counter = load_tokenizer(settings)
    outcomes: list[Outcome] = []
    try:
        with (
            Index(settings.index_path) as index,
            IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20) as runner,
            Progress(len(paths), label="ingest", unit="files", stream=sys.stderr) as bar,
        ):
            _warn_tokenizer_change(index, counter)

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
                    bar.print(describe_outcome(outcome), out=out)
            if any(o.status == "indexed" for o in outcomes):
                embed_index(settings, index, out=out)
    finally:
        lock.release()
    summarise(outcomes, t0, out=out)
    return outcomes


def hand_to_daemon(
    settings: Settings, paths: list[Path], running: str, *, out: TextIO, t0: float
) -> list[Outcome]:
    """kb ingest while the daemon runs: the files go into its inbox and their results are reported as
    the daemon records them (the same lines as when kb ingest indexes them itself)."""
    from knowledge.ingest.handoff import hand_over

    print(
        f"the daemon is running ({running}): handing {len(paths)} file(s) to its inbox", file=out, flush=True
    )
    with Progress(len(paths), label="ingest", unit="files", stream=sys.stderr) as bar:
        is_each_line_shown = not (bar.is_on and out.isatty())

        def shown(outcome: Outcome) -> None:
            bar.advance()
            if is_each_line_shown or outcome.status != "indexed":
                bar.print(describe_outcome(outcome), out=out)

        outcomes = hand_over(settings, paths, idle_s=max(settings.import_wait_s, 1.0), shown=shown)
    summarise(outcomes, t0, out=out)
    return outcomes


def summarise(outcomes: list[Outcome], t0: float, *, out: TextIO) -> None:
    """The last lines of kb ingest: a count per status, the time, and the reasons of failures."""
    counts = Counter(o.status for o in outcomes)
    parts = [
        f"{counts[s]} {s}" for s in ("indexed", "duplicate", "failed", "skipped", "waiting") if counts[s]
    ]
    print(f"{', '.join(parts) or 'nothing to do'} in {time.perf_counter() - t0:.1f} s", file=out)
    if reasons := Counter(o.reason for o in outcomes if o.status == "failed"):
        listed = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
        print(f"failed by reason: {listed} (originals and NAME.error.json in inbox/failed/)", file=out)


def embed_index(settings: Settings, index: Index, *, out: TextIO) -> None:
    """Give every chunk without a vector one (kb ingest and kb reindex, before they return)."""
    try:
        embedder = make_embedder(settings)
    except EmbedderError as exc:
        print(f"vectors: not made: {exc}", file=out)
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

    with Progress(missing, label="embed", unit="chunks", stream=sys.stderr) as bar:
        try:
            embed_missing(index, embedder, batch=settings.embed_batch, progress=advance)
        except EmbedderError as exc:
            log.warning("embed.unavailable", model=embedder.name, reason=str(exc))
            bar.print(f"vectors: stopped after {done} of {missing} chunks: {exc}", out=out)
            return
    print(f"embedded {done} chunks in {time.perf_counter() - t0:.1f} s ({embedder.name})", file=out)


def describe_outcome(o: Outcome) -> str:
    """One line for a file: what happened and where things are (a name that is not UTF-8, readably)."""
    o = Outcome(**{**o.__dict__, "source": o.source.with_name(readable_name(o.source.name))})
    if o.status == "indexed":
        unread = (
            f"; OCR time ran out, pages {o.unread_pages} not read (KB_OCR_BUDGET_S)" if o.unread_pages else ""
        )
        return f"indexed    {o.source.name} → {o.raw_path} ({plural(o.chunks, 'chunk')}, {o.title!r}){unread}"
    if o.status == "duplicate":
        return f"duplicate  {o.source.name} = {o.duplicate_of} ({o.title!r}), kept as {_rel(o.kept_at)}"
    if o.status == "skipped":
        return f"skipped    {o.source.name}: {o.message}"
    if o.status == "waiting":
        return f"waiting    {o.source.name}: {o.message} ({_rel(o.kept_at)})"
    return f"failed     {o.source.name}: {o.reason}: {o.message} → {_rel(o.kept_at)}"


def _rel(path: Path | None) -> str:
    if path is None:
        return "-"
    parts = path.parts
    return "/".join(parts[parts.index("inbox") :]) if "inbox" in parts else str(path)


def _warn_tokenizer_change(index: Index, counter: TokenCounter) -> None:
    """Log when the index was built with another tokenizer or another version of kb's text analysis."""
    from knowledge.store.analysis import ANALYZER_VERSION

    built_with = index.meta("tokenizer")
    if built_with is not None and built_with != counter.name:
        log.warning("index.tokenizer_changed", index=built_with, current=counter.name, fix="kb reindex")
    analyzer = index.meta("analyzer")
    if analyzer is not None and analyzer != ANALYZER_VERSION:
        log.warning("index.analyzer_changed", index=analyzer, current=ANALYZER_VERSION, fix="kb reindex")


# -- search ---------------------------------------------------------------------------------


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    """kb search [-k N] [--json] QUERY  |  kb search --batch FILE --json"""
    k = args.k or settings.search_k
    if k < 1:
        print("kb: -k must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.batch is None and not args.query:
        print("kb: search needs a QUERY or --batch FILE", file=sys.stderr)
        return EXIT_USAGE
    if args.batch is not None:
        queries = args.batch.read_text(encoding="utf-8", errors="replace").splitlines()
    else:
        queries = [" ".join(args.query)]
    translate = settings.translate != "off" and not args.no_translate
    with Index(settings.index_path, readonly=True) as index:
        meaning = search_meaning(settings, index)
        answers = asyncio.run(_find_all(settings, index, queries, k=k, meaning=meaning, translate=translate))
    for query, (found, translations) in zip(queries, answers, strict=True):
        if args.batch is not None and args.json:
            line = {
                "query": query,
                "results": [result_json(r, found.verdict, translations) for r in found.results],
                "answerable": found.verdict.answerable,
                "verdict": found.verdict.to_json(),
                "translations": [t.to_json() for t in translations],
            }
            print(json.dumps(line, ensure_ascii=False), flush=False)
        elif args.json:
            results = [result_json(r, found.verdict, translations) for r in found.results]
            print(json.dumps(results, ensure_ascii=False, indent=2))
        else:
            if args.batch is not None:
                print(f"## {query}")
            print_results(found, sys.stdout, translations)
    return EXIT_OK


async def _find_all(
    settings: Settings, index: Index, queries: list[str], *, k: int, meaning: Meaning | None, translate: bool
) -> list[tuple[Found, list[Translation]]]:
    """Each query's passages and verdict, searched also in the index's other languages when the
    model can translate it and that can help (knowledge.retrieval.translate)."""
    from knowledge.wiring import http_session, model_client, translator

    out: list[tuple[Found, list[Translation]]] = []
    async with contextlib.AsyncExitStack() as stack:
        translate_with = None
        if translate and meaning is not None:
            session = await stack.enter_async_context(http_session())
            translate_with = translator(settings, model_client(settings, session))
        for query in queries:

            async def search(texts: Sequence[str], query: str = query) -> Found:
                return find(
                    index, query, k=k, meaning=meaning, threshold=settings.min_relevance, translations=texts
                )

            groups = meaning.cache.group_counts if meaning is not None else dict
            out.append(await search_translated(search, translate_with, query, groups))
    return out


def result_json(
    result: SearchResult, verdict: Verdict, translations: Sequence[Translation] = ()
) -> dict[str, object]:
    """One result as ``kb search --json`` prints it: the contract's fields, its relevance, the
    query's verdict (``answerable``: whether the documents answer it, the same on every result)
    and the translations of the query searched with it (the same on every result)."""
    return {
        **result.to_json(),
        "answerable": verdict.answerable,
        "translations": [t.to_json() for t in translations],
    }


def search_meaning(settings: Settings, index: Index) -> Meaning | None:
    """Search by meaning for this index, saying on stderr when it is partial or unavailable."""
    try:
        meaning = Meaning.of(make_embedder(settings))
    except EmbedderError as exc:
        print(f"kb: searching by words only: {exc}", file=sys.stderr)
        return None
    if meaning is not None:
        cov = coverage(index, meaning.embedder.name)
        if not cov.is_complete:
            print(
                f"kb: {cov.vectors} of {cov.chunks} passages have vectors yet; search by meaning is partial",
                file=sys.stderr,
            )
    return meaning


def print_results(found: Found, out: TextIO, translations: Sequence[Translation] = ()) -> None:
    """Readable results: rank, citation, relevance, a few lines of text; then the translations
    searched too, and the verdict."""
    if translations:
        print("also searched as: " + " · ".join(f"{t.language}: {t.text}" for t in translations), file=out)
    if not found.results:
        print("no matching passages", file=out)
        return
    for r in found.results:
        print(f"{r.rank}. {r.citation}  (relevance {r.relevance:.2f}, score {r.score:.3f})", file=out)
        if r.source_url:
            print(f"   {r.source_url}", file=out)
        snippet = " ".join(r.text.split())
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", file=out)
    verdict = found.verdict
    answer = (
        "the documents answer it"
        if verdict.answerable
        else "the documents do not answer it (kb ask would go to the web)"
    )
    print(f"verdict: {answer}: {verdict.why}", file=out)


# -- ls, rm, restore ------------------------------------------------------------------------


def cmd_ls(args: argparse.Namespace, settings: Settings) -> int:
    """kb ls [WORDS] [--json] [--limit N]"""
    docs: list[DocumentRecord] = []
    if settings.index_path.exists():
        with Index(settings.index_path, readonly=True) as index:
            docs = matching_documents(index.documents(), args.words)
    shown = docs if args.limit <= 0 else docs[: args.limit]
    if args.json:
        print(json.dumps([document_json(d) for d in shown], ensure_ascii=False, indent=2))
        return EXIT_OK
    if not docs:
        print("no documents match" if args.words else "no documents yet — add files with: kb ingest PATH")
        return EXIT_OK
    for d in shown:
        print(f"{d.id}  {d.indexed_at[:16].replace('T', ' ')}  {d.title}  ({d.source_url or d.source_name})")
    if len(shown) < len(docs):
        print(f"… {len(docs) - len(shown)} more (--limit N shows more, --limit 0 all)")
    return EXIT_OK


def matching_documents(docs: Sequence[DocumentRecord], words: Sequence[str]) -> list[DocumentRecord]:
    """Documents whose title or source contains every word (any case), newest first."""
    wanted = [w.casefold() for w in words if w.strip()]

    def is_match(d: DocumentRecord) -> bool:
        text = f"{d.title} {d.source_name} {d.source_url or ''}".casefold()
        return all(w in text for w in wanted)

    found = [d for d in docs if is_match(d)]
    return sorted(found, key=lambda d: (d.indexed_at, d.id), reverse=True)


def document_json(d: DocumentRecord) -> dict[str, object]:
    """One document as kb ls --json prints it."""
    return {
        "id": d.id, "title": d.title, "indexed_at": d.indexed_at, "source_name": d.source_name,
        "source_url": d.source_url, "raw_path": d.raw_path, "chunks": d.chunk_count,
    }  # fmt: skip


def cmd_rm(args: argparse.Namespace, settings: Settings) -> int:
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
                f"removed  {t.doc_id}  {t.title!r} → trash {t.trash_id}; undo with: kb restore {t.trash_id}"
            )
        elif result.status == "waiting":
            print(f"waiting  {doc_id}: {result.message}")
        else:
            failed += 1
            print(f"kb: {result.message}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    """kb restore [TRASH_ID]"""
    from knowledge.ingest import trash
    from knowledge.ingest.requests import change

    if args.trash_id is None:
        entries = trash.trashed(settings)
        if not entries:
            print("the trash is empty")
            return EXIT_OK
        for e in entries:
            until = e.expires_at().strftime("%Y-%m-%d")
            print(
                f"{e.trash_id}  removed {e.removed_at[:16].replace('T', ' ')}  {e.title}  ({e.doc_id}, kept until {until})"
            )
        print("restore one with: kb restore TRASH_ID")
        return EXIT_OK
    [result] = change(
        settings, "restore", [args.trash_id], make_counter=lambda: load_tokenizer(settings), wait_s=args.wait
    )
    if result.status == "failed":
        print(f"kb: {result.message}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"restored  {result.doc_id}  {result.title!r}"
        if result.status == "done"
        else f"waiting  {result.message}"
    )
    return EXIT_OK


# -- backup, restore-backup -----------------------------------------------------------------


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    """kb backup DEST | kb backup --verify ARCHIVE"""
    from knowledge.backup import backup, verify

    if args.verify:
        v = verify(args.dest)
        print(
            f"verified  {v.archive}: {v.files:,} files, {v.bytes / 1e6:.1f} MB, each as its manifest lists; index "
            f"sound: {v.index.documents:,} documents, {v.index.chunks:,} chunks (made {v.created_at} by kb {v.kb_version})"
        )
        return EXIT_OK
    bar = _BackupBar()
    try:
        done = backup(settings, args.dest, progress=bar)
    finally:
        bar.close()
    dropped = _dropped_secrets(done.settings_dropped)
    print(
        f"backup  {done.dest}: {done.files:,} files, {done.bytes / 1e6:.1f} MB, index {done.index.documents:,} "
        f"documents / {done.index.chunks:,} chunks, {done.seconds:.1f} s"
        + (f"; left out: {dropped}" if dropped else "")
    )
    for name in done.secret_in:
        print(
            f"kb: warning: {name} holds a secret's value (kept as it is: it is one of your files)",
            file=sys.stderr,
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

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.shown = 0

    def __call__(self, files: int, expected: int, nbytes: int) -> None:
        if self.bar is None:
            self.bar = Progress(expected, label="backup", unit="files", stream=sys.stderr)
        self.bar.advance(files - self.shown)
        self.bar.describe(f"{nbytes / 1e6:,.0f} MB")
        self.shown = files

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_restore_backup(args: argparse.Namespace, settings: Settings) -> int:
    """kb restore-backup ARCHIVE --home DIR"""
    from knowledge.backup import restore

    done = restore(args.archive, args.restore_home)
    v = done.verified
    print(
        f"restored  {v.archive} → {done.home}: {v.files:,} files, index "
        f"{v.index.documents - len(done.settled.missing):,} documents / {v.index.chunks:,} chunks, {done.seconds:.1f} s"
    )
    if done.settled.put_back:
        print(f"  put back {plural(len(done.settled.put_back), 'document')} removed while the backup ran")
    if done.settled.missing:
        print(
            f"  {plural(len(done.settled.missing), 'document')} of the index copy had no raw file in the archive: left out"
        )
    dropped = _dropped_secrets(v.manifest.get("settings_dropped") or {})
    if dropped:
        print(f"  not in the backup: {dropped} — set them again in {done.home / '.env'}")
    print(f"  next: kb --home {done.home} daemon (it indexes what the backup caught after its index copy)")
    return EXIT_OK


# -- reindex, status, config ----------------------------------------------------------------


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    """kb reindex"""
    counter = load_tokenizer(settings)
    t0 = time.perf_counter()
    total = len(list(settings.raw.glob("*.md"))) if settings.raw.is_dir() else 0
    with WriterLock(settings.lock_path, role="kb reindex") as _lock, Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, counter)
        with Progress(total, label="reindex", unit="documents", stream=sys.stderr) as bar:
            docs, chunks = ingestor.reindex(progress=lambda n, total: bar.advance())
        print(
            f"reindexed {docs} documents, {chunks} chunks with {counter.name} in {time.perf_counter() - t0:.1f} s"
        )
        embed_index(settings, index, out=sys.stdout)
    return EXIT_OK


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    """kb status [--json]"""
    report = status_report(settings, model=asyncio.run(check_model(settings)))
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return EXIT_OK
    print("\n".join(aligned(summary_facts(report) + activity_facts(report))))
    ingests = report["last_ingests"]
    if ingests:
        print("last ingests")
        for rec in ingests:  # type: ignore[union-attr]
            detail = rec.get("doc_id") or rec.get("error", "")
            print(f"  {rec['finished_at']}  {rec['status']:<9} {Path(rec['path']).name}  {detail}")
    return EXIT_OK


async def check_model(settings: Settings) -> dict[str, object]:
    """Ask the configured model server whether it is up (for status reports)."""
    from knowledge.wiring import http_session, model_client

    async with http_session() as session:
        return await probe_model(model_client(settings, session))


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    """kb config"""
    for env, value, origin, help_text in describe(settings):
        print(f"{env:<26} {value!s:<44} [{origin}]  {help_text}")
    return EXIT_OK


# -- run ------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """kb run: the daemon in the background and the terminal chat in the foreground."""
    from daemon.main import background
    from knowledge.wiring import load_language

    language = load_language(settings)  # once: the daemon, the chat or the bot, and the summary share it
    with background(settings, language[0], language[1]):
        if settings.telegram_token:
            from bot.main import serve

            report = status_report(
                settings, model=asyncio.run(check_model(settings)), counter=(language[0], language[2])
            )
            print("\n".join(summary_lines(report)), flush=True)
            print("KB_TELEGRAM_TOKEN is set: serving the Telegram bot (Ctrl-C stops it).", flush=True)
            return serve(settings, language=language)
        return chat_until_done(settings, language)


def cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    """kb chat"""
    return chat_until_done(settings)


def chat_until_done(settings: Settings, language: Language | None = None) -> int:
    """The terminal chat until /quit, end of input or Ctrl-C (each a normal end: exit 0)."""
    import signal

    from cli.chat import holding_the_terminal

    if sys.stdin.isatty():  # a person at a terminal: Ctrl-C leaves, even if kb's parent ignored it (a job
        signal.signal(signal.SIGINT, signal.default_int_handler)  # started with & in a script inherits that)
    try:
        with holding_the_terminal():
            return asyncio.run(_chat(settings, language))
    except KeyboardInterrupt:
        print(flush=True)  # leave the shell's prompt on a line of its own
        return EXIT_OK


async def _chat(settings: Settings, language: Language | None = None) -> int:
    from cli.chat import chat_loop
    from knowledge.errors import FetchRefused
    from knowledge.websearch.importer import ImportRefused
    from knowledge.wiring import candidate_store, conversing, load_language, open_engine

    words = terminal_words(settings)

    async def do_import(source_id: str) -> str:
        try:
            result, reply = await import_and_answer(settings, source_id)
        except (ImportRefused, FetchRefused) as exc:
            return words.tr("refused ({reason}): {why}", reason=exc.reason, why=exc)
        return describe_import(result, words) + ("\n\n" + plain(reply, words) if reply is not None else "")

    def keep_url(url: str) -> str:
        record = candidate_store(settings).save_url("cli", url)
        return f"web-1 · {record.candidates[0].title} — {url}\n" + words.tr("Import it with: /import web-1")

    async def status_text() -> str:
        model = await probe_model(engine.llm)
        report = await asyncio.to_thread(status_report, settings, model=model, counter=counter)
        return "\n".join(aligned(summary_facts(report, words) + activity_facts(report, words)))

    language = language or load_language(settings)
    counter = (language[0], language[2])
    async with open_engine(settings, language) as engine:
        model = await probe_model(engine.llm)
        report = await asyncio.to_thread(status_report, settings, model=model, counter=counter)
        print("\n".join(summary_lines(report, words)), flush=True)
        await chat_loop(
            conversing(settings, engine),
            sources=lambda: _sources_text(settings, words),
            status=status_text,
            out=sys.stdout,
            history_file=settings.runs / "chat_history",
            on_import=do_import,
            on_url=keep_url,
            words=words,
        )
    return EXIT_OK


def _sources_text(settings: Settings, words: Words) -> str:
    """The latest documents, one per line (the chat's /sources)."""
    docs = []
    if settings.index_path.exists():
        with Index(settings.index_path, readonly=True) as index:
            docs = sorted(index.documents(), key=lambda d: d.indexed_at, reverse=True)[:15]
    lines = [f"{d.title} — {d.raw_path} ({d.source_url or d.source_name})" for d in docs]
    return "\n".join(lines) or words.tr("No documents yet: drop a file into the inbox or run kb ingest PATH.")


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """kb ask QUESTION  |  kb ask --audio FILE  |  kb ask --conversation NAME QUESTION"""
    from cli.chat import FRESH, Printer
    from knowledge.wiring import conversing, open_engine

    words = terminal_words(settings)  # the reply's words; the rest of the command line stays English
    heard = None
    if args.audio is not None:
        if args.question:
            print("kb: ask takes a QUESTION or --audio FILE, not both", file=sys.stderr)
            return EXIT_USAGE
        if not args.audio.is_file():
            print(f"kb: no such file: {args.audio}", file=sys.stderr)
            return EXIT_USAGE
        heard = hear(args.audio, settings)
        if not args.json:
            print(words.tr("I heard: {text}", text=heard.text) + "\n", flush=True)
    elif not args.question:
        print("kb: ask needs a QUESTION or --audio FILE", file=sys.stderr)
        return EXIT_USAGE
    if args.new and not args.conversation:
        print("kb: --new goes with --conversation NAME", file=sys.stderr)
        return EXIT_USAGE
    question = heard.text if heard is not None else " ".join(args.question)
    # a person at a terminal sees the answer as it is written; --json and pipes get it whole
    printer = Printer(sys.stdout, words) if not args.json and sys.stdout.isatty() else None

    async def ask() -> object:
        async with open_engine(settings) as engine:
            talk = conversing(settings, engine)
            if args.conversation:
                if args.new:
                    await asyncio.to_thread(talk.store.end, f"cli:{args.conversation}")
                key = f"cli:{args.conversation}"
                return await talk.ask(key, question, listener=printer, language=words.language)
            return await talk.ask_once(question, listener=printer, language=words.language)

    if settings.index_path.exists():
        with contextlib.suppress(KbError), Index(settings.index_path, readonly=True) as index:
            search_meaning(settings, index)  # says on stderr when search by meaning is partial
    answered = asyncio.run(ask())
    reply = answered.reply
    if args.json:
        text, note = text_and_note(reply, words)
        payload = {
            "text": text,
            "mode": reply.mode,
            "citations": [c.__dict__ for c in reply.citations],
            "note": note,
            "door": reply.route.to_json() if reply.route else None,
            "candidates": [{"id": c.id, "title": c.title, "url": c.url} for c in reply.candidates],
            "translations": [t.to_json() for t in reply.translations],
            "searched_as": reply.searched_as,
            "passages": [passage_json(p) for p in reply.passages],
        }
        if args.conversation:
            payload["conversation"] = {"name": args.conversation, "fresh": answered.fresh}
        if heard is not None:
            payload["heard"] = {
                "text": heard.text,
                "language": heard.language,
                "duration_s": heard.duration_s,
            }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        if answered.fresh:
            print(words.tr(FRESH))
        print(printer.finish(reply) if printer is not None else plain(reply, words))
        if reply.candidates:
            print("\n" + words.tr("Import one with: kb import web-N (nothing is imported until you do)"))
    return EXIT_OK


def passage_json(p: SearchResult) -> dict[str, object]:
    """A ranked passage as ``kb ask --json`` lists it."""
    return {
        "rank": p.rank, "chunk_id": p.chunk_id, "document_id": p.document_id, "source_name": p.source_name,
        "title": p.title, "lines": f"{p.start_line}-{p.end_line}",
    }  # fmt: skip


def hear(path: Path, settings: Settings) -> Transcript:
    """The question spoken in an audio file; SpeechError (a KbError: exit 1 with its sentence) otherwise."""
    from knowledge.speech.decode import MAX_AUDIO_BYTES, too_large
    from knowledge.speech.transcribe import model_notice, speech_runner, transcribe_audio

    if (size := path.stat().st_size) > MAX_AUDIO_BYTES:
        raise too_large(size)
    data = path.read_bytes()
    if notice := model_notice(settings.whisper_model, own_dir=settings.model_dir):
        print(f"kb: {notice}", file=sys.stderr, flush=True)
    with speech_runner() as runner:
        return transcribe_audio(data, settings=settings, runner=runner)


def cmd_measure(args: argparse.Namespace, settings: Settings) -> int:
    """kb measure [--dry-run] --evidence-tokens N... QUESTION"""
    from knowledge.wiring import build_engine, http_session, load_language

    numbers = [w for w in args.evidence_tokens if w.isdigit()]
    budgets = [
        int(w)
        for w in numbers[: next((i for i, w in enumerate(args.evidence_tokens) if not w.isdigit()), None)]
    ]
    words = args.evidence_tokens[len(budgets) :] + args.question
    if not budgets or not words:
        print("kb: measure needs --evidence-tokens N [N...] and a QUESTION", file=sys.stderr)
        return EXIT_USAGE
    question = " ".join(words)
    counter, template, why = load_language(settings, background=False)
    if why:
        print(f"note: {why}; counts use {counter.name}", file=sys.stderr)

    async def measure() -> int:
        async with http_session() as session:
            engine = build_engine(settings, session, counter, template)
            passages = engine.retrieve(question)
            print(
                f"context {settings.context_tokens} tokens: {settings.max_output_tokens} kept for the answer "
                f"(KB_MAX_OUTPUT_TOKENS), at most {settings.history_tokens} for the conversation so far "
                "(KB_HISTORY_TOKENS; none here), the evidence at most its budget"
            )
            header = f"{'budget':>8} {'evidence':>9} {'input':>7} {'passages':>9}"
            print(header + ("" if args.dry_run else f" {'server':>7} {'output':>7} {'ms':>8}"))
            for budget in budgets:
                engine.settings = replace(engine.settings, evidence_tokens=budget)
                prompt = engine.prompt(question, passages)
                row = f"{budget:>8} {prompt.evidence_tokens:>9} {prompt.input_tokens:>7} {len(prompt.passages):>9}"
                if not args.dry_run:
                    done = await engine.llm.chat(prompt.messages, max_tokens=settings.max_output_tokens)
                    row += f" {done.prompt_tokens!s:>7} {done.completion_tokens!s:>7} {done.elapsed_ms:>8.0f}"
                print(row, flush=True)
        return EXIT_OK

    return asyncio.run(measure())


EXIT_RATE_LIMITED = 3


def cmd_websearch(args: argparse.Namespace, settings: Settings) -> int:
    """kb websearch QUESTION [--json] [--explain]"""
    from knowledge.answer.variants import NAMES, answer_language
    from knowledge.websearch.providers import SearchRateLimited
    from knowledge.wiring import http_session, model_client, web_searcher

    question = " ".join(args.question)
    reader = NAMES[answer_language(question, terminal_words(settings).language)]

    async def run() -> object:
        async with http_session() as session:
            return await web_searcher(settings, session, model_client(settings, session))(
                question, "cli", True, reader
            )

    try:
        found = asyncio.run(run())
    except SearchRateLimited as exc:
        print(f"kb: {exc}", file=sys.stderr)
        return EXIT_RATE_LIMITED
    candidates = found.record.candidates if found.record else []
    if args.json:
        payload = {
            "plan": {
                "planner": found.plan.planner,
                "fallback_reason": found.plan.fallback_reason,
                "queries": [q.__dict__ for q in found.plan.queries],
            },
            "search_id": found.record.search_id if found.record else None,
            "candidates": [c.__dict__ for c in candidates],
            "summary": found.summary,
            "dropped": [{"title": d.hit.title, "url": d.hit.url, "reason": d.reason} for d in found.dropped],
            "notes": found.notes,
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return EXIT_OK
    planned = "; ".join(
        f"{q.query!r} ({q.language or '?'}, {q.freshness or 'any time'})" for q in found.plan.queries
    )
    print(f"plan ({found.plan.planner}): {planned}")
    for note in found.notes:
        print(f"note: {note}")
    if not candidates:
        print("no candidates")
    for c in candidates:
        print(f"{c.id}  {c.title}\n       {c.url}")
    if found.summary:
        print("\n" + "\n".join(found.summary))
    if args.explain and found.dropped:
        print("\ndropped:")
        for d in found.dropped:
            print(f"  {d.reason[:48]:<48}  {d.hit.url}")
    return EXIT_OK


EXIT_REFUSED = 2


def describe_import(result: object, words: Words = ENGLISH) -> str:
    """One line for an import's outcome."""
    r, w = result, words
    if r.status == "indexed":
        chunks = w.ntr("{n} chunk", "{n} chunks", r.chunks or 0)
        return w.tr("indexed    {id} {url} → {title!r} ({chunks}, {doc})", id=r.source_id, url=r.url,
                    title=r.title, chunks=chunks, doc=r.doc_id)  # fmt: skip
    if r.status == "already":
        return w.tr("already    {id} {url} was imported before: {title!r} ({doc})", id=r.source_id, url=r.url,
                    title=r.title, doc=r.doc_id)  # fmt: skip
    if r.status == "queued":
        return w.tr("queued     {id} {url}: {why}", id=r.source_id, url=r.url, why=r.message)
    return w.tr("failed     {id} {url}: {reason}: {why} (kept in {kept})", id=r.source_id, url=r.url,
                reason=r.reason, why=r.message, kept=r.kept_at)  # fmt: skip


async def import_and_answer(settings: Settings, source_id: str, *extra: str, chat_id: str = "cli") -> tuple:
    """Import a candidate, then answer its search's question again from the new local evidence."""
    from datetime import UTC, datetime

    from knowledge.websearch.importer import import_web_source
    from knowledge.wiring import candidate_store, make_fetcher, open_engine

    store = candidate_store(settings)
    record = store.latest(chat_id)
    result = await import_web_source(
        source_id, *extra, chat_id=chat_id, settings=settings, store=store, fetch=make_fetcher(settings).fetch,
        wait_s=settings.import_wait_s, clock=lambda: datetime.now(UTC),
    )  # fmt: skip
    reply = None
    if result.status in ("indexed", "already") and record is not None and record.queries:
        async with open_engine(settings) as engine:
            reply = await engine.ask(result.question, chat_id=chat_id)
    return result, reply


def _import_exit(run: object) -> int:
    from knowledge.errors import FetchRefused
    from knowledge.websearch.importer import ImportRefused

    try:
        result, reply = asyncio.run(run)
    except (ImportRefused, FetchRefused) as exc:
        print(f"kb: refused ({exc.reason}): {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(describe_import(result))
    if reply is not None:
        print("\n" + plain(reply, ENGLISH))
    return EXIT_OK if result.status in ("indexed", "already", "queued") else EXIT_FAILED


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """kb import web-N"""
    return _import_exit(import_and_answer(settings, args.source_id, *args.extra))


def cmd_import_url(args: argparse.Namespace, settings: Settings) -> int:
    """kb import-url [--check] URL"""
    from knowledge.errors import FetchRefused
    from knowledge.wiring import candidate_store, make_fetcher

    if args.check:
        try:
            addresses = asyncio.run(make_fetcher(settings).check_only(args.url))
        except FetchRefused as exc:
            print(f"refused ({exc.reason}): {exc}")
            return EXIT_REFUSED
        print(f"allowed: {args.url} resolves to {', '.join(addresses)}")
        return EXIT_OK
    if not args.url.startswith(("http://", "https://")):
        print(f"kb: refused (scheme): {args.url!r} is not an http(s) URL", file=sys.stderr)
        return EXIT_REFUSED
    candidate_store(settings).save_url("cli", args.url)
    return _import_exit(import_and_answer(settings, "web-1"))


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """kb doctor"""
    from cli.diagnose import doctor

    findings = asyncio.run(doctor(settings))
    for f in findings:
        mark = "ok  " if f.is_ok else ("warn" if f.is_warning else "FAIL")
        print(f"{mark}  {f.name:<14} {f.detail}")
        if f.fix:
            print(f"      {'':<14} fix: {f.fix}")
    return EXIT_FAILED if any(not f.is_ok and not f.is_warning for f in findings) else EXIT_OK


def cmd_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    """kb checkpoint"""
    from cli.diagnose import checkpoint

    results = asyncio.run(checkpoint(settings))
    for r in results:
        print(f"{'pass' if r.is_pass else 'FAIL'}  {r.case.name:<44} {r.ms:>7.0f} ms  [{r.reply.mode}]")
        if not r.is_pass:
            print("      got: " + " ".join(plain(r.reply, ENGLISH).split())[:200])
    passed = sum(r.is_pass for r in results)
    print(f"{passed}/{len(results)} cases passed")
    return EXIT_OK if passed == len(results) else EXIT_FAILED


def cmd_bot(args: argparse.Namespace, settings: Settings) -> int:
    """kb bot"""
    from bot.main import serve

    return serve(settings)


def cmd_service(args: argparse.Namespace, settings: Settings) -> int:
    """kb service install|uninstall|status [--only NAMES] [--dry-run]"""
    import plistlib

    from cli import service

    wanted = [n.strip() for n in (args.only or "").split(",") if n.strip()]
    known = {s.name: s for s in service.SERVICES}
    if unknown := [n for n in wanted if n not in known]:
        print(f"kb: unknown service {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return EXIT_USAGE
    chosen = [known[n] for n in wanted] or list(service.SERVICES)
    if args.action == "install" and not wanted and not settings.telegram_token:
        chosen = [s for s in chosen if s.name != "bot"]
        print(
            "bot     skipped: KB_TELEGRAM_TOKEN is not set (put it in ~/.config/kb/env, then install again)"
        )
    place = service.Place(
        home=str(settings.home.resolve()), bin=str(Path(sys.executable).parent),
        env_file=str(Path.home() / ".config" / "kb" / "env"), model=settings.model or service.DEFAULT_MODEL,
        port=urlsplit(settings.llm_url).port or 8081,
    )  # fmt: skip
    host = service.Host("darwin" if sys.platform == "darwin" else "linux", Path.home(), os.getuid())
    if args.dry_run:
        environment = read_dotenv(Path(place.env_file), lenient=True)
        for one in chosen:
            print(f"# {host.file_of(one)}")
            if host.platform == "darwin":
                print(plistlib.dumps(service.plist_dict(one, place, environment)).decode())
            else:
                print(service.unit_text(one, place))
        return EXIT_OK
    act = {"install": lambda: service.install(chosen, place, host), "uninstall": lambda: service.uninstall(chosen, host),
           "status": lambda: service.status(chosen, host)}[args.action]  # fmt: skip
    try:
        lines = act()
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"kb: {args.action} failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print("\n".join(lines))
    return EXIT_FAILED if any("not started" in line for line in lines) else EXIT_OK


def cmd_daemon(args: argparse.Namespace, settings: Settings) -> int:
    """kb daemon"""
    from daemon.main import serve

    return serve(settings, load_tokenizer(settings, background=True))


def cmd_logs(args: argparse.Namespace, settings: Settings) -> int:
    """kb logs [-f] [-n N] [--event PREFIX]"""
    from cli.logview import follow, format_line, last_lines

    path = settings.log_path
    if not path.exists() and not args.follow:
        print(f"no log yet at {path}")
        return EXIT_OK
    wanted = args.event or ""
    lines = last_lines(path, args.n, event_prefix=wanted) if path.exists() else []
    for line in lines:
        print(format_line(line))
    if args.follow:
        for line in follow(path, event_prefix=wanted):
            print(format_line(line), flush=True)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
