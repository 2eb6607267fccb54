"""HTML to Markdown: keep the main content, drop chrome, never recurse over the DOM.

The main content is what trafilatura chooses (content.py); kb renders the page itself and keeps the
lines trafilatura chose. When trafilatura finds nothing, or the page is too deep or too large for it,
kb's own pick: <main>, [role=main] or the largest <article>, minus chrome named by tags and classes.

Parser: selectolax's lexbor backend (the Modest one is deprecated in selectolax 1.0). Lexbor's tree
builder is quadratic in the nesting depth of block elements (100,000 nested <div>s take ~28 s to
parse), so a cheap tag scan estimates the depth first and very deep pages get flat text extraction
with the stdlib tokenizer instead. The DOM walk itself uses an explicit stack.

Policies: images are dropped with their alt text (alt is mostly "logo" or a file name, noise in a
search index); emphasis is not marked; <br> becomes a plain newline (no trailing-space breaks);
the title is <title>, else og:title, else the first <h1>.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

from knowledge.convert.base import Converted
from knowledge.convert.charset import decode_bytes
from knowledge.convert.chrome import DROP_TAGS, Chrome, is_hidden
from knowledge.convert.content import article_facts, choose_content, coverage, keep_chosen
from knowledge.errors import ConversionError

# Blink caps the DOM depth its parser builds at 512; real pages stay far below. Lexbor's scope checks
# cost O(depth) per tag (1,000 open <div>s then 1M stray </p>: 3 s), so the cap also bounds that.
MAX_NESTING = 512
MIN_TEXT_CHARS = 20
# Beyond these, trafilatura does not choose the content (see _main_markdown).
MAX_CHOOSER_TAGS = 40_000
MAX_CHOOSER_DEPTH = 200
# kb's rendering must hold this share of trafilatura's text, or class names do not count as chrome.
MIN_COVERAGE = 0.7

_BLOCKS = {
    "p", "div", "section", "article", "main", "header", "figure", "figcaption", "address", "hr",
    "details", "summary", "center", "form", "fieldset", "legend", "dl", "dt", "dd", "tr", "td",
    "th", "caption", "thead", "tbody", "tfoot", "body", "html",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_UNSAFE_SCHEMES = ("javascript:", "data:", "vbscript:")
_VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "param", "keygen",
}  # fmt: skip
# Elements whose end tag may be omitted never make the tree deeper than their parent list/table.
_OPTIONAL_END = {
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot",
    "colgroup", "caption", "rb", "rt", "rp", "rtc", "html", "head", "body",
}  # fmt: skip
_UNNESTED = _VOID | _OPTIONAL_END  # what the nesting estimate leaves out
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)")
_RAW_TEXT = re.compile(r"<!--.*?(?:-->|$)|<(script|style)\b.*?(?:</\1\s*>|$)", re.S | re.I)
_SPACE = re.compile(r"\s+")
_SPACES = re.compile(r" {2,}")
_BLOCK_START = re.compile(r"(?:#{1,6}|[+*-])(?=\s|$)|>")
_NUMBERED_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
_BACKTICKS = re.compile(r"`+")
_LANGUAGE = re.compile(r"\b(?:language|lang)-([\w+#.-]+)")
_TITLE_SEPARATORS = (" | ", " - ", " – ", " — ", " · ", " :: ", " » ")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_JS_WORD = re.compile(r"\b(?:javascript|js)\b", re.I)
_JS_NEED = re.compile(r"\b(?:enabled?|disabled|required|requires?|turn on|activate|need|must|support)", re.I)
_APP_MOUNT = "#root, #app, #__next, #__nuxt, #svelte, [data-reactroot], [ng-version], app-root"
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_WORD = re.compile(r"\w")


def html_to_markdown(html: str, *, base_url: str | None = None) -> Converted:
    """Convert an HTML page to Markdown with just its main content."""
    depth = _nesting_depth(html)
    if depth > MAX_NESTING:
        title, markdown, needs_js = _flat_text(html)
        author = published = None
    else:
        tree = LexborHTMLParser(html)
        base_url = _document_base(tree, base_url)
        needs_js = _looks_script_rendered(tree)
        title = _title(tree)
        # lxml (under trafilatura) stops building at depth 256, losing deeper text, and a page of tens
        # of thousands of elements is a listing or a dump, not an article: kb's own pick serves both.
        may_choose = depth <= MAX_CHOOSER_DEPTH and html.count("<") <= MAX_CHOOSER_TAGS
        markdown = _main_markdown(tree, html, base_url=base_url, may_choose=may_choose)
        # the author and date are the document's facts (front matter, citations), not body text
        author, published = article_facts(html) if may_choose else (None, None)
    _refuse_empty(markdown, needs_js=needs_js)
    # One spelling per character (NFC: é composed, as keyboards type it), as trafilatura's text is.
    return Converted(
        title=unicodedata.normalize("NFC", title),
        markdown=unicodedata.normalize("NFC", markdown),
        converter="html",
        author=author and unicodedata.normalize("NFC", author),
        published=published,
    )


def convert_html_bytes(data: bytes, *, declared: str | None = None, base_url: str | None = None) -> Converted:
    """Decode HTML bytes (BOM, declared charset, <meta>, detection) and convert them to Markdown."""
    text, codec = decode_bytes(data, declared=declared, is_html=True)
    return replace(html_to_markdown(text, base_url=base_url), encoding=codec)


def _nesting_depth(html: str) -> int:
    """Estimate the deepest element nesting from a linear tag scan (an over-estimate is harmless)."""
    tags = ((closing, tag.lower()) for closing, tag in _TAG.findall(_RAW_TEXT.sub("", html)))
    return deepest_nesting((closing, name) for closing, name in tags if name not in _UNNESTED)


def deepest_nesting(tags: Iterable[tuple[str, str]]) -> int:
    """The deepest nesting of a run of tags, each ('/' for an end tag or '', its name), in document order."""
    open_by_name: dict[str, int] = {}
    depth = deepest = 0
    for closing, name in tags:
        if closing:
            # Stray end tags only cancel an open element of the same name, as in the real parser.
            if open_by_name.get(name, 0) > 0:
                open_by_name[name] -= 1
                depth -= 1
        else:
            open_by_name[name] = open_by_name.get(name, 0) + 1
            depth += 1
            deepest = max(deepest, depth)
    return deepest


def _document_base(tree: LexborHTMLParser, base_url: str | None) -> str | None:
    """The URL relative links resolve against: <base href> over the page's own URL."""
    base = tree.css_first("base[href]")
    href = (base.attributes.get("href") or "").strip() if base else ""
    if href and not _is_unsafe(href):
        try:
            return urljoin(base_url or "", href)
        except ValueError:  # a malformed base, e.g. an unclosed IPv6 host: links stay as written
            return None
    return base_url


