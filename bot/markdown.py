"""Model-written Markdown as Telegram HTML: the few tags parse_mode=HTML accepts, in whole blocks.

The local model answers in Markdown (bold points, lists, inline code, fences, links, now and then
headings and tables). markdown-it-py parses it (CommonMark with tables and strikethrough, raw HTML
off, so ``<script>`` is text) and the token stream is walked into Telegram's subset: ``<b> <i> <s>
<code> <pre> <a href> <blockquote>``; every other ``<``, ``>`` and ``&`` is escaped. Each block
closes every tag it opens, so bot/pages.py's ``split_blocks`` may cut a long answer between any two.

Choices, and why:

* A whole list is one block, its items joined by single newlines (``split_blocks`` joins blocks
  with blank lines, which would double-space the items). A list longer than ``BLOCK_UNITS`` visible
  UTF-16 code units (as bot.pages counts) becomes several blocks, cut between top-level items; long
  code blocks (between lines), quotes and tables are cut the same way, each piece in its own tags.
* Reference definitions are not parsed at all: the model's ``[1]: http://…`` line stays visible as
  it was written, and its citations ``[1]``, ``[2][3]`` stay literal text instead of becoming links
  to whatever the line defined.
* Every link reaches the renderer (markdown-it's own URL filter is replaced by ``_safe_href``):
  only http and https links become ``<a>``; any other (tg: — a proxy, another bot —, mailto:,
  javascript:, data:, relative…) shows its label as text rather than the raw ``[label](…)``. A
  label that is not the link's own address is followed by the host it really opens, "Harbor rules
  (harbor.example)", and a label that looks like another address by the real address (host and
  path), so a look-alike cannot hide behind a familiar one; hosts are shown in ASCII (punycode).
* Telegram refuses or drops some nestings, so none is written: code is never inside ``<b>``/``<i>``/
  ``<s>`` (those are closed around it and reopened), nothing is linked inside a link, code inside a
  link is plain text, and a quote inside a quote is shown as text of the outer quote.
* Containers nested past ``MAX_NESTING`` (markdown-it's recursion guard, which drops their content)
  are shown as their source lines, escaped; input whose markup leaves nothing visible is shown as
  written. Text is never lost to markup.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.pages import units

MAX_NESTING = 20  # markdown-it's limit on nested containers; bounds the recursion below too
BLOCK_UNITS = 3500  # visible UTF-16 code units in one block of a list, quote, code or table
TABLE_PRE_WIDTH = 40  # widest aligned table in <pre>; about what a phone shows in monospace
LINK_SCHEMES = frozenset({"http", "https"})
NOTE_CHARS = 60  # the real address shown after a link whose label looks like another one
IMAGE_SCHEMES = frozenset({"http", "https"})
BULLETS = ("•", "◦", "▪")
RULE = "———"

_TAG = re.compile(r"<[^<>]+>")  # our own output: text between tags has no "<" (escaped)
_LANGUAGE = re.compile(r"[A-Za-z0-9+#_-]{1,40}")  # an info string we pass on as class="language-…"
_EMPHASIS = {"strong_open": "<b>", "em_open": "<i>", "s_open": "<s>"}
_EMPHASIS_CLOSE = frozenset({"strong_close", "em_close", "s_close"})
_LISTS = frozenset({"bullet_list_open", "ordered_list_open"})
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_ADDRESS = re.compile(r"(?:[a-z][a-z0-9+.-]*://)?[^\s/]+\.[^\s/.]+(?:/\S*)?", re.IGNORECASE)  # x.org/…


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "maxNesting": MAX_NESTING})
    md.enable(["table", "strikethrough"])
    md.disable("reference")  # see the module docstring: citations stay text
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # _safe_href decides instead
    return md


_MD = _parser()  # configuration only: parse() keeps its state per call


def _esc(text: str) -> str:
    """Text safe inside Telegram HTML."""
    return html.escape(text, quote=False)


def markdown_blocks(text: str) -> list[str]:
    """Model-written Markdown as Telegram HTML blocks (paragraphs, list items, code blocks…), each whole:
    every tag a block opens it also closes, so a message may be cut between any two blocks."""
    if not text or not text.strip():
        return []
    # markdown-it's own normalisation, done first so token line numbers index these lines;
    # a lone surrogate could not be encoded for sending
    source = text.encode("utf-8", "replace").decode("utf-8")
    source = source.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")
    lines = source.split("\n")
    blocks = [b for node in _tree(_MD.parse(source)) for b in _blocks(node, lines, in_quote=False)]
    blocks = [b for b in blocks if _visible(b).strip()]
    if not blocks and any(ch.isalnum() for ch in source):
        return [_esc(source.strip())]  # all markup and nothing shown (an empty fence "```abc"…): as written
    return blocks


# --------------------------------------------------------------------------------------------
# Blocks


@dataclass
class _Node:
    token: Token
    children: list[_Node] = field(default_factory=list)


def _tree(tokens: Sequence[Token]) -> list[_Node]:
    """Block tokens as a tree (built without recursion); inline tokens stay flat in ``children``."""
    root = _Node(Token("root", "", 0))
    stack = [root]
    for tok in tokens:
        if tok.nesting < 0:
            if len(stack) > 1:
                stack.pop()
            continue
        node = _Node(tok)
        stack[-1].children.append(node)
        if tok.nesting > 0:
            stack.append(node)
    return root.children


def _blocks(node: _Node, lines: list[str], *, in_quote: bool) -> list[str]:
    """The whole blocks one block node renders to."""
    tok = node.token
    kind = tok.type
    if kind == "paragraph_open":
        return [_inline_of(node)]
    if kind == "heading_open":
        return [_inline_of(node, outer=("<b>",))]
    if kind in ("fence", "code_block"):
        return _code_blocks(tok)
    if kind == "hr":
        return [RULE]
    if kind == "table_open":
        return _table_blocks(node)
    if kind in _LISTS:
        return _pack(_list_items(node, 0, lines, in_quote=in_quote), "\n")
    if kind == "blockquote_open":
        if _is_cut(node):
            inner = [_source(node, lines)]
        else:
            inner = [b for child in node.children for b in _blocks(child, lines, in_quote=True)]
        if in_quote:
            return inner  # Telegram's quotes do not nest
        return _pack(inner, "\n\n", "<blockquote>", "</blockquote>")
    if kind == "inline":
        return [_inline(tok.children or [])]
    if node.children:
        return [b for child in node.children for b in _blocks(child, lines, in_quote=in_quote)]
    return [_esc(tok.content)] if tok.content else []


def _is_cut(node: _Node) -> bool:
    """Whether markdown-it stopped nesting here (MAX_NESTING) and dropped the container's content."""
    return node.token.level + 1 >= MAX_NESTING


