"""kb mcp: the knowledge base for the owner's other tools (desktop assistants, agents) over MCP."""

from __future__ import annotations

import argparse
import errno
from typing import TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from knowledge.config import Settings
from knowledge.words.catalog import terminal_words


def _mcp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP on loopback instead of stdio")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        metavar="P",
        help="with --http: the port (default: KB_MCP_PORT, 8765)",
    )


def cmd_mcp(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb mcp [--http [--port P]]"""
    from mcpserver.main import run

    port = settings.mcp_port if args.port is None else args.port
    words = terminal_words(settings)
    if args.port is not None and not args.http:
        said = words.tr("--port goes with --http")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    try:
        run(settings, http=args.http, port=port, err=err)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        said = words.tr(
            "port {port} on 127.0.0.1 is in use: stop what uses it or choose another with --port", port=port
        )
        print(f"kb: {said}", file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


COMMANDS = {
    "mcp": Command(
        cmd_mcp,
        help="serve the knowledge base to MCP clients (Claude Desktop, Claude Code, Cursor…)",
        description="Serve kb's tools over the Model Context Protocol: search, get, ask, web_search, "
        "import_web_source (only by the owner's choice, asked through the client) and status. By default on "
        "stdin/stdout, for a client that starts kb mcp itself; with --http, Streamable HTTP at "
        "http://127.0.0.1:PORT/mcp for any local client (loopback only; a foreign Host or Origin is refused; "
        "set KB_MCP_TOKEN to require Authorization: Bearer TOKEN). The index is only read: the daemon writes it. "
        "Exit status: 0 when the client leaves or Ctrl-C stops it, 1 when it cannot start.",
        arguments=_mcp_arguments,
    ),
}