def _looks_script_rendered(tree: LexborHTMLParser) -> bool:
    """True when the page shows the signs of an app shell: <noscript>, a JS phrase or a mount point."""
    # A tracking-pixel <noscript> holds only an <img>; an app shell's says something.
    if any(node.text().strip() for node in tree.css("noscript")):
        return True
    return tree.css_first("script") is not None and tree.css_first(_APP_MOUNT) is not None


def _title(tree: LexborHTMLParser) -> str:
    """<title>, else og:title, else the first <h1>; a site suffix is cut only if og:title or h1 confirm it."""
    head_title = tree.head.css_first("title") if tree.head else None
    og = tree.css_first('meta[property="og:title"], meta[name="og:title"]')
    h1 = tree.body.css_first("h1") if tree.body else None
    title = _collapse(head_title.text()) if head_title else ""
    og_title = _collapse(og.attributes.get("content") or "") if og else ""
    h1_title = _collapse(h1.text()) if h1 else ""
    for short in (og_title, h1_title):
        if short and any(title.startswith(short + sep) for sep in _TITLE_SEPARATORS):
            return short
    return title or og_title or h1_title


def _main_markdown(tree: LexborHTMLParser, html: str, *, base_url: str | None, may_choose: bool) -> str:
    """The page rendered by kb, keeping what trafilatura chose as the content (see content.py).

    When trafilatura finds nothing, kb's own pick: a landmark element minus chrome (_landmark).
    """
    # Ruby readings ("子供(こども)") would be inlined into the words they annotate.
    if tree.css_first("rt, rp") is not None:
        for node in tree.css("rt, rp"):
            node.decompose()
        html = tree.html or ""
    chosen = choose_content(html) if may_choose else None
    if chosen is not None and tree.body is not None:
        markdown = keep_chosen(_render(tree.body, base_url=base_url), chosen)
        if coverage(markdown, chosen) >= MIN_COVERAGE:
            return markdown
        # kb took part of the content for chrome by its class names: trafilatura's choice decides alone.
        # (What neither shows, text in <noscript>, <template> or hidden elements, stays out.)
        bare = keep_chosen(_render(tree.body, base_url=base_url, chrome_by_names=False), chosen)
        if coverage(bare, chosen) > coverage(markdown, chosen):
            return bare
        if markdown.strip():
            return markdown
    return _render(_landmark(tree), base_url=base_url)


