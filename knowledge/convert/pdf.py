"""PDF → Markdown with pypdf: one ``## Page N`` section per page that has text.

Text comes from pypdf's layout mode (characters on a grid, so columns, indentation and gaps
survive) and is turned into reading text by pdf_text.py: running headers, footers and page numbers
dropped, columns in order, paragraphs on one line, hyphenated words joined, ligatures spelled out.

Pages without a text layer (a scan; or a scan carrying only a stamp of text, such as a scanning app's
watermark, over a full-page picture) are rendered with pypdfium2 at the OCR resolution and read by OCR
when it is on: one line per recognised line, in reading order. A scanned page with nothing legible is
listed in the result (``OcrFacts.illegible_pages``); a PDF with nothing legible at all is ``pdf-no-text``.

Every way a hostile or broken PDF can fail inside pypdf ends as a ``ConversionError`` with a stable
reason: ``empty``, ``pdf-malformed``, ``pdf-encrypted``, ``pdf-unsupported``, ``pdf-too-many-pages``,
``pdf-no-text``, ``pdf-limit`` or ``timeout``. pypdf's own limits are per stream, and one page can still
hang or eat memory, so callers run this through ``knowledge.convert.isolate.IsolatedRunner``; here the
deadline is only checked between pages. Text pages share ``timeout_s``; each page read by OCR has
``page_timeout_s`` of its own, and ``progress(done, total)`` is told before the first and after each.

A long scan is read in turns: with a ``PageStore`` (pagestore.py) each page read is kept there, and
once OCR has had ``ocr_turn_s`` the conversion stops with reason ``ocr-paused`` so that other files
get the worker; the next call goes on from the stored pages. In all, a file gets ``ocr_budget_s`` of
OCR: the pages past it are not read and are listed (``OcrFacts.unread_pages``), what was read is kept.
"""

from __future__ import annotations

import io
import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pypdf import PageObject, PasswordType, PdfReader, apply_configuration
from pypdf.errors import DependencyError, LimitReachedError

from knowledge.convert.base import TITLE_MAX_CHARS, Converted, OcrFacts
from knowledge.convert.ocr import MAX_OCR_PIXELS, OcrSpec, engine_for, read_text
from knowledge.convert.ocr_text import OcrLine, is_readable, lines_markdown, mean_confidence
from knowledge.convert.pagestore import PageStore
from knowledge.convert.pdf_text import drop_running_lines, reading_text
from knowledge.errors import ConversionError
from knowledge.text import one_line, shorten

# pypdf logs a warning for every robustness fix on a broken file ("EOF marker not found", …) and an
# error for fonts it cannot map; the outcome that matters reaches the user as a ConversionError, so
# these would only spam the console (and the worker's inherited stderr, where nothing is configured).
logging.getLogger("pypdf").setLevel(logging.CRITICAL)


# Titles that authoring tools fill in for the user: "Untitled", "Microsoft Word - report.docx", a
# bare file name, or the tool's own placeholder ("Enscript Output", "Document1", "Slide 1",
# "PowerPoint Presentation"...). A title that repeats the PDF's Creator or Producer (the tool) is
# junk too (see choose_title); anything else is taken as the title.
_JUNK_TITLE = re.compile(
    r"untitled\b.*|microsoft \w+ - .*|\S.*\.(docx?|pdf|rtf|odt|txt|tex|dvi|pptx?|xlsx?|indd|e?ps|html?|md)"
    r"|enscript output|a2ps output|(document|doc|book|sheet|presentation|slide|layout|scan|image|img)[ _-]?\d*"
    r"|powerpoint presentation|(new )?(title|document|page|file)|print|noname|unknown|none|null|\(anonymous\)"
    r"|[\W\d_]*",  # no letter at all
    re.IGNORECASE,
)
_BLANK_RUNS = re.compile(r"\n{3,}")
# A page whose text layer is shorter than this (letters and digits) and that a picture mostly covers is
# a scan with a stamp on it: OCR reads the picture.
STAMP_MAX_CHARS = 40
SCAN_COVER_SHARE = 0.5


