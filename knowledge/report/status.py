"""What ``kb status`` reports: documents, chunks, tokenizer, inbox counts, recent ingests, the writer.

The same facts open ``kb run`` / ``kb chat`` (:func:`summary_lines`) and answer the chat's and
the terminal chat's ``/status``: where the knowledge base is, its size, whether the model server
answers (and the command that starts it), whether token counts are exact, web search, the inbox. The
phone's ``/status`` says what an owner needs in words (:func:`phone_facts`), without the internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from knowledge.config import Settings
from knowledge.errors import ConfigError, IndexError_, IndexMissing, KbError, Refused
from knowledge.ingest import working
from knowledge.ingest.lock import holder
from knowledge.ingest.names import is_candidate_name
from knowledge.model.client import ModelBadResponse, ModelClient
from knowledge.model.tokenizer import TokenCounter, hf_cache_dir, load_counter
from knowledge.retrieval.backfill import Coverage, coverage, second_coverage
from knowledge.retrieval.embed import Embedder, EmbedderError, make_embedder
from knowledge.retrieval.second import Second, beside, unavailable
from knowledge.sources import state
from knowledge.sources.registry import config_file, read_sources
from knowledge.store.connection import index_problem
from knowledge.store.index import Index
from knowledge.text import sentences
from knowledge.words.catalog import ENGLISH, LABELLED, Words
from knowledge.words.reasons import index_problem_text

USE_NAME = "Universal Sentence Encoder"
LoadedCounter = tuple[
    TokenCounter, str | None
]  # a token counter, and why it is an approximation (None: exact)


async def probe_model(llm: ModelClient, *, timeout_s: float = 5.0) -> dict[str, object]:
    """Whether the model server answers (its ``/v1/models``, and its ``/health`` when it has one; see
    knowledge.model.reach): ``{"url", "reachable", "start"[, "models"][, "error"]}``."""
    state: dict[str, object] = {"url": llm.base_url, "reachable": True, "start": llm.start_hint}
    try:
        reach = await asyncio.wait_for(llm.check(), timeout=timeout_s)
    except ModelBadResponse as exc:  # something answers there, just not as expected
        state.update(error=str(exc))
    except (KbError, TimeoutError) as exc:
        state.update(reachable=False, error=str(exc) or f"no answer within {timeout_s:g} s")
    else:
        if reach.models is not None:
            state["models"] = list(reach.models)
        if reach.problem:  # something answers there, just not as expected
            state["error"] = reach.problem
    return state


def counter_state(settings: Settings, loaded: LoadedCounter | None = None) -> dict[str, object]:
    """The token counter queries are budgeted with: ``{"name", "exact"[, "why"]}`` (``loaded``: the
    one the caller already has, with why it is an approximation; else it is loaded here)."""
    counter, why = loaded or load_counter(
        settings.tokenizer_spec, cache_dir=hf_cache_dir(), own_dir=settings.tokenizer_dir
    )
    return {"name": counter.name, "exact": why is None} | ({"why": why} if why else {})


def status_report(
    settings: Settings,
    *,
    model: dict[str, object] | None = None,
    counter: LoadedCounter | None = None,
    second: Second | None = None,
) -> dict[str, object]:
    """What ``kb status --json`` prints (and the start-up summary, the chat's and the bot's /status show).

    ``model`` is the result of :func:`probe_model`, when the caller has asked the server; ``counter``
    the token counter a running engine uses (see counter_state); ``second`` the second embedder to
    try now (about a second: loaded and asked one sentence); without it, only whether its package is
    there is checked.
    """
    providers = ["DuckDuckGo Lite"] + (["Brave"] if settings.brave_api_key else [])
    report: dict[str, object] = {
        "home": str(settings.home),
        "documents": 0,
        "chunks": 0,
        "tokenizer": None,
        "inbox": count_files(settings.inbox),
        "processed": count_files(settings.processed),
        "failed": count_files(settings.failed),
        "last_ingests": [],
        "writer": holder(settings.lock_path),
        "working": [asdict(w) for w in working.in_hand(working.folder(settings))],
        "embedding": asdict(pace) if (pace := working.read_pace(working.folder(settings))) else None,
        "vectors": {"model": embed_model_name(settings), "vectors": 0, "chunks": 0},
        "second_vectors": second_state(settings, None, second),
        "inbox_path": str(settings.inbox),
        "model_server": model,
        "token_counter": counter_state(settings, counter),
        "web_search": {
            "on": settings.web_search == "on",
            "mode": settings.web_search,
            "providers": providers,
        },
    }
    try:
        sources = read_sources(config_file(settings.home))
    except ConfigError as exc:
        sources, report["sources_error"] = [], str(exc)
    report["sources"] = [
        {
            "name": s.name,
            "path": str(s.path),
            "present": s.root.is_dir(),
            "indexed": 0,
            "skipped": 0,
            "failed": 0,
        }
        for s in sources
    ]
    if settings.index_path.exists():
        try:
            with Index(settings.index_path, readonly=True) as index:
                for entry in report["sources"] if state.has_table(index.conn) else []:
                    entry.update(state.counts(index.conn, entry["name"]))
                report["documents"] = index.document_count()
                report["chunks"] = index.chunk_count()
                report["tokenizer"] = index.meta("tokenizer")
                report["vectors"] = coverage(index, embed_model_name(settings)).to_json()
                report["second_vectors"] = second_state(settings, index, second)
                report["last_ingests"] = [
                    {k: v for k, v in rec.__dict__.items() if v is not None} for rec in index.last_ingests(10)
                ]
        except (
            sqlite3.Error,
            IndexError_,
        ) as exc:  # being created by the daemon this very moment, or damaged
            report["index_error"] = str(exc)
            report["index_problem"] = problem_of(exc)
    return report


def problem_of(exc: BaseException) -> str:
    """Why the index could not be read: IndexUnreadable's reason, ``empty`` when it holds nothing yet,
    else what SQLite's error means (knowledge.store.connection.index_problem)."""
    if isinstance(exc, IndexMissing):
        return "empty"
    if isinstance(exc, Refused):
        return exc.reason
    return index_problem(exc, None)


