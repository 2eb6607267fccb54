"""The terminal chat: questions answered by the engine, with a few slash commands."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TextIO

from knowledge.answer.assistant import Engine, Reply
from knowledge.logs import prompting
from knowledge.websearch.importer import pasted_url

HELP = """Ask a question in any language; answers cite your documents as [n].
/search Q  search the web for Q even when the knowledge base has something
/import web-N   import a web candidate (a pasted URL becomes web-1)
/sources   the latest documents in the knowledge base
/status    the knowledge base, model server, tokenizer, web search and inbox
/help      this text
/quit      leave (Ctrl-D works too)"""


def render_reply(reply: Reply) -> str:
    """A reply for the terminal: the answer, its sources, and the mode when it is not a local answer."""
    text = reply.render()
    if reply.mode == "degraded":
        return "(model unavailable)\n" + text
    if reply.candidates:
        text += "\n\nImport one with /import web-N (nothing is imported until you do)."
    return text


async def chat_loop(
    engine: Engine,
    *,
    sources: Callable[[], str],
    status: Callable[[], Awaitable[str]],
    read: Callable[[str], str] = input,
    out: TextIO,
    history_file: Path | None = None,
    on_import: Callable[[str], Awaitable[str]] | None = None,
    on_url: Callable[[str], str] | None = None,
) -> None:
    """Read questions until /quit or end of input; answer each."""
    _load_history(history_file)
    print("Ask a question; /help for commands.", file=out)
    try:
        await _questions(engine, sources, status, read, out, on_import, on_url)
    finally:  # also when Ctrl-C cancels the chat
        _save_history(history_file)


async def _questions(engine, sources, status, read, out, on_import, on_url) -> None:
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
            print(HELP, file=out)
        elif command == "/search":
            question = line[len("/search") :].strip()
            if not question:
                print("usage: /search QUESTION", file=out)
            else:
                print(render_reply(await engine.search_web(question, chat_id="cli")), file=out, flush=True)
        elif command == "/import" and on_import is not None:
            parts = line.split()
            if len(parts) != 2:
                print("usage: /import web-N (one source id, nothing else)", file=out)
            else:
                print(await on_import(parts[1]), file=out, flush=True)
        elif on_url is not None and pasted_url(line):
            print(on_url(line), file=out)
        elif command == "/sources":
            print(sources(), file=out)
        elif command == "/status":
            print(await status(), file=out)
        elif command.startswith("/"):
            print(f"unknown command {command}; /help lists them", file=out)
        else:
            reply = await engine.ask(line)
            print(render_reply(reply), file=out, flush=True)


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
