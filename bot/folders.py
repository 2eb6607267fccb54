"""/folders: the owner's folders kb keeps in sync (kb sources), each with its files indexed, waiting,
skipped and failed counted now, in the chat's language."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog
from telegram import Update
from telegram.ext import ContextTypes

from bot.deps import deps_of, words_of
from bot.render import bold, esc, italic
from bot.send import say, typing
from knowledge.config import Settings
from knowledge.errors import ConfigError
from knowledge.sources.registry import config_file, read_sources
from knowledge.sources.report import SourceReport, reports
from knowledge.words.catalog import N_, Words
from knowledge.words.sources import SAID, counts_line

log = structlog.get_logger()

HEAD = N_("Folders kept in sync")
NONE = N_(
    "No folders yet: kb sources add PATH --name NAME on your computer adds one (a notes vault, Documents)."
)
LEFT_OUT = N_("kb sources {name} on your computer lists each file left out, and why.")
UNREADABLE = N_("The list of folders (kb.toml) cannot be read: kb doctor on your computer says why.")


async def on_folders(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/folders: each source with its counts (a walk of its folder, read-only)."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    w = words_of(deps, chat_id)
    async with typing(context, chat_id):
        try:
            found = await asyncio.to_thread(_reports, deps.settings)
        except ConfigError as exc:
            log.warning("bot.folders_unreadable", error=str(exc))
            await say(context, chat_id, esc(w.tr(UNREADABLE)))
            return
    log.info("bot.folders", sources=len(found))
    await say(context, chat_id, folders_html(found, w))


def _reports(settings: Settings) -> list[SourceReport]:
    return reports(settings.index_path, read_sources(config_file(settings.home)))


def folders_html(found: Sequence[SourceReport], words: Words) -> str:
    """The sources, one paragraph each: the name, the folder, the counts; then where to see why a file
    was left out, when one was."""
    if not found:
        return esc(words.tr(NONE))
    blocks = [bold(words.tr(HEAD))]
    for r in found:
        where = r.path if r.root == r.path else f"{r.path} → {r.root}"
        lines = [f"<b>{esc(r.name)}</b> · <code>{esc(where)}</code>", esc(counts_line(words, r.counts))]
        if not r.is_present:
            lines.append(italic(words.tr(SAID["absent"])))
        blocks.append("\n".join(lines))
    left_out = [r.name for r in found if r.counts.get("skipped") or r.counts.get("failed")]
    if left_out:
        blocks.append(italic(words.tr(LEFT_OUT, name=left_out[0])))
    return "\n\n".join(blocks)
