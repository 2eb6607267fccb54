"""Notes kept from the chat: forwarded messages and typed thoughts as Markdown files (pure functions).

A Telegram message is text plus entities (bold, links, code…) whose offsets count UTF-16 code
units. ``to_markdown`` turns that into CommonMark; ``note_file`` makes the whole note::

    ---
    title: "Meeting moved to Friday"
    kind: "forward"
    origin_type: "channel"
    origin_name: "Team News (@teamnews)"
    origin_date: "2024-05-01T10:00:00Z"
    source_url: "https://t.me/teamnews/42"
    ---

    Meeting moved to **Friday**, see [the plan](https://example.com/plan).

    — forwarded from Team News (@teamnews), 2024-05-01 10:00 UTC · <https://t.me/teamnews/42>

Nothing time-dependent but the original date goes into the bytes: the same forward gives the same
file, so the pipeline records a second one as a duplicate. A typed note carries no date at all (the
same thought twice is one note); its time travels in the sidecar. The front matter is for people
reading the file: the pipeline keeps only its title and takes provenance from kb's own sidecar
(``sidecar_fields``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from knowledge.ingest.raw import slugify
from knowledge.text import sentences, shorten

TITLE_CHARS = 80
# Text that could start a Markdown construct wherever it stands / at the start of a line.
# An underscore between letters or digits (@team_news) opens no emphasis in CommonMark: kept as it is
_INLINE = re.compile(r"([\\`*\[\]<>~|]|(?<!\w)_|_(?!\w))|(&(?=#?\w+;))")
_LINE_START = re.compile(r"^([ \t]*)([#>+=-]|\d+[.)])", re.MULTILINE)
_STYLES = {"bold": "**", "italic": "*", "strikethrough": "~~"}


@dataclass(frozen=True)
class Entity:
    """A Telegram message entity: offsets and lengths in UTF-16 code units."""

    type: str
    offset: int
    length: int
    url: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Origin:
    """Where a forwarded message came from: ``kind`` is forward_origin's type."""

    kind: str
    name: str
    date: datetime | None = None
    username: str | None = None  # a public chat's or channel's @name, a user's own
    message_id: int | None = None  # the message in a channel
    sender_id: int | None = None  # the user's, chat's or channel's Telegram id, when Telegram gives it

    @property
    def label(self) -> str:
        """ "Team News (@teamnews)", "Alice", "Bob (hidden account)"."""
        if self.kind == "hidden_user":
            return f"{self.name} (hidden account)"
        return f"{self.name} (@{self.username})" if self.username else self.name

    @property
    def link(self) -> str | None:
        """https://t.me/<username>/<id> for a message of a public channel (or public chat)."""
        if self.kind in ("channel", "chat") and self.username and self.message_id:
            return f"https://t.me/{self.username}/{self.message_id}"
        return None


@dataclass(frozen=True)
class Piece:
    """One message of a note: its text and entities, where it came from (None for the owner's own)."""

    text: str
    entities: tuple[Entity, ...] = ()
    origin: Origin | None = None
    kind: str = "text"  # text | voice (a transcript)
    seconds: int | None = None  # a voice note's length


def forward_key(piece: Piece) -> str:
    """What identifies a forwarded message, so that one kept before is known when forwarded again:
    its chat and message id when Telegram gives them (a channel post); else its sender, its date and
    its text (a person's message, a hidden account's, the owner's own)."""
    o = piece.origin
    if o is not None and o.sender_id is not None and o.message_id is not None:
        return f"{o.kind}:{o.sender_id}:{o.message_id}"
    digest = hashlib.sha256(" ".join(piece.text.split()).encode("utf-8")).hexdigest()[:32]
    if o is None:
        return f"own:{digest}"
    when = o.date.isoformat() if o.date else ""
    return f"{o.kind}:{o.sender_id if o.sender_id is not None else o.name}:{when}:{digest}"


def origin_group(piece: Piece) -> str:
    """Which forwards belong in one note: those from the same sender (a channel, a chat, a person)."""
    o = piece.origin
    if o is None:
        return "own"
    return f"{o.kind}:{o.sender_id if o.sender_id is not None else o.name}"


@dataclass(frozen=True)
class Note:
    """A note ready for the inbox: a file name, its bytes, its title and the sidecar's provenance."""

    name: str
    data: bytes
    title: str
    sidecar: dict[str, str] = field(default_factory=dict)


# -- entities to Markdown -------------------------------------------------------------------


def escape(text: str) -> str:
    """Plain text made literal in CommonMark: inline markup characters and line-start markers escaped."""
    text = _INLINE.sub(lambda m: "\\" + m.group(0), text)
    return _LINE_START.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], text)


