"""Backfill: chunk vectors filled in after the lexical commit, and the background passages embedded.

Two embedders fill in their own vectors: the first (e5, :func:`embed_missing`) and the second,
the Universal Sentence Encoder asked across scripts (:func:`embed_second_missing`, after the first
has nothing left to do; its vectors are kept by chunk text, see knowledge.store.use_vectors).

:func:`embed_missing` works in small batches taken in turns (each document's next few chunks a
turn, the newest document first: a note added after a big file is not kept waiting behind it);
a kill loses at most the batch in hand, and the next call carries on. Chunks whose vector
belongs to another model count as missing, so changing the model re-embeds everything in the
background while the old vectors are simply not used.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import structlog

from knowledge.retrieval import background as background_passages
from knowledge.retrieval.centring import Background
from knowledge.retrieval.embed import Embedder, passage_text
from knowledge.retrieval.second import Second, beside, encoded, script_of
from knowledge.retrieval.vectors import stored_background
from knowledge.store.index import Index
from knowledge.store.vectors import DTYPE_BYTES, encode
from knowledge.text import language_group

log = structlog.get_logger()


@dataclass(frozen=True)
class Coverage:
    """How many chunks have a vector of the current model."""

    model: str | None
    vectors: int
    chunks: int

    @property
    def is_complete(self) -> bool:
        return self.model is not None and self.vectors >= self.chunks

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "vectors": self.vectors, "chunks": self.chunks}


def coverage(index: Index, model: str | None) -> Coverage:
    """Vectors of ``model`` against chunks in the index."""
    chunks = index.chunk_total()
    return Coverage(model, index.vector_count(model) if model else 0, chunks)


def second_coverage(index: Index, second: Second | None) -> Coverage:
    """The second embedder's vectors against chunks in the index (model None: it is off or broken)."""
    model = second.model if second is not None and not second.encoder.is_broken else None
    return Coverage(model, index.use_vector_count(model) if model else 0, index.chunk_total())


# Batches of missing chunks read per query (embed_missing): the query sorts every missing chunk
# (260 ms at 100,000), while a batch of 16 takes ~2 s to embed on a CPU; a note added meanwhile
# waits for at most this many batches.
READ_AHEAD = 8


def embed_missing(
    index: Index,
    embedder: Embedder,
    *,
    batch: int = 16,
    limit: int | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[int], None] | None = None,
    second: Second | bool = True,
) -> int:
    """Embed chunks that have no vector of the embedder's model, batch by batch; how many were stored.

    Stops when nothing is missing, after ``limit`` chunks, or when ``should_stop()`` says so
    between batches. Raises EmbedderError when the embedder fails (nothing of that batch is stored).
    Once nothing is missing, the second embedder (``second``: see knowledge.retrieval.second.beside)
    fills in its own vectors the same way (not counted in what is returned).
    """
    if not index.chunk_total():
        return 0
    done = _embed_first(index, embedder, batch=batch, limit=limit, should_stop=should_stop, progress=progress)
    other = beside(embedder, second)
    if other is not None and not should_stop() and (limit is None or done < limit):
        embed_second_missing(index, other, batch=batch, should_stop=should_stop)
    return done


def _embed_first(
    index: Index,
    embedder: Embedder,
    *,
    batch: int,
    limit: int | None,
    should_stop: Callable[[], bool],
    progress: Callable[[int], None] | None,
) -> int:
    """embed_missing's work for the first embedder."""
    dimension = None  # a server may change its model's size under the same name: asked each time
    if not getattr(embedder, "has_fixed_dimension", False):
        dimension = len(embedder.embed(["dimension"], "passage")[0])
    stored = stored_background(index, embedder.name)
    if stored is None or (dimension is not None and stored.raw.shape[1] != dimension):
        made = embed_background(embedder)
        index.store_background(
            embedder.name, made.version, [(g, encode(v)) for g, v in zip(made.groups, made.raw, strict=True)]
        )
        log.debug("embed.background", model=embedder.name, passages=len(made.raw))
    done = 0
    ahead: list[tuple[int, str, str, str]] = []  # chunks read, not embedded yet
    while not should_stop() and (limit is None or done < limit):
        size = batch if limit is None else min(batch, limit - done)
        if not ahead:  # the query ranks every missing chunk: read several batches at once
            ahead = index.chunks_without_vectors(
                embedder.name,
                limit=size * READ_AHEAD if limit is None else min(size * READ_AHEAD, limit - done),
                vector_bytes=dimension * DTYPE_BYTES if dimension else None,
            )
            if not ahead:
                break
        rows, ahead = ahead[:size], ahead[size:]
        t0 = time.perf_counter()
        vectors = embedder.embed([passage_text(title, text) for _, _, title, text in rows], "passage")
        stored = index.store_vectors(
            embedder.name,
            [
                (rowid, sha, language_group(text), encode(v))
                for (rowid, sha, _, text), v in zip(rows, vectors, strict=True)
            ],
        )
        done += len(rows)
        log.debug("embed.batch", chunks=len(rows), stored=stored, ms=round((time.perf_counter() - t0) * 1000))
        if progress:
            progress(len(rows))
    return done


@dataclass
class _Embedded:
    """Background passages already embedded in this process, by model: kept only for a model whose
    vectors never change under its name (``has_fixed_dimension``: the bundled one), so each new index
    of a process (a test session's, a daemon's after ``kb rm`` emptied one) skips seconds of CPU."""

    made: dict[tuple[str, str], Background] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, embedder: Embedder, make: Callable[[Embedder], Background]) -> Background:
        if not getattr(embedder, "has_fixed_dimension", False):
            return make(embedder)
        key = (embedder.name, background_passages.VERSION)
        with self.lock:
            if key not in self.made:
                self.made[key] = make(embedder)
            return self.made[key]


_EMBEDDED = _Embedded()


def embed_background(embedder: Embedder) -> Background:
    """The background passages embedded by this embedder (EmbedderError when it fails)."""
    return _EMBEDDED.get(embedder, _embed_background)


def _embed_background(embedder: Embedder) -> Background:
    found = background_passages.passages()
    vectors = embedder.embed([text for _, text in found], "passage")
    groups = np.array([group for group, _ in found], dtype=object)
    return Background(background_passages.VERSION, groups, np.asarray(vectors, dtype=np.float32))  # unit rows


def embed_second_missing(
    index: Index,
    second: Second,
    *,
    batch: int = 16,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """The second embedder's vectors for chunk texts that have none, batch by batch, the newest chunks
    first; how many were stored. Forgets the vectors of texts no chunk holds any longer first. A broken
    encoder (knowledge.retrieval.second.UseEncoder) stops it, having said so once."""
    if index.use_vector_rows() > index.chunk_total():  # some are of texts edited away or deleted
        log.debug("embed.second_pruned", rows=index.prune_use_vectors())
    done = 0
    while not should_stop():
        ahead = index.texts_without_use_vectors(second.model, limit=batch * READ_AHEAD)
        if not ahead:
            break
        for start in range(0, len(ahead), batch):
            if should_stop():
                break
            rows = ahead[start : start + batch]
            t0 = time.perf_counter()
            vectors = second.encoder.encode([text for _, text in rows])
            if vectors is None:
                return done
            stored = index.store_use_vectors(
                second.model,
                [
                    (sha, script_of(text), vec)
                    for (sha, text), vec in zip(rows, encoded(vectors), strict=True)
                ],
            )
            done += stored
            ms = round((time.perf_counter() - t0) * 1000)
            log.debug("embed.second_batch", chunks=len(rows), stored=stored, ms=ms)
            if progress:
                progress(len(rows))
    return done
