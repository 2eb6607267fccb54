"""Message text as Telegram stores it: parse_mode=HTML after tdlib, entities, trimming and limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.fake_telegram.errors import bad_request

MAX_TEXT_LENGTH = 4096

# parse_mode=HTML, after tdlib's parse_html (td/telegram/MessageEntity.cpp)

SUPPORTED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
        "tg-time",
    }
)
_SIMPLE_ENTITIES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
}
_ENTITY_RE = re.compile(rb"&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,7})|([a-zA-Z]+))(;?)")
_NAMED = {b"lt": "<", b"gt": ">", b"amp": "&", b"quot": '"'}
_SPACE = frozenset(b" \t\r\n\v\f")


class HtmlParseError(ValueError):
    """Telegram's 'can't parse entities' reason, e.g. 'Unsupported start tag "br" at byte offset 3'."""


def utf16_len(s: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's entity offsets."""
    return len(s.encode("utf-16-le")) // 2


def _entity_char(s: bytes, i: int, strict: bool) -> tuple[str | None, int]:
    """The character an HTML entity at s[i] stands for and the index after it, or (None, i)."""
    m = _ENTITY_RE.match(s, i)
    if m is None:
        return None, i
    dec, hx, name, semi = m.groups()
    if strict and not semi:
        return None, i
    if name is not None:
        char = _NAMED.get(name)
        if char is None:
            return None, i
        return char, m.end()
    code = int(dec) if dec is not None else int(hx, 16)
    if code == 0 or code >= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return None, i
    return chr(code), m.end()


def _decode_entity(s: bytes, i: int, strict: bool) -> tuple[str | None, int]:
    """Like ``_entity_char``, but a "&" that starts no entity is refused when ``strict``."""
    char, end = _entity_char(s, i, strict)
    if char is None and strict:
        raise HtmlParseError(f'Unescaped "&" at byte offset {i}; write it as "&amp;"')
    return char, end


@dataclass
class _Open:
    tag: str
    arg: str
    start16: int  # offset in UTF-16 units of the decoded text
    start_byte: int  # offset in bytes of the decoded text
    expandable: bool = False


def parse_html(text: str, *, strict_ampersand: bool = True) -> tuple[str, list[dict]]:
    """The plain text and entities Telegram makes of ``text`` with parse_mode=HTML.

    Raises HtmlParseError with Telegram's reason (byte offsets count UTF-8 bytes of ``text``).
    The text is not trimmed here; see ``format_text``.
    """
    s = text.encode("utf-8")
    n = len(s)
    out = bytearray()
    u16 = 0
    stack: list[_Open] = []
    entities: list[dict] = []
    i = 0

    def add(chunk: str) -> None:
        nonlocal u16
        out.extend(chunk.encode("utf-8"))
        u16 += utf16_len(chunk)

    def is_space(k: int) -> bool:
        return k < n and s[k] in _SPACE

    while i < n:
        c = s[i]
        if c == 0x26:  # &
            char, j = _decode_entity(s, i, strict_ampersand)
            if char is not None:
                add(char)
                i = j
                continue
        if c != 0x3C:  # not <
            out.append(c)
            if c & 0xC0 != 0x80:  # a UTF-8 lead byte starts a character
                u16 += 2 if c >= 0xF0 else 1
            i += 1
            continue

        begin = i
        i += 1
        if i >= n or s[i] != 0x2F:  # an opening tag
            name_begin = i
            while i < n and s[i] not in _SPACE and s[i] != 0x3E:
                i += 1
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
            tag = s[name_begin:i].decode("utf-8", "replace").lower()
            if tag not in SUPPORTED_TAGS:
                raise HtmlParseError(f'Unsupported start tag "{tag}" at byte offset {begin}')
            arg = ""
            expandable = False
            while i < n and s[i] != 0x3E:
                while is_space(i):
                    i += 1
                if i < n and s[i] == 0x3E:
                    break
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                attr_begin = i
                while i < n and s[i] not in _SPACE and s[i] not in b"=>":
                    i += 1
                attr = s[attr_begin:i].decode("utf-8", "replace").lower()
                if not attr:
                    raise HtmlParseError(f'Empty attribute name in the tag "{tag}" at byte offset {begin}')
                while is_space(i):
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if s[i] != 0x3D:  # no "=": only <blockquote expandable> may do that
                    if tag == "blockquote" and attr == "expandable":
                        expandable = True
                        continue
                    raise HtmlParseError(
                        f'Expected equal sign in declaration of an attribute of the tag "{tag}" '
                        f"at byte offset {begin}"
                    )
                i += 1
                while is_space(i):
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if s[i] not in b"\"'":  # a name token: letters, digits, '.' and '-'
                    token_begin = i
                    while i < n and (chr(s[i]).isalnum() and s[i] < 0x80 or s[i] in b".-"):
                        i += 1
                    value = s[token_begin:i].decode("ascii").lower()
                    if i >= n:
                        raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                    if s[i] not in _SPACE and s[i] != 0x3E:
                        raise HtmlParseError(f"Unexpected end of name token at byte offset {token_begin}")
                else:
                    quote = s[i]
                    i += 1
                    raw = bytearray()
                    while i < n and s[i] != quote:
                        if s[i] == 0x26:
                            char, j = _decode_entity(s, i, strict_ampersand)
                            if char is not None:
                                raw.extend(char.encode("utf-8"))
                                i = j
                                continue
                        raw.append(s[i])
                        i += 1
                    if i < n:
                        i += 1  # the closing quote
                    value = raw.decode("utf-8", "replace")
                    if i >= n:
                        raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if tag == "a" and attr == "href":
                    arg = value
                elif tag == "code" and attr == "class" and value.startswith("language-"):
                    arg = value[len("language-") :]
                elif tag == "span" and attr == "class" and value.startswith("tg-"):
                    arg = value[len("tg-") :]
                elif (tag, attr) in (("tg-emoji", "emoji-id"), ("tg-time", "unix")):
                    arg = value
            i += 1  # the ">"
            if tag == "span" and arg != "spoiler":
                raise HtmlParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {begin}')
            stack.append(_Open(tag, arg, u16, len(out), expandable))
            continue

        # a closing tag
        if not stack:
            raise HtmlParseError(f"Unexpected end tag at byte offset {begin}")
        i += 1  # the "/"
        name_begin = i
        while i < n and s[i] not in _SPACE and s[i] != 0x3E:
            i += 1
        end_name = s[name_begin:i].decode("utf-8", "replace").lower()
        while is_space(i):
            i += 1
        if i >= n or s[i] != 0x3E:
            raise HtmlParseError(f"Unclosed end tag at byte offset {begin}")
        i += 1
        top = stack[-1]
        if end_name and end_name != top.tag:
            raise HtmlParseError(
                f'Unmatched end tag at byte offset {begin}, expected "</{top.tag}>", found "</{end_name}>"'
            )
        stack.pop()
        if u16 <= top.start16:
            continue  # empty entities are dropped
        offset, length = top.start16, u16 - top.start16
        kind = _SIMPLE_ENTITIES.get(top.tag)
        if top.tag == "span":
            kind = "spoiler"
        if kind is not None:
            entities.append({"type": kind, "offset": offset, "length": length})
        elif top.tag == "a":
            url = top.arg or out[top.start_byte :].decode("utf-8", "replace")
            entities.append({"type": "text_link", "offset": offset, "length": length, "url": url})
        elif top.tag == "code":
            entity = {"type": "code", "offset": offset, "length": length}
            if top.arg:
                entity["_language"] = top.arg
            entities.append(entity)
        elif top.tag == "pre":
            last = entities[-1] if entities else None
            if last and last["type"] == "code" and last["offset"] == offset and last["length"] == length:
                entities[-1] = {"type": "pre", "offset": offset, "length": length}
                if last.get("_language"):
                    entities[-1]["language"] = last["_language"]
            else:
                entities.append({"type": "pre", "offset": offset, "length": length})
        elif top.tag == "blockquote":
            kind = "expandable_blockquote" if top.expandable else "blockquote"
            entities.append({"type": kind, "offset": offset, "length": length})
        elif top.tag == "tg-emoji":
            if not top.arg.isdigit():
                raise HtmlParseError("Invalid custom emoji identifier specified")
            entities.append(
                {"type": "custom_emoji", "offset": offset, "length": length, "custom_emoji_id": top.arg}
            )
        # tg-time: accepted, no entity (the date_time entity's fields are not verified here)
    if stack:
        raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    for entity in entities:
        entity.pop("_language", None)
    return out.decode("utf-8", "replace"), entities