def _landmark(tree: LexborHTMLParser) -> LexborNode:
    """<main>, then [role=main], then the <article> with the most text, else <body>."""
    for selector in ("main", '[role="main"]'):
        if (node := tree.css_first(selector)) is not None:
            return node
    # Only outermost articles: an inner one never has more text, and measuring nested ones is quadratic.
    inner = {node.mem_id for node in tree.css("article article")}
    articles = [node for node in tree.css("article") if node.mem_id not in inner]
    if articles:
        return max(articles, key=lambda node: len(node.text()))
    return tree.body if tree.body is not None else tree.root


@dataclass
class _Frame:
    """A line prefix owed by a list item or blockquote: ``first`` once, then ``rest``."""

    first: str
    rest: str
    used: bool = False


@dataclass
class _List:
    """An open <ul>/<ol>: the next number (None for bullets) and how many items it has had."""

    number: int | None
    items: int = 0


@dataclass
class _Link:
    """An open <a>: where its text starts in the inline buffer and where it points."""

    start: int
    flushes: int
    url: str | None


class _Writer:
    """Accumulates inline text and emits prefixed Markdown lines block by block."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.inline: list[str] = []
        self.frames: list[_Frame] = []
        self.links: list[_Link] = []
        self.lists: list[_List] = []
        self.heading = 0
        self.flushes = 0
        self.tight = False  # the next block follows on the next line (list items), not after a blank

    def text(self, text: str) -> None:
        self.inline.append(_SPACE.sub(" ", text))

    def line_break(self) -> None:
        self.inline.append("\n")

    def flush(self) -> None:
        """End the current paragraph (or heading) and emit it."""
        if not self.inline:
            return
        text = "".join(self.inline)
        self.inline.clear()
        self.flushes += 1
        lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
        lines = [line for line in lines if line]
        if not lines:
            return
        if self.heading:
            lines = ["#" * self.heading + " " + " ".join(lines)]
        else:
            # Plain text that would read as a list item, heading or quote (a <br> line may start one).
            lines = [_escape_start(line) for line in lines]
        self.block(lines)

    def block(self, lines: list[str]) -> None:
        """Emit finished lines, separated from the previous block by a blank line unless tight."""
        if self.lines and not self.tight:
            # The blank line belongs to the enclosing blocks only: frames not yet started add nothing.
            self.lines.append("".join(frame.rest for frame in self.frames if frame.used).rstrip())
        self.tight = False
        for line in lines:
            prefix = "".join(self._take(frame) for frame in self.frames)
            self.lines.append(prefix + line)

    @staticmethod
    def _take(frame: _Frame) -> str:
        if frame.used:
            return frame.rest
        frame.used = True
        return frame.first


def _escape_start(line: str) -> str:
    """Backslash-escape a line start that Markdown would read as a heading, list item or quote."""
    if _BLOCK_START.match(line):
        return "\\" + line
    return _NUMBERED_START.sub(r"\1\\\2", line, count=1)


def _render(root: LexborNode, *, base_url: str | None, chrome_by_names: bool = True) -> str:
    """Walk ``root`` with an explicit stack and return its Markdown (one trailing newline)."""
    writer = _Writer()
    chrome = Chrome(root, by_names=chrome_by_names)
    # Entries to open carry None; entries to close carry the tag they close.
    stack: list[tuple[LexborNode, str | None]] = [(root, None)]
    while stack:
        node, closing = stack.pop()
        if closing is not None:
            _leave(writer, closing)
            continue
        tag = node.tag or "-"  # a processing instruction (<?php … ?>) has no tag name
        if tag == "-text":
            writer.text(node.text_content or "")
            continue
        if tag.startswith(("-", "!")) or (node is not root and chrome.drops(node, tag)):
            continue
        if not _enter(writer, node, tag, base_url=base_url):
            continue
        stack.append((node, tag))
        child = node.last_child
        while child is not None:
            stack.append((child, None))
            child = child.prev
    writer.flush()
    text = "\n".join(line.rstrip() for line in writer.lines).strip("\n")
    return text + "\n" if text else ""


def _enter(writer: _Writer, node: LexborNode, tag: str, *, base_url: str | None) -> bool:
    """Open ``node``; return False when its children are already handled (or must be skipped)."""
    if tag == "br":
        writer.line_break()
    elif tag == "a":
        writer.links.append(_Link(len(writer.inline), writer.flushes, _link_url(node, base_url)))
    elif tag == "code":
        writer.text(_code_span(_collapse(_plain_text(node))))
        return False
    elif tag == "pre":
        writer.flush()
        if lines := _fenced(node):
            writer.block(lines)
        return False
    elif tag == "table" and _is_data_table(node):
        writer.flush()
        if lines := _table(node, base_url=base_url):
            writer.block(lines)
        return False
    elif tag in _HEADINGS:
        writer.flush()
        writer.heading = _HEADINGS[tag]
    elif tag in ("ul", "ol"):
        writer.flush()
        writer.tight = bool(writer.frames) and writer.frames[-1].rest.strip() == ""
        start = (node.attributes.get("start") or "1").strip()
        writer.lists.append(_List(int(start) if tag == "ol" and start.isdigit() else None))
    elif tag == "li":
        writer.flush()
        current = writer.lists[-1] if writer.lists else _List(None)
        marker = f"{current.number}. " if current.number is not None else "- "
        if current.number is not None:
            current.number += 1
        writer.tight = writer.tight or current.items > 0  # items sit on adjacent lines
        current.items += 1
        writer.frames.append(_Frame(marker, " " * len(marker)))
    elif tag == "blockquote":
        writer.flush()
        writer.frames.append(_Frame("> ", "> "))
    elif tag in _BLOCKS or tag == "table":
        writer.flush()
    return True


def _leave(writer: _Writer, tag: str) -> None:
    """Close an element: end its block, pop its prefix, or wrap its link text."""
    if tag == "a":
        _close_link(writer, writer.links.pop())
    elif tag in _HEADINGS:
        writer.flush()
        writer.heading = 0
    elif tag in ("ul", "ol"):
        writer.flush()
        writer.lists.pop()
    elif tag in ("li", "blockquote"):
        writer.flush()
        writer.frames.pop()
    elif tag in _BLOCKS or tag == "table":
        writer.flush()


def _close_link(writer: _Writer, link: _Link) -> None:
    """Turn the text collected since the <a> opened into ``[text](url)``."""
    if link.url is None or link.flushes != writer.flushes:
        return  # no usable target, or a block inside the link already emitted its text
    text = "".join(writer.inline[link.start :]).replace("\n", " ")
    label = _collapse(text)
    if not label:
        return
    lead = " " if text[:1].isspace() else ""
    trail = " " if text[-1:].isspace() else ""
    writer.inline[link.start :] = [f"{lead}[{label}]({link.url}){trail}"]


def _link_url(node: LexborNode, base_url: str | None) -> str | None:
    """The resolved href, or None for missing, fragment-only and script/data URLs."""
    href = (node.attributes.get("href") or "").strip()
    if not href or href.startswith("#") or _is_unsafe(href):
        return None
    try:
        url = urljoin(base_url, href) if base_url else href
    except ValueError:  # e.g. a malformed IPv6 host
        return None
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _is_unsafe(href: str) -> bool:
    """True for javascript:, data: and vbscript: URLs, however they are spaced or cased."""
    # Browsers strip ASCII tabs and newlines anywhere in a URL, so "java\tscript:" still runs.
    squashed = re.sub(r"[\x00-\x20]", "", href).lower()
    return squashed.startswith(_UNSAFE_SCHEMES)


def _code_span(text: str) -> str:
    """Wrap inline code in a backtick run longer than any inside it."""
    if not text:
        return ""
    ticks = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fenced(node: LexborNode) -> list[str]:
    """A <pre> as a fenced code block, language from a language-x / lang-x class."""
    code = _plain_text(node).strip("\n").rstrip()
    if not code.strip():
        return []
    classes = " ".join(
        (n.attributes.get("class") or "") for n in (node, node.css_first("code")) if n is not None
    )
    language = match.group(1) if (match := _LANGUAGE.search(classes)) else ""
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(code)), default=0) + 1)
    return [fence + language, *code.split("\n"), fence]


def _plain_text(node: LexborNode) -> str:
    """The text of a code element as shown: <br> as newlines, no script, style or hidden subtrees."""
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        tag = current.tag or "-"
        if tag == "-text":
            parts.append(current.text_content or "")
        elif tag == "br":
            parts.append("\n")
        elif current is node or not (tag.startswith("-") or tag in DROP_TAGS or is_hidden(current)):
            child = current.last_child
            while child is not None:
                stack.append(child)
                child = child.prev
    return "".join(parts)


def _rows(table: LexborNode) -> list[LexborNode]:
    """The table's own rows (not those of nested tables), in order."""
    rows = []
    for child in table.iter():
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(row for row in child.iter() if row.tag == "tr")
    return rows