def _source(node: _Node, lines: list[str]) -> str:
    """A container's source lines as escaped text."""
    start, end = node.token.map or (0, 0)
    return _esc("\n".join(lines[start:end]).strip())


def _list_items(node: _Node, level: int, lines: list[str], *, in_quote: bool) -> list[str]:
    """One piece per item: marker, text, continuation lines and nested lists, indented 2 spaces a level."""
    ordered = node.token.type == "ordered_list_open"
    number = _start(node.token)
    indent = "  " * level
    items = []
    for item in node.children:
        if ordered:
            marker = f"{number}."
            number += 1
        else:
            marker = BULLETS[min(level, len(BULLETS) - 1)]
        parts = _item_parts(item, level, lines, in_quote=in_quote)
        if parts:
            items.append("\n".join([f"{indent}{marker} {parts[0].lstrip(' ')}", *parts[1:]]))
        else:
            items.append(f"{indent}{marker}")
    return items


def _item_parts(item: _Node, level: int, lines: list[str], *, in_quote: bool) -> list[str]:
    """The pieces of one list item, each starting on a line of its own."""
    if _is_cut(item):
        return [_source(item, lines)]
    cont = "  " * (level + 1)
    parts: list[str] = []
    for child in item.children:
        kind = child.token.type
        if kind in _LISTS:
            parts += _list_items(child, level + 1, lines, in_quote=in_quote)
        elif kind == "paragraph_open":
            parts.append(cont + _inline_of(child, newline="\n" + cont))
        else:  # code, quote, heading, table, rule: as blocks of their own
            parts += _blocks(child, lines, in_quote=in_quote)
    return [p for p in parts if _visible(p).strip()]


def _start(token: Token) -> int:
    """An ordered list's first number (markdown-it sets "start" only when it is not 1)."""
    try:
        return int(token.attrGet("start") or 1)
    except (TypeError, ValueError):
        return 1


def _code_blocks(token: Token) -> list[str]:
    """A fenced or indented code block as <pre> (with its language when the info string is one word)."""
    code = token.content.rstrip("\n")
    if not code.strip():
        return []
    words = token.info.split()
    lang = words[0] if words else ""
    if _LANGUAGE.fullmatch(lang):
        head, tail = f'<pre><code class="language-{html.escape(lang, quote=True)}">', "</code></pre>"
    else:
        head, tail = "<pre>", "</pre>"
    return _pack([_esc(line) for line in code.split("\n")], "\n", head, tail)