def clip_entities(entities: list[dict], start16: int, end16: int) -> list[dict]:
    """The parts of ``entities`` inside [start16, end16) in UTF-16 units, offsets from ``start16``."""
    out = []
    for e in entities:
        start = max(e["offset"], start16)
        stop = min(e["offset"] + e["length"], end16)
        if stop > start:
            out.append({**e, "offset": start - start16, "length": stop - start})
    return out


def trim_text(text: str, entities: list[dict]) -> tuple[str, list[dict]]:
    """Telegram strips surrounding whitespace from message text; entities follow the cut."""
    stripped = text.strip()
    if stripped == text:
        return text, entities
    lead16 = utf16_len(text[: len(text) - len(text.lstrip())])
    return stripped, clip_entities(entities, lead16, lead16 + utf16_len(stripped))


def format_text(
    text: str,
    parse_mode: str | None,
    entities: list | None,
    *,
    strict_ampersand: bool = True,
    allow_empty: bool = False,
    length_in_utf16: bool = True,
):
    """(plain text, entities) as Telegram stores them, or ApiError as Telegram answers.

    ``allow_empty`` lets the text be empty after parsing and trimming (sendMessageDraft's
    "Thinking..." placeholder). ``length_in_utf16``: the 4,096 limit counts UTF-16 code units (an
    emoji counts two), else code points."""
    if parse_mode:
        mode = parse_mode.lower()
        if mode == "html":
            try:
                plain, found = parse_html(text, strict_ampersand=strict_ampersand)
            except HtmlParseError as exc:
                raise bad_request(f"can't parse entities: {exc}") from None
        elif mode in ("markdown", "markdownv2"):
            plain, found = text, []  # not parsed by the stand-in
        else:
            raise bad_request("unsupported parse_mode")
    else:
        plain, found = text, list(entities or [])
    plain, found = trim_text(plain, found)
    found.sort(key=lambda e: (e["offset"], -e["length"]))
    if not plain and not allow_empty:
        raise bad_request("message text is empty")
    if (utf16_len(plain) if length_in_utf16 else len(plain)) > MAX_TEXT_LENGTH:
        raise bad_request("message is too long")
    return plain, found
