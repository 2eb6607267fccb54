"""A conversation turn, for any front end: the message resolved against what came before, answered
by the engine, and remembered.

The front end says which conversation (its key), what the owner wrote and, in Telegram, what the
message replies to (an anchor: one of kb's answers, a message carrying a document, or a message
kb knows nothing of, whose text is context). The turn it gets back says what was searched and
whether the conversation started afresh; the front end remembers the message ids of its reply
with :meth:`Conversations.anchor`.

A conversation file that cannot be read or written (a full disk above all) never costs the answer:
the message is answered as if it came first, and the reply says afterwards that it was not
remembered (``not-remembered-disk-full``, ``not-remembered``).

``in:NAME`` and ``#tag`` in a message keep its search to a folder source's documents, to the notes
carrying a tag, or both (knowledge.conversation.scoping), unless the front end gives a scope itself: the
reply says which scope it searched (``scoped``), or why there is none of that name (``scope-refused``,
with the names there are), and then nothing is searched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import structlog

from knowledge.answer.assistant import Engine, Listener
from knowledge.answer.prompt import Exchange
from knowledge.answer.reply import Reply, Said
from knowledge.conversation.followup import Plan, Rewriter, asks_nothing, plan, points_back, stands_alone
from knowledge.conversation.scoping import scope_words
from knowledge.conversation.store import Anchor, Conversation, ConversationError, Conversations, Turn
from knowledge.errors import SourceRefused
from knowledge.retrieval.scope import Scope

log = structlog.get_logger()

# The scope a source's name and a tag ask for (knowledge.sources.registry.scope_asked); SourceRefused
# naming what there is.
Scoper = Callable[[str | None, str | None], Scope | None]

QUOTE_CHARS = 600  # of a replied-to message kb knows nothing of


@dataclass(frozen=True)
class Answered:
    """A turn's outcome: the reply, what was searched for it, its stored turn and whether the
    conversation started afresh with it (an earlier one ended: idle, /new)."""

    reply: Reply
    plan: Plan
    turn_id: int | None
    fresh: bool
    document_id: str | None = None  # the turn was asked about this document


class Conversing:
    """The engine in conversation: one store, one rewriter (None: follow-ups are joined without the model)."""

    def __init__(
        self, engine: Engine, store: Conversations, rewriter: Rewriter | None, scoper: Scoper | None = None
    ) -> None:
        """``scoper``: what ``in:NAME`` and ``#tag`` in a message ask for (None: they are words)."""
        self.engine = engine
        self.store = store
        self.rewriter = rewriter
        self.scoper = scoper

    async def _scoped(self, message: str, scope: Scope | None) -> tuple[str, Scope | None, Said | None]:
        """The message without its scope words, the scope they ask for and what the reply says of it
        (``scope-refused``: nothing is to be searched); as given when the front end gave a scope."""
        if scope is not None or self.scoper is None:
            return message, scope, None
        asked = scope_words(message)
        if asked.source is None and asked.tag is None:
            return message, None, None
        try:
            scope = await asyncio.to_thread(self.scoper, asked.source, asked.tag)
        except SourceRefused as exc:
            log.info("converse.scope_refused", reason=exc.reason)
            return asked.question, None, Said("scope-refused", {"reason": exc.reason, **exc.facts})
        log.info("converse.scoped", source=asked.source is not None, tag=asked.tag is not None)
        facts = {"source": scope.source or "", "tag": scope.tag or ""} if scope else {}
        return asked.question, scope, Said("scoped", facts)

    async def ask_once(
        self,
        message: str,
        *,
        listener: Listener | None = None,
        chat_id: str = "cli",
        language: str | None = None,
        scope: Scope | None = None,
    ) -> Answered:
        """One question outside any conversation (``kb ask`` without a conversation name); ``scope``:
        answered from one source's documents only (knowledge.retrieval.scope)."""
        message, scope, scoped = await self._scoped(message, scope)
        if scoped is not None and scoped.kind == "scope-refused":
            return Answered(Reply("", "no-evidence", said=(scoped,)), Plan(message), None, fresh=False)
        reply = await self.engine.ask(
            message, chat_id=chat_id, listener=listener, language=language, scope=scope
        )
        return Answered(_saying(reply, scoped), Plan(message), None, fresh=False)

    async def ask(
        self,
        key: str,
        message: str,
        *,
        anchor: Anchor | None = None,
        replied_text: str | None = None,
        document: str | None = None,
        question_message_id: int | None = None,
        listener: Listener | None = None,
        chat_id: str = "cli",
        language: str | None = None,
        scope: Scope | None = None,
    ) -> Answered:
        """Answer ``message`` in the key's conversation and remember the turn.

        ``anchor``: what the message replies to, when kb knows it (a turn continues from there, a
        document is asked about); ``replied_text``: the text (or the highlighted quote) of a replied-to
        message kb knows nothing of, context marked as data; ``document``: ask about this document;
        ``scope``: search one source's documents only (knowledge.retrieval.scope)."""
        message, scope, scoped = await self._scoped(message, scope)
        if scoped is not None and scoped.kind == "scope-refused":
            return Answered(Reply("", "no-evidence", said=(scoped,)), Plan(message), None, fresh=False)
        forgotten: ConversationError | None = None
        try:
            conversation = await asyncio.to_thread(self.store.current, key)
        except ConversationError as exc:  # answered all the same, as a first message
            forgotten, conversation = exc, Conversation(0, key, (), None, None, fresh=False)
        turns = _turns_for(conversation, anchor)
        if replied_text and anchor is None:
            quoted = " ".join(replied_text.split())[:QUOTE_CHARS]
            turns = (*turns, _quoted_turn(quoted))
        document = document or _document_for(conversation, anchor, message, turns)
        if not turns and document is None and asks_nothing(message):
            reply = Reply("", "no-evidence", said=(Said("fragment"),))
            return Answered(reply, Plan(message), None, conversation.fresh)
        rewrite = None
        if turns and not stands_alone(message, turns) and self.rewriter is not None:
            rewrite = await self.rewriter(message, turns, _titles(turns))
        searched = plan(message, turns, rewrite)
        log.info(
            "converse.planned",
            how=searched.how,
            turns=len(turns),
            anchored=anchor is not None,
            document=document is not None,
            carried=len(searched.carried),
        )
        reply = await self.engine.ask(
            searched.standalone,
            chat_id=chat_id,
            document=document,
            also=searched.also,
            history=_exchanges(turns),
            listener=listener,
            language=language,
            scope=scope,
        )
        turn_id = None
        if forgotten is None:
            try:
                turn_id = await asyncio.to_thread(
                    self.store.add_turn,
                    conversation.id,
                    message=message,
                    standalone=searched.standalone,
                    answer=reply.text if reply.mode in ("local", "degraded") else "",
                    cited=[c.chunk_id for c in reply.citations],
                    titles=[c.title for c in reply.citations],
                    question_message_id=question_message_id,
                    document_id=document,
                )
            except ConversationError as exc:  # the answer stands; only the memory of it is lost
                forgotten = exc
        if forgotten is not None:
            reply = _not_remembered(reply, forgotten)
        return Answered(_saying(reply, scoped), searched, turn_id, conversation.fresh, document)


