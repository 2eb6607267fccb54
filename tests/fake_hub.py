"""A Hugging Face hub stand-in on 127.0.0.1 (``HF_ENDPOINT``): serves files of any model, records requests.

Every answer carries a hostile ``ETag`` (a path out of any cache folder): a client that builds a
path from it writes outside its folder, which the tests check for.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.fake_llm import ThreadedServer
from tests.local_server import serve_app

HOSTILE_ETAG = '"../../../x/sitecustomize.py"'


class Hub:
    """``files`` maps a file name (of any model) to its bytes; ``status`` other than 200 answers every
    request with it; ``redirect`` maps a file name to a Location; ``slow`` sends bodies 64 KiB at a
    time with that many seconds between pieces."""

    def __init__(
        self,
        files: dict[str, bytes],
        status: int = 200,
        *,
        redirect: dict[str, str] | None = None,
        slow: float = 0.0,
    ) -> None:
        self.files, self.status, self.seen, self.port = files, status, [], 0
        self.redirect, self.slow = redirect or {}, slow

    def downloads(self) -> list[str]:
        """The file names fetched (GET) so far."""
        return [p.rsplit("/", 1)[1] for p in self.seen if p.startswith("GET ")]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, _: object):
        async def resolve(request: web.Request) -> web.StreamResponse:
            self.seen.append(f"{request.method} {request.path}")
            name = request.match_info["file"]
            if name in self.redirect:
                return web.Response(status=302, headers={"Location": self.redirect[name]})
            body = self.files.get(name)
            if self.status != 200 or body is None:
                return web.Response(status=self.status if self.status != 200 else 404)
            if not self.slow:
                return web.Response(body=body, headers={"ETag": HOSTILE_ETAG})
            response = web.StreamResponse(headers={"ETag": HOSTILE_ETAG})
            await response.prepare(request)
            for start in range(0, len(body), 65536):
                await response.write(body[start : start + 65536])
                await asyncio.sleep(self.slow)
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_route("*", "/{owner}/{name}/resolve/{rev}/{file}", resolve)
        runner, self.port = await serve_app(app)
        return runner


def ThreadedHub(hub: Hub) -> ThreadedServer:  # noqa: N802 - reads like the class it makes
    """The hub stand-in in a thread of its own, for kb subprocesses."""
    return ThreadedServer(hub, hub.start)
