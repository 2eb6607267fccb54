"""PDF text quality: words recovered, words split by hyphenation, paragraphs intact, running heads left.

The PDFs are drawn by reportlab (tests/pdf_layouts.py) in layouts taken from real documents: a
three-page report (one column, indented justified paragraphs, hyphenation, fi/fl ligatures, running
header and footer, page numbers), a two-column journal article, and a page with a ruled table. Each
comes with the text a reader should get back.

Figures per layout, for kb's converter and for pypdf's plain text (what kb wrote before):

* recall: share of the expected words (a multiset, case-folded) found in the output;
* precision: share of the output's words that are expected (running heads and page numbers cost);
* split: expected words found only broken at a line-end hyphen ("adip-" + "iscing");
* intact: share of expected paragraphs found whole, in order of their words, on one line.

    python bench/pdf.py [--show LAYOUT]
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import time
from collections import Counter
from pathlib import Path

from pypdf import PdfReader

from knowledge.convert.pdf import pdf_to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the layouts are shared with the tests
from tests.pdf_layouts import LAYOUTS  # noqa: E402

_WORD = re.compile(r"[^\W_]+(?:[-'’][^\W_]+)*")
_PAGE_HEADING = re.compile(r"^## Page \d+$", re.M)
_SPLIT = re.compile(r"([^\W\d_]+)-\s+([^\W\d_]+)")


def words(text: str) -> Counter[str]:
    return Counter(w.casefold() for w in _WORD.findall(text))


def kb_text(data: bytes) -> str:
    """kb's converter, without its page headings."""
    return _PAGE_HEADING.sub("", pdf_to_markdown(data).markdown)


def plain_text(data: bytes) -> str:
    """pypdf's plain-mode text of every page: what kb indexed before."""
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def score(output: str, expected: list[str]) -> dict[str, float]:
    """Recall, precision, split words and intact paragraphs of one output."""
    want = words(" ".join(expected))
    got = words(output)
    found = sum(min(n, got[w]) for w, n in want.items())
    vocabulary = set(want)
    split = sum(
        1
        for a, b in _SPLIT.findall(output)
        if (a + b).casefold() in vocabulary and f"{a}-{b}".casefold() not in vocabulary
    )
    output = output.replace(" | ", " ").replace("| ", "").replace(" |", "")
    lines = {" ".join(line.split()) for line in output.split("\n")}
    flat = " ".join(output.split())
    intact = sum(1 for p in expected if " ".join(p.split()) in lines or " ".join(p.split()) in flat)
    return {
        "recall": found / max(1, sum(want.values())),
        "precision": found / max(1, sum(got.values())),
        "split": split,
        "intact": intact / len(expected),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", choices=sorted(LAYOUTS), help="print kb's text of this layout")
    args = parser.parse_args()
    print(
        f"{'layout':<8} {'extractor':<12} {'recall':>6} {'precision':>9} {'split':>5} {'intact':>6} {'ms':>7}"
    )
    totals: dict[str, Counter[str]] = {}
    for name, make in LAYOUTS.items():
        data, expected = make()
        for extractor, fn in (("kb", kb_text), ("pypdf-plain", plain_text)):
            t0 = time.perf_counter()
            output = fn(data)
            ms = (time.perf_counter() - t0) * 1000
            s = score(output, expected)
            print(
                f"{name:<8} {extractor:<12} {s['recall']:>6.3f} {s['precision']:>9.3f} {s['split']:>5} "
                f"{s['intact']:>6.2f} {ms:>7.1f}"
            )
            want = sum(words(" ".join(expected)).values())
            t = totals.setdefault(extractor, Counter())
            t["found"] += round(s["recall"] * want)
            t["want"] += want
            t["split"] += s["split"]
        if args.show == name:
            print(kb_text(data))
    for extractor, t in totals.items():
        print(f"all      {extractor:<12} {t['found'] / t['want']:>6.3f} {'':>9} {t['split']:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
