"""MCP benchmark: a warm ``search`` over stdio and over HTTP, against one ``kb search --json`` process per query.
(Not named mcp.py: run as a script, that would shadow the SDK's package.)

Figures printed (medians and p95; the machine is shared and noisy, so nothing here is a test):

1. ``kb search --json QUERY`` as a process per query: median and p95 of ``--process-runs`` (5) runs;
2. ``kb mcp`` over stdio, driven by the SDK's client: server start to first answer (initialize, list the
   tools, one search), then ``--queries`` (50) warm searches: median, p95, and the ratio to (1). Every query
   is a different one (the first answer's too), so nothing kept between calls can answer one seen before;
3. ``kb mcp --http`` on a free loopback port: the same, over Streamable HTTP;
4. 8 HTTP clients at once, ``--queries`` searches each, while ``kb ingest`` writes ``--ingest-docs`` (100)
   new documents into the same index: median, p95 and how many calls failed (target: none).

The index holds about ``--chunks`` (10,000) chunks of documents made of shuffled XQuAD sentences in English,
Chinese and Thai (the sample bundled with the tests), ingested through the usual pipeline. With
``--embed local`` (the default) search is hybrid: the question is embedded by the real local model, and
every chunk has a vector of the model's dimension; embedding 10,000 real chunks takes long here, so those
stored vectors are SYNTHETIC random unit vectors: their cost is measured, not their ranking. ``--embed off``
measures search by words alone. Targets (issue 37): a warm hybrid search median <= 30 ms at 10k chunks,
start to first answer <= 2 s. The machine's load average is printed before and after: on a shared 2-core
machine the figures follow it. kb's modules are byte-compiled once, as an installed kb's are, whatever the
caller's PYTHONDONTWRITEBYTECODE says.

    python bench/mcp_search.py [--chunks 10000] [--queries 50] [--process-runs 5] [--embed local|off] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from knowledge.config import Settings, load_settings  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.report.status import embed_model_name  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.embed import make_embedder  # noqa: E402
from knowledge.store.analysis import SENTENCE_END  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from knowledge.store.vectors import encode  # noqa: E402
from knowledge.text import language_group  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "xquad_sample.json"
LANGS = ("en", "zh", "th")
CHUNKS_PER_DOC = 10  # about, with the approximate counter and the default chunk size


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentences() -> dict[str, list[str]]:
    """The sample's sentences per language."""
    contexts = json.loads(SAMPLE.read_text(encoding="utf-8"))["contexts"]
    return {
        lang: [s.strip() for a in contexts[lang] for p in a["paragraphs"] for s in SENTENCE_END.split(p)
               if len(s.strip()) > 20]
        for lang in LANGS
    }  # fmt: skip


def synthetic_doc(rng: random.Random, pool: dict[str, list[str]], n: int) -> str:
    """A Markdown document of shuffled sentences in one language, about ten chunks long."""
    lang = LANGS[n % 3]
    target = {"en": 5200, "zh": 1500, "th": 4200}[lang]
    parts, size = [f"# Document {n}", ""], 0
    while size < target:
        para = " ".join(rng.choice(pool[lang]) for _ in range(rng.randint(3, 6)))
        parts += [para, ""]
        size += len(para)
    return "\n".join(parts)


