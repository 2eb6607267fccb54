"""Build small PDFs as bytes for the converter tests: well-formed, broken and hostile ones.

Objects are numbered in a fixed layout so a test can point at them:
1 catalog, 2 page tree, 3 Helvetica font, 4 document info, 5 a 1x1 grey image,
then each page at 6 + 2i with its content stream at 7 + 2i.
"""

from __future__ import annotations

import functools
import io
import zlib

from pypdf import PdfReader, PdfWriter

FONT = b"<< /Font << /F1 3 0 R >> >>"
IMAGE = b"<< /XObject << /Im1 5 0 R >> >>"
CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
DRAW_IMAGE = b"q 200 0 0 200 72 500 cm /Im1 Do Q"
GREY_PIXEL = b"/Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8 "


def stream(data: bytes, extra: bytes = b"", *, length: int | None = None) -> bytes:
    """A stream object; ``length`` overrides the declared /Length."""
    declared = len(data) if length is None else length
    return b"<< /Length %d %s>>\nstream\n" % (declared, extra) + data + b"\nendstream"


def pdf_string(text: str) -> bytes:
    """A literal PDF string with the delimiters escaped."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def text_content(lines: list[str]) -> bytes:
    """A content stream that shows each line in Helvetica, one below the other."""
    shown = b" T* ".join(pdf_string(line) + b" Tj" for line in lines)
    return b"BT /F1 12 Tf 14 TL 72 720 Td " + shown + b" ET"


def build(objects: list[bytes], *, info: bool = True, circular_prev: bool = False) -> bytes:
    """Serialise numbered objects with a correct xref table and trailer."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"/Size %d /Root 1 0 R" % (len(objects) + 1)
    if info:
        trailer += b" /Info 4 0 R"
    if circular_prev:
        trailer += b" /Prev %d" % xref_at  # the xref section names itself as its predecessor
    out += b"trailer\n<< " + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def document(
    pages: list[tuple[bytes | None, bytes]],
    *,
    title: str | None = None,
    page_tree: bytes | None = None,
    circular_prev: bool = False,
) -> bytes:
    """A PDF whose pages are (resources or None, content stream object) pairs."""
    kids = b" ".join(b"%d 0 R" % (6 + 2 * i) for i in range(len(pages)))
    tree = page_tree or b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages))
    info = b"<< /Title %s >>" % pdf_string(title) if title is not None else b"<< >>"
    objects = [CATALOG, tree, HELVETICA, info, stream(b"\x80", GREY_PIXEL)]
    for i, (resources, content) in enumerate(pages):
        page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R" % (7 + 2 * i)
        if resources is not None:
            page += b" /Resources " + resources
        objects += [page + b" >>", content]
    return build(objects, circular_prev=circular_prev)


def text_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A PDF with one page per list of lines, in Helvetica."""
    return document([(FONT, stream(text_content(lines))) for lines in pages], title=title)


def one_page(content: bytes, *, resources: bytes | None = FONT, extra: bytes = b"") -> bytes:
    """A one-page PDF with the given raw content stream."""
    return document([(resources, stream(content, extra))])


@functools.cache  # 300 MB takes a second to deflate; several tests share the result
def deflate_zeros(size: int) -> bytes:
    """``size`` zero bytes deflated, built in 1 MiB steps so the test never holds them all."""
    compressor = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    parts = [compressor.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + compressor.flush()


def flate_bomb(size: int, *, rounds: int = 1) -> bytes:
    """A page whose content stream inflates to ``size`` bytes through ``rounds`` FlateDecode filters."""
    data = deflate_zeros(size)
    for _ in range(rounds - 1):
        data = zlib.compress(data, 9)
    filters = b" ".join([b"/FlateDecode"] * rounds)
    return one_page(data, extra=b"/Filter [%s] " % filters)


def encrypted(
    plain: bytes, *, user_password: str, owner_password: str = "owner", algorithm: str = "RC4-128"
) -> bytes:
    """``plain`` re-written with encryption (RC4-128, AES-128 or AES-256)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(plain)))
    writer.encrypt(user_password, owner_password, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def lone_surrogate() -> bytes:
    """A text PDF whose font's ToUnicode map sends the glyph for A to U+D800, a lone surrogate
    (no character; not encodable in UTF-8): it shows "ABBA was here, a fine band from Sweden"."""
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Lone def\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"1 beginbfchar <41> <D800> endbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 8 0 R >>"
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 7 0 R /Resources " + FONT + b" >>"
    content = stream(text_content(["ABBA was here, a fine band from Sweden"]))
    tree = b"<< /Type /Pages /Kids [6 0 R] /Count 1 >>"
    return build([CATALOG, tree, font, b"<< >>", stream(b"\x80", GREY_PIXEL), page, content, stream(cmap)])
