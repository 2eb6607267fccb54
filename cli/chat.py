"""The terminal chat: a conversation with the knowledge base, answers written as they arrive, a few
slash commands.

Each ``kb>`` run is one conversation (``/new`` starts another): a follow-up ("and the second
point?") is understood from what came before. ``/good`` and ``/bad`` vote on the last answer
(knowledge.feedback; ``kb feedback`` lists the votes); after ``/bad`` the chat says how to search the
web for it. Ctrl-C while an answer is being written stops that
answer (what was said stays); at the prompt it leaves kb. However the run ends (``/quit``, Ctrl-D,
Ctrl-C, its terminal closed: SIGHUP, or SIGTERM), its conversation is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TextIO

from cli.opening import pick
from knowledge.answer.reply import Citation, Reply
from knowledge.conversation.session import Answered, Conversing
from knowledge.conversation.store import ConversationError
from knowledge.feedback.record import BAD, GOOD, Rated, rated
from knowledge.feedback.store import Cast, Feedback, FeedbackRefused
from knowledge.logs import prompting
from knowledge.websearch.choice import Typed
from knowledge.websearch.importer import pasted_url
from knowledge.words.catalog import ENGLISH, N_, Words
from knowledge.words.replies import plain

HELP = N_(
    "Ask a question in any language; answers cite your documents as [n].\n"
    'Follow-ups are understood from the conversation ("and the second point?"); /new starts afresh.\n'
    "In a question, in:NAME searches one folder source only and #tag only the notes with that tag\n"
    '("in:vault #rent how much was the deposit?"; kb sources lists the sources).\n'
    "/new       forget this conversation and start a new one\n"
    "/search Q  search the web for Q even when the knowledge base has something\n"
    "/import web-N   import a web candidate (a pasted URL becomes web-1)\n"
    "/open N    the passage the last answer cites as [N], and where to open its file\n"
    "/sources   the latest documents in the knowledge base\n"
    "/status    the knowledge base, model server, tokenizer, web search and inbox\n"
    "/good      the last answer helped; /bad: it did not (kb feedback lists the votes)\n"
    "/help      this text\n"
    "/quit      leave (Ctrl-D works too)"
)


FRESH = N_("(A new conversation: earlier messages are not taken into account.)")
WHICH = N_("Which one? Write its id: {ids}.")
NOTHING_TO_RATE = N_("There is no answer to rate yet: ask a question first, then /good or /bad.")
NOTED = N_("Noted: {vote} for the last answer.")
CHANGED = N_("Changed to {vote} for the last answer.")
ALREADY = N_("Already noted: {vote} for the last answer.")
WEB_HOW = N_("To search the web for it: /search {question}")
NOT_SAVED = N_("Not saved: {why}")


def render_reply(reply: Reply, words: Words, *, streamed: bool = False) -> str:
    """A reply for the terminal: the answer (unless it was written as it streamed), its sources, and
    the mode when it is not a local answer."""
    text = plain(reply, words, answer=not streamed)
    if reply.mode == "degraded":
        return words.tr("(model unavailable)") + "\n" + text
    if reply.candidates:
        text += "\n\n" + words.tr("Import one with /import web-N (nothing is imported until you do).")
    return text


class Printer:
    """An answer written to the terminal as the model writes it (the engine's Listener)."""

    def __init__(self, out: TextIO, words: Words = ENGLISH) -> None:
        self.out = out
        self.words = words
        self.shown = ""

    async def reading(self, passages: int, done: int, total: int) -> None:
        """Nothing to show while the model reads: the answer follows."""

    async def text(self, so_far: str) -> None:
        if so_far.startswith(self.shown):
            self.out.write(so_far[len(self.shown) :])
            self.out.flush()
            self.shown = so_far

    def finish(self, reply: Reply) -> str:
        """What is left to print once the reply is known: the rest of the answer if it changed at the
        end, then its notes and sources."""
        if not self.shown:
            return render_reply(reply, self.words)
        rest = reply.text[len(self.shown) :] if reply.text.startswith(self.shown) else ""
        return rest + "\n\n" + render_reply(reply, self.words, streamed=True).strip()


async def answer(
    conversing: Conversing,
    key: str,
    question: str,
    out: TextIO,
    words: Words = ENGLISH,
    *,
    interruptible: bool = True,
) -> Answered | None:
    """One answer written as it arrives; Ctrl-C stops it (what was said stays). None when stopped."""
    printer = Printer(out, words)
    task = asyncio.ensure_future(conversing.ask(key, question, listener=printer, language=words.language))
    loop = asyncio.get_running_loop()
    stoppable = interruptible and threading.current_thread() is threading.main_thread()
    if stoppable:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        answered = await task
    except asyncio.CancelledError:
        this = asyncio.current_task()
        if not task.cancelled() or (this is not None and this.cancelling()):  # the chat itself ends
            raise
        print(("\n" if printer.shown else "") + words.tr("(stopped)"), file=out, flush=True)
        return None
    finally:
        if stoppable:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
    lead = words.tr(FRESH) + "\n" if answered.fresh and not printer.shown else ""
    print(lead + printer.finish(answered.reply), file=out, flush=True)
    return answered


# The last answer, to vote on: its token in the conversation file (None: it could not be kept) and what it was.
Last = tuple[str | None, Rated]


async def offer(feedback: Feedback, key: str, question: str, answered: Answered) -> Last:
    """Keep an answer to be voted on with /good or /bad."""
    about = rated(question, answered.plan.standalone, answered.reply)
    try:
        return await asyncio.to_thread(feedback.offer, key, about), about
    except ConversationError:  # a full disk: the answer stands, a vote on it cannot be kept
        return None, about


async def rate(feedback: Feedback, key: str, last: Last | None, vote: int, words: Words) -> str:
    """/good or /bad on the last answer: what the chat says (and, after /bad, how to search the web)."""
    if last is None:
        return words.tr(NOTHING_TO_RATE)
    token, _ = last
    try:
        if token is None:
            raise ConversationError("the conversation file could not be written when the answer was given")
        cast = await asyncio.to_thread(feedback.cast, key, token, vote)
    except (ConversationError, FeedbackRefused) as exc:
        return words.tr(NOT_SAVED, why=str(exc))
    return cast_text(cast, words)


def cast_text(cast: Cast, words: Words, *, web_how: str = WEB_HOW) -> str:
    """What is said of a vote cast on an answer: noted, changed or noted already (and, after a bad one on
    an answer not from the web, how to search the web for its question: ``web_how``, ``{question}`` in it)."""
    vote, about = cast.vote.vote, cast.vote.rated
    said = CHANGED if cast.is_change else ALREADY if cast.previous == vote else NOTED
    text = words.tr(said, vote="👍" if vote == GOOD else "👎")
    if vote == BAD and about.door != "web":
        text += "\n" + words.tr(web_how, question=about.standalone)
    return text


async def chat_loop(
    conversing: Conversing,
    *,
    sources: Callable[[], str],
    status: Callable[[], Awaitable[str]],
    read: Callable[[str], str] = input,
    out: TextIO,
    history_file: Path | None = None,
    on_import: Callable[[str], Awaitable[str]] | None = None,
    on_url: Callable[[str], str] | None = None,
    pick: Callable[[str], tuple[Typed, list[str]] | None] | None = None,
    words: Words = ENGLISH,
    feedback: Feedback | None = None,
    on_open: Callable[[Citation], Awaitable[str]] | None = None,
) -> None:
    """Read questions until /quit or end of input; answer each, in one conversation per run (``pick``:
    the typed choice a line makes among the web candidates on show, which ``on_import`` imports;
    ``feedback``: where /good and /bad are kept, by default beside the conversation; ``on_open``: what
    /open N shows of the last answer's source [N])."""
    _load_history(history_file)
    print(words.tr("Ask a question; /help for commands."), file=out)
    key = f"chat:{uuid.uuid4().hex[:12]}"
    try:
        with _ended_by(signal.SIGHUP, signal.SIGTERM):  # a closed terminal, a stop: the chat ends here
            votes = feedback or Feedback(conversing.store)
            await _questions(
                conversing, key, sources, status, read, out, on_import, on_url, pick, words, votes, on_open
            )
    finally:  # also when Ctrl-C cancels the chat
        _save_history(history_file)
        with contextlib.suppress(Exception):  # a terminal run's conversation is not kept after it
            conversing.store.forget(key)


@contextlib.contextmanager
def _ended_by(*signals: signal.Signals) -> Iterator[None]:
    """While inside, these signals cancel the running task (its ``finally`` runs) instead of killing
    the process outright; in the main thread only (elsewhere, nothing changes)."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    added = []
    if task is not None and threading.current_thread() is threading.main_thread():
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, task.cancel)
                added.append(sig)
    try:
        yield
    finally:
        for sig in added:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)


async def _questions(
    conversing, key, sources, status, read, out, on_import, on_url, typed_pick, words, feedback, on_open
) -> None:
    engine = conversing.engine
    last: Last | None = None  # the last answer, for /good and /bad
    cited: list[Citation] | None = None  # the sources of the last answer, for /open N
    while True:
        try:
            line = (await read_line(read, "kb> ")).strip()
        except EOFError:
            print(file=out)
            break
        if not line:
            continue
        command = line.split()[0].lower()
        if command in ("/quit", "/exit", "/q"):
            break
        if command == "/help":
            print(words.tr(HELP), file=out)
        elif command == "/new":
            await asyncio.to_thread(conversing.store.end, key)
            print(words.tr("A new conversation: ask away."), file=out, flush=True)
        elif command == "/search":
            question = line[len("/search") :].strip()
            if not question:
                print(words.tr("usage: /search QUESTION"), file=out)
            else:
                reply = await engine.search_web(question, chat_id="cli", language=words.language)
                print(render_reply(reply, words), file=out, flush=True)
        elif command == "/import" and on_import is not None:
            parts = line.split()
            if len(parts) != 2:
                print(words.tr("usage: /import web-N (one source id, nothing else)"), file=out)
            else:
                print(await on_import(parts[1]), file=out, flush=True)
        elif on_url is not None and pasted_url(line):
            print(on_url(line), file=out)
        elif command in ("/good", "/bad"):
            vote = GOOD if command == "/good" else BAD
            print(await rate(feedback, key, last, vote, words), file=out, flush=True)
        elif command == "/open" and on_open is not None:
            chosen = pick(cited, line[len(command) :].strip(), words)
            print(chosen if isinstance(chosen, str) else await on_open(chosen), file=out, flush=True)
        elif command == "/sources":
            print(sources(), file=out)
        elif command == "/status":
            print(await status(), file=out)
        elif command.startswith("/"):
            print(words.tr("unknown command {command}; /help lists them", command=command), file=out)
        elif (
            on_import is not None
            and typed_pick is not None
            and (picked := await asyncio.to_thread(typed_pick, line))
        ):
            typed, ids = picked  # a typed choice among the candidates on show: imported, never searched
            if typed.source_id is None:
                print(words.tr(WHICH, ids=", ".join(ids)), file=out, flush=True)
            else:
                print(await on_import(typed.source_id), file=out, flush=True)
        else:
            answered = await answer(conversing, key, line, out, words)
            last = await offer(feedback, key, line, answered) if answered is not None else None
            cited = list(answered.reply.citations) if answered is not None else cited


async def read_line(read: Callable[[str], str], prompt: str) -> str:
    """A line from ``read`` (``input``), in a thread of its own that never holds the process back:
    when Ctrl-C cancels the chat, kb leaves at once instead of waiting for Enter."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(value: object, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def run() -> None:
        try:
            value = read(prompt)
        except BaseException as exc:  # EOFError above all; handed to the chat as it is
            with contextlib.suppress(RuntimeError):  # the loop is closed: kb is leaving
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, None)

    with prompting(prompt):  # a warning meanwhile is written above the prompt, which is drawn again
        threading.Thread(target=run, name="kb-input", daemon=True).start()
        return await future


