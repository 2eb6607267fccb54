"""The Universal Sentence Encoder for benchmarks: its vectors remembered by text and saved between runs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from knowledge.retrieval.second import UseEncoder

ROOT = Path(__file__).resolve().parents[1]
USE_CACHE = ROOT / "runs" / "bench" / "xquad-use.npz"


class CachedUse(UseEncoder):
    """The Universal Sentence Encoder, its vectors remembered by text and saved between runs."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.memo: dict[str, np.ndarray] = {}
        self.computed, self.seconds = 0, 0.0
        if path.is_file():
            data = np.load(path, allow_pickle=False)
            self.memo = {str(t): v for t, v in zip(data["texts"], data["vectors"], strict=True)}

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            t0 = time.perf_counter()
            vectors = super().encode(todo)
            if vectors is None:
                return None
            self.seconds += time.perf_counter() - t0
            self.computed += len(todo)
            self.memo.update(zip(todo, vectors, strict=True))
        return np.stack([self.memo[t] for t in texts])

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = list(self.memo)
        np.savez(self.path, texts=np.array(texts), vectors=np.stack([self.memo[t] for t in texts]))
