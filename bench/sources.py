"""Folder sources: a generated vault indexed in place by the daemon, kept in sync, and restarted.

A vault of N small notes (default 5,000; English, Chinese and Thai, one in ten with front matter and
[[links]]) and P text PDFs (default 200, in Attachments/) is made in a temporary folder and registered
as a source. The daemon runs in this process as ``kb run`` runs it (conversions in its isolated worker,
the default settle time unless --settle-s); it does not embed: this script embeds after it, with a
counting embedder, so every passage embedded is counted. Per run (median of --runs):

1. first scan: the daemon started over the new source until idle (every file read, converted, chunked,
   searchable by words): files/s, and the PDFs' share of the time (from the log's sources.indexed);
2. fully searchable: then every passage embedded (--embedder hashed: hashed vectors, no model, the
   cost of kb's own work; local: the multilingual e5 model kb uses by default);
3. restart: the daemon stopped and started over the unchanged vault, until idle: the time, the files
   read again and the passages embedded again (both must be 0);
4. edits: --edits notes each get a line while the daemon runs; the time from the write until the new
   line is in the index (median and p95; the settle time is part of it), and the passages embedded;
5. a rename into another folder: the time until the document has its new path, and the passages
   embedded (must be 0).

With --memory, one first scan and one restart of a vault of --notes notes (say 100,000; no PDFs) in a
child process each, by words only (nothing embedded): their peak memory (the process's, and the
conversion worker's), the time, and files/s.

    python bench/sources.py [--notes 5000] [--pdfs 200] [--runs 1] [--embedder hashed|local] [--edits 30]
    python bench/sources.py --memory --notes 100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

# bench/daemon.py shares its name with the daemon package: keep this folder off the import path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]
sys.path.insert(0, str(HERE.parent))  # the PDFs are made as the tests make them

from daemon.main import background  # noqa: E402
from knowledge.config import Settings, load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.embed import LocalEmbedder  # noqa: E402
from knowledge.sources.registry import Source, config_file, write_sources  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from tests.pdfs import text_pdf  # noqa: E402

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
IDLE_S = 3600.0


class Hashed:
    """Hashed bag-of-words vectors: embedding that costs nearly nothing (kb's own work is what is timed)."""

    name = "bench:hashed"
    has_fixed_dimension = True

    def embed(self, texts: Sequence[str], side: str) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, int(hashlib.md5(word.encode()).hexdigest()[:4], 16) % 64] += 1.0
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


class Counting:
    """An embedder (same name, same vectors) that counts the passages it is asked to embed."""

    def __init__(self, inner: object) -> None:
        self.inner, self.passages = inner, 0
        self.name, self.has_fixed_dimension = inner.name, True

    def embed(self, texts: Sequence[str], side: str) -> np.ndarray:
        if side == "passage":
            self.passages += len(texts)
        return self.inner.embed(texts, side)

    def embedded(self, index: Index) -> tuple[int, float]:
        """Embed what is missing: (passages embedded, seconds)."""
        self.passages = 0
        t0 = time.perf_counter()
        embed_missing(index, self)
        return self.passages, time.perf_counter() - t0


