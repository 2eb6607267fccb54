"""Backup of a big knowledge base while the daemon runs: time, size, and the daemon's ingest latency.

Figures printed (the machine is shared and noisy: medians, nothing here is a test):

1. ``kb backup DEST.tar.gz`` (a real ``kb`` process, as the owner runs it) of a knowledge base of
   ``--docs`` documents (10,000 by default: about 141,000 chunks with the real Qwen3 tokenizer, each
   chunk with a vector): seconds, archive size, the index's size on disk, and the same for a folder
   backup;
2. ``kb backup --verify`` of the archive: seconds;
3. the daemon's ingest latency (a small Markdown file renamed into the inbox → its ingest record in
   the index, ``KB_SETTLE_S=0.05``), median of single-file ingests while idle and while the backup
   runs, and their ratio (target: under 2x).

The knowledge base is built like bench/ingest.py's big index: documents of shuffled XQuAD sentences
in English, Chinese and Thai through the real pipeline, then SYNTHETIC random unit vectors (384-dim,
the local model's size) for every chunk, so the index is the size a real one is; plus a few removed
documents in the trash and a conversation file. Building 10,000 documents takes about six minutes here;
``--keep DIR`` builds once and reuses it.

    python bench/backup.py [--docs 10000] [--keep DIR] [--probes 7] [--tokenizer SPEC|approx]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

# The bench folder holds a daemon.py: keep it off the import path, or it hides the daemon package.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]
_spec = importlib.util.spec_from_file_location("bench_ingest", HERE / "ingest.py")
_bench_ingest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_ingest)
corpus, synthetic_doc, ingest_synthetic, store_synthetic_vectors, percentile = (
    _bench_ingest.corpus,
    _bench_ingest.synthetic_doc,
    _bench_ingest.ingest_synthetic,
    _bench_ingest.store_synthetic_vectors,
    _bench_ingest.percentile,
)
add_tokenizer_option, bench_counter = _bench_ingest.add_tokenizer_option, _bench_ingest.bench_counter

from daemon.main import background  # noqa: E402
from knowledge.config import Settings, load_settings  # noqa: E402
from knowledge.conversation.store import Conversations  # noqa: E402
from knowledge.ingest import trash  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import TokenCounter  # noqa: E402
from knowledge.retrieval.embed import LOCAL_MODEL  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

DATA = _bench_ingest.DATA
VECTOR_MODEL = "local:" + LOCAL_MODEL  # what the local embedder names its vectors
VECTOR_DIM = 384  # multilingual-e5-small's dimension
SETTLE_S = "0.05"
REPO = HERE.parent


def env_for(home: Path, tokenizer: str) -> dict[str, str]:
    """The settings the daemon and the kb processes of this benchmark run with."""
    return {
        "KB_MODEL": "",
        "KB_TOKENIZER": tokenizer,
        "KB_EMBED": "off",  # the vectors are synthetic; no embedder competes for the CPU
        "KB_SUMMARIES": "off",  # nor a model server the daemon would ask for summaries
        "KB_SETTLE_S": SETTLE_S,
        "HF_HUB_OFFLINE": "1",
        "KB_HOME": str(home),
    }


def build(settings: Settings, counter: TokenCounter, docs: int, rng: random.Random) -> None:
    """Ingest documents up to ``docs``, give every chunk a vector, remove a few, keep a conversation."""
    sentences, _, questions = corpus(DATA)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, counter)
        have = index.document_count() + len(trash.trashed(settings))
        ingest_synthetic(ingestor, settings.inbox, rng, sentences, range(have, docs))
        stored = store_synthetic_vectors(index, VECTOR_MODEL, VECTOR_DIM)
        if stored:
            print(f"  {stored} synthetic vectors stored", file=sys.stderr)
        if not trash.trashed(settings):  # a trash with something in it, as a real one has
            for doc in index.documents()[:5]:
                trash.remove(ingestor, doc.id, now=datetime.now(UTC))
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store = Conversations(settings.conversations_path)
    if not settings.conversations_path.exists():
        conversation = store.current("tg:1")
        for q in questions[:20]:
            store.add_turn(conversation.id, message=q, standalone=q, answer="An answer. " * 20, cited=())


RUN = f"{time.time_ns():x}"  # probe names never seen by the index before (it may be reused)


class IngestWork:
    """The daemon's own time for each file it ingests (Outcome.ms: read, convert, chunk, index)."""

    def __init__(self, daemon: object) -> None:
        self.ms: dict[str, float] = {}
        ingestor = daemon.ingestor  # type: ignore[attr-defined]
        inner = ingestor.ingest

        def timed(path: Path, **kwargs: object) -> object:
            outcome = inner(path, **kwargs)
            self.ms[path.name] = outcome.ms
            return outcome

        ingestor.ingest = timed


class Probes:
    """Documents like the knowledge base's own (about 14 chunks of XQuAD sentences), dropped one at a time."""

    def __init__(self, settings: Settings, work: IngestWork) -> None:
        self.settings, self.work = settings, work
        self.sentences, _, _ = corpus(DATA)
        self.rng = random.Random(7)
        self.n = 0

    def ingest(self) -> tuple[float, float]:
        """(seconds from the file's rename into the inbox to its ingest record in the index, the
        daemon's own seconds ingesting it)."""
        self.n += 1
        name = f"probe-{RUN}-{self.n}.md"
        staged = self.settings.home / f".{name}"
        text = synthetic_doc(self.rng, self.sentences, 30_000_000 + self.n)
        staged.write_text(text.replace("# Document", f"# Probe {RUN} {self.n}", 1), encoding="utf-8")
        t0 = time.perf_counter()
        os.rename(staged, self.settings.inbox / name)
        with Index(self.settings.index_path, readonly=True) as index:
            while time.perf_counter() < t0 + 120:
                row = index.conn.execute(
                    "SELECT status FROM ingests WHERE path LIKE ? ORDER BY id DESC LIMIT 1", (f"%{name}",)
                ).fetchone()
                if row is not None and name in self.work.ms:
                    assert row[0] == "indexed", row
                    return time.perf_counter() - t0, self.work.ms[name] / 1000
                time.sleep(0.005)
        raise TimeoutError(f"{name} was not ingested within 120 s")


