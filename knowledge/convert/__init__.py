"""Converters: any supported source (HTML, PDF, text, Markdown, images, SVG drawings, Obsidian canvases
and bases) in, Markdown with a title out.

``convert_source`` decides the type by sniffing the bytes, enforces the size limit and, given a
runner, converts in an isolated worker process under the conversion timeout, whatever the type:
pypdf can hang or blow up on hostile files, and a pathological text or HTML file must not hold the
single worker either. Images and scanned PDF pages are read by OCR (``ocr``, off when None); each page
OCR reads reports progress, and has ``Limits.ocr_page_timeout_s`` of its own on top of the conversion
timeout; a scanned PDF has ``Limits.ocr_budget_s`` of OCR in all, in turns of ``Limits.ocr_turn_s``
when a ``PageStore`` keeps its pages between turns (reason ``ocr-paused``: call again later), and
the worker is stopped past that whatever the pages report. Every failure is a ``ConversionError``
with a stable reason code and a sentence for the owner; an unexpected exception in a converter is
reason ``internal-error``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import PurePath

from knowledge.convert.base import TITLE_MAX_CHARS, Converted, Limits, OcrFacts
from knowledge.convert.isolate import IsolatedRunner
from knowledge.convert.ocr import OcrSpec
from knowledge.convert.pagestore import PageStore
from knowledge.convert.sniff import sniff
from knowledge.errors import ConversionError
from knowledge.text import shorten

__all__ = ["Converted", "Limits", "OcrFacts", "OcrSpec", "convert_source"]

# The converters are imported by the first conversion of their kind, not with the package: their
# libraries (trafilatura, pypdf, Pillow, PyYAML…) cost a process that only reads the index (kb search,
# kb mcp) a few hundred milliseconds of its start.


def _drawing_or_board(kind: str) -> Callable[..., Converted]:
    """The converter of an SVG drawing, an Obsidian canvas or an Obsidian base."""
    if kind == "svg":
        from knowledge.convert.svg import svg_to_markdown

        return svg_to_markdown
    from knowledge.convert.obsidian import base_to_markdown, canvas_to_markdown

    return canvas_to_markdown if kind == "canvas" else base_to_markdown


_DRAWINGS_AND_BOARDS = frozenset({"svg", "canvas", "base"})


def convert_source(
    data: bytes,
    *,
    name: str,
    limits: Limits,
    declared_charset: str | None = None,
    source_url: str | None = None,
    runner: IsolatedRunner | None = None,
    ocr: OcrSpec | None = None,
    progress: Callable[[int, int], None] | None = None,
    pages: PageStore | None = None,
) -> Converted:
    """Convert a source's bytes to Markdown; the title falls back to the file name.

    ``progress(done, total)`` hears about pages read by OCR; ``pages`` keeps them between turns.
    """
    if not data:
        raise ConversionError("empty", "the file is empty")
    if len(data) > limits.max_source_bytes:
        raise ConversionError(
            "too-large",
            f"the file is {len(data) / 2**20:.1f} MiB, over the {limits.max_source_bytes / 2**20:g} MiB limit"
            " (KB_MAX_SOURCE_MB)",
        )
    kind = sniff(data, name)
    timeout_s = limits.convert_timeout_s
    page_timeout_s: float | None = None  # converters that read pages by OCR report progress
    total_s: float | None = None  # however often pages are reported, never longer than this
    convert: Callable[..., Converted]
    if kind == "pdf":
        from knowledge.convert.pdf import pdf_to_markdown

        convert = partial(
            pdf_to_markdown,
            max_pages=limits.pdf_max_pages,
            timeout_s=timeout_s,
            ocr=ocr,
            page_timeout_s=limits.ocr_page_timeout_s,
            ocr_budget_s=limits.ocr_budget_s,
            ocr_turn_s=limits.ocr_turn_s,
            pages=pages,
        )
        timeout_s += 5.0  # the PDF converter's own deadline fires first; the runner's kill is the backstop
        page_timeout_s = limits.ocr_page_timeout_s + 5.0
        ocr_s = min(limits.ocr_turn_s, limits.ocr_budget_s) if pages is not None else limits.ocr_budget_s
        total_s = timeout_s + ocr_s + page_timeout_s  # a turn may end with one page begun in time
    elif kind == "image":
        from knowledge.convert.image import image_to_markdown

        if ocr is None or not ocr.is_on:  # refused here: no worker needs to start for it
            return image_to_markdown(data, name=name, ocr=None)
        convert = partial(image_to_markdown, name=name, ocr=ocr)
        page_timeout_s = limits.ocr_page_timeout_s + 5.0
    elif kind == "html":
        from knowledge.convert.html import convert_html_bytes

        convert = partial(convert_html_bytes, declared=declared_charset, base_url=source_url)
    elif kind in _DRAWINGS_AND_BOARDS:
        convert = partial(_drawing_or_board(kind), name=name)
    else:
        from knowledge.convert.text import text_to_markdown

        convert = partial(text_to_markdown, markdown=kind == "markdown", declared=declared_charset)
    if runner is not None:
        converted = runner.call(
            convert,
            data,
            timeout_s=timeout_s,
            progress_timeout_s=page_timeout_s,
            on_progress=progress,
            total_timeout_s=total_s,
        )
    elif page_timeout_s is not None:
        converted = convert(data, progress=progress)
    else:
        converted = convert(data)
    title = shorten(converted.title, TITLE_MAX_CHARS) if converted.title.strip() else PurePath(name).stem
    return replace(converted, title=title)
