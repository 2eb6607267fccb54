"""Bytes to text: BOM, declared charset, <meta>, UTF-8, then detection, with labels widened to supersets.

The order follows the WHATWG encoding sniffing algorithm (BOM > transport charset > <meta> > default),
with UTF-8 and a detector in place of the browser's locale default, because inbox files carry no locale.
Declared labels are widened to the codec browsers really use (w3lib's DEFAULT_ENCODING_TRANSLATION):
decoding with the literal label in Python fails on ``镕`` (gb2312), ``𡃁`` (big5) and ``①`` (shift_jis),
or silently turns ``€`` and smart quotes into C1 controls (tis-620, iso-8859-1).
One step is moved forward: NUL-laden bytes are settled (UTF-16 without a BOM, or binary) right after
the BOM, because NULs "decode" in UTF-8 and every single-byte charset a label could name.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from itertools import islice

from charset_normalizer import from_bytes

from knowledge.errors import ConversionError

# WHATWG prescans 1,024 bytes for <meta>; w3lib (Scrapy) scans 4,096. We take the wider window so a
# charset after a long comment block or a big <head> is still honoured; it costs nothing.
META_WINDOW_BYTES = 4096

# Labels Python's codec registry does not know, mapped to the codec WHATWG decodes them with.
_ALIASES = {
    "x-sjis": "cp932",
    "windows-31j": "cp932",
    "ms932": "cp932",
    "x-gbk": "gb18030",
    "gb-2312": "gb18030",
    "gb-2312-80": "gb18030",
    "csgb2312": "gb18030",
    "csiso58gb231280": "gb18030",
    "iso-ir-58": "gb18030",
    "chinese": "gb18030",
    "x-x-big5": "big5hkscs",
    "cn-big5": "big5hkscs",
    "csbig5": "big5hkscs",
    "windows-874": "cp874",
    "dos-874": "cp874",
    "tis620": "cp874",
    "cseuckr": "cp949",
    "csksc56011987": "cp949",
    "windows-949": "cp949",
    "ks-c-5601-1989": "cp949",
    "ksc5601": "cp949",
    "ksc-5601": "cp949",
    "iso-ir-149": "cp949",
    "x-cp1252": "cp1252",
    "x-user-defined": "cp1252",
    "x-mac-roman": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic",
    "x-euc-jp": "euc_jp",
    "koi8-ru": "koi8_u",
    "iso-8859-8-i": "iso8859_8",
    "csiso88598i": "iso8859_8",
    "logical": "iso8859_8",
    "unicode-1-1-utf-8": "utf-8",
    "unicode11utf8": "utf-8",
    "unicode20utf8": "utf-8",
    "x-unicode20utf8": "utf-8",
    "ucs-2": "utf-16",
    "csunicode": "utf-16",
    "iso-10646-ucs-2": "utf-16",
    "unicodefeff": "utf-16",
}

# Python codec name -> the superset codec that decodes what pages labelled so really contain.
_WIDER = {
    "ascii": "cp1252",
    "latin_1": "cp1252",
    "iso8859_1": "cp1252",
    "iso8859_9": "cp1254",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "tis_620": "cp874",
    "iso8859_11": "cp874",
    "euc_kr": "cp949",
    "utf_16": "utf-16-le",  # WHATWG: the bare label means little-endian, whatever the platform
    "utf_32": "utf-32-le",
}

# UTF-7 is refused by WHATWG (a classic filter bypass); the escape codecs are not charsets at all.
_REFUSED = {"utf_7", "unicode_escape", "raw_unicode_escape", "idna", "punycode", "undefined"}

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_MAGIC = (
    (b"PK\x03\x04", "ZIP archive header"),
    (b"\x89PNG\r\n\x1a\n", "PNG image header"),
    (b"\x7fELF", "ELF executable header"),
    (b"\x1f\x8b", "gzip header"),
    (b"%PDF-", "PDF header"),
    (b"GIF87a", "GIF image header"),
    (b"GIF89a", "GIF image header"),
    (b"\xff\xd8\xff", "JPEG image header"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive header"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE (old Office) header"),
    (b"SQLite format 3\x00", "SQLite database header"),
)

_COMMENT = re.compile(rb"<!--.*?(?:-->|$)", re.S)
_META = re.compile(rb"<meta\s[^<>]*?charset\s*=\s*[\"']?\s*([a-z0-9_.:()-]+)", re.I)
_CHARSET_PARAM = re.compile(r"charset\s*=\s*[\"']?\s*([a-z0-9_.:()-]+)", re.I)
_ISO8859 = re.compile(r"iso-?8859-?(\d+)$")
_C1 = re.compile("[\x80-\x9f]")
_NULS = re.compile("\x00+")
# Text has almost no C0 controls besides whitespace and ESC; binary formats are full of them.
_TEXT_BYTES = bytes([9, 10, 11, 12, 13, 27, *range(32, 256)])
# Random bytes hold about 10 % such controls (26 of 256 values); text holds next to none.
_BINARY_CONTROL_SHARE = 0.03
# Characters no text is made of: controls, C1 controls, replacement characters kb's decoding added,
# private-use and unassigned code points. Random bytes decoded by any charset are far above this.
_BINARY_NUL_SHARE = 0.10
_IMPLAUSIBLE_SHARE = 0.02
_IMPLAUSIBLE = re.compile("[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f\ufffd\ue000-\uf8ff\U000f0000-\U0010ffff]")
_UTF16_NUL_SHARE = 0.30
# Characters Western European text (what cp1252 is for) is made of, beyond ASCII.
# Without ð Ý ý Þ þ Ð: they are Turkish ğ İ ı Ş ş Ğ (cp1254) or Lithuanian š ž (cp1257) read as cp1252.
_WESTERN = re.compile(
    "[\u00c0-\u00cf\u00d1-\u00d6\u00d8-\u00dc\u00df-\u00ef\u00f1-\u00f6\u00f8-\u00fc\u00ff"
    "\u0152\u0153\u00a0\u00a3\u00a7\u00a9\u00ab"
    "\u00ae\u00b0\u00b7\u00bb\u00bf\u00a1\u2013\u2014\u2018\u2019\u201a\u201c\u201d"
    "\u201e\u2020\u2022\u2026\u20ac\u2122]"
)
_NON_ASCII = re.compile("[^\x00-\x7f]")
_NON_LATIN_LETTER = re.compile(r"(?![a-zA-Z\u00c0-\u024f\u1e00-\u1eff])[^\W\d_]")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def widen_label(label: str) -> str | None:
    """Map a declared charset label to the Python codec of the superset browsers decode it with."""
    name = label.strip().strip("\"'").strip().lower().replace("_", "-")
    name = _ALIASES.get(name, name)
    if match := _ISO8859.match(name):
        name = f"iso8859_{match.group(1)}"
    try:
        codec = codecs.lookup(name).name.replace("-", "_")
        b"a".decode(codec, "replace")  # LookupError for bytes-to-bytes codecs such as rot13 or zlib
    except (LookupError, ValueError):
        return None
    if codec in _REFUSED:
        return None
    return codecs.lookup(_WIDER.get(codec, codec)).name


def decode_bytes(data: bytes, *, declared: str | None = None, is_html: bool = False) -> tuple[str, str]:
    """Decode a document's bytes to text (NUL runs become spaces) and name the codec used."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _clean(data[len(bom) :].decode(codec, "replace")), codec
    _refuse_magic(data)
    # NUL-laden bytes "decode" as UTF-8 or any single-byte charset, so settle UTF-16 or binary first.
    if b"\x00" in data and (utf16 := _utf16_without_bom(data)) is not None:
        return utf16
    # Every ASCII-compatible charset decodes a control byte to a control character (no lead byte
    # takes one as its trail), so this measures the decoded text before the costly detection.
    _refuse_control_heavy(data)
    text, codec = _decode(data, declared, is_html=is_html)
    _refuse_implausible(text, data)
    return _clean(text), codec


