"""OCR quality and speed: rendered A4 pages of real text read by RapidOCR, and a scanned PDF end to end.

Pages are A4 at 150 dpi (KB_OCR_DPI's default), 11-point Noto Sans CJK, 2 cm margins, filled with
XQuAD paragraphs (/work/shared/data/xquad, CC BY-SA 4.0): English as is, Chinese turned into Taiwan
Traditional with OpenCC ``s2twp``. Each page goes through kb's own path (margins trimmed, lines read,
one script per page, reading order). Figures:

1. character error rate (CER) per language: edit distance over the length of the text drawn, after
   NFKC (full-width signs count as their half-width selves) and with white space collapsed, or removed
   for Chinese, where spacing is typographic (target <= 2 %);
2. Traditional characters turned Simplified: for each Traditional character drawn, how many more of its
   Simplified twin the output holds than the text does; before and after kb's script repair
   (target 0 after);
3. seconds per A4 page: median and p95 (target <= 10 s here);
4. a scanned 10-page PDF (page 7 left blank) ingested through the real pipeline and conversion worker:
   convert time, whether a line of each page is found by kb's search with a citation inside that
   page's section, the blank page reported, and the worker's peak memory (its cap is 2 GiB).

    python bench/ocr.py [--pages 6] [--dpi 150] [--data DIR] [--no-pdf]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import opencc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the page drawing is shared with the tests
from knowledge.config import load_settings  # noqa: E402
from knowledge.convert.isolate import IsolatedRunner  # noqa: E402
from knowledge.convert.ocr import read_lines  # noqa: E402
from knowledge.convert.ocr_engines import RapidOcrEngine  # noqa: E402
from knowledge.convert.ocr_text import keep_script, legible_lines, reading_order  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.retrieval.search import search  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from tests import ocr_images  # noqa: E402

DATA = Path("/work/shared/data/xquad")
_SPACE = re.compile(r"\s+")


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), bit-parallel (Myers/Hyyrö) on Python ints."""
    if not a or not b:
        return len(a) + len(b)
    if len(a) > len(b):
        a, b = b, a
    full = (1 << len(a)) - 1
    last = 1 << (len(a) - 1)
    peq: dict[str, int] = {}
    for i, ch in enumerate(a):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    pv, mv, score = full, 0, len(a)
    for ch in b:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)
        mh = pv & xh
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
    return score


