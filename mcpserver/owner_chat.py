"""The owner's Telegram chat as the way to ask about an import when the MCP client cannot ask: the candidate
is kept as the chat's latest search (web-1) and sent with the bot's usual button; the owner's tap imports it
in the bot, exactly like a candidate of their own search."""

from __future__ import annotations

import aiohttp
import structlog

from bot.render import candidate_buttons
from knowledge.config import Settings
from knowledge.errors import KbError
from knowledge.websearch.store import Candidate, CandidateStore
from knowledge.words.catalog import Words
from mcpserver.results import host_of

log = structlog.get_logger()


class OwnerUnreachable(KbError):
    """The Bot API did not take the message (the reason never includes the token)."""


def owner_chat(settings: Settings) -> int | None:
    """The chat the candidate goes to: the first allowed user's private chat, when a bot is configured."""
    if not settings.telegram_token or not settings.telegram_allowed_users:
        return None
    return settings.telegram_allowed_users[0]


def offer_text(candidate: Candidate, client: str, words: Words) -> str:
    """The message the owner reads above the button."""
    return words.tr(
        "{client} found this page and asks to import it into your knowledge base:\n{title}\n{host}\n{url}\n"
        "Tap it to import it; nothing is imported otherwise.",
        client=client,
        title=candidate.title,
        host=host_of(candidate.url),
        url=candidate.url,
    )


async def offer(
    settings: Settings,
    store: CandidateStore,
    candidate: Candidate,
    question: str,
    *,
    client: str,
    words: Words,
    session: aiohttp.ClientSession,
) -> int:
    """Keep the candidate as the owner's chat's latest search and send it with its button; the message id."""
    chat = owner_chat(settings)
    if chat is None:
        raise OwnerUnreachable("no Telegram bot is configured (KB_TELEGRAM_TOKEN, KB_TELEGRAM_ALLOWED_USERS)")
    record = store.save(
        str(chat), question, [question], [(candidate.title, candidate.url, candidate.snippet)]
    )
    button = candidate_buttons(record)[0]
    body = {
        "chat_id": chat,
        "text": offer_text(candidate, client, words),
        "link_preview_options": {"is_disabled": True},
        "reply_markup": {"inline_keyboard": [[{"text": button.text, "callback_data": button.data}]]},
    }
    url = f"{settings.telegram_api_url}{settings.telegram_token}/sendMessage"
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=15)) as response:
            answer = await response.json(content_type=None)
            status = response.status
    except (
        aiohttp.ClientError,
        TimeoutError,
        ValueError,
    ) as exc:  # the message of some names the URL: not said
        raise OwnerUnreachable(f"the Telegram Bot API could not be reached ({type(exc).__name__})") from None
    if not isinstance(answer, dict) or not answer.get("ok"):
        said = answer.get("description") if isinstance(answer, dict) else None
        raise OwnerUnreachable(f"the Telegram Bot API refused the message (HTTP {status}: {said or '?'})")
    log.info("mcp.offered", chat=chat, search_id=record.search_id, host=host_of(candidate.url))
    return int(answer["result"]["message_id"])