def make_vault(root: Path, notes: int, pdfs: int = 0, seed: int = 7) -> None:
    """N notes in folders of at most 100 (at least 50 folders), one in ten with front matter and links;
    P PDFs of two or three pages in Attachments/."""
    rng = random.Random(seed)
    folders = max(50, notes // 100)
    for n in range(notes):
        folder = root / f"Area {n % folders:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [rng.choice(EN + ZH + TH) + f" (note {n})." for _ in range(rng.randint(3, 12))]
        head = ""
        if n % 10 == 0:
            head = f"---\ntitle: Note {n}\ntags: [bench, area{n % 50}]\ncreated: 2025-01-{n % 28 + 1:02d}\n---\n\n"
            lines.append(f"See [[Note {n + 1}]] and [[Note {n + 2}|the next one]].")
        (folder / f"Note {n}.md").write_text(
            f"{head}# Note {n}\n\n" + "\n\n".join(lines) + "\n", encoding="utf-8"
        )
    if pdfs:
        (root / "Attachments").mkdir(parents=True, exist_ok=True)
    for n in range(pdfs):
        pages = [
            [f"{rng.choice(EN)} (manual {n}, page {p}, line {i})." for i in range(30)]
            for p in range(rng.randint(2, 3))
        ]
        (root / "Attachments" / f"Manual {n}.pdf").write_bytes(text_pdf(pages, title=f"Manual {n}"))


def bench_settings(home: Path, settle_s: str | None) -> Settings:
    """The home's settings: no model, no embedding in the daemon, the default settle time unless given."""
    env = {
        "KB_MODEL": "",
        "KB_TOKENIZER": "",
        "KB_EMBED": "off",
        "KB_SUMMARIES": "off",
        "HF_HUB_OFFLINE": "1",
    }
    if settle_s:
        env["KB_SETTLE_S"] = settle_s
    return load_settings(env, home=home)


def indexed_events(log_path: Path, since: datetime | None = None) -> list[tuple[datetime, str]]:
    """(time, file) of each file the daemon indexed from a source, after ``since``."""
    out = []
    for line in log_path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "sources.indexed":
            when = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
            if since is None or when > since:
                out.append((when, record["file"]))
    return sorted(out)


def share_of(events: list[tuple[datetime, str]], suffix: str) -> float:
    """Seconds the daemon spent on the files with this suffix (each file's time since the one before)."""
    return sum(
        (b - a).total_seconds()
        for (a, _), (b, file) in zip(events, events[1:], strict=False)
        if file.endswith(suffix)
    )


def wait_until(check, timeout_s: float = 120.0, poll_s: float = 0.005) -> float:
    """Seconds until ``check()`` is true (TimeoutError past ``timeout_s``)."""
    t0 = time.perf_counter()
    while not check():
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError("the change did not reach the index")
        time.sleep(poll_s)
    return time.perf_counter() - t0


def one_run(args: argparse.Namespace) -> dict[str, float]:
    """One vault: first scan, fully searchable, restart, edits, a rename."""
    with tempfile.TemporaryDirectory(prefix="kb-bench-sources-") as tmp:
        vault, home = Path(tmp) / "Vault", Path(tmp) / "kb"
        make_vault(vault, args.notes, args.pdfs)
        settings = bench_settings(home, args.settle_s)
        configure_logging(settings.log_path, console_level="error")
        write_sources(config_file(home), [Source("vault", vault)])
        embedder = Counting(LocalEmbedder() if args.embedder == "local" else Hashed())
        out: dict[str, float] = {"settle_s": settings.settle_s}
        t0 = time.perf_counter()
        with background(settings, ApproxCounter()) as daemon:
            assert daemon.wait_idle(IDLE_S), "the daemon did not settle"
            out["first_s"] = time.perf_counter() - t0
        events = indexed_events(settings.log_path)
        out["first_files"] = len(events)
        out["pdf_s"] = share_of(events, ".pdf")
        out["pdfs_indexed"] = sum(1 for _, f in events if f.endswith(".pdf"))
        with Index(settings.index_path) as index:
            out["chunks"], out["embed_s"] = embedder.embedded(index)
        mark = datetime.now().astimezone()
        t0 = time.perf_counter()
        with background(settings, ApproxCounter()) as daemon:
            assert daemon.wait_idle(IDLE_S), "the daemon did not settle"
            out["restart_s"] = time.perf_counter() - t0
            out["restart_read"] = len(indexed_events(settings.log_path, mark))
            with Index(settings.index_path) as index:
                out["restart_embedded"], _ = embedder.embedded(index)
            out.update(edits_and_rename(settings, vault, daemon, embedder, args.edits))
        return out


def edits_and_rename(settings: Settings, vault: Path, daemon, embedder: Counting, edits: int) -> dict:
    """Edit notes one after another, then rename one, while the daemon runs: how long each took to be
    in the index, and the passages embedded for them."""
    rng = random.Random(11)
    notes = sorted(vault.glob("Area */Note *.md"))
    latencies = []
    reader = sqlite3.connect(f"file:{settings.index_path}?mode=ro", uri=True, check_same_thread=False)
    try:
        for n in range(edits):
            note = rng.choice(notes)
            word = f"edited{n}x{rng.randrange(10**9)}"
            with note.open("a", encoding="utf-8") as fh:
                fh.write(f"\nAn edited line: {word}.\n")

            def seen(word: str = word) -> bool:
                return (
                    reader.execute(
                        "SELECT 1 FROM chunks WHERE text LIKE ? LIMIT 1", (f"%{word}%",)
                    ).fetchone()
                    is not None
                )

            latencies.append(wait_until(seen))
            daemon.wait_idle(60)
        with Index(settings.index_path) as index:
            edit_embedded, _ = embedder.embedded(index)
        note = notes[0]
        moved = vault / "Renamed" / f"{note.stem} (moved).md"
        moved.parent.mkdir(exist_ok=True)
        os.rename(note, moved)
        new_path = f"vault:Renamed/{moved.name}"

        def renamed() -> bool:
            return (
                reader.execute("SELECT 1 FROM documents WHERE raw_path = ?", (new_path,)).fetchone()
                is not None
            )

        rename_s = wait_until(renamed)
        daemon.wait_idle(60)
        with Index(settings.index_path) as index:
            rename_embedded, _ = embedder.embedded(index)
            documents = index.document_count()
    finally:
        reader.close()
    latencies.sort()
    return {
        "edit_median_s": statistics.median(latencies),
        "edit_p95_s": latencies[max(0, round(0.95 * len(latencies)) - 1)],
        "edit_embedded": edit_embedded,
        "edits": edits,
        "rename_s": rename_s,
        "rename_embedded": rename_embedded,
        "documents_after": documents,
    }


def child_scan(vault: str, home: str) -> None:
    """In a child process: the daemon over the vault until idle, by words; its time and peak memory as JSON."""
    settings = bench_settings(Path(home), None)
    configure_logging(settings.log_path, console_level="error")
    write_sources(config_file(settings.home), [Source("vault", Path(vault))])
    t0 = time.perf_counter()
    with background(settings, ApproxCounter()) as daemon:
        assert daemon.wait_idle(IDLE_S), "the daemon did not settle"
        elapsed = time.perf_counter() - t0
        self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the worker, once it has ended
    with Index(settings.index_path, readonly=True) as index:
        documents = index.document_count()
    print(
        json.dumps(
            {
                "s": elapsed,
                "self_mib": self_kib / 1024,
                "worker_mib": children_kib / 1024,
                "documents": documents,
            }
        )
    )


def memory_runs(notes: int) -> None:
    """A first scan and a restart over a vault of ``notes`` notes, each in a child process."""
    with tempfile.TemporaryDirectory(prefix="kb-bench-sources-") as tmp:
        vault, home = Path(tmp) / "Vault", Path(tmp) / "kb"
        t0 = time.perf_counter()
        make_vault(vault, notes)
        print(
            f"vault: {notes} notes written in {time.perf_counter() - t0:.0f} s; by words only (nothing embedded)"
        )
        for what in ("first scan", "restart, unchanged"):
            done = subprocess.run(
                [sys.executable, __file__, "--child-scan", str(vault), str(home)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            r = json.loads(done.stdout.strip().splitlines()[-1])
            worker = f"{r['worker_mib']:.0f} MiB" if r["worker_mib"] else "not started"
            print(f"{what:20} {r['s']:8.1f} s ({notes / r['s']:.0f} files/s), {r['documents']} documents; peak "
                  f"memory: the daemon {r['self_mib']:.0f} MiB, its conversion worker {worker}")  # fmt: skip


def main() -> None:
    """Run and print medians."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--pdfs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--embedder", choices=("hashed", "local"), default="hashed")
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--settle-s", default=None, help="KB_SETTLE_S for the daemon (default: kb's)")
    parser.add_argument(
        "--memory", action="store_true", help="peak memory of a first scan and a restart, by words"
    )
    parser.add_argument("--child-scan", nargs=2, metavar=("VAULT", "HOME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_scan:
        child_scan(*args.child_scan)
        return
    if args.memory:
        memory_runs(args.notes)
        return
    runs = [one_run(args) for _ in range(args.runs)]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    files = args.notes + args.pdfs
    print(
        f"vault: {args.notes} notes and {args.pdfs} PDFs; median of {args.runs} run(s); settle {med('settle_s'):g} s"
    )
    print(f"first scan by the daemon: {med('first_s'):7.1f} s ({files / med('first_s'):.0f} files/s; "
          f"{med('first_files'):.0f} files indexed); the {med('pdfs_indexed'):.0f} PDFs took {med('pdf_s'):.1f} s "
          f"({med('pdfs_indexed') / max(med('pdf_s'), 1e-9):.1f} PDFs/s)")  # fmt: skip
    print(f"fully searchable:         {med('first_s') + med('embed_s'):7.1f} s (then {med('chunks'):.0f} passages "
          f"embedded by {args.embedder}: {med('embed_s'):.1f} s, {med('chunks') / max(med('embed_s'), 1e-9):.0f}/s)")  # fmt: skip
    print(f"restart, unchanged:       {med('restart_s'):7.2f} s to idle; files read again: {med('restart_read'):.0f}, "
          f"passages embedded again: {med('restart_embedded'):.0f}")  # fmt: skip
    print(f"an edit seen in the index: median {med('edit_median_s'):.2f} s, p95 {med('edit_p95_s'):.2f} s "
          f"({args.edits} edits; passages embedded for them: {med('edit_embedded'):.0f})")  # fmt: skip
    print(f"a rename into another folder: {med('rename_s'):.2f} s, passages embedded: {med('rename_embedded'):.0f} "
          f"(documents: {med('documents_after'):.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
