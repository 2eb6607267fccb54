"""The commands with which kb speaks first: ``kb summarize DOC`` and ``kb digest``.

Their words (the summary, the digest) are in the terminal's language; the rest stays English, as
the command line does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from typing import TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from knowledge.config import Settings
from knowledge.errors import IndexMissing, KbError
from knowledge.store.index import Index
from knowledge.words.catalog import N_, terminal_words

CLI_KEY = "cli"  # the command line's own "last digest", beside each chat's

SINCE = N_("--since {period} is not a period: write it as 24h, 7d or 2w")


def _summarize_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("doc_id", metavar="DOC_ID")
    p.add_argument("--sentences", type=int, default=5, help="how long the summary is (5)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _digest_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since", metavar="PERIOD", help="how far back: 24h, 7d, 2w (default: since the last digest)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_summarize(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb summarize DOC_ID"""
    from knowledge.answer.summary import Writer, summarize
    from knowledge.retrieval.search import document_passages
    from knowledge.wiring import open_engine

    words = terminal_words(settings)
    try:
        with Index(settings.index_path, readonly=True) as index:
            doc = index.document(args.doc_id)
            chunks = document_passages(index, args.doc_id) if doc is not None else []
    except IndexMissing:
        doc = None
    if doc is None:
        said = words.tr("no document {id} (kb ls lists them)", id=repr(args.doc_id))
        print(f"kb: {said}", file=err)
        return EXIT_FAILED

    def progress(n: int, total: int) -> None:
        if total > 1:
            print(
                f"\r{words.tr('Reading part {n} of {total}…', n=n, total=total)}",
                end="",
                file=err,
                flush=True,
            )

    async def run():
        async with open_engine(settings) as engine:
            return await summarize(Writer.of(engine), doc.title, chunks, reader=words.language,
                                   sentences=max(1, args.sentences), progress=progress)  # fmt: skip

    summary = asyncio.run(run())
    if summary.parts > 1:
        print(file=err)
    if args.json:
        print(json.dumps({
            "doc_id": doc.id, "title": doc.title, "text": summary.text, "kind": summary.kind,
            "citations": [c.__dict__ for c in summary.citations], "parts": summary.parts, "whole": summary.whole,
            "calls": summary.calls,
            "prompt_tokens": summary.prompt_tokens, "input_tokens": summary.input_tokens,
            "output_tokens": summary.output_tokens,
        }, ensure_ascii=False), file=out)  # fmt: skip
    else:
        print(f"{doc.title}\n\n{summary.text}", file=out)
        if summary.kind == "excerpt":
            why = (
                f" ({summary.why})" if words.language == "en" else ""
            )  # the model's error: English, technical
            print(words.tr("(its opening lines: the model is not running)") + why, file=out)
        for c in summary.citations:
            print(f"[{c.number}] {c.raw_path}:{c.start_line}-{c.end_line}", file=out)
    return EXIT_OK if summary.kind == "model" else EXIT_FAILED


def cmd_digest(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb digest [--since PERIOD]"""
    from knowledge.conversation.store import Conversations
    from knowledge.report.digest import digest_of, parse_since, since_last
    from knowledge.words.digest import digest_plain

    store, words = Conversations(settings.conversations_path), terminal_words(settings)
    now = time.time()
    until = datetime.fromtimestamp(now, UTC)
    try:
        since = (
            until - parse_since(args.since) if args.since else since_last(store.last_digest(CLI_KEY), until)
        )
    except ValueError as exc:
        said = f"--since {exc}" if words.language == "en" else words.tr(SINCE, period=args.since)
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    try:
        asked = store.unanswered(since.timestamp(), now, keys=f"{CLI_KEY}:*")  # the command line's own
        digest = digest_of(settings.index_path, asked, since=since, until=until, whole=True)
    except KbError as exc:
        print(f"kb: {exc}", file=err)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({
            "since": since.isoformat(timespec="seconds"), "until": until.isoformat(timespec="seconds"),
            "groups": {g: [i.__dict__ for i in items] for g, items in digest.groups.items()},
            "more": digest.more, "unanswered": digest.unanswered,
            "resurfaced": digest.resurfaced.__dict__ if digest.resurfaced else None,
            "resurfaced_for": digest.resurfaced_for,
        }, ensure_ascii=False), file=out)  # fmt: skip
    else:
        print(digest_plain(digest, words), file=out)
    if not args.since:
        store.digest_sent(CLI_KEY, now)
    return EXIT_OK


COMMANDS = {
    "summarize": Command(
        cmd_summarize,
        help="summarise a whole document with the model",
        description="Summarise one document (its id, from kb ls), however long: the model reads it part by "
        "part, each part as many passages as fit one prompt counted exactly (progress on stderr), then "
        "summarises the parts' summaries; the summary cites the parts by their lines. A document longer than "
        "12 parts is read in 12 sections spread from its beginning to its end (whole: false). Without the "
        'model: its opening sentences, marked as such. --json prints {"doc_id","title","text","kind",'
        '"citations","parts","whole","calls","prompt_tokens","input_tokens","output_tokens"}. Exit status: 0 '
        "summarised by the model, 1 no such document or only its opening (the model is down).",
        arguments=_summarize_arguments,
    ),
    "digest": Command(
        cmd_digest,
        help="what was kept lately, the questions left open, one thing from long ago",
        description="What was kept since the last `kb digest` (a week back the first time, or --since), "
        "grouped as files, web imports, notes and forwards, voice notes, each with its summary and id, newest "
        "first, all of them (a terminal has no message limit); the questions asked with kb ask --conversation "
        "that no passage answered; and one document kept long ago that bears on the newest. No model is "
        "asked. The bot sends the same with /digest (each chat its own questions), and on KB_DIGEST's "
        'schedule. --json prints {"since","until","groups":{GROUP:[{"doc_id","title","kind","summary",'
        '"indexed_at","source_url"}]},"more","unanswered","resurfaced","resurfaced_for"}.',
        arguments=_digest_arguments,
    ),
}
