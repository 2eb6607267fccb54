"""An OpenAI-compatible ``/v1/embeddings`` stand-in on 127.0.0.1.

It speaks the wire format (``input`` string or list, ``data[].embedding`` with ``index``,
``usage``, ``{"error": {...}}`` bodies) and answers with deterministic vectors: a hashed bag
of the words (and CJK/Thai characters) of each text, so texts sharing words are close.
Scripted failures, delays and a shuffled ``data`` order test the client; requests are recorded.
``held`` keeps the requests it picks (by their texts) waiting until ``released`` is set: a client
caught mid-request, for a test to kill.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web

from tests.fake_llm import ThreadedServer
from tests.local_server import serve_v1

DIM = 64
_TOKENS = re.compile(r"[^\W\d_]+|\d+")


def bag_vector(text: str, dim: int = DIM) -> list[float]:
    """A unit vector of hashed words (each CJK/Thai character counts as a word)."""
    vec = np.zeros(dim, dtype=np.float64)
    words = []
    for token in _TOKENS.findall(text.lower()):
        words += list(token) if not token.isascii() else [token]
    for word in words:
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vec[h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    norm = np.linalg.norm(vec)
    return (vec / norm if norm else vec + 1.0 / np.sqrt(dim)).tolist()


@dataclass
class FakeEmbeddings:
    """The server's behaviour and what it saw."""

    model: str = "bag-of-words"
    status: int = 200  # a non-200 status answers every request with an error body
    body: str | None = None  # a raw body instead of embeddings
    delay_s: float = 0.0
    shuffle: bool = True
    dim: int = DIM  # llama.cpp serves whatever is loaded: a test may change it under the same name
    requests: list[dict] = field(default_factory=list)
    base_url: str = ""
    held: Callable[[list[str]], bool] | None = None  # requests whose texts it picks wait for released
    released: threading.Event = field(default_factory=threading.Event)

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.held is not None and self.held(texts):
            await asyncio.to_thread(self.released.wait, 60)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.status != 200:
            return web.json_response(
                {
                    "error": {
                        "message": f"model {body.get('model')!r} not found",
                        "type": "invalid_request_error",
                    }
                },
                status=self.status,
            )
        if self.body is not None:
            return web.Response(text=self.body, content_type="application/json")
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": bag_vector(t, self.dim)}
            for i, t in enumerate(inputs)
        ]
        if self.shuffle:
            random.Random(len(self.requests)).shuffle(data)
        tokens = sum(len(t.split()) for t in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self.embeddings)
        return app


async def start(fake: FakeEmbeddings) -> web.AppRunner:
    """Serve ``fake`` on a free port of 127.0.0.1 in the running loop; sets ``fake.base_url``."""
    return await serve_v1(fake)


def threaded(fake: FakeEmbeddings) -> ThreadedServer:
    """The stand-in in a thread of its own (for synchronous code and subprocesses)."""
    return ThreadedServer(fake, start)