def to_markdown(text: str, entities: Sequence[Entity] = ()) -> str:
    """Telegram text with its entities as CommonMark: links, emphasis, code and quotes kept."""
    starts = _utf16_index(text)
    spans = []
    for e in entities:
        begin, end = starts.get(e.offset), starts.get(e.offset + e.length)
        if begin is not None and end is not None and end > begin:
            spans.append((begin, end, e))
    spans.sort(key=lambda s: (s[0], -s[1]))
    return _render(text, 0, len(text), spans)


def _utf16_index(text: str) -> dict[int, int]:
    """UTF-16 offset → index into ``text``, for every character boundary."""
    index, units = {}, 0
    for i, ch in enumerate(text):
        index[units] = i
        units += 2 if ord(ch) > 0xFFFF else 1
    index[units] = len(text)
    return index


def _render(text: str, begin: int, end: int, spans: list[tuple[int, int, Entity]]) -> str:
    """Markdown for text[begin:end] with the spans inside it (sorted; a partly overlapping one is cut)."""
    out, pos, i = [], begin, 0
    while i < len(spans):
        s_begin, s_end, entity = spans[i]
        s_end = min(s_end, end)
        inner = []
        j = i + 1
        while j < len(spans) and spans[j][0] < s_end:
            inner.append(spans[j])
            j += 1
        if s_begin < pos:  # overlaps what is already written: keep the text, drop the markup
            i = j
            continue
        out.append(escape(text[pos:s_begin]))
        out.append(_wrap(text, s_begin, s_end, entity, inner))
        pos, i = s_end, j
    out.append(escape(text[pos:end]))
    return "".join(out)


def _wrap(text: str, begin: int, end: int, entity: Entity, inner: list[tuple[int, int, Entity]]) -> str:
    raw = text[begin:end]
    kind = entity.type
    if kind == "pre":
        fence = "`" * max(3, _longest_run(raw, "`") + 1)
        return f"\n{fence}{entity.language or ''}\n{raw.strip(chr(10))}\n{fence}\n"
    if kind == "code":
        ticks = "`" * (_longest_run(raw, "`") + 1)
        pad = " " if raw.startswith("`") or raw.endswith("`") else ""
        return f"{ticks}{pad}{raw}{pad}{ticks}"
    if kind == "url" and re.match(r"https?://[^\s<>]+$", raw):
        return f"<{raw}>"
    if kind == "email" and re.match(r"[^\s<>@]+@[^\s<>@]+$", raw):
        return f"<{raw}>"
    body = _render(text, begin, end, inner)
    if kind == "text_link" and entity.url:
        label = body.strip() or escape(entity.url)
        return f"{_lead(body)}[{label}]({_destination(entity.url)}){_trail(body)}"
    if kind in _STYLES and body.strip():
        mark = _STYLES[kind]
        return f"{_lead(body)}{mark}{body.strip()}{mark}{_trail(body)}"
    if kind in ("blockquote", "expandable_blockquote"):
        quoted = "\n".join("> " + line if line else ">" for line in body.strip("\n").split("\n"))
        return f"\n{quoted}\n"
    return body  # mentions, hashtags, underline, spoilers…: their text is what matters


def _lead(s: str) -> str:
    return s[: len(s) - len(s.lstrip())]


def _trail(s: str) -> str:
    return s[len(s.rstrip()) :]


def _longest_run(s: str, ch: str) -> int:
    return max((len(m) for m in re.findall(re.escape(ch) + "+", s)), default=0)


def _destination(url: str) -> str:
    """A link destination that CommonMark reads back whole (spaces, brackets)."""
    if re.search(r"[\s()<>]", url):
        return "<" + url.replace("<", "%3C").replace(">", "%3E").replace("\n", "") + ">"
    return url


# -- notes ----------------------------------------------------------------------------------


def title_of(pieces: Sequence[Piece]) -> str:
    """The first line with a letter or a digit, shortened; else what the note is ("Forwarded from Alice")."""
    for piece in pieces:
        for line in piece.text.split("\n"):
            if any(ch.isalnum() for ch in line):
                return shorten(line.strip(), TITLE_CHARS)
    first = pieces[0].origin if pieces else None
    return f"Forwarded from {first.label}" if first is not None else "Note"


@dataclass(frozen=True)
class Footer:
    """How a note's provenance line is worded and the time zone of its date: English and UTC here; a
    front end gives its reader's words and the owner's zone (the same forward still makes the same file)."""

    forwarded: str = "forwarded from {name}"
    voice: str = "voice note"
    seconds: str = "({n} s)"
    dated: str = "{line}, {when}"
    zone: tzinfo = UTC