def embed_model_name(settings: Settings) -> str | None:
    """The name vectors are stored under for the configured embedder (None: off or misconfigured)."""
    embedder = _embedder(settings)
    return embedder.name if embedder is not None else None


def _embedder(settings: Settings) -> Embedder | None:
    try:
        return make_embedder(settings)
    except EmbedderError:
        return None


def second_state(
    settings: Settings, index: Index | None, second: Second | None = None
) -> dict[str, object] | None:
    """The second embedder beside the local e5 (None: there is none, see knowledge.retrieval.second.beside):
    ``{"name", "model", "vectors", "chunks"[, "problem"]}`` (``index`` None: nothing counted yet); with a
    problem, search uses e5 alone and ``model`` is None."""
    embedder = _embedder(settings)
    if embedder is None or beside(embedder, True) is None:
        return None
    found = second or Second()
    problem = unavailable(found.encoder, load=second is not None)
    counted = second_coverage(index, found) if index is not None else Coverage(found.model, 0, 0)
    state = {"name": USE_NAME} | counted.to_json() | ({"model": None, "problem": problem} if problem else {})
    return state


def count_files(folder: Path) -> int:
    """Source files directly in a folder (sidecars, error records, hidden and temporary names excluded)."""
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.is_file() and is_candidate_name(p.name))


def pace_text(vectors: Mapping[str, Any], report: Mapping[str, Any], words: Words = ENGLISH) -> str:
    """``; 7.5 chunks/s, about 1 h 15 min to go`` while the daemon is making vectors, else ""."""
    pace = report.get("embedding")
    missing = vectors.get("chunks", 0) - vectors.get("vectors", 0)
    if not pace or missing <= 0 or pace.get("model") != vectors.get("model"):
        return ""
    return words.tr(
        "; {rate} chunks/s, about {left} to go",
        rate=f"{pace['rate']:.2g}",
        left=duration(missing / pace["rate"], words),
    )


