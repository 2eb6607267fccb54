"""Chunk vectors in memory: the cache a reader keeps of the index's vectors, and the search over it.

* Stored beside their chunks in the index file (``chunk_vectors``: rowid, model, the chunk's
  script group, vector), as float16: half the bytes of float32 (82 MB per 100,000 chunks).
  Filled in after the lexical commit (knowledge.retrieval.backfill); centred by language
  before they are compared (knowledge.retrieval.centring).
* Searched exhaustively: a reader keeps the matrix of the current model in memory
  (:class:`VectorCache`) and, when the index's vector epoch changes, reads only the rows
  written since (each row is stamped with the epoch that wrote it) and drops the rows
  deleted: the same result as reading them all, in a third of the time (0.5 s against
  1.3-1.9 s at 143,000 vectors on a 2-core machine). Up to
  ``EXACT_MAX`` vectors one matrix product ranks them all. Beyond, that product reads the
  whole matrix per question (150 MB at 100,000 x 384 float32: 30-60 ms on a busy small
  machine), so a 1-bit code per dimension of each centred vector (48 bytes a chunk) first
  picks the ``PREFILTER`` closest by Hamming distance, and exact cosines rank those.
* Read against a background: kb's background passages (knowledge.retrieval.background),
  embedded once per model and stored beside the chunk vectors, stand for unrelated text. A
  language with few passages in the index is centred on a mean topped up with them, and a
  question's typical cosine with each language is read from the index's passages and these
  together: a knowledge base of one document is measured the way a large one is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import structlog

from knowledge.retrieval import background as background_passages
from knowledge.retrieval.centring import (
    DEFAULT_NOISE,
    Background,
    centre_rows,
    centred,
    group_sums,
    moved_sums,
    same,
    shift_index,
    shift_indices,
    shifts_from_sums,
)
from knowledge.store.index import Index
from knowledge.store.records import VectorRows
from knowledge.store.vectors import DTYPE, decode, stored
from knowledge.text import language_group

log = structlog.get_logger()

TYPICAL_SAMPLE = 2000  # chunks sampled to estimate a question's typical (unrelated) cosine
MIN_TYPICAL = 200  # fewer chunks than this: no estimate

# Up to this many vectors nearest() is one exact matrix product (a few ms).
EXACT_MAX = 20_000
# Candidates the sign codes keep for exact ranking: at least this many, and 64 per result.
# On the XQuAD vectors of the local model, codes of centred vectors kept 97.6 % of the exact
# 40 nearest with only 8 candidates per result (320 of 1,555), and the exact best one always.
PREFILTER = 2048
# A refresh that finds more than this share of the rows changed loads them all instead.
FULL_RELOAD_SHARE = 0.5
# A language with fewer rows than this in the sample is judged against the background passages
# of its script too (a few rows of one document say little about unrelated text).
MIN_REFERENCE = 32


def stored_background(index: Index, model: str) -> Background | None:
    """The background vectors stored in the index for this model, when they are of the current passages."""
    version, rows = index.background(model)
    if version != background_passages.VERSION or not rows:
        return None
    return Background(version, np.array([g for g, _ in rows], dtype=object), decode([v for _, v in rows]))


@dataclass(frozen=True, eq=False)
class Loaded:
    """One state of a :class:`VectorCache`, never changed once built: what questions read, and what
    the next refresh starts from. Rows are in rowid order, as a full load reads them."""

    index_id: str | None = None  # the file it was read from (see Index.vector_version)
    epoch: int = -1  # the vector epoch of the snapshot it reflects
    rowids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # ascending
    raw: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=DTYPE))  # as stored (float16)
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))  # each row's language
    sums: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)  # see group_sums
    languages: list[str] = field(default_factory=list)  # groups with a mean of their own ("" = overall)
    shifts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))  # those means
    shift_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))  # each row's mean
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))  # centred rows
    norms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))  # their lengths before
    sample: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    centre: np.ndarray | None = None  # mean vector, when the matrix is big enough for codes
    codes: np.ndarray | None = None  # sign codes of the centred rows (see sign_codes)
    background: Background | None = None  # what the shifts and the reference were built with
    reference: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))  # see built
    reference_groups: dict[str, np.ndarray] = field(default_factory=dict)  # each group's rows in it
    noise: float = DEFAULT_NOISE  # spread of a question's cosines with unrelated text (see noise_scale)

    @property
    def size(self) -> int:
        return len(self.rowids)


@dataclass(frozen=True)
class Delta:
    """What an incremental refresh changed: rows new, rows replaced (same rowid), rows gone."""

    added: int
    replaced: int
    removed: int


@dataclass
class VectorCache:
    """The current model's vectors of one index, in memory, brought up to date when the index changes.

    A refresh after a change reads only the vector rows written since the last one (their stamps
    are later than its epoch) and the list of rowids (to drop the deleted), and rebuilds the rest
    from what it keeps: the stored vectors, uncentred and as stored (float16), beside the centred
    float32 matrix (half as much again: 225 MB per 100,000 x 384 in all; keeping them as float32
    would take 300 MB and save the float16 conversion, about 0.2 s of a refresh at 143,000), and
    each language's exact sum. The result is the same, bit for bit, as a full load of that
    snapshot. A full load is made on the first refresh, for another file, when the epoch went
    back, when more than ``full_share`` of the rows changed, and when the rows do not add up (a
    vector of another dimension under the same model name, or an index file without stamps:
    made by an older kb and not yet opened by a writer of this one).
    A copy of the file put back in its place keeps the file's id: only its epoch going back
    tells, so a refresh must come between that and new writes passing the cached epoch.
    """

    model: str
    exact_max: int = EXACT_MAX  # up to this many vectors, nearest() ranks them all exactly
    prefilter: int = PREFILTER  # beyond, the candidates its sign codes keep (at least)
    full_share: float = FULL_RELOAD_SHARE  # more rows than this share changed: a full load
    _loaded: Loaded = field(default_factory=Loaded)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # taken to swap or read _loaded
    _refreshing: threading.Lock = field(default_factory=threading.Lock)  # one refresh at a time

    def refresh(self, index: Index, *, background: Background | None = None) -> str:
        """Bring the cache up to date: "unchanged", "incremental" or "full" (what it had to do).

        ``background``: the background vectors to read against when the index has none stored
        for this model (those stored win). Questions asked meanwhile, from other threads, use the
        previous state until the new one is swapped in whole.
        """
        with self._refreshing:
            previous = self._loaded
            version = index.vector_version()
            if version == (previous.index_id, previous.epoch) and (
                background is None or previous.background is not None
            ):
                return "unchanged"
            t0 = time.perf_counter()
            background = stored_background(index, self.model) or background
            step = self._changes(index, previous, version) if same(background, previous.background) else None
            loaded = (
                step[0]
                if step
                else load(index.vectors(self.model), exact_max=self.exact_max, background=background)
            )
            with self._lock:
                self._loaded = loaded
            ms = round((time.perf_counter() - t0) * 1000, 1)
            if step:
                delta = step[1]
                log.debug(
                    "vectors.reload", mode="incremental", vectors=loaded.size, added=delta.added,
                    replaced=delta.replaced, removed=delta.removed, ms=ms,
                )  # fmt: skip
                return "incremental"
            log.debug("vectors.reload", mode="full", vectors=loaded.size, ms=ms)
            return "full"

    def _changes(
        self, index: Index, previous: Loaded, version: tuple[str | None, int]
    ) -> tuple[Loaded, Delta] | None:
        """The previous state brought up to date from the rows written since, or None (load it all)."""
        index_id, epoch = version
        if not previous.size or index_id is None or index_id != previous.index_id or epoch < previous.epoch:
            return None
        read = index.vector_changes(self.model, since=previous.epoch)
        if read is None or read.index_id != previous.index_id or read.epoch < previous.epoch:
            return None
        return updated(previous, read, exact_max=self.exact_max, full_share=self.full_share)

    def _current(self) -> Loaded:
        with self._lock:
            return self._loaded

    def query_vector(self, vector: np.ndarray, text: str) -> np.ndarray:
        """A question's vector moved into the centred space of the chunks (by the question's script)."""
        loaded = self._current()
        if not loaded.languages:
            return vector.astype(np.float32)
        shift = loaded.shifts[shift_index(loaded.languages, language_group(text))]
        return centred(vector[None, :].astype(np.float32), shift[None, :])[0][0]

    def reference(self, query: np.ndarray) -> tuple[dict[str, float], float, int, float]:
        """What a question is judged against, from one pass over the sample: its typical (median)
        cosine with the text of each language group (index sample, and background passages where
        the sample has few), its typical (median) cosine with any chunk of the sample, how many passages
        compete by chance (the index's and the background passages read), and the spread of
        cosines with unrelated text (see noise_scale)."""
        loaded = self._current()
        competing = loaded.size + len(loaded.reference) - len(loaded.sample)
        if not len(loaded.reference) or loaded.reference.shape[1] != query.shape[-1]:
            return {}, 0.0, competing, loaded.noise
        cos = dot(loaded.reference, query.astype(np.float32))
        typical = {g: float(np.median(cos[rows])) for g, rows in loaded.reference_groups.items()}
        sampled = len(loaded.sample)  # the sample comes first in the reference
        overall = float(np.median(cos[:sampled])) if sampled >= MIN_TYPICAL else 0.0
        return typical, overall, competing, loaded.noise

    @property
    def size(self) -> int:
        return self._current().size

    @property
    def dimension(self) -> int:
        """The dimension of the vectors in hand (0 when none)."""
        return int(self._current().matrix.shape[1]) if self.size else 0

    @property
    def has_background(self) -> bool:
        """Whether the vectors in hand were read against background passages."""
        return self._current().background is not None

    def nearest(
        self, query: np.ndarray, k: int, *, within: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """(rowid, cosine) of the k nearest chunks, best first; ``within`` (ascending rowids): the k
        nearest of those chunks only (a search scope: chosen among them, never a share of the whole's k)."""
        loaded = self._current()
        rowids, matrix, centre, codes = loaded.rowids, loaded.matrix, loaded.centre, loaded.codes
        if not len(rowids) or matrix.shape[1] != query.shape[-1]:
            return []
        query = query.astype(np.float32)
        keep = max(self.prefilter, 64 * k)
        rows = None if within is None else np.flatnonzero(is_in(within, rowids))
        count = len(rowids) if rows is None else len(rows)
        if not count:
            return []
        if codes is not None and centre is not None and count > keep:
            code = sign_codes(query[None, :], centre)[:, 0]
            distance = hamming(codes if rows is None else codes[:, rows], code)
            kept = np.argpartition(distance, keep - 1)[:keep]
            rows = np.sort(kept if rows is None else rows[kept])  # gathered in memory order
            scores = dot(matrix[rows], query)
        elif rows is None:
            rows = np.arange(len(rowids))
            scores = dot(matrix, query)
        else:
            scores = dot(matrix[rows], query)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(rowids[rows[i]]), float(scores[i])) for i in top]

    def group_counts(self) -> dict[str, int]:
        """How many chunks with a vector each language group has (from the kept group sums)."""
        return {group: n for group, (n, _) in self._current().sums.items()}

    def groups_of(self, rowids: list[int]) -> dict[int, str]:
        """The language group of each of these chunks that has a vector."""
        loaded = self._current()
        found, rows = rows_of(loaded.rowids, rowids)
        return {r: str(g) for r, g in zip(found, loaded.groups[rows], strict=True)}

    def cosines(self, query: np.ndarray, rowids: list[int]) -> dict[int, float]:
        """Cosine of the query with each of these chunks that has a vector."""
        loaded = self._current()
        found, rows = rows_of(loaded.rowids, rowids)
        if not found or loaded.matrix.shape[1] != query.shape[-1]:
            return {}
        scores = dot(loaded.matrix[rows], query.astype(np.float32))
        return {r: float(s) for r, s in zip(found, scores, strict=True)}


