"""Folder sources: a generated vault indexed in place, then a restart with nothing changed.

A vault of N small notes (default 5,000; English, Chinese and Thai, one in ten with front matter and
[[links]]) is made in a temporary folder. Per run (median of --runs):

1. first index: every note read, converted, chunked and indexed (what kb sources add or the daemon's
   first walk does), then embedded by a counting stand-in embedder (hashed vectors, no model);
2. restart: a new writer over the same index walks the vault again, nothing having changed: the time,
   the notes read again (must be 0) and the chunks embedded again (must be 0);
3. the daemon started over the unchanged vault, until it is idle (its watch set up, its walk done);
4. one note edited, then one renamed into another folder: time to sync each, and chunks embedded
   (the edit: its changed chunks only; the rename: 0).

    python bench/sources.py [--notes 5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# bench/daemon.py shares its name with the daemon package: keep this folder off the import path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]

from daemon.main import background  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.sources.registry import Source, config_file, write_sources  # noqa: E402
from knowledge.sources.sync import SourceSync  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

EN = ["The harbour ferry leaves at seven", "Sourdough needs a starter fed with rye", "The NAS holds four drives",
      "The plumber comes on Thursday", "Tulips are planted in autumn"]  # fmt: skip
ZH = [
    "渡輪每天早上七點出發",
    "酸種麵包需要用裸麥餵養",
    "網路儲存裝置有四顆硬碟",
    "水電工星期四會來",
    "鬱金香在秋天種下",
]
TH = [
    "เรือข้ามฟากออกเวลาเจ็ดโมง",
    "ขนมปังต้องใช้หัวเชื้อ",
    "เครื่องเก็บข้อมูลมีสี่ดิสก์",
    "ช่างประปามาวันพฤหัส",
    "ปลูกทิวลิปในฤดูใบไม้ร่วง",
]


class CountingEmbedder:
    """Hashed bag-of-characters vectors; counts every passage it is asked to embed."""

    name = "bench:hashed"
    has_fixed_dimension = True

    def __init__(self) -> None:
        self.passages = 0

    def embed(self, texts: Sequence[str], side: str) -> np.ndarray:
        if side == "passage":
            self.passages += len(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, int(hashlib.md5(word.encode()).hexdigest()[:4], 16) % 64] += 1.0
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


def make_vault(root: Path, notes: int, seed: int = 7) -> None:
    """N notes in 50 folders, one in ten with front matter and links."""
    rng = random.Random(seed)
    for n in range(notes):
        folder = root / f"Area {n % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [rng.choice(EN + ZH + TH) + f" (note {n})." for _ in range(rng.randint(3, 12))]
        head = ""
        if n % 10 == 0:
            head = f"---\ntitle: Note {n}\ntags: [bench, area{n % 50}]\n---\n\n"
            lines.append(f"See [[Note {n + 1}]] and [[Note {n + 2}|the next one]].")
        (folder / f"Note {n}.md").write_text(
            f"{head}# Note {n}\n\n" + "\n\n".join(lines) + "\n", encoding="utf-8"
        )


def one_run(notes: int) -> dict[str, float]:
    """One vault, indexed once, then synced again as after a restart."""
    with tempfile.TemporaryDirectory(prefix="kb-bench-sources-") as tmp:
        vault, home = Path(tmp) / "Vault", Path(tmp) / "kb"
        make_vault(vault, notes)
        settings = load_settings({"KB_MODEL": "", "KB_TOKENIZER": "", "KB_EMBED": "off", "KB_SUMMARIES": "off",
                                  "KB_SETTLE_S": "0.2"}, home=home)  # fmt: skip
        configure_logging(settings.log_path, console_level="error")
        source = Source("vault", vault)
        embedder = CountingEmbedder()
        out: dict[str, float] = {}
        with Index(settings.index_path) as index:
            t0 = time.perf_counter()
            first = SourceSync(Ingestor(settings, index, ApproxCounter())).sync_source(source)
            out["first_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            embed_missing(index, embedder)
            out["first_embed_s"] = time.perf_counter() - t0
            out["first_indexed"] = first.indexed
            out["embedded_first"] = embedder.passages
        with Index(settings.index_path) as index:  # a new writer: as after a restart
            embedder.passages = 0
            t0 = time.perf_counter()
            again = SourceSync(Ingestor(settings, index, ApproxCounter())).sync_source(source)
            out["restart_s"] = time.perf_counter() - t0
            out["restart_read"] = again.indexed + again.touched + again.moved
            out["restart_embedded"] = embed_missing(index, embedder)
        write_sources(config_file(home), [source])
        t0 = time.perf_counter()
        with background(settings, ApproxCounter()) as daemon:
            assert daemon.wait_idle(600), "the daemon did not settle"
            out["daemon_restart_s"] = time.perf_counter() - t0
        with Index(settings.index_path) as index:
            sync = SourceSync(Ingestor(settings, index, ApproxCounter()))
            note = vault / "Area 03" / "Note 3.md"
            note.write_text(
                note.read_text(encoding="utf-8") + "\nAn edited line about the ferry.\n", encoding="utf-8"
            )
            t0 = time.perf_counter()
            sync.sync_paths(source, ["Area 03/Note 3.md"])
            out["edit_s"] = time.perf_counter() - t0
            embedder.passages = 0
            out["edit_embedded"] = embed_missing(index, embedder)
            os.rename(note, vault / "Area 04" / "Note 3 (moved).md")
            t0 = time.perf_counter()
            moved = sync.sync_paths(source, ["Area 03/Note 3.md", "Area 04/Note 3 (moved).md"])
            out["rename_s"] = time.perf_counter() - t0
            out["rename_moved"] = moved.moved
            out["rename_embedded"] = embed_missing(index, embedder)
        return out


def main() -> None:
    """Run and print medians."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(args.notes) for _ in range(args.runs)]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"vault: {args.notes} notes; medians of {args.runs} runs")
    print(
        f"first index:       {med('first_s'):8.2f} s  ({args.notes / med('first_s'):.0f} notes/s), "
        f"{med('first_indexed'):.0f} indexed; embedding {med('embedded_first'):.0f} chunks: {med('first_embed_s'):.2f} s"
    )
    print(
        f"restart, unchanged: {med('restart_s'):7.2f} s  ({med('first_s') / med('restart_s'):.0f}x faster than the "
        f"first index); notes read again: {med('restart_read'):.0f}, chunks embedded again: {med('restart_embedded'):.0f}"
    )
    print(f"daemon restart to idle: {med('daemon_restart_s'):.2f} s")
    print(f"one edit synced:   {med('edit_s') * 1000:8.1f} ms, chunks embedded: {med('edit_embedded'):.0f}")
    print(f"one rename synced: {med('rename_s') * 1000:8.1f} ms, moved: {med('rename_moved'):.0f}, "
          f"chunks embedded: {med('rename_embedded'):.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
