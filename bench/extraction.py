"""HTML main-content extraction: kb's converter against trafilatura, on public evaluation sets.

The folder given decides the set and its scoring:

* trafilatura's own evaluation pages (a checkout's ``tests`` folder: ``evaldata.json`` with
  ``eval/`` and ``cache/``): 990 pages, each with up to six snippets that must appear and six that
  must not; scored as trafilatura scores them (whitespace-normalised substring matches, F1 over
  the pooled counts). Groups: English, other Latin-script languages, and non-Latin scripts
  (CJK, Cyrillic, Arabic, …), told apart by the snippets themselves.
* the article-extraction benchmark (scrapinghub/article-extraction-benchmark: ``ground-truth.json``,
  ``html/*.html.gz`` and ``evaluate.py``): 181 pages, scored by that folder's own evaluate.py
  (4-gram shingles, precision and recall averaged per page). Groups: English and non-English,
  told apart by English function words in the ground truth.

kb's Markdown is reduced to text first (link targets, heading and list markers, table pipes
removed), so it is judged on the words a reader sees. Times are per page, in this process, after
one warm-up page; the machine is shared, so read them as a guide.

    python bench/extraction.py FOLDER [--only kb,trafilatura] [--limit N] [--worst 10]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from knowledge.convert.html import convert_html_bytes
from knowledge.errors import ConversionError

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LINE_MARK = re.compile(r"^(?:\s*(?:#{1,6}|>|[-*+]|\d{1,9}[.)])\s+)+", re.M)
_TABLE_RULE = re.compile(r"^\|(?:-+\|)+$", re.M)
_FENCE = re.compile(r"^(?:`{3,}|~{3,})\S*$", re.M)
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>])")
_ENGLISH = frozenset("the of and to in is that for it with as was on are by this be from at".split())
_WORD = re.compile(r"[^\W\d_]+")


def markdown_text(markdown: str) -> str:
    """The words a reader sees in kb's Markdown: no link targets, markers, rules or fences."""
    text = _LINK.sub(r"\1", markdown)
    text = _TABLE_RULE.sub("", text)
    text = _FENCE.sub("", text)
    text = _LINE_MARK.sub("", text)
    text = text.replace(" | ", " ").replace("| ", "").replace(" |", "")
    return _ESCAPE.sub(r"\1", text)


def run_kb(data: bytes) -> str:
    """kb's HTML converter, reduced to text; a refused page is an empty result."""
    try:
        return markdown_text(convert_html_bytes(data).markdown)
    except ConversionError:
        return ""


def run_trafilatura(data: bytes) -> str:
    """trafilatura as both benchmarks run it (comments left out, tables kept), as plain text."""
    import trafilatura

    return trafilatura.extract(data, include_comments=False, include_tables=True) or ""


EXTRACTORS: dict[str, Callable[[bytes], str]] = {"kb": run_kb, "trafilatura": run_trafilatura}


def script_group(text: str) -> str:
    """'non-latin' when most letters are outside the Latin script, else 'english' or 'latin'."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "latin"
    latin = sum(1 for ch in letters if "LATIN" in unicodedata.name(ch, ""))
    if latin < 0.5 * len(letters):
        return "non-latin"
    words = [w.lower() for w in _WORD.findall(text)]
    share = sum(1 for w in words if w in _ENGLISH) / max(1, len(words))
    return "english" if share >= 0.08 else "latin"


def _timed(fn: Callable[[bytes], str], data: bytes) -> tuple[str, float]:
    t0 = time.perf_counter()
    try:
        result = fn(data)
    except Exception as exc:  # a crash is a miss, as a failing library would be in production
        print(f"  crash: {type(exc).__name__}: {exc}", file=sys.stderr)
        result = ""
    return result, (time.perf_counter() - t0) * 1000


# -- trafilatura's evaluation pages ----------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def trafilatura_set(folder: Path, limit: int | None) -> list[tuple[str, bytes, dict]]:
    """(url, html bytes, annotation) for every page of evaldata.json found under eval/ or cache/."""
    evaldata = json.loads((folder / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url in sorted(evaldata)[:limit]:
        item = evaldata[url]
        for sub in ("cache", "eval"):
            path = folder / sub / item["file"]
            if path.is_file():
                pages.append((url, path.read_bytes(), item))
                break
        else:
            raise SystemExit(f"{url}: {item['file']} not found under {folder}/eval or cache")
    return pages


def score_trafilatura_set(pages: list[tuple[str, bytes, dict]], results: dict[str, str]) -> dict[str, dict]:
    """Pooled precision, recall and F1 per group, as trafilatura's eval_common counts them."""
    counts: dict[str, list[int]] = {}
    for url, _, item in pages:
        text = _norm(results[url])
        tp = sum(1 for w in item["with"] if _norm(w) in text)
        fp = sum(1 for w in item["without"] if _norm(w) in text)
        fn = len(item["with"]) - tp
        group = script_group(" ".join(item["with"]))
        for key in ("all", group):
            c = counts.setdefault(key, [0, 0, 0, 0])
            c[0] += tp
            c[1] += fp
            c[2] += fn
            c[3] += 1
    scores = {}
    for key, (tp, fp, fn, n) in counts.items():
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        scores[key] = {"precision": precision, "recall": recall, "f1": f1, "pages": n}
    return scores


