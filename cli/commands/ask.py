"""kb ask, kb chat and kb measure: questions answered by the model from the knowledge base."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import structlog

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from cli.commands.search import add_scope, scope_or_refusal, search_meaning
from cli.commands.web import describe_import, import_and_answer, import_exit, typed_pick
from knowledge.config import Settings
from knowledge.conversation.store import ConversationError
from knowledge.errors import KbError
from knowledge.report.status import probe_model, status_lines, status_report, summary_lines
from knowledge.retrieval.search import SearchResult
from knowledge.store.index import Index
from knowledge.words.catalog import Words, terminal_words
from knowledge.words.reasons import refused
from knowledge.words.replies import plain, text_and_note

if TYPE_CHECKING:
    from knowledge.speech.transcribe import Transcript
    from knowledge.wiring import Language


def _ask_arguments(p: argparse.ArgumentParser) -> None:
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
        "answers (kept in runs/conversations.sqlite3; it ends after KB_CONVERSATION_IDLE_S of silence); "
        "kb feedback good|bad --conversation NAME votes on its last answer",
    )
    p.add_argument("--new", action="store_true", help="with --conversation: start it afresh")
    p.add_argument("--audio", type=Path, metavar="FILE", help="ask the question spoken in this audio file")
    add_scope(p, "answer from the documents of the folder source NAME only (when they do not answer, as "
              "without --in: the web, when it is on)", "answer from the notes tagged TAG only")  # fmt: skip


def _measure_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", nargs="*")
    # Strings, not ints: "--evidence-tokens 160 320 640 QUESTION" must leave the question's words alone.
    p.add_argument("--evidence-tokens", nargs="+", default=["160", "320", "640"], metavar="N")
    p.add_argument("--dry-run", action="store_true", help="count only; no model server needed")


def cmd_chat(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb chat"""
    return chat_until_done(settings, out=out)


def chat_until_done(settings: Settings, language: Language | None = None, *, out: TextIO) -> int:
    """The terminal chat until /quit, end of input or Ctrl-C (each a normal end: exit 0)."""
    import signal

    from cli.chat import holding_the_terminal

    if sys.stdin.isatty():  # a person at a terminal: Ctrl-C leaves, even if kb's parent ignored it (a job
        signal.signal(signal.SIGINT, signal.default_int_handler)  # started with & in a script inherits that)
    try:
        with holding_the_terminal():
            return asyncio.run(_chat(settings, language, out=out))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C; SIGHUP or SIGTERM (cli.chat)
        with contextlib.suppress(OSError):  # a terminal that hung up takes no more lines
            print(file=out, flush=True)  # leave the shell's prompt on a line of its own
        return EXIT_OK


