"""A scripted OpenAI-compatible chat server on 127.0.0.1, for behaviour the real model cannot be asked for.

Each request takes the next step of the script (the last step repeats): an answer, a body,
an HTTP status, a delay, or a dropped connection. Requests are recorded for assertions.

A request with ``"stream": true`` is answered as ``mlx_lm.server`` streams (server-sent events):
``: keepalive done/total`` comments while it "reads the prompt" (``prefill_s``), then the answer
in small pieces at ``tokens_per_s``, the finish chunk, the usage chunk when
``stream_options.include_usage`` is set, and ``data: [DONE]``; ``cut_after`` drops the connection
after that many pieces (a server killed mid-answer).

``health_step`` and ``models_step``, when set, answer ``/health`` and ``/v1/models`` with their
``body`` and ``status`` as they are (a server that says something unreadable there).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from tests.local_server import serve_v1


@dataclass
class Step:
    """What the server does for one request."""

    answer: str | None = None
    body: str | bytes | None = None
    status: int = 200
    delay_s: float = 0.0
    drop: bool = False
    prefill_s: float = 0.0  # streamed: keep-alive comments this long before the first piece
    tokens_per_s: float = 0.0  # streamed: pieces per second (0: all at once)
    cut_after: int | None = None  # streamed: the connection drops after this many pieces


def answer(text: str, **kw: object) -> Step:
    return Step(answer=text, **kw)  # type: ignore[arg-type]


@dataclass
class FakeLLM:
    """The server's script and what it saw."""

    script: list[Step] = field(default_factory=lambda: [answer("ok")])
    requests: list[dict] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    responder: Callable[[dict], Step] | None = None
    base_url: str = ""
    streamed: list[float] = field(default_factory=list)  # when each streamed piece was sent (monotonic)
    health_step: Step | None = None  # /health answers this instead of {"status": "ok"}
    models_step: Step | None = None  # /v1/models answers this instead of the one fake model

    def step(self, body: dict) -> Step:
        if self.responder is not None:
            return self.responder(body)
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            step = self.step(body)
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
            if step.drop:
                request.transport.close()  # the client sees the connection drop mid-request
                return web.Response(status=200)
            if step.body is not None:  # as it is: text, or bytes (invalid UTF-8 and such)
                raw = step.body if isinstance(step.body, bytes) else step.body.encode("utf-8")
                kind = "text/event-stream" if body.get("stream") else "application/json"
                return web.Response(body=raw, status=step.status, content_type=kind)
            if step.status != 200:
                return web.json_response({"error": "scripted failure"}, status=step.status)
            if body.get("stream"):
                return await self._stream(request, body, step)
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": "default_model",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": step.answer},
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
                }
            )
        finally:
            self.in_flight -= 1

    async def _stream(self, request: web.Request, body: dict, step: Step) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        total = 1000
        started = time.monotonic()
        while time.monotonic() - started < step.prefill_s:
            done = int(total * (time.monotonic() - started) / step.prefill_s)
            await resp.write(f": keepalive {done}/{total}\n\n".encode())
            await asyncio.sleep(min(0.25, step.prefill_s))
        pieces = stream_pieces(step.answer or "")
        for n, piece in enumerate(pieces):
            if step.cut_after is not None and n >= step.cut_after:
                request.transport.close()
                return resp
            await resp.write(_event({"object": "chat.completion.chunk", "choices": [
                {"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": piece}}]}))  # fmt: skip
            self.streamed.append(time.monotonic())
            if step.tokens_per_s:
                await asyncio.sleep(1 / step.tokens_per_s)
        await resp.write(_event({"object": "chat.completion.chunk", "choices": [
            {"index": 0, "finish_reason": "stop", "delta": {"role": "assistant"}}]}))  # fmt: skip
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": len(pieces), "total_tokens": 10 + len(pieces)}
            await resp.write(_event({"object": "chat.completion", "choices": [], "usage": usage}))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def health(self, request: web.Request) -> web.Response:
        if self.health_step is not None:
            return _as_is(self.health_step)
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        if self.models_step is not None:
            return _as_is(self.models_step)
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        return app


def _as_is(step: Step) -> web.Response:
    """A step's body, byte for byte, as JSON (text, or bytes: invalid UTF-8 and such)."""
    raw = step.body if isinstance(step.body, bytes) else (step.body or "").encode("utf-8")
    return web.Response(body=raw, status=step.status, content_type="application/json")


_PIECE = re.compile(r"[\u3000-\u9fff\uff00-\uffef]|[\u0e00-\u0e7f]{1,3}|\w+\s*|\s+|[^\w\s]\s*")


def stream_pieces(text: str) -> list[str]:
    """The answer in the pieces a server streams: a word (with its space), a CJK character, a few Thai letters."""
    return _PIECE.findall(text)


def _event(chunk: dict) -> bytes:
    chunk = {"id": "chatcmpl-fake", "model": "default_model", "created": 0, **chunk}
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()


async def start(fake: FakeLLM) -> web.AppRunner:
    """Serve ``fake`` on a free port of 127.0.0.1 in the running loop; sets ``fake.base_url``."""
    return await serve_v1(fake)


class ThreadedServer:
    """An aiohttp stand-in in a thread of its own, for tests that run kb as a subprocess.

    ``starter`` is an async function that starts the server and returns its runner (or a
    (runner, …) tuple); the context manager yields ``fake``.
    """

    def __init__(self, fake: object, starter: Callable[[object], Awaitable[object]]) -> None:
        self.fake = fake
        self.starter = starter
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        started = self.loop.run_until_complete(self.starter(self.fake))
        self.runner = started[0] if isinstance(started, tuple) else started
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self):
        self._thread.start()
        self._ready.wait(10)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def free_port() -> int:
    """A port nothing listens on (for 'server down' tests)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chatml_answer(body: dict) -> str:
    """The user turn of a request (to build answers that depend on the evidence)."""
    return json.dumps(body["messages"][-1]["content"])


def ThreadedFakeLLM(fake: FakeLLM) -> ThreadedServer:  # noqa: N802 - reads like the class it makes
    """The scripted model server in a thread of its own."""
    return ThreadedServer(fake, start)


def web_step(
    query: str, verdicts: str, summary: str, answer_for: Callable[[dict], Step], *, language: str = "en"
) -> Callable[[dict], Step]:
    """A responder for a question that reaches the web step: the planner gets one ``query``, the
    relevance check ``verdicts`` ("1: YES"), the summary ``summary``; every other request (the
    answer from the evidence) goes to ``answer_for``."""
    plan = json.dumps(
        {"needsSearch": True, "queries": [{"query": query, "freshness": None, "language": language}]}
    )

    def respond(body: dict) -> Step:
        system = body["messages"][0]["content"]
        if "plan web searches" in system:
            return answer(plan)
        if "'n: YES'" in system:
            return answer(verdicts)
        if "Summarise" in system:
            return answer(summary)
        return answer_for(body)

    return respond
