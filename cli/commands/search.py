"""kb search and kb ls: passages for a question, documents by title. The shape of ``search --json`` is a contract."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from cli.commands import EXIT_OK, EXIT_USAGE, Command
from knowledge.config import Settings
from knowledge.errors import ConfigError, IndexMissing, SourceRefused
from knowledge.retrieval.backfill import coverage
from knowledge.retrieval.embed import EmbedderError, make_embedder
from knowledge.retrieval.scope import Scope
from knowledge.retrieval.search import Found, Meaning, SearchResult, find
from knowledge.retrieval.sufficiency import Verdict
from knowledge.retrieval.translate import Translation, search_translated
from knowledge.sources.opening import opening
from knowledge.sources.registry import Source, config_file, read_sources, scope_in, with_tag
from knowledge.sources.state import split_raw_path
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.words.catalog import ENGLISH, N_, Words, terminal_words
from knowledge.words.sources import REFUSALS


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="*", help="the question (words are joined with spaces)")
    p.add_argument(
        "-k", type=int, default=None, metavar="N", help="number of passages (default: KB_SEARCH_K)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    add_scope(p, "search only the documents of the folder source NAME", "search only the notes tagged TAG")
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


def _ls_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("words", nargs="*", metavar="WORDS", help="words the title or source must contain")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--limit", type=int, default=50, metavar="N", help="show at most N documents (default 50; 0: all)"
    )


def add_scope(p: argparse.ArgumentParser, what: str, tagged: str) -> None:
    """The ``--in NAME`` and ``--tag TAG`` options of kb search and kb ask."""
    p.add_argument(
        "--in",
        dest="source",
        metavar="NAME",
        help=f"{what} (kb sources lists them; an unknown NAME is refused with exit status 2, naming the "
        "sources there are); by default, every document",
    )
    p.add_argument(
        "--tag",
        metavar="TAG",
        help=f"{tagged} (in its front matter or as an inline #tag; with or without '#', any case; "
        "#home holds #home/rent); with --in, the notes of that source carrying it. A tag no document "
        "carries is refused with exit status 2, naming the tags used most",
    )


def scope_or_refusal(
    settings: Settings, name: str | None, tag: str | None, *, err: TextIO
) -> Scope | None | int:
    """The scope ``--in NAME`` and ``--tag TAG`` ask for (None: everything), or the exit status of their
    refusal (said on ``err``). A tag is looked up in the index on disk (none yet: every tag is refused)."""
    try:
        scope = scope_in(settings.home, name)
        if tag is None:
            return scope
        try:
            with Index(settings.index_path, readonly=True) as index:
                return with_tag(scope, tag, index)
        except IndexMissing:
            return with_tag(scope, tag, None)
    except SourceRefused as exc:
        words = terminal_words(settings)
        said = str(exc) if words.language == "en" else words.tr(REFUSALS[exc.reason], **exc.facts)
        print(f"kb: {said}", file=err)
        return EXIT_USAGE


def cmd_search(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb search [-k N] [--json] [--in NAME] [--tag TAG] QUERY  |  kb search --batch FILE --json"""
    k, words = settings.search_k if args.k is None else args.k, terminal_words(settings)
    if k < 1:
        said = words.tr("-k must be at least 1")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    if args.batch is None and not args.query:
        said = words.tr("search needs a QUERY or --batch FILE")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    if args.batch is not None:
        queries = args.batch.read_text(encoding="utf-8", errors="replace").splitlines()
    else:
        queries = [" ".join(args.query)]
    scope = scope_or_refusal(settings, args.source, args.tag, err=err)
    if isinstance(scope, int):
        return scope
    translate = settings.translate != "off" and not args.no_translate
    sources = _sources_or_none(settings)
    with Index(settings.index_path, readonly=True) as index:
        meaning = search_meaning(settings, index, err=err)
        answers = asyncio.run(
            _find_all(settings, index, queries, k=k, meaning=meaning, translate=translate, scope=scope)
        )
        dates = index.dates_of(r.document_id for found, _ in answers for r in found.results)
    for query, (found, translations) in zip(queries, answers, strict=True):
        if args.batch is not None and args.json:
            line = {
                "query": query,
                "results": [
                    result_json(r, found.verdict, translations, sources, dates.get(r.document_id))
                    for r in found.results
                ],
                "answerable": found.verdict.answerable,
                "verdict": found.verdict.to_json(),
                "translations": [t.to_json() for t in translations],
            }
            print(json.dumps(line, ensure_ascii=False), file=out, flush=False)
        elif args.json:
            results = [
                result_json(r, found.verdict, translations, sources, dates.get(r.document_id))
                for r in found.results
            ]
            print(json.dumps(results, ensure_ascii=False, indent=2), file=out)
        else:
            if args.batch is not None:
                print(f"## {query}", file=out)
            print_results(found, out, translations, words)
    return EXIT_OK