def load(read: VectorRows, *, exact_max: int, background: Background | None = None) -> Loaded:
    """The cache's state built from every row of a snapshot (a full load)."""
    rows = read.rows
    if rows:  # a server that changed its dimension under the same name: keep the newest size
        size = len(rows[-1][2])
        rows = [r for r in rows if len(r[2]) == size]
    rowids = np.fromiter((r for r, _, _ in rows), dtype=np.int64, count=len(rows))
    raw = stored([v for _, _, v in rows])
    groups = np.array([g for _, g, _ in rows], dtype=object)
    return built(
        read, rowids, raw, groups, group_sums(raw, groups), exact_max=exact_max, background=background
    )


def updated(
    previous: Loaded,
    read: VectorRows,
    *,
    exact_max: int,
    full_share: float = FULL_RELOAD_SHARE,
) -> tuple[Loaded, Delta] | None:
    """A state brought up to the snapshot ``read`` (rows stamped after its epoch, every rowid now),
    centred on the same background as ``previous``.

    Equal to ``load`` of that snapshot, bit for bit: the same rows in the same order, the same
    (exact) language sums, then the same code. None when a full load is needed: the rows do not
    add up to the rowids listed, or more than ``full_share`` of them changed.
    """
    dim = previous.raw.shape[1]
    changed = np.fromiter((r for r, _, _ in read.rows), dtype=np.int64, count=len(read.rows))
    if (
        not previous.size
        or len(changed) > full_share * len(read.rowids)
        or any(len(v) != dim * np.dtype(DTYPE).itemsize for _, _, v in read.rows)
    ):
        return None
    stays = is_in(read.rowids, previous.rowids) & ~is_in(changed, previous.rowids)
    rowids = read.rowids
    if (
        not len(rowids)
        or np.count_nonzero(stays) + len(changed) != len(rowids)
        or not is_in(rowids, changed).all()
    ):
        return None  # a row without a stamp, or of a dimension not loaded: only a full load can tell
    kept = np.flatnonzero(stays)  # rows of previous, and where they go
    kept_at, new_at = np.searchsorted(rowids, previous.rowids[kept]), np.searchsorted(rowids, changed)
    raw = np.empty((len(rowids), dim), dtype=DTYPE)
    copy_rows(raw, kept_at, previous.raw, kept)
    raw[new_at] = stored([v for _, _, v in read.rows]).reshape(len(changed), dim)
    groups = np.empty(len(rowids), dtype=object)
    groups[kept_at] = previous.groups[kept]
    groups[new_at] = np.array([g for _, g, _ in read.rows], dtype=object)
    gone = np.flatnonzero(~stays)  # rows of previous deleted or replaced
    sums = moved_sums(
        previous.sums,
        gone=group_sums(previous.raw[gone], previous.groups[gone]),
        come=group_sums(raw[new_at], groups[new_at]),
    )
    replaced = int(np.count_nonzero(is_in(previous.rowids, changed)))
    delta = Delta(len(changed) - replaced, replaced, len(gone) - replaced)
    return built(read, rowids, raw, groups, sums, exact_max=exact_max, background=previous.background), delta