async def _chat(settings: Settings, language: Language | None = None, *, out: TextIO) -> int:
    from cli.chat import chat_loop
    from cli.opening import opened
    from knowledge.errors import FetchRefused
    from knowledge.websearch.importer import ImportRefused
    from knowledge.wiring import candidate_store, conversing, load_language, open_engine

    words = terminal_words(settings)

    async def do_import(source_id: str) -> str:
        try:
            result, reply = await import_and_answer(settings, source_id)
        except (ImportRefused, FetchRefused) as exc:
            # English keeps the error's own message (it names the fix); another language its sentence;
            # the reason code is the log's
            structlog.get_logger().info("chat.import_refused", reason=exc.reason, source_id=source_id)
            why = str(exc) if words.language == "en" else refused(exc.reason, words)
            return words.tr("refused: {why}", why=why)
        return describe_import(result, words) + ("\n\n" + plain(reply, words) if reply is not None else "")

    def keep_url(url: str) -> str:
        record = candidate_store(settings).save_url("cli", url)
        return f"web-1 · {record.candidates[0].title} — {url}\n" + words.tr("Import it with: /import web-1")

    async def status_text() -> str:
        model = await probe_model(engine.llm)
        report = await asyncio.to_thread(status_report, settings, model=model, counter=counter)
        return "\n".join(status_lines(report, words))

    language = language or load_language(settings)
    counter = (language[0], language[2])
    async with open_engine(settings, language) as engine:
        # what the first question would load, while the summary is made and the question typed (/quit or
        # Ctrl-C right away leaves at once)
        engine.warm_in_background(words.language)
        model = await probe_model(engine.llm)
        report = await asyncio.to_thread(status_report, settings, model=model, counter=counter)
        print("\n".join(summary_lines(report, words)), file=out, flush=True)
        await chat_loop(
            conversing(settings, engine),
            sources=lambda: _sources_text(settings, words),
            status=status_text,
            out=out,
            history_file=settings.runs / "chat_history",
            on_import=do_import,
            on_url=keep_url,
            pick=lambda line: typed_pick(settings, line),
            words=words,
            on_open=lambda cited: asyncio.to_thread(opened, settings, engine.open_index, cited, words),
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


def cmd_ask(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb ask [--in NAME] [--tag TAG] QUESTION  |  kb ask --audio FILE  |  kb ask --conversation NAME QUESTION"""
    from cli.chat import FRESH, Printer, offer
    from knowledge.feedback.store import Feedback
    from knowledge.wiring import conversing, open_engine

    words = terminal_words(settings)
    scope = scope_or_refusal(settings, args.source, args.tag, err=err)
    if isinstance(scope, int):
        return scope
    heard = None
    if args.audio is not None:
        if args.question:
            said = words.tr("ask takes a QUESTION or --audio FILE, not both")
            print(f"kb: {said}", file=err)
            return EXIT_USAGE
        if not args.audio.is_file():
            said = words.tr("no such file: {path}", path=str(args.audio))
            print(f"kb: {said}", file=err)
            return EXIT_USAGE
        heard = hear(args.audio, settings, err=err)
        if not args.json:
            print(words.tr("I heard: {text}", text=heard.text) + "\n", file=out, flush=True)
    elif not args.question:
        said = words.tr("ask needs a QUESTION or --audio FILE")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    if args.new and not args.conversation:
        said = words.tr("--new goes with --conversation NAME")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    question = heard.text if heard is not None else " ".join(args.question)
    picked = typed_pick(settings, question) if args.conversation and not args.new else None
    if picked is not None:  # a typed choice among the candidates on show: imported, never searched
        from cli.chat import WHICH

        typed, ids = picked
        if typed.source_id is None:
            print(words.tr(WHICH, ids=", ".join(ids)), file=out)
            return EXIT_USAGE
        return import_exit(import_and_answer(settings, typed.source_id), out=out, err=err, words=words)
    # a person at a terminal sees the answer as it is written; --json and pipes get it whole
    printer = Printer(out, words) if not args.json and out.isatty() else None

    async def ask() -> object:
        async with open_engine(settings) as engine:
            talk = conversing(settings, engine)
            if args.conversation:
                if args.new:  # a file that cannot be written (a full disk): the answer says so after it
                    with contextlib.suppress(ConversationError):
                        await asyncio.to_thread(talk.store.end, f"cli:{args.conversation}")
                key = f"cli:{args.conversation}"
                answered = await talk.ask(
                    key, question, listener=printer, language=words.language, scope=scope
                )
                await offer(Feedback(talk.store), key, question, answered)  # for kb feedback good|bad
                return answered
            return await talk.ask_once(question, listener=printer, language=words.language, scope=scope)

    if settings.index_path.exists():
        with contextlib.suppress(KbError), Index(settings.index_path, readonly=True) as index:
            search_meaning(settings, index, err=err)  # says when search by meaning is partial
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
        print(json.dumps(payload, ensure_ascii=False, indent=2), file=out)
    else:
        if answered.fresh:
            print(words.tr(FRESH), file=out)
        print(printer.finish(reply) if printer is not None else plain(reply, words), file=out)
        if reply.candidates:
            print(
                "\n" + words.tr("Import one with: kb import web-N (nothing is imported until you do)"),
                file=out,
            )
    return web_exit(reply.kinds())


def web_exit(kinds: list[str]) -> int:
    """kb ask's exit status: as kb websearch's when the web search it went to failed (3 rate-limited,
    1 another failure), else 0, the answer given."""
    from cli.commands.web import EXIT_RATE_LIMITED

    if "web-rate-limited" in kinds:
        return EXIT_RATE_LIMITED
    return EXIT_FAILED if "web-failed" in kinds else EXIT_OK


def passage_json(p: SearchResult) -> dict[str, object]:
    """A ranked passage as ``kb ask --json`` lists it."""
    return {
        "rank": p.rank, "chunk_id": p.chunk_id, "document_id": p.document_id, "source_name": p.source_name,
        "title": p.title, "lines": f"{p.start_line}-{p.end_line}",
    }  # fmt: skip


def hear(path: Path, settings: Settings, *, err: TextIO) -> Transcript:
    """The question spoken in an audio file; SpeechError (a KbError: exit 1 with its sentence) otherwise."""
    from knowledge.speech.decode import MAX_AUDIO_BYTES, too_large
    from knowledge.speech.transcribe import model_notice, speech_runner, transcribe_audio

    if (size := path.stat().st_size) > MAX_AUDIO_BYTES:
        raise too_large(size)
    data = path.read_bytes()
    if notice := model_notice(settings.whisper_model, own_dir=settings.model_dir):
        print(f"kb: {notice}", file=err, flush=True)
    with speech_runner() as runner:
        return transcribe_audio(data, settings=settings, runner=runner)


def cmd_measure(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb measure [--dry-run] --evidence-tokens N... QUESTION"""
    from knowledge.wiring import build_engine, http_session, load_language

    numbers = [w for w in args.evidence_tokens if w.isdigit()]
    budgets = [
        int(w)
        for w in numbers[: next((i for i, w in enumerate(args.evidence_tokens) if not w.isdigit()), None)]
    ]
    words = args.evidence_tokens[len(budgets) :] + args.question
    if not budgets or not words:
        print("kb: measure needs --evidence-tokens N [N...] and a QUESTION", file=err)
        return EXIT_USAGE
    question = " ".join(words)
    counter, template, why = load_language(settings, background=False)
    if why:
        print(f"note: {why}; counts use {counter.name}", file=err)

    async def measure() -> int:
        async with http_session() as session:
            engine = build_engine(settings, session, counter, template)
            passages = engine.retrieve(question)
            print(
                f"context {settings.context_tokens} tokens: {settings.max_output_tokens} kept for the answer "
                f"(KB_MAX_OUTPUT_TOKENS), at most {settings.history_tokens} for the conversation so far "
                "(KB_HISTORY_TOKENS; none here), the evidence at most its budget",
                file=out,
            )
            header = f"{'budget':>8} {'evidence':>9} {'input':>7} {'passages':>9}"
            print(header + ("" if args.dry_run else f" {'server':>7} {'output':>7} {'ms':>8}"), file=out)
            for budget in budgets:
                engine.settings = replace(engine.settings, evidence_tokens=budget)
                prompt = engine.prompt(question, passages)
                row = f"{budget:>8} {prompt.evidence_tokens:>9} {prompt.input_tokens:>7} {len(prompt.passages):>9}"
                if not args.dry_run:
                    done = await engine.llm.chat(prompt.messages, max_tokens=settings.max_output_tokens)
                    row += f" {done.prompt_tokens!s:>7} {done.completion_tokens!s:>7} {done.elapsed_ms:>8.0f}"
                print(row, file=out, flush=True)
        return EXIT_OK

    return asyncio.run(measure())


COMMANDS = {
    "ask": Command(
        cmd_ask,
        help="answer one question from the knowledge base with the model",
        description="Answer a typed QUESTION, or the question spoken in an audio file (--audio: a voice note or "
        "MP3, M4A, OGG, WAV, FLAC; transcribed with KB_WHISPER_MODEL, then answered like a typed question). "
        "Exit status: 0 answered, 1 the audio could not be transcribed (nothing heard, too long, unreadable, "
        "timed out: the reason on stderr), the web search it went to failed, or another failure, 2 usage, "
        "3 the web search was rate-limited (as kb websearch).",
        arguments=_ask_arguments,
    ),
    "chat": Command(cmd_chat, help="a terminal chat with the knowledge base (/help inside)"),
    "measure": Command(
        cmd_measure,
        help="exact prompt sizes for evidence budgets (and timings from the server)",
        description="For each evidence budget: the evidence tokens actually packed and the exact input tokens "
        "(system prompt, question, evidence and chat template, counted with the model's tokenizer). "
        "Without --dry-run each prompt is also sent: elapsed ms, output tokens and the server's own count.",
        arguments=_measure_arguments,
    ),
}