@contextlib.contextmanager
def holding_the_terminal(fd: int = 0) -> Iterator[None]:
    """While the chat runs, Ctrl-C reaches kb's own process group alone.

    Started by ``make run``, kb shares make's process group, and the terminal sends Ctrl-C to
    all of it: make then dies of the signal whatever kb does ("make: *** [run] Interrupt").
    kb moves to a group of its own and makes it the terminal's foreground group, and gives the
    terminal back to the group it came from when it leaves. Nothing is done when kb already
    leads its group (started from a shell) or stdin is not a terminal.
    """
    previous = None
    with contextlib.suppress(OSError):
        if os.isatty(fd) and os.getpgrp() != os.getpid() and os.tcgetpgrp(fd) == os.getpgrp():
            group = os.getpgrp()
            os.setpgid(0, 0)
            _foreground(fd, os.getpgrp())
            previous = group
    try:
        yield
    finally:
        if previous is not None:
            with contextlib.suppress(OSError):
                _foreground(fd, previous)


def _foreground(fd: int, group: int) -> None:
    """Make ``group`` the terminal's foreground process group (as a shell does for a job)."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not, unless it ignores this
    try:
        os.tcsetpgrp(fd, group)
    finally:
        signal.signal(signal.SIGTTOU, old)


def _load_history(path: Path | None) -> None:
    if path is None:
        return
    with contextlib.suppress(ImportError, OSError):
        import readline

        readline.read_history_file(path)


def _save_history(path: Path | None) -> None:
    if path is None:
        return
    with contextlib.suppress(ImportError, OSError):
        import readline

        path.parent.mkdir(parents=True, exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(path)