def zone_name(zone: tzinfo, when: datetime) -> str:
    """``Asia/Taipei`` (a zone's name), else what the zone calls itself then (``UTC``, ``UTC+08:00``)."""
    return getattr(zone, "key", None) or when.astimezone(zone).tzname() or "UTC"


def provenance(piece: Piece, footer: Footer = Footer()) -> str:  # noqa: B008 - frozen, never changed
    """ "— forwarded from Team News (@teamnews), 2024-05-01 10:00 UTC · <https://t.me/teamnews/42>"."""
    origin = piece.origin
    what = [footer.voice] if piece.kind == "voice" else []
    if piece.seconds:
        what.append(footer.seconds.format(n=piece.seconds))
    if origin is None:
        return f"— {sentences(what)}" if what else ""
    line = "— " + sentences([*what, footer.forwarded.format(name=escape(origin.label))])
    if origin.date is not None:
        local = origin.date.astimezone(footer.zone)
        when = f"{local:%Y-%m-%d %H:%M} {zone_name(footer.zone, origin.date)}"
        line = footer.dated.format(line=line, when=when)
    if origin.link:
        line += f" · <{origin.link}>"
    return line


def note_file(pieces: Sequence[Piece], *, kind: str, footer: Footer = Footer()) -> Note:  # noqa: B008
    """The Markdown note for messages forwarded together (``kind`` "forward") or typed (``note``), each
    message's provenance worded by ``footer``."""
    title = title_of(pieces)
    fields = origin_fields(pieces)
    front = {"title": title, "kind": kind, **fields}
    lines = [
        "---",
        *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()),
        "---",
    ]
    blocks = []
    for piece in pieces:
        block = to_markdown(piece.text, piece.entities).strip("\n")
        tail = provenance(piece, footer)
        blocks.append("\n\n".join(part for part in (block, tail) if part))
    body = "\n\n* * *\n\n".join(block for block in blocks if block)
    text = "\n".join(lines) + "\n\n" + body.strip("\n") + "\n"
    prefix = "forward" if kind == "forward" else "note"
    return Note(f"{prefix}-{slugify(title)[:40]}.md", text.encode("utf-8"), title, fields)


def origin_fields(pieces: Sequence[Piece]) -> dict[str, str]:
    """origin_type, origin_name, origin_date (the first message's), source_url (its t.me link)."""
    origins = [p.origin for p in pieces if p.origin is not None]
    if not origins:
        return {}
    fields = {
        "origin_type": ", ".join(dict.fromkeys(o.kind for o in origins)),
        "origin_name": ", ".join(dict.fromkeys(o.label for o in origins)),
    }
    if origins[0].date is not None:
        fields["origin_date"] = iso(origins[0].date)
    if origins[0].link:
        fields["source_url"] = origins[0].link
    return fields


def iso(when: datetime) -> str:
    """2024-05-01T10:00:00Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- links with a comment -------------------------------------------------------------------

_URL = re.compile(r"https?://\S+")


def link_and_comment(text: str) -> tuple[str, str] | None:
    """(url, comment) when a message is one link plus a comment before or after it; None for a bare
    link (imported as before), for text without exactly one link, and for a question (ends with "?")."""
    text = text.strip()
    urls = _URL.findall(text)
    if len(urls) != 1:
        return None
    url = urls[0].rstrip(".,;:!)»”")
    start = text.index(url)
    before, after = text[:start].strip(), text[start + len(url) :].strip()
    if before and after.strip(".,;:!)»” "):
        return None  # a link in the middle of a sentence is something said, not a link shared
    comment = (before or after).strip(" \n-—–:")
    if not comment or comment.endswith("?"):
        return None
    return url, comment


# -- albums ---------------------------------------------------------------------------------


def album_pdf(images: Sequence[bytes], *, title: str, when: datetime | None) -> bytes:
    """Photos as the pages of one PDF, in order; the same photos, title and date give the same bytes."""
    from PIL import Image  # imported here: the bot needs Pillow only for albums

    pages = []
    for data in images:
        with Image.open(io.BytesIO(data)) as image:
            pages.append(image.convert("RGB"))
    stamp = time.gmtime((when or datetime(2000, 1, 1, tzinfo=UTC)).timestamp())
    out = io.BytesIO()
    pages[0].save(
        out, "PDF", save_all=True, append_images=pages[1:], title=title, creationDate=stamp,
        modDate=stamp, resolution=150.0,
    )  # fmt: skip
    return out.getvalue()