async def _find_all(
    settings: Settings,
    index: Index,
    queries: list[str],
    *,
    k: int,
    meaning: Meaning | None,
    translate: bool,
    scope: Scope | None = None,
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
                    index, query, k=k, meaning=meaning, threshold=settings.min_relevance, translations=texts,
                    scope=scope,
                )  # fmt: skip

            groups = meaning.cache.group_counts if meaning is not None else dict
            out.append(await search_translated(search, translate_with, query, groups))
    return out


def result_json(
    result: SearchResult,
    verdict: Verdict,
    translations: Sequence[Translation] = (),
    sources: Sequence[Source] = (),
    dates: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """One result as ``kb search --json`` prints it: the contract's fields, its relevance, the
    query's verdict (``answerable``: whether the documents answer it, the same on every result)
    and the translations of the query searched with it (the same on every result); a folder source's
    passage has its ``source``, ``path`` and what opens it (``open``: an Obsidian link or the file); a
    note's front-matter ``dates`` (``date``, ``created``, ``updated``, ISO 8601), when it gives any."""
    in_source = split_raw_path(result.raw_path)
    where = opening(sources, result.raw_path) if in_source else None
    return {
        **result.to_json(),
        "answerable": verdict.answerable,
        "translations": [t.to_json() for t in translations],
        **({"source": in_source[0], "path": in_source[1]} if in_source else {}),
        **({"open": where.target} if where else {}),
        **({"dates": dict(dates)} if dates else {}),
    }


def _sources_or_none(settings: Settings) -> list[Source]:
    """The registered sources (none when kb.toml cannot be read: search goes on without them)."""
    try:
        return read_sources(config_file(settings.home))
    except ConfigError:
        return []


def search_meaning(settings: Settings, index: Index, *, err: TextIO) -> Meaning | None:
    """Search by meaning for this index, saying on ``err`` when it is partial or unavailable."""
    words = terminal_words(settings)
    try:
        meaning = Meaning.of(make_embedder(settings))
    except EmbedderError as exc:
        said = f"searching by words only: {exc}" if words.language == "en" else words.tr(BY_WORDS_ONLY)
        print(f"kb: {said}", file=err)
        return None
    if meaning is not None:
        cov = coverage(index, meaning.embedder.name)
        if not cov.is_complete:
            print(f"kb: {words.tr(PARTIAL, vectors=cov.vectors, chunks=cov.chunks)}", file=err)
    return meaning


BY_WORDS_ONLY = N_("searching by words only: the embedder cannot be used (kb doctor says why)")
PARTIAL = N_("{vectors} of {chunks} passages have vectors yet; search by meaning is partial")


def print_results(
    found: Found, out: TextIO, translations: Sequence[Translation] = (), words: Words = ENGLISH
) -> None:
    """Readable results: rank, citation, relevance, a few lines of text; then the translations
    searched too, and the verdict (in ``words``; English gives the verdict's reasoning, another
    language its figures)."""
    w = words
    if translations:
        searched = " · ".join(f"{t.language}: {t.text}" for t in translations)
        print(w.tr("also searched as: {translations}", translations=searched), file=out)
    if not found.results:
        print(w.tr("no matching passages"), file=out)
        return
    for r in found.results:
        tags = "".join(f" #{t}" for t in r.tags)
        scores = w.tr(
            "relevance {relevance}, score {score}", relevance=f"{r.relevance:.2f}", score=f"{r.score:.3f}"
        )
        print(f"{r.rank}. {r.citation}  ({scores}){tags}", file=out)
        if r.source_url:
            print(f"   {r.source_url}", file=out)
        snippet = " ".join(r.text.split())
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", file=out)
    verdict = found.verdict
    answer = (
        w.tr("the documents answer it")
        if verdict.answerable
        else w.tr("the documents do not answer it (kb ask would go to the web)")
    )
    if w.language == "en":
        print(f"verdict: {answer}: {verdict.why}", file=out)
        return
    figures = w.tr("best relevance {relevance}, threshold {threshold}", relevance=f"{verdict.relevance:.2f}",
                   threshold=f"{verdict.threshold:.2f}")  # fmt: skip
    print(w.tr("verdict: {answer} ({figures})", answer=answer, figures=figures), file=out)


def cmd_ls(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb ls [WORDS] [--json] [--limit N]"""
    docs: list[DocumentRecord] = []
    if settings.index_path.exists():
        with Index(settings.index_path, readonly=True) as index:
            docs = matching_documents(index.documents(), args.words)
    shown = docs if args.limit <= 0 else docs[: args.limit]
    if args.json:
        print(json.dumps([document_json(d) for d in shown], ensure_ascii=False, indent=2), file=out)
        return EXIT_OK
    words = terminal_words(settings)
    if not docs:
        print(
            words.tr("no documents match") if args.words else words.tr(NO_DOCUMENTS),
            file=out,
        )
        return EXIT_OK
    for d in shown:
        print(f"{d.id}  {d.indexed_at[:16].replace('T', ' ')}  {d.title}  ({_origin(d)})", file=out)
    if len(shown) < len(docs):
        print(
            words.tr("… {n} more (--limit N shows more, --limit 0 all)", n=len(docs) - len(shown)), file=out
        )
    return EXIT_OK


NO_DOCUMENTS = N_("no documents yet — add files with: kb ingest PATH")


def matching_documents(docs: Sequence[DocumentRecord], words: Sequence[str]) -> list[DocumentRecord]:
    """Documents whose title or source contains every word (any case), newest first."""
    wanted = [w.casefold() for w in words if w.strip()]

    def is_match(d: DocumentRecord) -> bool:
        text = f"{d.title} {d.source_name} {_origin(d)}".casefold()
        return all(w in text for w in wanted)

    found = [d for d in docs if is_match(d)]
    return sorted(found, key=lambda d: (d.indexed_at, d.id), reverse=True)


def _origin(d: DocumentRecord) -> str:
    """Where a document came from, as kb ls shows it: its page's URL, a folder source's note by its place
    in the source (``notes:projA/README.md``: two README.md told apart), else the file's name."""
    if d.source_url:
        return d.source_url
    return d.raw_path if split_raw_path(d.raw_path) is not None else d.source_name


def document_json(d: DocumentRecord) -> dict[str, object]:
    """One document as kb ls --json prints it."""
    return {
        "id": d.id, "title": d.title, "indexed_at": d.indexed_at, "source_name": d.source_name,
        "source_url": d.source_url, "raw_path": d.raw_path, "chunks": d.chunk_count,
    }  # fmt: skip


COMMANDS = {
    "search": Command(
        cmd_search,
        help="find passages for a question",
        description="Rank passages for a question (any text is a valid query) and say whether they answer it. "
        "With --json each result is "
        '{"rank","score","chunk_id","document_id","title","source_name","source_url","start_line","end_line","text",'
        '"relevance","tags","answerable","translations"}: relevance is the probability (0-1) that the passage answers '
        "the question, tags its document's (a note's front matter and inline #tags), answerable the verdict on "
        "the question (its best passage reaches KB_MIN_RELEVANCE), "
        'translations the question as also searched in the index\'s other languages ([{"language","text"}], '
        "from the model), both the same on every result; a passage from a folder source (kb sources) also "
        'carries "source" (its name) and "path" (the file, relative to the source; start_line and end_line are '
        "lines of that file).",
        arguments=_search_arguments,
    ),
    "ls": Command(
        cmd_ls,
        help="list documents, newest first",
        description="List the documents in the knowledge base, newest first: id, date indexed, title and "
        "source (file name or URL). With WORDS, only documents whose title or source contains every word "
        "(any case). With --json, a list of "
        '{"id","title","indexed_at","source_name","source_url","raw_path","chunks"}. '
        "Exit status: 0 (also when nothing matches).",
        arguments=_ls_arguments,
    ),
}