def _table_blocks(node: _Node) -> list[str]:
    """A table: aligned columns in <pre> when it fits a phone's width, else one "a | b | c" line a row.

    A narrow grid is the easiest to scan, but a grid wider than the bubble wraps every row mid-cell
    and reads as noise; rows as lines wrap gracefully and keep their bold, code and links.
    """
    rows: list[tuple[bool, list[tuple[str, list[Token]]]]] = []  # (is head, [(align, inline tokens)])
    for section in node.children:  # thead/tbody → tr → th/td → inline
        for row in section.children:
            cells = []
            for cell in row.children:
                align = str(cell.token.attrGet("style") or "").removeprefix("text-align:")
                inline = cell.children[0].token.children if cell.children else None
                cells.append((align, list(inline or [])))
            rows.append((section.token.type == "thead_open", cells))
    if not rows:
        return []
    columns = max(len(cells) for _, cells in rows)
    plain = [[_plain(tokens) for _, tokens in cells] + [""] * (columns - len(cells)) for _, cells in rows]
    widths = [max(1, *(_width(row[c]) for row in plain)) for c in range(columns)]
    if sum(widths) + 3 * (columns - 1) > TABLE_PRE_WIDTH:
        lines = [
            " | ".join(_inline(tokens, outer=("<b>",) if head else ()) for _, tokens in cells)
            for head, cells in rows
        ]
        return _pack(lines, "\n")
    first = rows[0][1]
    aligns = [first[c][0] if c < len(first) else "" for c in range(columns)]
    out = []
    for (head, _), row in zip(rows, plain, strict=True):
        out.append(_esc(" | ".join(_pad(row[c], widths[c], aligns[c]) for c in range(columns)).rstrip()))
        if head:
            out.append("-+-".join("-" * w for w in widths))
    return _pack(out, "\n", "<pre>", "</pre>")


