"""The owner's choice before an import: asked through the client's elicitation form when it offers one;
without a way to ask the owner, nothing is imported. Pure pieces: the question's words and the outcome."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from knowledge.websearch.store import Candidate
from knowledge.words.catalog import Words
from mcpserver.results import host_of


class Choice(BaseModel):
    """The form the owner sees: accepting it with the box ticked imports the page."""

    import_page: bool = Field(default=True, title="Import this page into the knowledge base")


@dataclass(frozen=True)
class NoChannel:
    """The client cannot show the owner a question (no elicitation capability)."""


@dataclass(frozen=True)
class ViaTelegram:
    """The client cannot ask, but the owner's Telegram chat can: the candidate goes there with its button."""


@dataclass(frozen=True)
class NotOffered:
    """The id names no candidate of the latest MCP web search; ``why`` says so."""

    reason: str
    why: str


def waiting(words: Words) -> str:
    """What the tool answers once the candidate is in the owner's Telegram chat."""
    return words.tr(
        "waiting for the owner's choice: the page was sent to the owner's Telegram chat; "
        "nothing is imported unless they tap it"
    )


def question(candidate: Candidate, words: Words) -> str:
    """What the owner is asked: the page's title, host and URL."""
    return words.tr(
        "Import this web page into your knowledge base?\n{title}\n{host}\n{url}",
        title=candidate.title,
        host=host_of(candidate.url),
        url=candidate.url,
    )


def refusal(outcome: object, words: Words) -> str | None:
    """Why nothing is imported for this outcome of asking the owner, or None when the owner chose to import
    (or is being asked in Telegram)."""
    if isinstance(outcome, Choice):
        return None if outcome.import_page else words.tr("nothing was imported: the owner did not choose it")
    if isinstance(outcome, NoChannel):
        return words.tr(
            "nothing was imported: this client cannot ask the owner (it offers no elicitation form); "
            "the owner can import the page with kb import-url"
        )
    if isinstance(outcome, NotOffered):
        return words.tr("nothing was imported: {why}", why=outcome.why)
    if isinstance(outcome, ViaTelegram):
        return None
    return words.tr("nothing was imported: the owner declined or did not answer")