def built(
    read: VectorRows,
    rowids: np.ndarray,
    raw: np.ndarray,
    groups: np.ndarray,
    sums: dict[str, tuple[int, np.ndarray]],
    *,
    exact_max: int,
    background: Background | None = None,
) -> Loaded:
    """The state for these rows: language means, centred rows, the typical-cosine sample, the
    reference a question is judged against, and the sign codes when the matrix is big.

    Every row is centred again, even after a refresh that changed one: a language's mean moves
    with each of its rows, and centring 140,000 rows takes about 100 ms, a tenth of reading them.
    The reference is the sample with the centred background passages: what a question's cosine
    with text of each language is when the text does not answer it.
    No rows (none embedded yet, after an interrupted backfill or a change of model) is a state like
    any other: nothing to search, no language means to centre the passages on, an empty reference.
    """
    if background is not None and len(raw) and background.raw.shape[1] != raw.shape[1]:
        background = None  # of another dimension: the embedder changed under the same name
    languages, shifts = shifts_from_sums(sums, background.sums if background is not None else None)
    shift_of = shift_indices(languages, groups)
    matrix, norms = centre_rows(raw, shifts, shift_of)
    step = max(1, len(matrix) // TYPICAL_SAMPLE)
    sample = np.ascontiguousarray(matrix[::step])
    reference, reference_groups, noise = sample, groups[::step], DEFAULT_NOISE
    if background is not None and languages:  # languages: the means of the rows, none without rows
        own = {g: n for g, n in zip(*np.unique(groups[::step].astype(str), return_counts=True), strict=True)}
        needed = np.array([own.get(g, 0) < MIN_REFERENCE for g in background.groups], dtype=bool)
        bg, _ = centred(background.raw[needed], shifts[shift_indices(languages, background.groups[needed])])
        reference = np.concatenate([sample, bg]) if len(sample) else bg
        reference_groups = np.concatenate([groups[::step], background.groups[needed]])
    if background is not None:
        noise = background.noise
    centre, codes = None, None
    if len(matrix) > exact_max:
        centre = matrix.mean(axis=0)
        codes = sign_codes(matrix, centre)
    return Loaded(
        read.index_id, read.epoch, rowids, raw, groups, sums, languages, shifts, shift_of, matrix, norms,
        sample, centre, codes, background, np.ascontiguousarray(reference, dtype=np.float32),
        {str(g): np.flatnonzero(reference_groups == g) for g in set(reference_groups.tolist())}, noise,
    )  # fmt: skip


def rows_of(rowids: np.ndarray, wanted: list[int]) -> tuple[list[int], np.ndarray]:
    """The wanted rowids that have a row (in the order asked) and their rows, in ascending ``rowids``."""
    want = np.asarray(wanted, dtype=np.int64)
    hit = is_in(rowids, want)
    return want[hit].tolist(), np.searchsorted(rowids, want[hit])


def is_in(ascending: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each value is one of the ``ascending`` rowids."""
    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def copy_rows(out: np.ndarray, at: np.ndarray, source: np.ndarray, rows: np.ndarray) -> None:
    """``out[at] = source[rows]`` (both ascending), run by run: each run one slice copy, not a gather."""
    if not len(at):
        return
    breaks = np.flatnonzero((np.diff(at) != 1) | (np.diff(rows) != 1)) + 1
    for first, end in zip([0, *breaks.tolist()], [*breaks.tolist(), len(at)], strict=True):
        a, r = int(at[first]), int(rows[first])
        out[a : a + end - first] = source[r : r + end - first]


def dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with the query, on this thread.

    Not BLAS (``@``): its worker threads spin while they wait, and on a busy machine a
    product over a few thousand rows took 15 ms instead of 1 ms.
    """
    return np.einsum("ij,j->i", matrix, query)


def sign_codes(vectors: np.ndarray, centre: np.ndarray, *, block: int = 8192) -> np.ndarray:
    """One bit per dimension of each row (above the centre or not), packed in uint64 words.

    Laid out one row per word (words x rows), so that summing bit counts adds whole rows.
    Centring matters: an embedder's vectors share a large common direction, whose signs
    would be the same for every chunk and say nothing.
    """
    words = -(-vectors.shape[1] // 64)
    out = np.zeros((len(vectors), words * 8), dtype=np.uint8)
    for start in range(0, len(vectors), block):  # bounded temporaries for a big matrix
        bits = np.packbits(vectors[start : start + block] > centre, axis=1)
        out[start : start + len(bits), : bits.shape[1]] = bits
    return np.ascontiguousarray(out.view(np.uint64).T)


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def hamming(codes: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Bits that differ between each column of codes and one code (a column of the same layout)."""
    diff = codes ^ code[:, None]
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.bitwise_count(diff).sum(axis=0, dtype=np.int32)
    return _POPCOUNT[diff.view(np.uint8)].reshape(len(diff), -1, 8).sum(axis=(0, 2), dtype=np.int32)