def _saying(reply: Reply, said: Said | None) -> Reply:
    """The reply, saying also ``said`` (the scope it searched) when there is something to say."""
    return reply if said is None else replace(reply, said=(*reply.said, said))


def _not_remembered(reply: Reply, exc: ConversationError) -> Reply:
    """The reply, saying after it that its turn was not remembered (and why, when the disk is full)."""
    log.warning("converse.not_remembered", reason=exc.reason, error=str(exc))
    said = Said("not-remembered-disk-full") if exc.reason == "disk-full" else Said("not-remembered")
    return replace(reply, said=(*reply.said, said))


def _turns_for(conversation: Conversation, anchor: Anchor | None) -> tuple[Turn, ...]:
    """The turns a message follows: up to the anchored one when it replies to one of kb's answers."""
    if anchor is None or anchor.turn is None:
        return conversation.turns
    ids = [t.id for t in conversation.turns]
    if anchor.turn.id in ids:
        return conversation.turns[: ids.index(anchor.turn.id) + 1]
    return (anchor.turn,)  # an answer from an earlier conversation


def _document_for(
    conversation: Conversation, anchor: Anchor | None, message: str, turns: Sequence[Turn]
) -> str | None:
    """The document a message asks about: the one the replied-to message carries, or the one the owner
    has just sent when the message points back at it ("how much is this receipt?") and nothing else
    was asked since."""
    if anchor is not None:
        return anchor.document_id
    current = conversation.document_id
    last = turns[-1] if turns else None
    still = current and (last is None or last.at < conversation.document_at or last.document_id == current)
    return current if still and points_back(message) else None


def _quoted_turn(text: str) -> Turn:
    """A replied-to message kb knows nothing of, as an earlier message of the conversation (data)."""
    return Turn(0, f"(replying to a message: «{text}»)", "", "", (), 0.0)


def _titles(turns: Sequence[Turn]) -> list[str]:
    return list(dict.fromkeys(turns[-1].titles)) if turns else []


def _exchanges(turns: Sequence[Turn]) -> list[Exchange]:
    return [(t.message, t.answer) for t in turns if t.message]
