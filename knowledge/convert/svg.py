"""SVG drawings: their words are what kb reads, the drawing itself is not.

The root's ``<title>`` is the document title; every ``<title>``, ``<desc>`` and ``<text>`` (with its
``<tspan>`` and ``<textPath>`` runs) becomes a paragraph, in document order, whitespace collapsed;
``<script>`` and ``<style>`` are never read. A drawing with none of them is refused (``svg-no-text``).

Lexbor (selectolax) parses the drawing: it expands no entity a doctype declares (a "billion laughs"
file stays as small as it is written) and fetches nothing. A drawing nested deeper than
``MAX_NESTING`` elements is refused before it is parsed (``svg-too-deep``): lexbor's work per tag
grows with the depth of what is open.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from knowledge.convert.base import Converted
from knowledge.convert.charset import decode_bytes
from knowledge.convert.html import MAX_NESTING, deepest_nesting
from knowledge.errors import ConversionError

_WORDS = frozenset({"title", "desc", "text"})
_UNREAD = frozenset({"script", "style"})
_SPACE = re.compile(r"\s+")
# What holds no elements, then start and end tags ('/>' closes an empty one); linear in the text.
_OPAQUE = re.compile(
    r"<!--.*?(?:-->|\Z)|<!\[CDATA\[.*?(?:\]\]>|\Z)|<(script|style)\b.*?(?:</\1\s*>|\Z)", re.S | re.I
)
_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)[^<>]*?(/?)>")


def svg_to_markdown(data: bytes, *, name: str) -> Converted:
    """An SVG's title, descriptions and texts as Markdown paragraphs; ConversionError when it has none."""
    text, codec = decode_bytes(data)
    if (depth := nesting_depth(text)) > MAX_NESTING:
        raise ConversionError(
            "svg-too-deep",
            f"{name} nests its elements {depth} deep; kb reads drawings nested up to {MAX_NESTING} deep",
        )
    title, paragraphs = svg_words(text)
    if not paragraphs:
        raise ConversionError(
            "svg-no-text",
            f"{name} is a drawing without text (no <title>, <desc> or <text>): nothing to index",
        )
    return Converted(title=title, markdown="\n\n".join(paragraphs) + "\n", converter="svg", encoding=codec)


def svg_words(text: str) -> tuple[str, list[str]]:
    """The drawing's title (its root's first <title>, or '') and its paragraphs of text, in order."""
    tree = LexborHTMLParser(text)
    root = tree.css_first("svg")
    if root is None:
        return "", []
    pieces: list[tuple[LexborNode, list[str]]] = []
    # An explicit stack: the tree is walked once, however deep; a text node joins the piece of the
    # outermost <title>, <desc> or <text> around it.
    stack: list[tuple[LexborNode, int | None]] = [(root, None)]
    while stack:
        node, piece = stack.pop()
        tag = node.tag
        if tag == "-text":
            if piece is not None:
                pieces[piece][1].append(node.text_content or "")
            continue
        if tag in _UNREAD or tag.startswith("-"):
            continue
        if piece is None and tag in _WORDS:
            pieces.append((node, []))
            piece = len(pieces) - 1
        children = []
        child = node.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend((c, piece) for c in reversed(children))
    title = ""
    paragraphs = []
    for node, parts in pieces:
        words = _SPACE.sub(" ", " ".join(parts)).strip()
        if not words:
            continue
        if (
            not title
            and node.tag == "title"
            and node.parent is not None
            and node.parent.mem_id == root.mem_id
        ):
            title = words
        paragraphs.append(_escape(words))
    return title, paragraphs


def nesting_depth(text: str) -> int:
    """The deepest element nesting, from a linear scan of the tags (an over-estimate is harmless)."""
    tags = _TAG.findall(_OPAQUE.sub("", text))
    return deepest_nesting((closing, name) for closing, name, empty in tags if not empty)


_BLOCK_START = re.compile(r"(?:#{1,6}|[+*-])(?=\s|$)|>")


def _escape(line: str) -> str:
    """A backslash before a start Markdown would read as a heading, list item or quote."""
    return "\\" + line if _BLOCK_START.match(line) else line
