"""The ``kb`` command line: the parser's top, settings read once, logging configured once, each command
run and its failures turned into exit statuses. The commands live in ``cli/commands/``, by noun."""

from __future__ import annotations

import argparse
import contextvars
import functools
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import IO, Any, TextIO

import structlog

from cli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    add_command,
    admin,
    ask,
    feedback,
    ingest,
    library,
    mcp_server,
    search,
    sources,
    speaking,
    web,
)
from cli.errors import error_text
from cli.terminal import SafeStream, neutralise
from knowledge import __version__
from knowledge.config import SETTINGS, Settings, load_settings
from knowledge.errors import ConfigError, KbError
from knowledge.logs import Brief, WarnOnce, configure_logging, kept_logging
from knowledge.redact import redactor
from knowledge.words.catalog import N_, Words, terminal_words
from knowledge.words.language import for_terminal

log = structlog.get_logger()

_EPILOG = "settings (environment, KB_HOME/.env or KB_HOME/kb.toml):\n" + "\n".join(
    f"  {s.env:<26} {s.help} (default: {s.default or 'empty'})" for s in SETTINGS
)


class Parser(argparse.ArgumentParser):
    """argparse's parser, writing its help, usage and errors to the streams it is given (when given)."""

    def __init__(
        self, *args: Any, out: TextIO | None = None, err: TextIO | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.out, self.err = out, err

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        # argparse names the stream itself: sys.stdout for help and --version, sys.stderr for errors
        super()._print_message(message, (self.out if file is sys.stdout else self.err) or file)


def build_parser(*, out: TextIO | None = None, err: TextIO | None = None) -> argparse.ArgumentParser:
    """The argument parser, with one sub-command per job (help and errors on ``out`` and ``err``)."""
    parser = Parser(
        out=out,
        err=err,
        prog="kb",
        description="A self-hosted knowledge base: drop files into knowledge/inbox/, ask questions, get cited answers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--home", metavar="DIR", help="knowledge base folder (default: $KB_HOME or the current folder)"
    )
    parser.add_argument("--version", action="version", version=f"kb {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=functools.partial(Parser, out=out, err=err)
    )
    # Each module adds its own commands; kb --help lists them in this order.
    add_named(sub, admin.COMMANDS, "run", "daemon", "service")
    add_named(sub, ask.COMMANDS, "ask", "chat", "measure")
    add_named(sub, web.COMMANDS, "websearch", "import", "import-url")
    add_named(sub, admin.COMMANDS, "doctor", "checkpoint", "bot", "logs")
    add_named(sub, ingest.COMMANDS, "ingest")
    add_named(sub, sources.COMMANDS, "sources")
    add_named(sub, search.COMMANDS, "search")
    add_named(sub, ingest.COMMANDS, "reindex")
    add_named(sub, search.COMMANDS, "ls")
    add_named(sub, library.COMMANDS, "rm", "restore", "backup", "restore-backup")
    add_named(sub, speaking.COMMANDS, "summarize", "digest")
    add_named(sub, feedback.COMMANDS, "feedback")
    add_named(sub, admin.COMMANDS, "status", "config")
    add_named(sub, mcp_server.COMMANDS, "mcp")
    return parser


def add_named(sub: argparse._SubParsersAction, commands: Mapping[str, Command], *names: str) -> None:
    """Add the named commands' sub-parsers (from a module's COMMANDS: name → Command), in that order."""
    for name in names:
        add_command(sub, name, commands[name])


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Entry point of the ``kb`` console script; run in process (tests), the output goes to ``stdout`` and
    ``stderr`` and the settings come from ``env`` (defaults: the process's streams and environment)."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    # The hub library logs its retries on its own handler, past kb's logging: errors only (the
    # reasons reach the owner as kb's own sentences). Set before anything imports it.
    os.environ.setdefault("HF_HUB_VERBOSITY", "error")
    parser = build_parser(out=stdout, err=stderr)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error: argparse has said it on the streams
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        settings = load_settings(os.environ if env is None else env, home=args.home)
    except ConfigError as exc:
        words = Words(for_terminal(*_language_of(os.environ if env is None else env)))
        if words.language == "en":
            print(f"kb: configuration error: {neutralise(str(exc))}", file=stderr)
        else:
            print(f"kb: {neutralise(error_text(exc, words))}", file=stderr)
        return EXIT_USAGE
    # Everything printed from here on: no terminal control characters, no secrets.
    secrets = (settings.telegram_token, settings.brave_api_key, settings.mcp_token)
    out, err = SafeStream(stdout, redactor(secrets)), SafeStream(stderr, redactor(secrets))
    with kept_logging():  # this call's logging ends with it: nothing reaches the next call in this process
        if args.command != "config":
            is_quiet = is_quiet_console(args.command, settings)
            configure_logging(
                settings.log_path,
                console_level="warning" if is_quiet else settings.log_level,
                console=err,
                once=WarnOnce() if is_quiet else None,  # this run's memory of the warnings it has shown
                secrets=secrets,
                brief=brief_in(terminal_words(settings)),
            )
        # A context of its own: what the command binds to its log lines (the file being ingested) stays in it.
        return contextvars.copy_context().run(_run, args, settings, out, err)


def _language_of(env: Mapping[str, str]) -> tuple[str, str]:
    """KB_LANGUAGE and the locale in ``env``, for the words of an error said before the settings are read."""
    locale = next((env[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(k)), "")
    return env.get("KB_LANGUAGE", ""), locale


def brief_in(words: Words) -> Brief | None:
    """The console's short line for a warning in the terminal's language (None: English, the default,
    which says what went wrong): the event's name and subject, and where the details are."""
    if words.language == "en":
        return None

    def said(level: str, event: str, subject: str) -> str:
        message = BRIEF_WARNING if level == "warning" else BRIEF_ERROR
        return words.tr(message, event=event + (f" {subject}" if subject else ""))

    return said


BRIEF_WARNING = N_("kb warning: {event} (kb logs says more)")
BRIEF_ERROR = N_("kb error: {event} (kb logs says more)")


def _run(args: argparse.Namespace, settings: Settings, out: SafeStream, err: SafeStream) -> int:
    structlog.contextvars.clear_contextvars()  # as in a new process: no fields bound by the caller
    try:
        return args.func(args, settings, out=out, err=err)
    except KbError as exc:
        print(f"kb: {error_text(exc, terminal_words(settings))}", file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        said = terminal_words(settings).tr("interrupted")
        print(f"kb: {said}", file=err)
        return 130
    except BrokenPipeError:  # `kb search … | head`: the reader left; not an error
        if err.raw_stream is sys.stderr:
            sys.stderr.close()  # so Python's last flush of the broken stdout says nothing either
        return EXIT_OK
    except Exception:  # a bug or a library's error: shown and logged, through the redacting streams
        log.exception("kb.crashed", command=args.command)
        traceback.print_exc(file=err)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