def env_for(embed: str, llm_port: int) -> dict[str, str]:
    """No KB_ settings from the caller: no model server (a closed port), no translations, no hub. kb's
    modules are byte-compiled once (their __pycache__, git-ignored), as an installed kb's are, even when the
    caller says not to (PYTHONDONTWRITEBYTECODE): otherwise every process would compile them again."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KB_") and k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **base, "KB_MODEL": "", "KB_TOKENIZER": "", "KB_EMBED": embed, "KB_TRANSLATE": "off", "KB_SUMMARIES": "off",
        "KB_LLM_URL": f"http://127.0.0.1:{llm_port}/v1", "HF_HUB_OFFLINE": "1", "KB_LOG_LEVEL": "warning",
        "PYTHONPATH": str(ROOT),
    }  # fmt: skip


def build(home: Path, env: dict[str, str], chunks: int) -> Settings:
    """The index (reused when ``home`` has one), with vectors for every chunk when search is hybrid."""
    settings = load_settings(env, home=home)
    rng, pool = random.Random(7), sentences()
    if not settings.index_path.exists():
        settings.inbox.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with Index(settings.index_path) as index:
            ingestor = Ingestor(settings, index, ApproxCounter())
            for n in range(max(1, chunks // CHUNKS_PER_DOC)):
                path = settings.inbox / f"doc-{n:05d}.md"
                path.write_text(synthetic_doc(rng, pool, n), encoding="utf-8")
                ingestor.ingest(path)
        print(f"built: {time.perf_counter() - started:.0f} s", flush=True)
    with Index(settings.index_path) as index:
        model = embed_model_name(settings)
        if model is not None:
            dim = make_embedder(settings).embed(["dimension"], "query").shape[1]
            rows = index.conn.execute(
                "SELECT c.rowid, c.text_sha256, c.text FROM chunks c WHERE NOT EXISTS"
                " (SELECT 1 FROM chunk_vectors v WHERE v.rowid = c.rowid AND v.model = ?)",
                (model,),
            ).fetchall()
            vecs = np.random.default_rng(7).standard_normal((len(rows), dim), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) if len(rows) else 1
            index.store_vectors(  # each chunk's own language group, as the embedder would store it
                model,
                [
                    (r, sha, language_group(text), encode(v))
                    for (r, sha, text), v in zip(rows, vecs, strict=True)
                ],
            )
            embed_missing(
                index, make_embedder(settings)
            )  # none missing now: stores the background, as the daemon does
        print(f"index: {index.document_count():,} documents, {index.chunk_count():,} chunks, "
              f"vectors: {model or 'none (words only)'}", flush=True)  # fmt: skip
    return settings


def queries(n: int) -> list[str]:
    """n distinct questions made of a few words of the sample's sentences, in the three languages in turn:
    each is asked once, so nothing a server keeps between calls can answer one it has seen."""
    rng, pool = random.Random(11), sentences()
    distinct = {}
    for lang in LANGS:
        firsts = [" ".join(s.split()[:8]) if lang == "en" else s[:24] for s in pool[lang]]
        seconds = [" ".join(s.split()[8:16]) if lang == "en" else s[24:48] for s in pool[lang]]
        rng.shuffle(firsts)
        rng.shuffle(seconds)
        distinct[lang] = list(dict.fromkeys(q for q in firsts + seconds if len(q) >= 12))
    if n > 3 * min(len(d) for d in distinct.values()):
        raise SystemExit(f"at most {3 * min(len(d) for d in distinct.values())} distinct queries")
    return [distinct[LANGS[i % 3]][i // 3] for i in range(n)]


def kb(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cli", "--home", str(home), *args]


def figures(name: str, seconds: list[float]) -> float:
    """Print median and p95 in ms; return the median."""
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(
        f"{name:<44} median {statistics.median(ms):8.1f} ms   p95 {p95:8.1f} ms   (n={len(ms)})", flush=True
    )
    return statistics.median(ms)


def bench_processes(home: Path, env: dict[str, str], qs: list[str], runs: int) -> float:
    took = []
    for q in qs[:runs]:
        t0 = time.perf_counter()
        subprocess.run(kb(home, "search", "--json", q), env=env, capture_output=True, check=True, cwd=ROOT)
        took.append(time.perf_counter() - t0)
    return figures("kb search --json (a process per query)", took)


async def timed_searches(c: Client, qs: list[str]) -> list[float]:
    took = []
    for q in qs:
        t0 = time.perf_counter()
        r = await c.call_tool("search", {"query": q})
        took.append(time.perf_counter() - t0)
        if r.is_error:
            raise SystemExit(f"search failed: {r.content}")
    return took


async def bench_stdio(home: Path, env: dict[str, str], first: str, qs: list[str]) -> float:
    params = StdioServerParameters(command=sys.executable, args=["-m", "cli", "--home", str(home), "mcp"],
                                   env=env, cwd=str(ROOT))  # fmt: skip
    t0 = time.perf_counter()
    async with Client(params) as c:
        await c.list_tools()
        await c.call_tool("search", {"query": first})
        print(f"{'stdio: start to first answer':<44} {time.perf_counter() - t0:8.2f} s", flush=True)
        return figures("MCP search over stdio (warm)", await timed_searches(c, qs))


async def wait_listening(port: int, proc: subprocess.Popen) -> None:
    """Until the server accepts connections (it binds before loading the model)."""
    while proc.poll() is None:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.02)
    raise SystemExit("kb mcp --http exited")


async def bench_http(home: Path, env: dict[str, str], first: str, qs: list[str], ingest_docs: int) -> float:
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen(kb(home, "mcp", "--http", "--port", str(port)), env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        await wait_listening(port, proc)
        async with Client(url) as c:
            await c.list_tools()
            await c.call_tool("search", {"query": first})
            print(f"{'http: start to first answer':<44} {time.perf_counter() - t0:8.2f} s", flush=True)
            median = figures("MCP search over HTTP (warm)", await timed_searches(c, qs))
        await bench_concurrent(home, env, url, qs, ingest_docs)
        return median
    finally:
        proc.terminate()
        proc.wait(30)


async def bench_concurrent(
    home: Path, env: dict[str, str], url: str, qs: list[str], ingest_docs: int
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="kb-mcp-bench-new-"))
    rng, pool = random.Random(99), sentences()
    for n in range(ingest_docs):
        (folder / f"new-{n:04d}.md").write_text(synthetic_doc(rng, pool, 100_000 + n), encoding="utf-8")
    writer = subprocess.Popen(kb(home, "ingest", str(folder)), env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    failed = 0

    async def one(n: int) -> list[float]:
        nonlocal failed
        took = []
        async with Client(url) as c:
            for q in qs[n::8] + qs[: len(qs) - len(qs[n::8])]:
                t0 = time.perf_counter()
                r = await c.call_tool("search", {"query": q})
                took.append(time.perf_counter() - t0)
                failed += bool(r.is_error)
        return took

    results = await asyncio.gather(*(one(n) for n in range(8)))
    still_writing = writer.poll() is None
    writer.wait()
    figures("8 HTTP clients at once during kb ingest", [s for r in results for s in r])
    print(f"{'':<44} failed calls: {failed}; the ingest was {'still' if still_writing else 'no longer'} "
          f"writing when the clients finished", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=10_000, help="about this many chunks in the index")
    parser.add_argument("--queries", type=int, default=50, help="warm searches per transport")
    parser.add_argument("--process-runs", type=int, default=5, help="kb search processes")
    parser.add_argument(
        "--ingest-docs", type=int, default=100, help="documents ingested during the 8 clients"
    )
    parser.add_argument(
        "--embed", choices=("local", "off"), default="local", help="hybrid (local) or words only"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="build (or reuse) the index in this folder (the ingest during the 8 clients writes into a copy)",
    )
    args = parser.parse_args()
    home = args.keep or Path(tempfile.mkdtemp(prefix="kb-mcp-bench-"))
    env = env_for(args.embed, free_port())
    build(home, env, args.chunks)
    first, *qs = queries(args.queries + 1)  # the first answer's query is not timed again
    print(
        f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True
    )
    process = bench_processes(home, env, qs, args.process_runs)
    stdio = asyncio.run(bench_stdio(home, env, first, qs))
    # The HTTP part ingests --ingest-docs more documents: into a copy, so a kept index stays as built
    with tempfile.TemporaryDirectory(prefix="kb-mcp-bench-http-") as scratch:
        written = home if args.keep is None else Path(shutil.copytree(home, Path(scratch) / "home"))
        http = asyncio.run(bench_http(written, env, first, qs, args.ingest_docs))
    print(
        f"\nwarm MCP search vs a kb search process: stdio {process / stdio:.0f}x, http {process / http:.0f}x faster"
    )
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
