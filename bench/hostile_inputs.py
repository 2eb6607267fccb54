"""Seconds on hostile inputs: the figures the tests used to bound, measured here instead.

A converter, stemmer or planner that goes quadratic (or cubic) on one long line, a deep nesting or a
broken PDF turns one file or question into minutes of CPU. The tests check what comes out of each
hostile input; this prints how long each took (median of ``--repeat`` runs) beside the ceiling the
test once asserted, and the ratio of the two (linear code stays far below 1).

    python bench/hostile_inputs.py [--repeat 3] [--only text,stemmer,plan,html,pdf,image]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the hostile inputs are shared with the tests
from knowledge.convert.html import html_to_markdown  # noqa: E402
from knowledge.convert.image import load_image  # noqa: E402
from knowledge.convert.isolate import IsolatedRunner  # noqa: E402
from knowledge.convert.pdf import pdf_to_markdown  # noqa: E402
from knowledge.convert.text import text_to_markdown  # noqa: E402
from knowledge.errors import ConversionError  # noqa: E402
from knowledge.store.stemmer import porter_stem  # noqa: E402
from knowledge.websearch.plan import heuristic_plan, needs_search  # noqa: E402
from tests import ocr_images, pdfs  # noqa: E402
from tests.test_pdf import BOMB_BYTES, FAILURES  # noqa: E402
from tests.test_text import HOSTILE_MARKDOWN  # noqa: E402


def refused(convert: Callable[[], object]) -> Callable[[], None]:
    """``convert`` run for its ConversionError (the hostile inputs that must be refused)."""

    def run() -> None:
        try:
            convert()
        except ConversionError:
            return
        raise SystemExit("a hostile input was not refused: run the tests")

    return run


def markdown(line: str) -> object:
    """One hostile line between two plain ones, converted as Markdown."""
    return text_to_markdown(f"intro\n{line}\nend\n".encode(), markdown=True)


def cases(runner: IsolatedRunner) -> dict[str, list[tuple[str, float, Callable[[], object]]]]:
    """(label, the ceiling its test asserted in seconds, the work) by group."""
    deep = {
        d: "<html><head><title>Deep</title></head><body><p>Text before the nesting starts.</p>"
        + "<div>" * d
        + "Text at the very bottom of the nesting."
        + "</div>" * d
        + "</body></html>"
        for d in (400, 1_000, 100_000)
    }
    paragraphs = (
        "<html><body>" + "".join(f"<p>Paragraph number {i}.</p>" for i in range(100_000)) + "</body></html>"
    )
    circular = pdfs.document([(pdfs.FONT, pdfs.stream(pdfs.text_content(["loop"])))], circular_prev=True)
    bombs = {
        f"{w}×{h} PNG": ocr_images.encode(Image.new("1", (w, h)), "PNG")
        for w, h in ((30_000, 30_000), (12_000, 9_000))
    }
    flate = pdfs.flate_bomb(BOMB_BYTES, rounds=2)
    return {
        "text": [
            (f"markdown {i}: {line[:12]!r}…", 1.0, lambda line=line: markdown(line))
            for i, line in enumerate(HOSTILE_MARKDOWN, start=1)
        ],
        "stemmer": [
            (f"'y' × {n} + 'ed'", 0.5, lambda n=n: porter_stem("y" * n + "ed"))
            for n in (40, 60, 1_100, 100_000)
        ],
        "plan": [
            (
                "1,200 dashes, planned",
                0.5,
                lambda: heuristic_plan("-" * 1_200 + " what now x", date(2026, 1, 1)),
            ),
            ("50,000 '- ', needs_search", 0.5, lambda: needs_search("1 " + "- " * 50_000 + "x")),
        ],
        "html": [
            *((f"{d:,} nested divs", 10.0, lambda h=h: html_to_markdown(h)) for d, h in deep.items()),
            (
                "a 5 MB paragraph",
                20.0,
                lambda: html_to_markdown("<html><body><p>" + "word " * 1_000_000 + "</p></body></html>"),
            ),
            ("100,000 paragraphs", 20.0, lambda: html_to_markdown(paragraphs)),
        ],
        "pdf": [
            *(
                (f"refused: {p.id}", 5.0, refused(lambda build=p.values[0]: pdf_to_markdown(build())))
                for p in FAILURES
            ),
            ("circular xref /Prev", 5.0, lambda: pdf_to_markdown(circular)),
            (
                "flate bomb in a 160 MiB worker",
                10.0,
                refused(lambda: runner.call(pdf_to_markdown, flate, timeout_s=30)),
            ),
        ],
        "image": [
            (f"bomb refused: {label}", 2.0, refused(lambda data=data: load_image(data)))
            for label, data in bombs.items()
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per input (the median is shown)")
    parser.add_argument("--only", default="", help="comma-separated groups: text,stemmer,plan,html,pdf,image")
    args = parser.parse_args()
    only = {g for g in args.only.split(",") if g}
    print(f"{'group':<8} {'input':<44} {'median s':>9} {'ceiling s':>9} {'ratio':>7}")
    worst = 0.0
    with IsolatedRunner(memory_bytes=160 * 1024**2) as runner:
        for group, rows in cases(runner).items():
            if only and group not in only:
                continue
            for label, ceiling_s, work in rows:
                seconds = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    work()
                    seconds.append(time.perf_counter() - t0)
                median = statistics.median(seconds)
                ratio = median / ceiling_s
                worst = max(worst, ratio)
                print(f"{group:<8} {label[:44]:<44} {median:>9.3f} {ceiling_s:>9.1f} {ratio:>7.3f}")
    print(f"worst ratio to its ceiling: {worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