def pdf_to_markdown(
    data: bytes,
    *,
    max_pages: int = 2000,
    timeout_s: float = 30.0,
    ocr: OcrSpec | None = None,
    page_timeout_s: float = 20.0,
    progress: Callable[[int, int], None] | None = None,
    ocr_budget_s: float = math.inf,
    ocr_turn_s: float = math.inf,
    pages: PageStore | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Converted:
    """Convert PDF bytes to Markdown, one section per page with text; raise ConversionError otherwise.

    With ``ocr`` on, pages without a text layer are read by OCR (in turns, within a budget: see above).
    ``clock`` times ``timeout_s`` (the OCR's own times run on ``ocr.clock``).
    """
    if not data:
        raise ConversionError("empty", "the file is empty (0 bytes); nothing to convert")
    deadline = clock() + timeout_s
    # No external jbig2dec for a file we do not trust; text extraction never needs image data.
    with apply_configuration(jbig2dec_binary=None), _pypdf_errors():
        reader = _open(data)
        page_count = len(reader.pages)
        if page_count > max_pages:
            raise ConversionError(
                "pdf-too-many-pages",
                f"the PDF has {page_count} pages, more than the limit of {max_pages}; split it into smaller "
                "files or raise the page limit (KB_PDF_MAX_PAGES)",
            )
        texts: list[str] = []
        for number, page in enumerate(reader.pages, start=1):
            if clock() > deadline:
                raise ConversionError(
                    "timeout",
                    f"conversion took longer than {timeout_s:g} s (stopped before page {number} of "
                    f"{page_count}); split the PDF or raise KB_CONVERT_TIMEOUT_S",
                )
            texts.append(clean_text(_layout_text(page)))
        info_title, tools = _info_title(reader), _info_tools(reader)
    scans = [n for n, text in enumerate(texts, start=1) if not text.strip()]
    stamped = [
        n for n, text in enumerate(texts, start=1) if text.strip() and _word_chars(text) < STAMP_MAX_CHARS
    ]
    read: dict[int, list[list[OcrLine]]] = {}
    unread: tuple[int, ...] = ()
    engine_name = ""
    if ocr is not None and ocr.is_on and (scans or stamped):
        turn_s = ocr_turn_s if pages is not None else math.inf
        turn = _Turn(budget_s=ocr_budget_s, turn_s=turn_s, store=pages, clock=ocr.clock)
        with _pdfium_errors():
            engine_name, read, unread = _read_scans(
                data, scans, stamped, spec=ocr, page_timeout_s=page_timeout_s, progress=progress, turn=turn
            )
        for number in read:
            texts[number - 1] = ""  # the picture's text replaces a stamp's
    # The title comes from the visual lines (a heading is its own line there), the body is reflowed.
    firsts = ["\n".join(lines) for lines in drop_running_lines([text.split("\n") for text in texts])]
    texts = reading_text(texts)
    for number, blocks in read.items():
        texts[number - 1] = firsts[number - 1] = lines_markdown(blocks)
    sections = [f"## Page {number}\n\n{text}\n" for number, text in enumerate(texts, start=1) if text]
    illegible = tuple(n for n in scans if n not in read and n not in unread) if engine_name else ()
    if not sections:
        if unread:
            raise ConversionError(
                "pdf-no-text",
                f"nothing legible on the {page_count - len(unread)} page(s) read before the OCR time for one file "
                f"ran out (KB_OCR_BUDGET_S, {ocr_budget_s:g} s); {len(unread)} scanned page(s) from page {unread[0]} on "
                "were not read: raise "
                "KB_OCR_BUDGET_S, or split the PDF, and drop it in again",
            )
        if engine_name:
            raise ConversionError(
                "pdf-no-text",
                f"nothing legible: the PDF has no text layer and OCR found no readable text on its "
                f"{page_count} scanned page(s) (blank, blurred or too small?); scan it again at a higher "
                "resolution and drop it in again",
            )
        raise ConversionError(
            "pdf-no-text",
            f"no extractable text (scanned or image-only PDF?) in {page_count} page(s); set KB_OCR=auto so kb "
            "reads scans by OCR (or run OCR on it, for example ocrmypdf) and drop it in again",
        )
    facts = None
    if engine_name:
        lines = [line for blocks in read.values() for block in blocks for line in block]
        facts = OcrFacts(
            engine=engine_name,
            confidence=mean_confidence(lines),
            pages=tuple(sorted(read)),
            illegible_pages=illegible,
            unread_pages=unread,
        )
    return Converted(
        title=choose_title(info_title, firsts, tools=tools),
        markdown="\n".join(sections),
        converter="pdf",
        ocr=facts,
    )


def _word_chars(text: str) -> int:
    """How many letters and digits a text holds."""
    return sum(1 for ch in text if ch.isalnum())


@dataclass(frozen=True)
class _Turn:
    """How much OCR this call and this file may have, and where pages read are kept."""

    budget_s: float
    turn_s: float
    store: PageStore | None
    clock: Callable[[], float]


def _read_scans(
    data: bytes,
    scans: list[int],
    stamped: list[int],
    *,
    spec: OcrSpec,
    page_timeout_s: float,
    progress: Callable[[int, int], None] | None,
    turn: _Turn,
) -> tuple[str, dict[int, list[list[OcrLine]]], tuple[int, ...]]:
    """OCR of the scanned pages (and of stamped pages a picture covers): the engine's name, the legible
    pages, and the pages left unread when the file's OCR budget ran out."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    try:
        pages = sorted(scans + [n for n in stamped if _picture_cover(pdf[n - 1]) >= SCAN_COVER_SHARE])
        if not pages:
            return "", {}, ()
        engine = engine_for(spec)
        if engine is None:  # OCR is off
            return "", {}, ()
        known, spent = turn.store.load() if turn.store is not None else ({}, 0.0)
        seen = {n: blocks for n, blocks in known.items() if n in pages}
        todo = [n for n in pages if n not in seen]
        started = turn.clock()
        done = resumed = len(seen)
        if progress:
            progress(done, len(pages))
        unread: tuple[int, ...] = ()
        for i, number in enumerate(todo):
            if spent >= turn.budget_s:
                unread = tuple(todo[i:])
                break
            elapsed = turn.clock() - started
            if elapsed >= turn.turn_s or (
                done > resumed
                and turn.turn_s < math.inf
                and turn.store is not None
                and turn.store.others_waiting()
            ):  # a turn ends at ocr_turn_s, or after a page when other work waits behind this scan
                raise ConversionError(
                    "ocr-paused",
                    f"{done} of {len(pages)} scanned pages read so far; the rest after the files waiting behind it",
                )
            page_started = turn.clock()
            blocks = read_text(engine, render_page(pdf, number, dpi=spec.dpi))
            took_s = turn.clock() - page_started
            if took_s > page_timeout_s:
                raise ConversionError(
                    "timeout",
                    f"OCR of page {number} took {took_s:.0f} s, longer than the {page_timeout_s:g} s allowed per "
                    "scanned page; raise KB_OCR_PAGE_TIMEOUT_S or lower KB_OCR_DPI",
                )
            spent += took_s
            seen[number] = blocks
            if turn.store is not None:
                turn.store.add(number, blocks, took_s)
            done += 1
            if progress:
                progress(done, len(pages))
        # a page read as no words (a script not read here) is illegible
        read = {
            n: b
            for n, b in sorted(seen.items())
            if b and is_readable([line for block in b for line in block])
        }
        return engine.name, read, unread
    finally:
        pdf.close()


def render_page(pdf, number: int, *, dpi: int):  # pypdfium2 objects: untyped library
    """Page ``number`` (from 1) as an RGB picture at ``dpi``, or smaller when that exceeds MAX_OCR_PIXELS."""
    page = pdf[number - 1]
    try:
        width_pt, height_pt = page.get_size()
        scale = dpi / 72
        area = max(1.0, width_pt * height_pt)
        scale = min(scale, math.sqrt(MAX_OCR_PIXELS / area))
        bitmap = page.render(scale=scale, may_draw_forms=False)
        try:
            return bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()
    finally:
        page.close()


def _picture_cover(page) -> float:  # a pypdfium2 page
    """The share of the page that its largest picture covers (0 when it has none)."""
    import pypdfium2.raw as pdfium_c

    try:
        width_pt, height_pt = page.get_size()
        best = 0.0
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=1):
            left, bottom, right, top = obj.get_bounds()
            visible = max(0.0, min(right, width_pt) - max(left, 0.0)) * max(
                0.0, min(top, height_pt) - max(bottom, 0.0)
            )
            best = max(best, visible / max(1.0, width_pt * height_pt))
        return best
    finally:
        page.close()


def _layout_text(page: PageObject) -> str:
    """The page's text in layout mode; plain mode when the layout pass fails on an odd font or matrix."""
    try:
        return page.extract_text(extraction_mode="layout")
    except (MemoryError, LimitReachedError):
        raise
    except Exception:
        return page.extract_text()


def clean_text(text: str) -> str:
    """Normalise extracted page text: \\n newlines, no NULs, no trailing spaces, single blank lines."""
    text = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def choose_title(info_title: str | None, texts: list[str], *, tools: tuple[str, ...] = ()) -> str:
    """The document info title when it is plausible, else the first line of text, else "".

    Not plausible: a placeholder or a file name (``_JUNK_TITLE``), or the name of the tool that
    made the PDF (``tools``: its /Creator and /Producer).
    """
    title = " ".join((info_title or "").replace("\x00", "").split())
    names = [" ".join(t.split()).casefold() for t in tools if t and t.strip()]
    tool_words = {w for n in names for w in re.findall(r"[^\W\d_]+", n)}
    words = re.findall(r"[^\W\d_]+", title.casefold())
    is_tool = any(
        title.casefold() == n or (len(title) >= 4 and n.startswith(title.casefold())) for n in names
    )
    is_tool |= 0 < len(words) <= 4 and set(words) <= tool_words  # "LibreOffice Writer", by Writer/LibreOffice
    if title and not is_tool and not _JUNK_TITLE.fullmatch(title):
        return shorten(title, TITLE_MAX_CHARS)
    for text in texts:
        for line in text.split("\n"):
            if line.strip():
                return shorten(line, TITLE_MAX_CHARS)
    return ""


def _open(data: bytes) -> PdfReader:
    """Open the PDF, decrypting it when the user password is empty."""
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise ConversionError(
            "pdf-encrypted",
            "the PDF is protected by a password; remove the password (for example: qpdf --decrypt "
            "--password=… in.pdf out.pdf) and drop the unprotected file in again",
        )
    return reader


def _info_title(reader: PdfReader) -> str | None:
    """The /Title of the document information, or None when absent or unreadable."""
    try:
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except Exception:  # a broken /Info must not cost the text: fall back to the first line
        return None
    return title if isinstance(title, str) else None


def _info_tools(reader: PdfReader) -> tuple[str, ...]:
    """The /Creator and /Producer of the document information (the tools that made it), as far as readable."""
    try:
        metadata = reader.metadata
        found = (metadata.creator, metadata.producer) if metadata is not None else ()
    except Exception:  # a broken /Info costs nothing but this check
        return ()
    return tuple(t for t in found if isinstance(t, str))


@contextmanager
def _pypdf_errors() -> Iterator[None]:
    """Translate whatever pypdf raises on a broken or hostile file into a ConversionError."""
    try:
        yield
    except (ConversionError, MemoryError):
        raise  # ours already; memory exhaustion is the isolating runner's to report
    except LimitReachedError as exc:
        raise ConversionError(
            "pdf-limit",
            f"the PDF exceeds a pypdf safety limit ({_describe(exc)}); it is probably a decompression "
            "bomb or badly damaged and was not converted",
        ) from exc
    except DependencyError as exc:
        # An optional package pypdf needs for this file is missing: 'cryptography' for AES, 'brotli'.
        raise ConversionError(
            "pdf-unsupported",
            f"the PDF needs a package this installation lacks ({_describe(exc)}); install it, or save "
            "a plain (unencrypted) copy of the PDF and drop that in again",
        ) from exc
    # Fuzzed files raise anything from inside pypdf: PdfReadError, KeyError, RecursionError, TypeError…
    except Exception as exc:
        raise ConversionError(
            "pdf-malformed",
            f"not a readable PDF ({_describe(exc)}); the file is damaged, truncated or not a PDF; "
            "re-export or download it again",
        ) from exc


@contextmanager
def _pdfium_errors() -> Iterator[None]:
    """Translate what pypdfium2 raises while rendering scanned pages into a ConversionError."""
    import pypdfium2 as pdfium

    try:
        yield
    except (ConversionError, MemoryError):
        raise
    except pdfium.PdfiumError as exc:
        raise ConversionError(
            "pdf-malformed",
            f"the scanned pages of this PDF cannot be rendered for OCR ({_describe(exc)}); the file is "
            "damaged: re-export or download it again",
        ) from exc


def _describe(exc: BaseException) -> str:
    """``Type: message``, shortened so one bad file cannot flood a reason file."""
    message = one_line(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
