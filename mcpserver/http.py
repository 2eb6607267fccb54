"""kb mcp --http: Streamable HTTP on loopback only, behind a guard that refuses a foreign Host or Origin
(DNS rebinding) and, when KB_MCP_TOKEN is set, a request without ``Authorization: Bearer TOKEN``."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

log = structlog.get_logger()

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
MARKER = "mcp-http.json"  # runs/mcp-http.json while kb mcp --http serves: kb doctor reads it


def _host_name(host: str) -> str:
    """``[::1]:8765`` -> ``::1``; ``localhost:8765`` -> ``localhost``; lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def refusal(headers: Mapping[str, str], token: str) -> tuple[int, str] | None:
    """Why a request is refused, as (HTTP status, reason), or None to let it through.

    ``headers`` are the request's, names in lower case. The Host must be a loopback name; an Origin, when
    sent, must be a loopback http(s) origin; with a ``token``, the bearer must match it (constant time)."""
    host = headers.get("host", "")
    if _host_name(host) not in LOOPBACK:
        return 421, "host"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or (parts.hostname or "") not in LOOPBACK:
            return 403, "origin"
    if token:
        sent = headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {token}".encode()):
            return 401, "token"
    return None


SAID = {
    "host": "refused: the Host header is not a loopback name (127.0.0.1, localhost, [::1])",
    "origin": "refused: the Origin is not a loopback origin",
    "token": "refused: this server needs Authorization: Bearer <KB_MCP_TOKEN>",
}


class Guard:
    """An ASGI layer in front of the MCP app: every HTTP request passes :func:`refusal` first."""

    def __init__(self, app: Any, *, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # the lifespan: starts and stops the session manager
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = refusal(headers, self.token)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        log.warning("mcp.http_refused", reason=reason, path=scope.get("path"), client=scope.get("client"))
        body = json.dumps({"error": SAID[reason]}).encode()
        extra = [(b"www-authenticate", b"Bearer")] if reason == "token" else []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *extra]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})


def loopback_sockets(port: int) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1 and, when the machine has it, ::1 (port 0: a free one, the same on both).

    Made as TCP sockets by name (IPPROTO_TCP): asyncio then turns Nagle's algorithm off on each connection
    they accept (it does for TCP sockets only, and one made with protocol 0 does not say it is). With it on,
    a response's body waited for the client to acknowledge its headers, 40 ms of delayed ACK on every call."""
    sockets = [_bound(socket.AF_INET, ("127.0.0.1", port))]
    with contextlib.suppress(OSError):
        sockets.append(_bound(socket.AF_INET6, ("::1", sockets[0].getsockname()[1])))
    try:
        for s in sockets:
            s.listen(128)
            s.setblocking(False)
    except OSError:
        for s in sockets:
            s.close()
        raise
    return sockets


def _bound(family: socket.AddressFamily, address: tuple[str, int]) -> socket.socket:
    """A TCP socket bound to the address, closed again when it cannot be (a port in use, no ::1)."""
    made = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if family == socket.AF_INET6:
            made.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        else:
            made.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        made.bind(address)
    except OSError:
        made.close()
        raise
    return made


def http_app(server: Any, *, token: str) -> Guard:
    """The MCP server's Streamable HTTP app at /mcp, guarded."""
    return Guard(server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"), token=token)


def uvicorn_server(app: Any) -> Any:
    """A uvicorn server for the app: no access log (the guard and ``mcp.call`` log what matters)."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))


@contextlib.contextmanager
def marked(runs: Path, *, port: int, has_token: bool) -> Iterator[Path]:
    """runs/mcp-http.json while serving (pid, port, whether a token is required), removed at the end."""
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / MARKER
    path.write_text(json.dumps({"pid": os.getpid(), "port": port, "token": has_token}), encoding="utf-8")
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def serving(runs: Path) -> dict[str, Any] | None:
    """The running kb mcp --http's marker ({"pid", "port", "token"}), or None when none is serving."""
    try:
        state = json.loads((runs / MARKER).read_text(encoding="utf-8"))
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, dict) else None
