"""A Hugging Face Hub stand-in on 127.0.0.1: one model repository, served as huggingface_hub fetches it.

``snapshot_download`` asks for the revision (``/api/models/REPO/revision/main``), the file tree
(``/api/models/REPO/tree/SHA``), then each file's metadata (HEAD) and bytes (GET) under
``/REPO/resolve/SHA/NAME``. Point ``HF_ENDPOINT`` at ``hub.base_url``; every request is recorded in
``hub.seen`` as (method, path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from aiohttp import web

from tests.fake_llm import ThreadedServer
from tests.local_server import serve_app

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    """The repository it serves and what it saw."""

    repo: str
    files: dict[str, bytes]
    seen: list[tuple[str, str]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path))
        path = request.path
        if path == f"/api/models/{self.repo}/revision/main":
            siblings = [{"rfilename": name} for name in self.files]
            return web.json_response({"id": self.repo, "sha": COMMIT, "private": False, "siblings": siblings})
        if path == f"/api/models/{self.repo}/tree/{COMMIT}":
            return web.json_response(
                [
                    {"type": "file", "path": name, "size": len(body), "oid": hashlib.sha1(body).hexdigest()}
                    for name, body in self.files.items()
                ]
            )
        prefix = f"/{self.repo}/resolve/{COMMIT}/"
        if path.startswith(prefix) and path[len(prefix) :] in self.files:
            body = self.files[path[len(prefix) :]]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'}
            if request.method == "HEAD":
                return web.Response(headers=headers | {"Content-Length": str(len(body))})
            return web.Response(body=body, headers=headers)
        return web.Response(status=404, headers={"X-Error-Code": "RepoNotFound"})

    def downloads(self) -> list[str]:
        """The file names fetched (GET) so far."""
        return [p.rsplit("/", 1)[1] for m, p in self.seen if m == "GET" and "/resolve/" in p]


async def start(hub: FakeHub) -> web.AppRunner:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hub.handle)
    runner, port = await serve_app(app)
    hub.base_url = f"http://127.0.0.1:{port}"
    return runner


def ThreadedFakeHub(hub: FakeHub) -> ThreadedServer:  # noqa: N802 - reads like the class it makes
    """The hub stand-in in a thread of its own, for kb subprocesses."""
    return ThreadedServer(hub, start)