def _decode(data: bytes, declared: str | None, *, is_html: bool) -> tuple[str, str]:
    """Declared charsets, UTF-8, mostly UTF-8, detection, then cp1252 with replacements."""
    for codec in _declared_codecs(data, declared, is_html=is_html):
        text = _strict(data, codec)
        if text is not None and not _C1.search(text):
            return text, codec
    if (text := _strict(data, "utf-8")) is not None:
        return text, "utf-8"
    if (text := _mostly_utf8(data)) is not None:
        return text, "utf-8"
    if (detected := _detect(data)) is not None:
        return detected
    return data.decode("cp1252", "replace"), "cp1252"


def _declared_codecs(data: bytes, declared: str | None, *, is_html: bool) -> list[str]:
    """The transport charset, then the <meta> one: each widened, unknown labels skipped."""
    codecs_: list[str] = []
    if declared:
        label = match.group(1) if (match := _CHARSET_PARAM.search(declared)) else declared
        if (codec := widen_label(label)) is not None:
            codecs_.append(codec)
    if is_html and (label_bytes := _meta_charset(data)) is not None:
        codec = widen_label(label_bytes)
        if codec is not None:
            # WHATWG: a <meta> cannot declare UTF-16/32, since the bytes that spell it are ASCII.
            codecs_.append("utf-8" if codec.startswith(("utf-16", "utf-32")) else codec)
    return codecs_


def _meta_charset(data: bytes) -> str | None:
    """The charset of the first <meta charset> or http-equiv Content-Type outside comments."""
    window = _COMMENT.sub(b"", data[:META_WINDOW_BYTES])
    match = _META.search(window)
    return match.group(1).decode("ascii") if match else None


def _strict(data: bytes, codec: str) -> str | None:
    """The text if ``data`` is valid in ``codec``, else None."""
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        return None