def _is_data_table(table: LexborNode) -> bool:
    """A table of data (rendered as a Markdown table), not a layout grid of nested tables or one column."""
    if len(table.css("table")) > 1:  # css() matches the table itself too
        return False
    widths = [sum(1 for cell in row.iter() if cell.tag in ("td", "th")) for row in _rows(table)]
    return bool(widths) and max(widths) >= 2


def _table(table: LexborNode, *, base_url: str | None) -> list[str]:
    """A Markdown table; the first row is the header, whether it is made of <th> or <td>."""
    grid = [
        [_cell(cell, base_url=base_url) for cell in row.iter() if cell.tag in ("td", "th")]
        for row in _rows(table)
    ]
    grid = [row for row in grid if any(row)]
    if not grid:
        return []
    width = max(len(row) for row in grid)
    grid = [row + [""] * (width - len(row)) for row in grid]
    lines = ["|" + "".join(f" {cell} |" if cell else " |" for cell in row) for row in grid]
    lines.insert(1, "|" + "---|" * width)
    return lines


def _cell(cell: LexborNode, *, base_url: str | None) -> str:
    """A cell's Markdown on one line, pipes escaped (cells hold no tables: see _is_data_table)."""
    return _collapse(_render(cell, base_url=base_url)).replace("|", "\\|")


