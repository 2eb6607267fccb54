"""Stand-ins for OpenAI-compatible model servers other than mlx_lm.server, on 127.0.0.1: what each
answers at ``/health`` and ``/v1/models`` (the requests it saw are kept).

* ``ollama``: no ``/health`` (404); ``/v1/models`` lists ``qwen3:4b``.
* ``llama.cpp`` (llama-server): ``/health`` → ``{"status": "ok"}`` (``loading``: 503 and its error).
* ``vllm``: ``/health`` → 200 with an empty body.
* ``other``: something else on the port, 404 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from tests.local_server import serve_v1

MODELS = {"ollama": "qwen3:4b", "llama.cpp": "model.gguf", "vllm": "Qwen/Qwen3-4B-Instruct-2507"}


@dataclass
class OtherServer:
    kind: str
    loading: bool = False  # llama-server while it loads its model
    base_url: str = ""
    seen: list[str] = field(default_factory=list)

    async def health(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        if self.kind == "llama.cpp" and self.loading:
            error = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
            return web.json_response(error, status=503)
        if self.kind == "llama.cpp":
            return web.json_response({"status": "ok"})
        if self.kind == "vllm":
            return web.Response(status=200)
        raise web.HTTPNotFound()

    async def models(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        if self.kind not in MODELS:
            raise web.HTTPNotFound()
        return web.json_response(
            {"object": "list", "data": [{"id": MODELS[self.kind], "object": "model", "owned_by": self.kind}]}
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        return app


async def start_other(server: OtherServer) -> web.AppRunner:
    """Serve it on a free port of 127.0.0.1 in the running loop; sets ``server.base_url`` (…/v1)."""
    return await serve_v1(server)