def _pad(text: str, width: int, align: str) -> str:
    """``text`` padded to ``width`` display columns, as the column is aligned."""
    room = width - _width(text)
    if align == "right":
        return " " * room + text
    if align == "center":
        return " " * (room // 2) + text + " " * (room - room // 2)
    return text + " " * room


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: wide CJK counts two, combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pack(pieces: Sequence[str], sep: str, head: str = "", tail: str = "") -> list[str]:
    """Pieces joined by ``sep`` into blocks of at most BLOCK_UNITS visible units, each in head…tail."""
    blocks: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        n = units(_visible(piece))
        if current and size + len(sep) + n > BLOCK_UNITS:
            blocks.append(head + sep.join(current) + tail)
            current, size = [], 0
        size += n + (len(sep) if current else 0)
        current.append(piece)
    if current:
        blocks.append(head + sep.join(current) + tail)
    return blocks


def _visible(fragment: str) -> str:
    """The text Telegram shows for a fragment of our own HTML (whose text has only these three entities)."""
    return _TAG.sub("", fragment).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# --------------------------------------------------------------------------------------------
# Inline


def _inline_of(node: _Node, *, newline: str = "\n", outer: tuple[str, ...] = ()) -> str:
    """The inline content of a paragraph or heading node."""
    tokens = [
        t for child in node.children if child.token.type == "inline" for t in child.token.children or []
    ]
    return _inline(tokens, newline=newline, outer=outer)


def _inline(tokens: Sequence[Token], *, newline: str = "\n", outer: tuple[str, ...] = ()) -> str:
    """Inline tokens as HTML; tags are opened lazily before text, so none is empty or badly nested.

    ``want`` is the stack of tags the next text must be inside, ``shown`` the stack written so far;
    before each text the two are brought level by closing and opening the difference. A kind of
    emphasis already wanted is not wanted twice (Telegram merges nested same-type entities anyway).
    The walk is flat, so a thousand nested ``*`` cannot exhaust the stack.
    """
    out: list[str] = []
    want: list[str] = list(outer)
    shown: list[str] = []
    # per open token: the tag it added, the visible count and the number of texts before it, its href
    opened: list[tuple[str | None, int, int, str]] = []
    texts: list[str] = []  # the visible text so far, in pieces (a link's label is what follows its open)
    visible = 0

    def sync() -> None:
        k = 0
        while k < len(shown) and k < len(want) and shown[k] == want[k]:
            k += 1
        out.extend(_close(tag) for tag in reversed(shown[k:]))
        out.extend(want[k:])
        shown[:] = want

    def put(chunk: str, *, escape: bool = True) -> None:
        nonlocal visible
        if chunk:
            sync()
            out.append(_esc(chunk) if escape else chunk)
            texts.append(chunk)
            visible += len(chunk)

    def in_link() -> bool:
        return any(tag.startswith("<a ") for tag in want)

    for tok in tokens:
        kind = tok.type
        if kind in _EMPHASIS:
            tag = _EMPHASIS[kind]
            added = tag not in want
            if added:
                want.append(tag)
            opened.append((tag if added else None, visible, len(texts), ""))
        elif kind in _EMPHASIS_CLOSE or kind == "link_close":
            tag, start, first, href = opened.pop() if opened else (None, visible, len(texts), "")
            if kind == "link_close" and visible == start:
                put(href)  # a link with no label shows its URL
            if tag is not None and tag in want:
                want.remove(tag)
                note = _host_note("".join(texts[first:]), href) if kind == "link_close" else None
                if note:
                    put(f" ({note})")
        elif kind == "link_open":
            href = str(tok.attrGet("href") or "")
            safe = None if in_link() else _safe_href(href, LINK_SCHEMES)
            tag = f'<a href="{html.escape(safe, quote=True)}">' if safe else None
            if tag is not None:
                want.append(tag)
            opened.append((tag, visible, len(texts), safe or href))
        elif kind == "code_inline":
            if in_link() or not tok.content.strip():
                put(tok.content)  # Telegram has no code inside a link
            else:
                out.extend(_close(tag) for tag in reversed(shown))  # nor code inside bold/italic
                shown.clear()
                out.append(f"<code>{_esc(tok.content)}</code>")
                visible += len(tok.content)
        elif kind == "image":
            src = str(tok.attrGet("src") or "")
            label = _plain(tok.children or []) or src
            safe = None if in_link() else _safe_href(src, IMAGE_SCHEMES)
            if safe:
                want.append(f'<a href="{html.escape(safe, quote=True)}">')
                put(label)
                want.pop()
                note = _host_note(label, safe)
                if note:
                    put(f" ({note})")
            else:
                put(label)
        elif kind in ("softbreak", "hardbreak"):
            put(newline, escape=False)  # the model's line breaks are meant
        else:  # text, and anything else markdown-it may give: its content as text
            put(tok.content)
    want.clear()
    sync()
    return "".join(out)


def _close(tag: str) -> str:
    """The end tag for a start tag we wrote (``<a href="…">`` → ``</a>``)."""
    return "</" + tag[1:].split(">", 1)[0].split(" ", 1)[0] + ">"


def _plain(tokens: Sequence[Token]) -> str:
    """The text of inline tokens without markup (an image's alt text, a table cell in <pre>)."""
    parts: list[str] = []
    stack = [iter(tokens)]
    while stack:
        tok = next(stack[-1], None)
        if tok is None:
            stack.pop()
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image":
            stack.append(iter(tok.children or []))
        elif tok.type in ("text", "code_inline", "text_special"):
            parts.append(tok.content)
    return "".join(parts)


def _host_note(label: str, url: str) -> str | None:
    """What follows a link whose label is not its own address: the host it opens, or its host and
    path when the label looks like another address; None when the label is the address."""
    if _bare(label) == _bare(url):
        return None
    parts = urlsplit(url)
    host = _ascii_host(parts.hostname or "")
    if not host:
        return None
    if not _ADDRESS.fullmatch(label.strip()):
        return host
    where = host + (parts.path.rstrip("/") if parts.path.strip("/") else "")
    return where if len(where) <= NOTE_CHARS else where[: NOTE_CHARS - 1] + "…"


def _bare(address: str) -> str:
    """An address without scheme, "www." and a trailing slash, lowercased, to compare with another."""
    return _SCHEME.sub("", address.strip().lower()).removeprefix("www.").rstrip("/")


def _ascii_host(host: str) -> str:
    """A host as it is registered (punycode for a name in other scripts), so a look-alike shows."""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host.encode("ascii", "backslashreplace").decode("ascii")


def _safe_href(href: str, schemes: frozenset[str]) -> str | None:
    """The URL with whitespace and control characters removed if its scheme is allowed, else None."""
    cleaned = href
    if " " in href or not href.isprintable():  # isprintable: no control, format or separator characters
        cleaned = "".join(ch for ch in href if not ch.isspace() and unicodedata.category(ch)[0] != "C")
    scheme, colon, rest = cleaned.partition(":")
    if colon and rest and scheme.lower() in schemes:
        return cleaned
    return None