def duration(seconds: float, words: Words = ENGLISH) -> str:
    """``40 s``, ``12 min``, ``1 h 15 min``."""
    if seconds < 60:
        return words.tr("{n} s", n=max(1, round(seconds)))
    minutes = round(seconds / 60)
    if minutes < 60:
        return words.tr("{n} min", n=minutes)
    return words.tr("{h} h {m} min", h=minutes // 60, m=minutes % 60)


def summary_facts(report: Mapping[str, Any], words: Words = ENGLISH) -> list[tuple[str, str]]:
    """(label, fact) for the five things a person wants to know before the first question."""
    w = words
    if "index_error" in report:  # English shows the error itself; another language, what it means
        error = (
            report["index_error"]
            if w.language == "en"
            else index_problem_text(report.get("index_problem", "io-error"), w)
        )
        size = w.tr("index unreadable ({error})", error=error)
    else:
        size = w.tr(
            "{documents}, {chunks}",
            documents=w.ntr("{n} document", "{n} documents", report["documents"]),
            chunks=w.ntr("{n} chunk", "{n} chunks", report["chunks"]),
        )
    vectors = report.get("vectors") or {}
    if not vectors.get("model"):
        size += w.tr(" (search by words only: KB_EMBED=off)")
    elif report["chunks"]:
        size += w.tr(
            " ({vectors} with vectors, {model}{pace})",
            vectors=vectors["vectors"], model=vectors["model"], pace=pace_text(vectors, report, w),
        )  # fmt: skip
    model = report.get("model_server")
    if model is None:
        model_fact = w.tr("not checked")
    elif model["reachable"]:
        model_fact = w.tr("reachable at {url}", url=model["url"])
        if model.get("models"):
            model_fact += w.tr("; serving {models}", models=", ".join(model["models"][:3]))
        if model.get("error") and w.language == "en":  # the server's own words, technical: English only
            model_fact += w.tr(", but its health check failed: {error}", error=model["error"])
        elif model.get("error"):
            model_fact += w.tr(", but its health check failed (kb doctor says why)")
    else:
        model_fact = w.tr(
            "not reachable at {url} — start it with: {command}", url=model["url"], command=model["start"]
        )
    counter = report["token_counter"]
    if counter["exact"]:
        tokens = w.tr("exact ({name})", name=counter["name"])
    else:
        tokens = w.tr(
            "approximate ({name}): set KB_TOKENIZER to the model's tokenizer.json", name=counter["name"]
        )
    if report["tokenizer"] and report["tokenizer"] != counter["name"]:
        tokens += w.tr("; the index was built with {name}: run kb reindex", name=report["tokenizer"])
    web = report["web_search"]
    waiting = w.tr("{n} waiting to be indexed; ", n=report["inbox"]) if report["inbox"] else ""
    return [
        (w.tr("knowledge base"), w.tr(LABELLED, name=report["home"], what=size)),
        (w.tr("model server"), model_fact),
        (w.tr("tokenizer"), tokens),
        (w.tr("web search"), web_fact(web, w)),
        (
            w.tr("inbox"),
            w.tr("{path} ({waiting}drop files here to add them)", path=report["inbox_path"], waiting=waiting),
        ),
    ]


def embedder_facts(report: Mapping[str, Any], words: Words = ENGLISH) -> list[tuple[str, str]]:
    """(label, fact) for the two embedders and how many passages each has made vectors of, and a
    warning when the second cannot be asked (none when search is by words only)."""
    w, first, second = words, report.get("vectors") or {}, report.get("second_vectors")
    if not first.get("model"):
        return []
    fact = _made(first["model"], first, w)
    if second and not second.get("problem"):
        fact += w.tr("; second opinion across scripts: {made}", made=_made(second["name"], second, w))
    facts = [(w.tr("meaning"), fact)]
    if second and second.get("problem"):
        warning = w.tr(
            "the second opinion across scripts ({name}) is unavailable: {problem}; search falls back to e5 alone",
            name=second["name"], problem=second["problem"],
        )  # fmt: skip
        facts.append((w.tr("warning"), warning))
    return facts


def _made(name: str, counted: Mapping[str, Any], words: Words) -> str:
    """``local:multilingual-e5-small-q4 1,200/1,234 passages (34 waiting)``."""
    done, total = counted["vectors"], counted["chunks"]
    made = words.tr(
        "{name} {done}/{total} passages", name=name, done=words.number(done), total=words.number(total)
    )
    return made + (words.tr(" ({n} waiting)", n=words.number(total - done)) if total > done else "")


def activity_facts(report: Mapping[str, Any], words: Words = ENGLISH) -> list[tuple[str, str]]:
    """(label, fact) for what is waiting in the inbox, what failed, whether a daemon is indexing, and
    the embedders (see embedder_facts)."""
    w = words
    writer = report["writer"]
    files = w.tr(
        "{waiting} waiting, {processed} processed, {failed} failed",
        waiting=report["inbox"], processed=report["processed"], failed=report["failed"],
    )  # fmt: skip
    facts = [
        (w.tr("files"), files),
        (w.tr("daemon"), w.tr("running ({writer})", writer=writer) if writer else w.tr("not running")),
    ]
    for source in report.get("sources", []):
        fact = w.tr(
            "{indexed} indexed, {skipped} skipped, {failed} failed",
            indexed=source["indexed"], skipped=source["skipped"], failed=source["failed"],
        )  # fmt: skip
        if not source["present"]:
            fact = sentences([fact, w.tr("(not there now)")])
        facts.append(
            (w.tr("source {name}", name=source["name"]), w.tr(LABELLED, name=source["path"], what=fact))
        )
    facts += embedder_facts(report, w)
    if writer:  # a file left by a killed daemon is not work in progress
        facts += [
            (
                w.tr("reading"),
                w.tr("{name}: page {done} of {total}", name=x["name"], done=x["done"], total=x["total"]),
            )
            for x in report.get("working", [])
        ]
    return facts


def phone_facts(
    report: Mapping[str, Any], words: Words = ENGLISH, *, zone: tzinfo = UTC
) -> list[tuple[str, str]]:
    """(label, fact) for the phone's /status: what an owner needs (how many documents, what waits, whether
    the model and the indexing run, web search, what was added last, at ``zone``'s time), in words;
    paths, addresses, process ids and the tokenizer are the terminal's (kb status)."""
    w = words
    if "index_error" in report:
        documents = w.tr("cannot be read right now")
    else:
        documents = w.ntr("{n} document", "{n} documents", report["documents"])
    waiting = [w.ntr("{n} file to index", "{n} files to index", report["inbox"])] if report["inbox"] else []
    if report["writer"]:
        waiting += [w.tr("{name}: page {done} of {total}", name=x["name"], done=x["done"], total=x["total"])
                    for x in report.get("working", [])]  # fmt: skip
    if report["failed"]:
        waiting.append(w.ntr("{n} file could not be added", "{n} files could not be added", report["failed"]))
    model = report.get("model_server")
    if model is None:
        model_fact = w.tr("not checked")
    elif not model["reachable"]:
        model_fact = w.tr("not running")
    else:
        model_fact = w.tr("running, but its health check failed") if model.get("error") else w.tr("running")
    web = report["web_search"]
    web_fact_ = (
        w.tr("on") if web["on"] else w.tr("when asked: /search") if web.get("mode") == "ask" else w.tr("off")
    )
    facts = [
        (w.tr("knowledge base"), documents),
        (w.tr("waiting"), w.tr(", ").join(waiting) if waiting else w.tr("nothing")),
        (w.tr("model server"), model_fact),
        (
            w.tr("indexing"),
            w.tr("running") if report["writer"] else w.tr("not running: new files wait for it"),
        ),
        (w.tr("web search"), web_fact_),
    ]
    added = next((r for r in report.get("last_ingests", []) if r.get("status") == "indexed"), None)
    if added is not None:
        with contextlib.suppress(ValueError, KeyError):
            when = datetime.fromisoformat(added["finished_at"])
            when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(zone)
            name = Path(added["path"]).name
            facts.append((w.tr("last added"), w.tr("{name}, {when}", name=name, when=w.when(when))))
    return facts


def aligned(facts: list[tuple[str, str]]) -> list[str]:
    """Facts as terminal lines with the labels in a column (wide characters count two columns)."""
    return [f"{label}{' ' * max(1, 16 - columns(label))}{fact}" for label, fact in facts]


def columns(text: str) -> int:
    """How many terminal columns a text takes (CJK wide and full-width characters count two, Thai
    marks above and below none)."""
    return sum(
        0
        if unicodedata.category(ch) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(ch) in "WF"
        else 1
        for ch in text
    )


def web_fact(web: dict[str, object], words: Words = ENGLISH) -> str:
    """``on (DuckDuckGo Lite)``, ``when asked (/search) …`` or ``off (KB_WEB_SEARCH)``."""
    providers = ", ".join(web["providers"])
    if web["on"]:
        return words.tr("on ({providers})", providers=providers)
    if web.get("mode") == "ask":
        return words.tr(
            "when asked: /search, kb websearch ({providers}; KB_WEB_SEARCH=ask)", providers=providers
        )
    return words.tr("off (KB_WEB_SEARCH)")


def summary_lines(report: Mapping[str, Any], words: Words = ENGLISH) -> list[str]:
    """The start-up summary of ``kb run`` / ``kb chat``: five lines."""
    return aligned(summary_facts(report, words))


def status_lines(report: Mapping[str, Any], words: Words = ENGLISH) -> list[str]:
    """What ``kb status`` and the chat's /status show: the start-up summary, then the activity."""
    return aligned(summary_facts(report, words) + activity_facts(report, words))


def plural(n: int, noun: str) -> str:
    """``1 document``, ``3 documents`` (English, for the command line and the logs)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