# -- the article-extraction benchmark ---------------------------------------------------------


def _load_evaluate(folder: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("aeb_evaluate", folder / "evaluate.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {folder}/evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def article_set(folder: Path, limit: int | None) -> list[tuple[str, bytes, dict]]:
    """(key, html bytes, ground truth) for the benchmark's pages."""
    truth = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
    return [
        (key, gzip.decompress((folder / "html" / f"{key}.html.gz").read_bytes()), truth[key])
        for key in sorted(truth)[:limit]
    ]


def score_article_set(
    folder: Path, pages: list[tuple[str, bytes, dict]], results: dict[str, str]
) -> dict[str, dict]:
    """Precision, recall and F1 per group with the benchmark's own shingle matching."""
    evaluate = _load_evaluate(folder)
    per_group: dict[str, list] = {}
    for key, _, truth in pages:
        counts = evaluate.string_shingle_matching(true=truth.get("articleBody", ""), pred=results[key])
        group = "english" if script_group(truth.get("articleBody", "")) == "english" else "non-english"
        for name in ("all", group):
            per_group.setdefault(name, []).append(counts)
    return {
        name: {**evaluate.metrics_from_tp_fp_fns(counts), "pages": len(counts)}
        for name, counts in per_group.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="trafilatura's tests folder, or the benchmark's checkout")
    parser.add_argument("--only", default=",".join(EXTRACTORS), help="extractors to run (comma-separated)")
    parser.add_argument("--limit", type=int, help="only the first N pages")
    parser.add_argument("--worst", type=int, default=0, help="list kb's N worst pages")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    folder: Path = args.folder
    if (folder / "evaldata.json").is_file():
        pages = trafilatura_set(folder, args.limit)
        kind = "trafilatura evaluation pages"
    elif (folder / "ground-truth.json").is_file():
        pages = article_set(folder, args.limit)
        kind = "article-extraction benchmark"
    else:
        raise SystemExit(f"{folder}: neither evaldata.json nor ground-truth.json found")
    print(f"{kind}: {len(pages)} pages from {folder}")
    figures: dict[str, dict] = {}
    for name in args.only.split(","):
        fn = EXTRACTORS[name]
        _timed(fn, pages[0][1])  # warm-up: imports, caches
        results: dict[str, str] = {}
        times: list[float] = []
        for key, data, _ in pages:
            results[key], ms = _timed(fn, data)
            times.append(ms)
        if kind.startswith("trafilatura"):
            scores = score_trafilatura_set(pages, results)
        else:
            scores = score_article_set(folder, pages, results)
        scores["ms"] = {"median": statistics.median(times), "mean": statistics.fmean(times)}
        figures[name] = scores
        _print(name, scores)
        if args.worst and name == "kb":
            _print_worst(kind, folder, pages, results, args.worst)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def _print(name: str, scores: dict[str, dict]) -> None:
    ms = scores["ms"]
    print(f"\n{name}: {ms['median']:.1f} ms/page median, {ms['mean']:.1f} mean")
    print(f"  {'group':<12} {'pages':>5} {'precision':>9} {'recall':>7} {'F1':>6}")
    for group in ("all", "english", "latin", "non-english", "non-latin"):
        if group in scores:
            s = scores[group]
            print(f"  {group:<12} {s['pages']:>5} {s['precision']:>9.3f} {s['recall']:>7.3f} {s['f1']:>6.3f}")


def _print_worst(kind: str, folder: Path, pages: list, results: dict[str, str], n: int) -> None:
    rows = []
    for key, data, item in pages:
        if kind.startswith("trafilatura"):
            s = score_trafilatura_set([(key, data, item)], results)["all"]
        else:
            s = score_article_set(folder, [(key, data, item)], results)["all"]
        rows.append((s["f1"], key, s["precision"], s["recall"]))
    print(f"\n  kb's {n} worst pages (F1, precision, recall):")
    for f1, key, p, r in sorted(rows)[:n]:
        print(f"  {f1:.2f} {p:.2f} {r:.2f}  {key}")


if __name__ == "__main__":
    sys.exit(main())
