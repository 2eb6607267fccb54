"""kb mcp's entry: the warm knowledge base opened once, then the MCP server over stdio (one client: the
process that started it) or over loopback HTTP (any number of local clients) until it is stopped."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TextIO

import structlog
from threadpoolctl import threadpool_limits

from knowledge.config import Settings
from mcpserver.http import http_app, loopback_sockets, marked, uvicorn_server
from mcpserver.service import Kb, open_kb

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = structlog.get_logger()


def started(kb: Kb) -> MCPServer:
    """The MCP server over the knowledge base (the SDK is imported here, while the knowledge base warms)."""
    from mcpserver.app import build_server

    return build_server(kb)


async def serve_stdio(settings: Settings) -> None:
    """Serve one client on stdin/stdout (nothing else is written to stdout) until it closes them."""
    async with open_kb(settings) as kb:
        server = started(kb)
        log.info("mcp.started", transport="stdio")
        await server.run_stdio_async()


async def serve_http(settings: Settings, port: int, *, err: TextIO) -> None:
    """Serve Streamable HTTP at http://127.0.0.1:PORT/mcp (and [::1]) until interrupted."""
    sockets = loopback_sockets(port)  # bound first: a port in use fails before the model loads
    async with open_kb(settings) as kb:
        token = settings.mcp_token
        server = uvicorn_server(http_app(started(kb), token=token))
        with marked(settings.runs, port=port, has_token=bool(token)):
            url = f"http://127.0.0.1:{port}/mcp"
            log.info("mcp.started", transport="http", url=url, token=bool(token))
            lock = "a bearer token (KB_MCP_TOKEN)" if token else "NO token: set KB_MCP_TOKEN"
            print(f"kb mcp: serving {url} (loopback only; {lock}); Ctrl-C stops it", file=err, flush=True)
            await server.serve(sockets=sockets)


def run(settings: Settings, *, http: bool, port: int, err: TextIO) -> None:
    """Run the server until its client leaves (stdio) or it is interrupted (HTTP)."""
    # numpy's OpenBLAS parallelises each product over worker threads that then spin, waiting for the
    # next one: a search's few small products cost 80-120 ms of CPU on 2 cores instead of 45. One
    # thread gives the same vectors, bit for bit.
    with threadpool_limits(limits=1, user_api="blas"):
        asyncio.run(serve_http(settings, port, err=err) if http else serve_stdio(settings))
