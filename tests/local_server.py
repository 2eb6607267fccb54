"""Serving a test stand-in: an aiohttp app on a free port of 127.0.0.1, in the running loop."""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web


async def serve_app(app: web.Application, **runner_options: Any) -> tuple[web.AppRunner, int]:
    """Start ``app`` on 127.0.0.1 (never another address); (runner to clean up, port)."""
    runner = web.AppRunner(app, access_log=None, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


class OpenAIStandIn(Protocol):
    """A stand-in for an OpenAI-compatible server: its aiohttp app, and the base URL it is reached at."""

    base_url: str

    def app(self) -> web.Application: ...


async def serve_v1(fake: OpenAIStandIn) -> web.AppRunner:
    """Serve ``fake`` on a free port of 127.0.0.1 in the running loop; sets ``fake.base_url`` (…/v1)."""
    runner, port = await serve_app(fake.app())
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    return runner
