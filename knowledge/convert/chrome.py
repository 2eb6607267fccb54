"""Which elements of a page are chrome: hidden, scripts and media, form controls, menus, banners.

Tags and hidden elements always count. Class and id names count by their first or last word
(``top-menu``, ``social_share``, ``sidebar``), not as modifiers (``has-double-sidebar``, ``no-share``,
``js-code-nav-container``, a BEM ``--Ads``), and never for a wrapper holding most of the page's text.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

DROP_TAGS = {
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed",
    "canvas", "audio", "video", "img", "picture", "input", "button", "select", "textarea", "nav",
    "aside", "footer", "dialog", "rt", "rp",
}  # fmt: skip
_BOILERPLATE_TOKENS = {
    "cookie", "cookies", "consent", "gdpr", "menu", "navbar", "nav", "navigation", "sidebar",
    "breadcrumb", "breadcrumbs", "share", "sharing", "social", "advert", "advertisement", "ads",
    "promo", "newsletter", "subscribe", "popup", "modal", "skip", "footer", "masthead",
}  # fmt: skip
# Words that make a class name a state or a modifier of the element, not a name for what it is.
_MODIFIER_WORDS = frozenset({"has", "no", "with", "and", "w", "js", "is", "without", "show", "open"})
_BOILERPLATE_CLASSES = {"sr-only", "visually-hidden", "visuallyhidden", "screen-reader-text"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "dialog"}
_NEVER_DROPPED = {"html", "body", "main", "article"}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_TOKEN_SPLIT = re.compile(r"[_-]+")


class Chrome:
    """Decides which elements under a content root are chrome: hidden, form controls, menus, banners."""

    def __init__(self, root: LexborNode, *, by_names: bool = True) -> None:
        self.by_names = by_names  # False: only tags and hidden elements; the content was chosen already
        # Script and style text is not what a reader sees: it must not make the page look bigger.
        unseen = sum(len(node.text()) for node in root.css("script, style, template, noscript"))
        self.root_chars = len(root.text()) - unseen
        # Measuring a subtree's text costs its size; nested look-alike wrappers must not make that quadratic.
        self.measure_budget = 4 * self.root_chars
        inside = root.tag in ("main", "article")
        self.article_headers = None if inside else {n.mem_id for n in root.css("article header, main header")}

    def drops(self, node: LexborNode, tag: str) -> bool:
        """True for chrome; a named wrapper holding most of the root's text is content, not chrome."""
        if tag in DROP_TAGS:
            return True
        if not self.by_names:
            return bool(node.attributes) and is_hidden(node)
        if tag == "header" and self.article_headers is not None and node.mem_id not in self.article_headers:
            return True  # the site header; an article's own header holds its title
        attrs = node.attributes
        if not attrs:
            return False
        if is_hidden(node, attrs):
            return True
        if tag in _NEVER_DROPPED:
            return False
        names = f"{attrs.get('class') or ''} {attrs.get('id') or ''}".lower()
        is_chrome = (
            any(_is_chrome_name(name) for name in names.split())
            or bool(set(names.split()) & _BOILERPLATE_CLASSES)
            or (attrs.get("role") or "").lower() in _BOILERPLATE_ROLES
        )
        if not is_chrome:
            return False
        if self.measure_budget <= 0:
            return False  # out of budget: keep it rather than risk dropping the content
        chars = len(node.text())
        self.measure_budget -= chars
        return chars <= self.root_chars // 2


def _is_chrome_name(name: str) -> bool:
    """A class or id naming chrome by its first or last word: ``top-menu``, ``social_share``, ``sidebar``.

    Not modifiers that mention chrome: ``has-double-sidebar``, ``no-share``, ``with-navigation``,
    ``js-code-nav-container``, nor a BEM modifier (``Report__Section--Ads``).
    """
    parts = [part for part in _TOKEN_SPLIT.split(name.split("--")[0]) if part]
    if not parts or not _MODIFIER_WORDS.isdisjoint(parts):
        return False
    return parts[0] in _BOILERPLATE_TOKENS or parts[-1] in _BOILERPLATE_TOKENS


def is_hidden(node: LexborNode, attrs: dict[str, str | None] | None = None) -> bool:
    """True for the hidden attribute, aria-hidden="true" and inline display:none / visibility:hidden."""
    attrs = node.attributes if attrs is None else attrs
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").lower() == "true":
        return True
    return _HIDDEN_STYLE.search(attrs.get("style") or "") is not None