def normalise(text: str, lang: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    return _SPACE.sub("", text) if lang == "zh" else _SPACE.sub(" ", text).strip()


def simplified_twins(expected: str, output: str, t2s) -> int:  # noqa: ANN001 - an OpenCC converter
    """Traditional characters of ``expected`` read as their Simplified twin (counted without alignment)."""
    turned = 0
    for ch in set(expected):
        twin = t2s.convert(ch)
        if twin != ch:
            turned += max(0, output.count(twin) - expected.count(twin))
    return turned


def pages(data: Path, lang: str, count: int, *, dpi: int) -> list[tuple[object, list[str]]]:
    """``count`` A4 pages of one language: (picture, lines drawn), one article a page."""
    articles = json.loads((data / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
    s2twp = opencc.OpenCC("s2twp")
    out = []
    for article in articles[: count * 3 : 3]:
        paragraphs = [p["context"] for p in article["paragraphs"]]
        if lang == "zh":
            paragraphs = [s2twp.convert(p) for p in paragraphs]
        out.append(ocr_images.a4_page(paragraphs, dpi=dpi))
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def quality(engine: RapidOcrEngine, data: Path, count: int, dpi: int) -> list[float]:
    """Print CER and script figures per language; the seconds each page took."""
    t2s = opencc.OpenCC("t2s")
    seconds: list[float] = []
    print(
        f"{'lang':<5} {'page':>4} {'lines':>5} {'chars':>6} {'CER':>7} {'T→S raw':>7} {'T→S kb':>6} {'s':>6}"
    )
    for lang in ("en", "zh"):
        errors = chars = raw_turned = kb_turned = 0
        for n, (image, drawn) in enumerate(pages(data, lang, count, dpi=dpi), start=1):
            started = time.perf_counter()
            lines = legible_lines(read_lines(engine, image))
            fixed = keep_script(lines)
            blocks = reading_order(fixed)
            seconds.append(time.perf_counter() - started)
            expected = normalise("\n".join(drawn), lang)
            got = normalise("\n".join(line.text for block in blocks for line in block), lang)
            raw = normalise("\n".join(line.text for line in lines), lang)
            distance = levenshtein(expected, got)
            errors, chars = errors + distance, chars + len(expected)
            before, after = simplified_twins(expected, raw, t2s), simplified_twins(expected, got, t2s)
            raw_turned, kb_turned = raw_turned + before, kb_turned + after
            print(
                f"{lang:<5} {n:>4} {len(drawn):>5} {len(expected):>6} {distance / len(expected):>7.2%} "
                f"{before:>7} {after:>6} {seconds[-1]:>6.1f}"
            )
        print(
            f"{lang:<5} {'all':>4} {'':>5} {chars:>6} {errors / chars:>7.2%} {raw_turned:>7} {kb_turned:>6}"
            "   (targets: CER <= 2 %, T→S kb = 0)"
        )
    print(
        f"seconds per A4 page at {dpi} dpi: median {statistics.median(seconds):.1f}, "
        f"p95 {percentile(seconds, 0.95):.1f}, n={len(seconds)} (target <= 10 s)"
    )
    return seconds


def scanned_pdf_end_to_end(data: Path, dpi: int) -> None:
    """A 10-page scan (page 7 blank) through the pipeline: time, citations per page, memory."""
    en = pages(data, "en", 5, dpi=dpi)
    zh = pages(data, "zh", 5, dpi=dpi)
    sheets = [page for pair in zip(en, zh, strict=True) for page in pair]
    sheets[6] = (ocr_images.blank_page(dpi), [])
    pdf = ocr_images.scanned_pdf([image for image, _ in sheets], dpi=dpi)
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(
            {"KB_OCR": "rapidocr", "KB_EMBED": "off", "KB_MAX_SOURCE_MB": "100"}, home=home
        )
        settings.inbox.mkdir(parents=True)
        path = settings.inbox / "scan.pdf"
        path.write_bytes(pdf)
        told: list[tuple[int, int, float]] = []
        started = time.perf_counter()
        with (
            Index(settings.index_path) as index,
            IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20) as runner,
        ):
            ingestor = Ingestor(
                settings,
                index,
                ApproxCounter(),
                runner=runner,
                progress=lambda **r: told.append((r["done"], r["total"], time.perf_counter() - started)),
            )
            outcome = ingestor.ingest(path)
            memory = _worker_memory(runner.pid)
            raw_path = settings.raw / outcome.raw_path.removeprefix("raw/")
            lines = raw_path.read_text(encoding="utf-8").split("\n")
            starts = [
                (n + 1, int(line.split()[-1])) for n, line in enumerate(lines) if line.startswith("## Page ")
            ]
            cited = 0
            for number, (_, drawn) in enumerate(sheets, start=1):
                if not drawn:
                    continue
                lang = "en" if number % 2 else "zh"
                probe = max(drawn[2:8], key=len)  # a full line from the top of the page
                hits = search(index, probe, k=1)
                # The raw line the probe became (OCR may have changed a character or two).
                want = normalise(probe, lang)
                line_no = 1 + min(
                    range(len(lines)), key=lambda i: levenshtein(normalise(lines[i], lang), want)
                )
                page_of_line = max(page for start, page in starts if start <= line_no)
                is_cited = bool(hits) and hits[0].start_line <= line_no <= hits[0].end_line
                cited += page_of_line == number and is_cited
                if not (page_of_line == number and is_cited):
                    print(
                        f"  page {number} not cited: {probe!r} is raw line {line_no}, search gave {hits[:1]}"
                    )
        total_s = time.perf_counter() - started
        meta = raw_path.read_text(encoding="utf-8").split("---")[1]
    per_page = [b[2] - a[2] for a, b in zip(told, told[1:], strict=False) if b[0] == a[0] + 1]
    print(
        f"scanned 10-page PDF ({len(pdf) / 2**20:.1f} MiB, page 7 blank): {outcome.status} in {total_s:.1f} s "
        f"(convert and index; first page includes loading the model), seconds per page median "
        f"{statistics.median(per_page):.1f}, p95 {percentile(per_page, 0.95):.1f}"
    )
    print(f"  pages whose line kb search finds, cited by a range holding that line of that page: {cited}/9")
    print(
        "  front matter: " + "; ".join(line for line in meta.strip().splitlines() if line.startswith("ocr_"))
    )
    print(f"  conversion worker memory: {memory}")


def _worker_memory(pid: int | None) -> str:
    if pid is None:
        return "worker gone"
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmPeak", "VmHWM"):
            fields[key] = int(value.split()[0]) // 1024
    return f"peak address space {fields.get('VmPeak')} MiB, peak resident {fields.get('VmHWM')} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6, help="A4 pages per language (default 6)")
    parser.add_argument("--dpi", type=int, default=150, help="resolution of the pages (default 150)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with xquad.en.json and xquad.zh.json")
    parser.add_argument("--no-pdf", action="store_true", help="skip the scanned 10-page PDF")
    args = parser.parse_args()
    started = time.perf_counter()
    engine = RapidOcrEngine()
    print(f"{engine.name}: loaded in {time.perf_counter() - started:.1f} s")
    quality(engine, args.data, args.pages, args.dpi)
    if not args.no_pdf:
        scanned_pdf_end_to_end(args.data, args.dpi)
    return 0


if __name__ == "__main__":
    sys.exit(main())