def _mostly_utf8(data: bytes) -> str | None:
    """UTF-8 with U+FFFD for a few stray bytes, if the rest is evidently UTF-8."""
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    # One stray byte in a normal file must not send a UTF-8 file to the detector (it says cp1250),
    # but a cp1252 file is also "UTF-8 with a few bad bytes": require real multi-byte sequences too.
    if bad > max(1, len(data) // 1000):
        return None
    good = sum(1 for ch in islice(_NON_ASCII.finditer(text), 2 * bad) if ch.group() != "\ufffd")
    return text if good >= bad else None


def _detect(data: bytes) -> tuple[str, str] | None:
    """charset-normalizer's first candidate that decodes cleanly, preferring cp1252 for Western text."""
    # The default threshold rejects Chinese mixed with many Latin words (xquad has such paragraphs);
    # a second, lenient pass still only accepts candidates that decode strictly without C1 controls.
    for threshold in (0.2, 1.0):
        # preemptive_behaviour=False: labels inside the bytes were already tried, widened, above.
        for match in from_bytes(data, threshold=threshold, preemptive_behaviour=False):
            codec = widen_label(match.encoding)
            text = _strict(data, codec) if codec else None
            if codec is None or text is None or _C1.search(text):
                continue
            if _is_latin(text) and (western := _as_western(data)) is not None:
                return western, "cp1252"
            return text, codec
    return None


def _is_latin(text: str) -> bool:
    """True when every non-ASCII letter is a Latin letter (a cp125x-family guess)."""
    return _NON_LATIN_LETTER.search(text) is None


def _as_western(data: bytes) -> str | None:
    """The cp1252 reading, if it looks like Western European text.

    charset-normalizer 3.5.3 calls French, Spanish or English cp1252 paragraphs cp1257 or cp1250,
    turning à into ą. cp1252 is also the WHATWG default. Polish or Czech read as cp1252 show ³ ¹ š ž,
    which are not in the Western set, so those keep the detector's answer.
    """
    text = _strict(data, "cp1252")
    if text is None:
        return None
    western = len(_WESTERN.findall(text))
    return text if western >= 0.95 * len(_NON_ASCII.findall(text)) else None


def _utf16_without_bom(data: bytes) -> tuple[str, str] | None:
    """UTF-16 text without a BOM: NULs fill one byte of every ASCII character (LE: odd, BE: even)."""
    even, odd = data[0::2], data[1::2]
    if odd and odd.count(0) > _UTF16_NUL_SHARE * len(odd):
        codec = "utf-16-le"
    elif even and even.count(0) > _UTF16_NUL_SHARE * len(even):
        codec = "utf-16-be"
    else:
        return None
    text = _strict(data[: len(data) // 2 * 2], codec)
    if text is None:
        return None
    if len(_CONTROL.findall(text)) > _BINARY_CONTROL_SHARE * max(1, len(text)):
        return None  # 16-bit binary records, not text
    return _clean(text), codec


def _refuse_magic(data: bytes) -> None:
    """Raise for the file signatures of common binary formats."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            raise ConversionError("binary", f"the content looks like binary data ({what}), not text")


def _refuse_control_heavy(data: bytes) -> None:
    """Raise when the first 64 KiB hold many control bytes, or are full of NULs and controls.

    NULs alone are held to the looser share: a stray NUL separating two fields is still text.
    """
    sample = data[:65536]
    controls = len(sample.translate(None, _TEXT_BYTES))
    nuls = sample.count(0)
    if controls - nuls > _BINARY_CONTROL_SHARE * len(sample) or controls > _BINARY_NUL_SHARE * len(sample):
        share = round(100 * controls / len(sample))
        raise ConversionError(
            "binary", f"the content looks like binary data ({share} % NUL and control bytes), not text"
        )


def _refuse_implausible(text: str, data: bytes) -> None:
    """Raise when the decoded text is not made of characters text is made of (a measure of the result)."""
    sample = text[:65536]
    if not sample:
        return
    noise = len(_IMPLAUSIBLE.findall(sample)) - sample.count("\ufffd", 0) + _added_replacements(sample, data)
    noise += sum(1 for ch in _NON_ASCII.findall(sample[:16384]) if unicodedata.category(ch) == "Cn")
    if noise > _IMPLAUSIBLE_SHARE * len(sample):
        share = max(1, round(100 * noise / len(sample)))
        raise ConversionError(
            "binary",
            f"the content looks like binary data ({share} % of the decoded characters are controls, "
            "unassigned or undecodable), not text",
        )


def _added_replacements(sample: str, data: bytes) -> int:
    """U+FFFD characters the decoding added (those spelled out in the file itself are text)."""
    return max(0, sample.count("\ufffd") - data.count(b"\xef\xbf\xbd"))


def _clean(text: str) -> str:
    """Replace NUL runs with a space: SQLite functions see text as C strings, so a NUL truncates snippets.

    A space rather than nothing, because a NUL usually separates fields: ``alpha\\0beta`` must still
    let a search for ``beta`` find it.
    """
    return _NULS.sub(" ", text)
