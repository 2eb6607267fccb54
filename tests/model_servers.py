"""Stand-ins for OpenAI-compatible model servers other than mlx_lm.server, on 127.0.0.1: what each
answers at ``/health``, ``/v1/models`` and ``/v1/chat/completions`` (the requests it saw are kept).

* ``ollama``: no ``/health`` (404); ``/v1/models`` lists ``qwen3:4b``; a chat naming another model
  (or none) is answered 404 with Ollama's error.
* ``llama.cpp`` (llama-server): ``/health`` → ``{"status": "ok"}`` (``loading``: 503 and its error);
  a chat may name any model.
* ``vllm``: ``/health`` → 200 with an empty body; a chat naming another model is answered 404.
* ``other``: something else on the port, 404 everywhere.

A chat is answered ``ANSWER`` (as one JSON body, or as server-sent events when it asks to stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from aiohttp import web

from tests.local_server import serve_v1

MODELS = {"ollama": "qwen3:4b", "llama.cpp": "model.gguf", "vllm": "Qwen/Qwen3-4B-Instruct-2507"}
ANSWER = "The kettle is descaled monthly."


@dataclass
class OtherServer:
    kind: str
    loading: bool = False  # llama-server while it loads its model
    base_url: str = ""
    seen: list[str] = field(default_factory=list)
    chats: list[dict] = field(default_factory=list)  # the chat requests' bodies

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

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append(request.path)
        self.chats.append(body)
        if self.kind not in MODELS:
            raise web.HTTPNotFound()
        name = body.get("model")
        if self.kind == "ollama" and name != MODELS["ollama"]:
            error = {"message": f'model "{name or ""}" not found, try pulling it first', "type": "api_error"}
            return web.json_response({"error": error}, status=404)
        if self.kind == "vllm" and name != MODELS["vllm"]:
            error = {"message": f"The model `{name}` does not exist.", "type": "NotFoundError", "code": 404}
            return web.json_response({"error": error}, status=404)
        if not body.get("stream"):
            message = {"role": "assistant", "content": ANSWER}
            return web.json_response({"choices": [{"index": 0, "finish_reason": "stop", "message": message}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for delta, finish in (({"role": "assistant", "content": ANSWER}, None), ({}, "stop")):
            chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app


async def start_other(server: OtherServer) -> web.AppRunner:
    """Serve it on a free port of 127.0.0.1 in the running loop; sets ``server.base_url`` (…/v1)."""
    return await serve_v1(server)