def kb(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """A real kb process on the benchmark's knowledge base."""
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("KB_")}, **env}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        env=full,
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def timed_backup(
    env: dict[str, str], dest: Path, probes: Probes | None
) -> tuple[float, str, list[tuple[float, float]]]:
    """Run kb backup DEST (a real kb process); with ``probes``, ingest one document after another
    while it runs. (seconds, its summary line, the ingest latencies measured while it ran)"""
    during: list[tuple[float, float]] = []
    done = threading.Event()
    result: list[subprocess.CompletedProcess] = []

    def run() -> None:
        result.append(kb(env, "backup", str(dest)))
        done.set()

    t0 = time.perf_counter()
    thread = threading.Thread(target=run)
    thread.start()
    while probes is not None and not done.is_set():
        latency = probes.ingest()
        if not done.is_set():  # only ingests that ran while the backup did
            during.append(latency)
    thread.join()
    elapsed = time.perf_counter() - t0
    [proc] = result
    if proc.returncode != 0:
        raise SystemExit(f"kb backup failed ({proc.returncode}): {proc.stderr}")
    return elapsed, proc.stdout.strip(), during


def latency_line(what: str, idle: list[float], during: list[float]) -> str:
    """One figure: medians idle and during the backup, p90s, and the ratio of the medians."""
    ratio = statistics.median(during) / statistics.median(idle)
    return (
        f"  {what}: idle median {statistics.median(idle) * 1000:.0f} ms (p90 {percentile(idle, 0.9) * 1000:.0f},"
        f" {len(idle)} files), during the backup median {statistics.median(during) * 1000:.0f} ms (p90"
        f" {percentile(during, 0.9) * 1000:.0f}, max {max(during) * 1000:.0f}, {len(during)} files):"
        f" ratio {ratio:.2f}x (target < 2x)"
    )


def folder_bytes(path: Path) -> int:
    """Bytes of every file under path."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=10_000, help="documents in the knowledge base")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the knowledge base in this folder")
    parser.add_argument("--probes", type=int, default=7, help="single-file ingests measured while idle")
    add_tokenizer_option(parser)
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    spec, counter, _ = bench_counter(args.tokenizer)
    home = (args.keep or Path(tempfile.mkdtemp(prefix="kb-bench-backup-"))).absolute()
    env = env_for(home, "" if args.tokenizer == "approx" else spec)
    settings = load_settings(env, home=home)
    t0 = time.perf_counter()
    build(settings, counter, args.docs, random.Random(20261203))
    with Index(settings.index_path, readonly=True) as index:
        n_docs, n_chunks, n_vectors = (
            index.document_count(),
            index.chunk_count(),
            index.vector_count(VECTOR_MODEL),
        )
    index_mb = settings.index_path.stat().st_size / 1e6
    print(
        f"knowledge base: {n_docs} documents, {n_chunks} chunks, {n_vectors} SYNTHETIC vectors, index"
        f" {index_mb:.0f} MB (tokenizer {counter.name}; ready in {time.perf_counter() - t0:.0f} s)"
    )
    out = Path(tempfile.mkdtemp(prefix="kb-bench-backup-out-"))
    try:
        with background(settings, counter) as daemon:
            assert daemon.wait_idle(600), "the daemon did not settle"
            probes = Probes(settings, IngestWork(daemon))
            probes.ingest()  # the first one warms the tokenizer and the page cache: not counted
            idle = [probes.ingest() for _ in range(args.probes)]
            archive = out / "kb.tar.gz"
            seconds, summary, during = timed_backup(env, archive, probes)
            idle += [probes.ingest() for _ in range(args.probes)]
            folder = out / "kb-folder"
            folder_s, _, _ = timed_backup(env, folder, None)
            assert daemon.wait_idle(120)
        t1 = time.perf_counter()
        verified = kb(env, "backup", "--verify", str(archive))
        verify_s = time.perf_counter() - t1
        if verified.returncode != 0:
            raise SystemExit(f"kb backup --verify failed: {verified.stderr}")
        archive_mb = archive.stat().st_size / 1e6
        print(f"kb backup (tar.gz) with the daemon running: {seconds:.1f} s, archive {archive_mb:.0f} MB")
        print(f"  its summary: {summary}")
        print(f"kb backup (folder), daemon idle: {folder_s:.1f} s, {folder_bytes(folder) / 1e6:.0f} MB")
        print(f"kb backup --verify of the archive: {verify_s:.1f} s ({verified.stdout.strip()})")
        print(f"daemon ingest latency, one ~14-chunk document at a time (settle {SETTLE_S} s):")
        print(latency_line("inbox → indexed", [e for e, _ in idle], [e for e, _ in during]))
        print(latency_line("the daemon's ingest work", [w for _, w in idle], [w for _, w in during]))
        if args.docs and n_chunks:
            scale = 141_000 / n_chunks
            if abs(scale - 1) > 0.1:
                print(
                    f"PROJECTED to 141,000 chunks (linear in size, x{scale:.1f}; not measured): backup"
                    f" {seconds * scale:.0f} s, archive {archive_mb * scale:.0f} MB"
                )
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
