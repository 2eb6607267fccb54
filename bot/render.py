"""Engine replies as Telegram messages: escaped HTML, split by bot.pages, candidate buttons.

Every piece of text is escaped (Telegram's HTML mode rejects a bare ``&`` or ``<``); citations
are links when the source has a URL. Long replies are split at paragraph boundaries, never
inside a tag or a citation; link previews are turned off by the sender.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.markdown import markdown_blocks
from bot.pages import neutral, split_blocks
from knowledge.answer.reply import Citation, Reply
from knowledge.text import sentences
from knowledge.websearch.filters import host_of
from knowledge.websearch.store import SearchRecord
from knowledge.words.catalog import ENGLISH, N_, Words
from knowledge.words.replies import worded

MAX_CALLBACK_BYTES = 64
BUTTON_CHARS = 60


def esc(text: str) -> str:
    """Text safe inside Telegram HTML."""
    return html.escape(text, quote=False)


def italic(text: str) -> str:
    """Text in italics, escaped."""
    return f"<i>{esc(text)}</i>"


def bold(text: str) -> str:
    """Text in bold, escaped."""
    return f"<b>{esc(text)}</b>"


def link(url: str, label: str) -> str:
    """An <a> tag whose URL and label are escaped; only an http(s) URL is linked (a tg: or any other
    scheme a document may carry shows its label as text)."""
    if not re.match(r"https?://", url, re.IGNORECASE):
        return esc(label)
    return f'<a href="{html.escape(url, quote=True)}">{esc(label)}</a>'


def citation_html(c: Citation) -> str:
    """``[1] <a href=URL>Title</a> — raw/file.md:12-29``, or plain text without a URL."""
    where = f"{c.raw_path}:{c.start_line}-{c.end_line}"
    title = link(c.source_url, c.title) if c.source_url else esc(c.title)
    return f"[{c.number}] {title} — {esc(where)}"


def summary_html(line: str) -> str:
    """A web summary line ``text [web-N] [source: URL]`` with the source as a link."""
    m = re.match(r"^(.*)\[(web-\d)\] \[source: (\S+)\]$", line)
    if not m:
        return esc(line)
    return f"{esc(m.group(1))}[{esc(m.group(2))}] {link(m.group(3), host_of(m.group(3)) or m.group(3))}"


FRESH = N_("A new conversation: earlier messages are not taken into account.")


def reply_blocks(reply: Reply, words: Words = ENGLISH, *, fresh: bool = False) -> list[str]:
    """The reply as HTML paragraphs (each block is whole: never split inside): what kb says first, the
    model's Markdown as Telegram's HTML, passages and web summaries as text; what was searched when it
    differs from what was written, the notes and the sources after it. For a phone: what is wrong is
    said in words, never as an error or a command."""
    said = worded(reply, words, terminal=False)
    blocks: list[str] = [f"<i>{esc(words.tr(FRESH))}</i>"] if fresh else []
    if said.lead:
        lead = esc(sentences(said.lead))
        blocks.append(f"<i>{lead}</i>" if reply.mode == "degraded" else lead)
    if reply.mode == "web":
        blocks += [summary_html(line) for line in said.text.splitlines() if line.strip()]
    elif reply.mode == "degraded":
        blocks += [esc(p.strip()) for p in re.split(r"\n\s*\n", said.text) if p.strip()]
    else:
        blocks += markdown_blocks(said.text)
    if reply.searched_differently:
        blocks.append(italic(words.tr("searched as: {query}", query=reply.searched_differently)))
    blocks += [f"<i>{esc(note)}</i>" for note in said.notes]
    if reply.citations:
        blocks.append(bold(words.tr("Sources")))
        blocks += [citation_html(c) for c in reply.citations]
    return blocks


def reply_messages(reply: Reply, words: Words = ENGLISH, *, fresh: bool = False) -> list[str]:
    """The HTML messages that carry a reply."""
    return split_blocks(reply_blocks(reply, words, fresh=fresh)) or [esc(words.tr("(empty answer)"))]


@dataclass(frozen=True)
class Button:
    """An inline button: label and callback data."""

    text: str
    data: str


def candidate_buttons(record: SearchRecord, *, marks: Mapping[str, str] | None = None) -> list[Button]:
    """One button per candidate: ``web-2 · example.org — title…``, data ``imp:<search id>:<n>``;
    ``marks`` puts a sign before some (the one being imported, imported, failed)."""
    buttons = []
    for n, c in enumerate(record.candidates, 1):
        label = neutral(f"{(marks or {}).get(c.id, '')}{c.id} · {host_of(c.url)} — {c.title}")
        if len(label) > BUTTON_CHARS:
            label = label[: BUTTON_CHARS - 1].rstrip() + "…"
        data = f"imp:{record.search_id}:{n}"
        assert len(data.encode()) <= MAX_CALLBACK_BYTES  # search ids are 8 hex characters
        buttons.append(Button(label, data))
    return buttons


def parse_callback(data: str | None) -> tuple[str, str] | None:
    """(search id, source id) from ``imp:<search id>:<n>``; None for anything else."""
    if not data or len(data.encode()) > MAX_CALLBACK_BYTES:
        return None
    m = re.fullmatch(r"imp:([0-9a-f]{8}):([1-5])", data)
    return (m.group(1), f"web-{m.group(2)}") if m else None
