"""kb websearch, kb import and kb import-url: web candidates, and the one the owner chooses brought in."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING, TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, Command
from knowledge.config import Settings
from knowledge.words.catalog import ENGLISH, N_, Words, terminal_words
from knowledge.words.reasons import not_read, refused
from knowledge.words.replies import plain

if TYPE_CHECKING:
    from knowledge.websearch.choice import Typed


def _websearch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", nargs="+")
    p.add_argument(
        "--json", action="store_true", help="print the plan, candidates, summary and drops as JSON"
    )
    p.add_argument("--explain", action="store_true", help="also list every dropped result and why")


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source_id", metavar="web-N")
    p.add_argument("extra", nargs="*", help=argparse.SUPPRESS)


def _import_url_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("url")
    p.add_argument(
        "--check", action="store_true", help="say whether the guard allows the URL; do not connect"
    )


EXIT_RATE_LIMITED = 3


def cmd_websearch(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
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
        print(f"kb: {exc}", file=err)
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
        print(json.dumps(payload, ensure_ascii=False, indent=2), file=out)
        return EXIT_OK
    planned = "; ".join(
        f"{q.query!r} ({q.language or '?'}, {q.freshness or 'any time'})" for q in found.plan.queries
    )
    print(f"plan ({found.plan.planner}): {planned}", file=out)
    for note in found.notes:
        print(f"note: {note}", file=out)
    if not candidates:
        print("no candidates", file=out)
    for c in candidates:
        print(f"{c.id}  {c.title}\n       {c.url}", file=out)
    if found.summary:
        print("\n" + "\n".join(found.summary), file=out)
    if args.explain and found.dropped:
        print("\ndropped:", file=out)
        for d in found.dropped:
            print(f"  {d.reason[:48]:<48}  {d.hit.url}", file=out)
    return EXIT_OK


EXIT_REFUSED = 2


def typed_pick(settings: Settings, text: str, *, chat_id: str = "cli") -> tuple[Typed, list[str]] | None:
    """The owner's typed choice (「我選 web-2」, "the second one") among the candidates on show in the
    chat, with their ids; None when none are on show or the text is not a choice."""
    from knowledge.websearch.choice import typed_choice
    from knowledge.wiring import candidate_store

    record = candidate_store(settings).latest(chat_id)
    ids = [c.id for c in record.candidates] if record is not None else []
    typed = typed_choice(text, ids)
    return (typed, ids) if typed is not None else None


def describe_import(result: object, words: Words = ENGLISH) -> str:
    """One line for an import's outcome."""
    r, w = result, words
    if r.status == "indexed":
        chunks = w.ntr("{n} chunk", "{n} chunks", r.chunks or 0)
        facts = dict(id=r.source_id, url=r.url, title=r.title, chunks=chunks, doc=r.doc_id)
        if r.is_replacement:
            return w.tr(
                "updated    {id} {url} → {title!r} ({chunks}, {doc}): its earlier version is replaced",
                **facts,
            )
        return w.tr("indexed    {id} {url} → {title!r} ({chunks}, {doc})", **facts)
    if r.status == "already":
        return w.tr("already    {id} {url} was imported before: {title!r} ({doc})", id=r.source_id, url=r.url,
                    title=r.title, doc=r.doc_id)  # fmt: skip
    is_english = w.language == "en"  # English says the importer's message; another language what it means
    if r.status == "queued":
        why = r.message if is_english else w.tr(QUEUED)
        return w.tr("queued     {id} {url}: {why}", id=r.source_id, url=r.url, why=why)
    if not is_english:
        return w.tr("failed     {id} {url}: {why} (kept in {kept})", id=r.source_id, url=r.url,
                    why=not_read(r.reason or "unreadable", w), kept=r.kept_at)  # fmt: skip
    return w.tr("failed     {id} {url}: {reason}: {why} (kept in {kept})", id=r.source_id, url=r.url,
                reason=r.reason, why=r.message, kept=r.kept_at)  # fmt: skip


QUEUED = N_("it waits in the inbox until the daemon indexes it (kb daemon or kb run)")


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


def import_exit(run: object, *, out: TextIO, err: TextIO, words: Words = ENGLISH) -> int:
    """Run an import (and its answer), print its outcome (in ``words``); the exit status."""
    from knowledge.errors import FetchRefused
    from knowledge.websearch.importer import ImportRefused

    try:
        result, reply = asyncio.run(run)
    except (ImportRefused, FetchRefused) as exc:
        why = (
            f"refused ({exc.reason}): {exc}"
            if words.language == "en"
            else words.tr(REFUSED_, why=refused(exc.reason, words))
        )
        print(f"kb: {why}", file=err)
        return EXIT_REFUSED
    print(describe_import(result, words), file=out)
    if reply is not None:
        print("\n" + plain(reply, words), file=out)
    return EXIT_OK if result.status in ("indexed", "already", "queued") else EXIT_FAILED


def cmd_import(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb import web-N"""
    run = import_and_answer(settings, args.source_id, *args.extra)
    return import_exit(run, out=out, err=err, words=terminal_words(settings))


def cmd_import_url(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb import-url [--check] URL"""
    from knowledge.errors import FetchRefused
    from knowledge.wiring import candidate_store, make_fetcher

    words = terminal_words(settings)
    is_english = words.language == "en"
    if args.check:
        try:
            addresses = asyncio.run(make_fetcher(settings).check_only(args.url))
        except FetchRefused as exc:
            why = (
                f"refused ({exc.reason}): {exc}"
                if is_english
                else words.tr(REFUSED_, why=refused(exc.reason, words))
            )
            print(why, file=out)
            return EXIT_REFUSED
        print(words.tr("allowed: {url} resolves to {addresses}", url=args.url, addresses=", ".join(addresses)),
              file=out)  # fmt: skip
        return EXIT_OK
    if not args.url.startswith(("http://", "https://")):
        why = (
            f"refused (scheme): {args.url!r} is not an http(s) URL"
            if is_english
            else refused("scheme", words)
        )
        print(f"kb: {why}", file=err)
        return EXIT_REFUSED
    candidate_store(settings).save_url("cli", args.url)
    return import_exit(import_and_answer(settings, "web-1"), out=out, err=err, words=words)


REFUSED_ = N_("refused: {why}")


COMMANDS = {
    "websearch": Command(
        cmd_websearch,
        help="search the web for a question and list candidates (nothing is imported)",
        description="Plan queries, search (DuckDuckGo Lite, or Brave with KB_BRAVE_API_KEY), filter, and store up to "
        "five candidates web-1…web-5 for the terminal's chat. Exit status: 0 with or without candidates, 3 when every "
        "provider is rate-limited, 1 on other failures.",
        arguments=_websearch_arguments,
    ),
    "import": Command(
        cmd_import,
        help="import a web candidate (web-1 … web-5) of the latest search",
        description="Download the candidate through the SSRF guard, hand it to the daemon through the inbox, wait "
        "until it is indexed (KB_IMPORT_WAIT_S), then answer the original question again. Exit status: 0 indexed "
        "(or already imported, or queued for a daemon that is not running), 2 refused by the guard or the "
        "selection, 1 any other failure.",
        arguments=_import_arguments,
    ),
    "import-url": Command(
        cmd_import_url,
        help="import one web page or PDF by URL (your explicit choice)",
        description="The URL becomes a one-candidate list and is imported as web-1. With --check, only print the "
        "guard's verdict (DNS resolution included) without connecting. Exit status as for kb import.",
        arguments=_import_url_arguments,
    ),
}
