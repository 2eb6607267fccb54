"""Daemon latency and throughput.

1. A 170 KB HTML file renamed into the inbox: time until a search finds it (median of 5
   runs), printed next to the settle time (target: under 1 s plus the settle time).
2. 1,000 small files dropped into the inbox at once: how fast the daemon drains them,
   against ``kb ingest`` of the same files in-process (target: within 1.5x).

    python bench/daemon.py [--settle 1.0] [--files 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This script shares its name with the daemon package: keep its own folder off the import path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]
_spec = importlib.util.spec_from_file_location("bench_ingest", HERE / "ingest.py")
_bench_ingest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_ingest)
big_html, corpus = _bench_ingest.big_html, _bench_ingest.corpus

from daemon.main import background  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.retrieval.search import search  # noqa: E402
from knowledge.store.index import Index  # noqa: E402


def settings_for(home: Path, settle_s: float):
    return load_settings({"KB_MODEL": "", "KB_TOKENIZER": "", "KB_SETTLE_S": str(settle_s)}, home=home)


def small_files(n: int) -> list[tuple[str, str]]:
    return [
        (f"note-{i}.md", f"# Note {i}\n\nSmall note number {i} about topic{i} and a few words.\n")
        for i in range(n)
    ]


def latency(settle_s: float, runs: int) -> list[float]:
    """Seconds from the rename into the inbox to the first search that finds the page."""
    _, paragraphs, _ = corpus()
    page = big_html(paragraphs)
    times = []
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        settings = settings_for(Path(tmp), settle_s)
        with background(settings, ApproxCounter()):
            for run in range(runs):
                staged = Path(tmp) / f"page-{run}.html"
                staged.write_text(
                    page.replace("zebrafish marker", f"zebrafish marker{run}"), encoding="utf-8"
                )
                t0 = time.perf_counter()
                os.rename(staged, settings.inbox / staged.name)
                while True:
                    if settings.index_path.exists():
                        with Index(settings.index_path, readonly=True) as index:
                            hits = search(index, f"zebrafish marker{run}", k=1)
                        if hits and f"marker{run}" in hits[0].text:
                            break
                    time.sleep(0.01)
                times.append(time.perf_counter() - t0)
    return times


def drain(settle_s: float, n: int) -> tuple[float, float]:
    """(daemon seconds, in-process ingest seconds) for n small files."""
    files = small_files(n)
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        settings = settings_for(Path(tmp) / "direct", settle_s)
        src = Path(tmp) / "src"
        src.mkdir()
        for name, text in files:
            (src / name).write_text(text)
        with Index(settings.index_path) as index:
            ingestor = Ingestor(settings, index, ApproxCounter())
            t0 = time.perf_counter()
            for path in sorted(src.iterdir()):
                ingestor.ingest(path)
            direct = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        settings = settings_for(Path(tmp), settle_s)
        staging = Path(tmp) / "staging"
        staging.mkdir()
        for name, text in files:
            (staging / name).write_text(text)
        with background(settings, ApproxCounter()) as daemon:
            time.sleep(0.5)
            t0 = time.perf_counter()
            for name, _ in files:
                os.rename(staging / name, settings.inbox / name)
            while True:
                time.sleep(0.1)  # listing a folder of 1,000 files is not free: look rarely
                if len(os.listdir(settings.processed)) >= n:
                    with Index(settings.index_path, readonly=True) as index:
                        if index.document_count() >= n:
                            break
            via_daemon = time.perf_counter() - t0
            assert daemon.wait_idle(60)
    return via_daemon, direct


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--settle", type=float, default=1.0, help="KB_SETTLE_S (default 1.0, the default setting)"
    )
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    times = latency(args.settle, args.runs)
    median = statistics.median(times)
    print(
        f"170 KB HTML renamed into the inbox → found by search: median {median * 1000:.0f} ms over {args.runs} runs "
        f"(settle time {args.settle:g} s; beyond the settle time {max(0.0, median - args.settle) * 1000:.0f} ms; "
        f"target < 1 s + settle)"
    )
    via_daemon, direct = drain(args.settle, args.files)
    # No file can be taken before it held still for the settle time: the drain starts after it.
    draining = max(via_daemon - args.settle, 1e-9)
    print(
        f"{args.files} small files: daemon {via_daemon:.1f} s in all, {args.files / draining:.0f} files/s once the"
        f" settle time passed; kb ingest in-process {args.files / direct:.0f} files/s: ratio"
        f" {draining / direct:.2f}x (target <= 1.5x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
