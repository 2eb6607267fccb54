"""The terminal chat: questions answered by the engine, with a few slash commands."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from knowledge.answer.assistant import Engine, Reply
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
    while True:
        try:
            line = (await asyncio.to_thread(read, "kb> ")).strip()
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
    _save_history(history_file)


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