def _collapse(text: str) -> str:
    """Whitespace runs to single spaces, ends trimmed."""
    return _SPACE.sub(" ", text).strip()


def _refuse_empty(markdown: str, *, needs_js: bool) -> None:
    """Raise when the page has (almost) no text, naming JavaScript when the page needs it."""
    if len(markdown) > 50 * MIN_TEXT_CHARS:
        return
    sentences = _SENTENCE.findall(_LINK_TARGET.sub("]", markdown))
    # "You need to enable JavaScript to run this app." is the shell talking, not content.
    js_phrases = [s for s in sentences if _JS_WORD.search(s) and _JS_NEED.search(s)]
    chars = sum(len(_WORD.findall(s)) for s in sentences) - sum(len(_WORD.findall(s)) for s in js_phrases)
    if chars >= MIN_TEXT_CHARS:
        return
    if needs_js or js_phrases:
        raise ConversionError(
            "requires-javascript",
            "the page is filled in by JavaScript; the HTML as served has no content — save the page "
            "from a browser (File › Save Page As, or print to PDF) and import that instead",
        )
    raise ConversionError(
        "no-content",
        f"the HTML page has no readable text ({chars} characters after removing menus, scripts and "
        "boilerplate)",
    )


class _FlatText(HTMLParser):
    """Text of a page too deeply nested for a DOM: blocks become paragraphs, scripts are skipped."""

    _SKIP = {
        "script", "style", "noscript", "template", "svg", "iframe", "textarea", "select", "button", "title",
        "nav", "aside", "header", "footer",
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skipping: list[str] = []
        self.needs_js = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "noscript":
            self.needs_js = True
        if tag in self._SKIP:
            self.skipping.append(tag)
        elif tag == "br" or tag in _BLOCKS or tag in _HEADINGS or tag in ("li", "pre", "blockquote"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()
        elif tag in _BLOCKS or tag in _HEADINGS or tag in ("li", "pre", "blockquote"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping == ["title"]:
            self.title.append(data)
        elif not self.skipping:
            self.parts.append(data)


def _flat_text(html: str) -> tuple[str, str, bool]:
    """Title, paragraphs and the app-shell hint of a page, without building a DOM."""
    parser = _FlatText()
    parser.feed(html)
    parser.close()
    paragraphs = [_collapse(line) for line in "".join(parser.parts).split("\n")]
    text = "\n\n".join(_escape_start(p) for p in paragraphs if p)
    return _collapse("".join(parser.title)), text + "\n" if text else "", parser.needs_js
