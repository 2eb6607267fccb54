"""Obsidian's own files: a canvas (JSON Canvas 1.0) and a base (Obsidian Bases, YAML).

A canvas gives its text cards (Markdown already) and group labels as paragraphs in the order of its
nodes, its file and link cards as plain lines (the note or address they show), and its edge labels;
a canvas with no card text and no label is refused (``canvas-no-text``), and one that is not a JSON
Canvas object (``canvas-malformed``). A base gives its views' names and its properties' display
names, nothing of its filters or formulas (``base-no-text`` when it names none, ``base-malformed``
when it is not YAML). Bases are read by PyYAML's safe loader: no Python objects, and an alias is a
reference (never copied), so a "billion laughs" of anchors stays as small as it is written.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from knowledge.convert.base import Converted
from knowledge.convert.text import normalize_newlines
from knowledge.errors import ConversionError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def canvas_to_markdown(data: bytes, *, name: str) -> Converted:
    """A canvas's card texts, labels and references as Markdown; ConversionError when it has no text."""
    try:
        canvas = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ConversionError("canvas-malformed", f"{name} is not a valid canvas (not JSON: {exc})") from exc
    nodes = canvas.get("nodes", []) if isinstance(canvas, dict) else None
    edges = canvas.get("edges", []) if isinstance(canvas, dict) else None
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise ConversionError(
            "canvas-malformed", f"{name} is not a valid canvas (JSON Canvas has lists of nodes and edges)"
        )
    paragraphs: list[str] = []
    references: list[str] = []
    for node in nodes:
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "text" and (text := _text(node.get("text"))):
            paragraphs.append(normalize_newlines(text).strip("\n"))
        elif kind == "group" and (label := _line(node.get("label"))):
            paragraphs.append(label)
        elif kind == "file" and (path := _line(node.get("file"))):
            references.append(path + _line(node.get("subpath")))
        elif kind == "link" and (url := _line(node.get("url"))):
            references.append(url)
    labels = [label for edge in edges if isinstance(edge, dict) and (label := _line(edge.get("label")))]
    if not paragraphs and not labels:
        shown = " (only cards that show files or links)" if references else ""
        raise ConversionError(
            "canvas-no-text", f"{name} is a canvas without text cards or labels{shown}: nothing to index"
        )
    blocks = paragraphs + ["\n".join(lines) for lines in (references, labels) if lines]
    return Converted(title="", markdown="\n\n".join(blocks) + "\n", converter="canvas", encoding="utf-8")


def base_to_markdown(data: bytes, *, name: str) -> Converted:
    """A base's view names and property display names as Markdown; ConversionError when it has none."""
    try:
        base = yaml.load(data, Loader=_Loader)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConversionError(
            "base-malformed", f"{name} is not a valid Obsidian base (not YAML: {' '.join(str(exc).split())})"
        ) from exc
    if base is not None and not isinstance(base, dict):
        raise ConversionError("base-malformed", f"{name} is not a valid Obsidian base (not a YAML mapping)")
    base = base or {}
    views = base.get("views")
    properties = base.get("properties")
    names = (
        [n for view in views if isinstance(view, dict) and (n := _line(view.get("name")))]
        if isinstance(views, list)
        else []
    )
    shown = (
        [
            d
            for prop in properties.values()
            if isinstance(prop, dict) and (d := _line(prop.get("displayName")))
        ]
        if isinstance(properties, dict)
        else []
    )
    if not names and not shown:
        raise ConversionError(
            "base-no-text",
            f"{name} is an Obsidian base without view names or property display names: nothing to index",
        )
    blocks = ["\n".join(lines) for lines in (names, shown) if lines]
    return Converted(title="", markdown="\n\n".join(blocks) + "\n", converter="base", encoding="utf-8")


def _text(value: Any) -> str:
    """A string field's text, or '' when it is missing, empty or not a string."""
    return value if isinstance(value, str) and value.strip() else ""


def _line(value: Any) -> str:
    """A field's text on one line, whitespace collapsed: a string, or a number YAML read as one ('' else)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return " ".join(value.split()) if isinstance(value, str) else ""
