"""kb feedback: the owner's votes on answers (👍 / 👎 in Telegram, /good and /bad in kb chat, kb feedback
good|bad --conversation NAME after kb ask --conversation NAME), as a table or exported as a regression set."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import datetime
from typing import TextIO

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from knowledge.config import Settings
from knowledge.feedback.record import BAD, GOOD, VOTE_NAMES, Vote, front_of, regression_set
from knowledge.words.catalog import N_, terminal_words

DEFAULT_ROWS = 50


# After kb ask --conversation NAME: what kb feedback good|bad --conversation NAME says (cli.chat's words
# for the rest: noted, changed, already noted, not saved)
NOTHING_TO_RATE = N_(
    "The conversation {name} has no answer to rate yet: ask in it first (kb ask --conversation {name} QUESTION)."
)
WEB_HOW = N_("To search the web for it: kb websearch {question}")


def _feedback_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "vote", nargs="?", choices=("good", "bad"),
        help="vote on the last answer of the conversation --conversation NAME (kb ask --conversation NAME)",
    )  # fmt: skip
    p.add_argument("--conversation", metavar="NAME", help="the conversation whose last answer the vote is on")
    p.add_argument("--json", action="store_true", help="export the votes as a regression set (JSON)")
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"only the N newest votes (default: {DEFAULT_ROWS} in the table, all with --json; 0: all)",
    )


def cmd_feedback(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb feedback [--json] [--limit N]"""
    from knowledge.conversation.store import Conversations
    from knowledge.feedback.store import Feedback

    words = terminal_words(settings)
    if (args.vote is None) != (args.conversation is None):
        said = words.tr("feedback good|bad goes with --conversation NAME (in kb chat: /good or /bad)")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    if args.vote is not None:
        return asyncio.run(
            vote_on_last(settings, args.conversation, GOOD if args.vote == "good" else BAD, out=out)
        )
    if args.limit is not None and args.limit < 0:
        said = words.tr("--limit N needs N >= 0")
        print(f"kb: {said}", file=err)
        return EXIT_USAGE
    limit = args.limit if args.limit is not None else (None if args.json else DEFAULT_ROWS)
    votes: list[Vote] = []
    if settings.conversations_path.exists():  # listing votes never makes the file
        votes = Feedback(Conversations(settings.conversations_path)).votes(limit=limit or None)
    if args.json:
        print(json.dumps(regression_set(votes), ensure_ascii=False, indent=2), file=out)
        return EXIT_OK
    if not votes:
        print(words.tr(NO_VOTES), file=out)
        return EXIT_OK
    print(f"{'when':<16}  {'vote':<4}  {'door':<5}  {'from':<8}  {'cited':>5}  question", file=out)
    for v in votes:
        print(table_row(v), file=out)
    good = sum(v.vote == 1 for v in votes)
    counted = words.ntr("{n} vote", "{n} votes", len(votes))
    print(words.tr("{votes}: {good} good, {bad} bad (kb feedback --json exports them as a regression set)",
                   votes=counted, good=good, bad=len(votes) - good), file=out)  # fmt: skip
    return EXIT_OK


async def vote_on_last(settings: Settings, name: str, vote: int, *, out: TextIO) -> int:
    """The owner's vote on the last answer of ``kb ask --conversation NAME``, said as kb chat says it
    (exit 1 when there is no answer to vote on, or the vote cannot be kept)."""
    from cli.chat import NOT_SAVED, cast_text
    from knowledge.conversation.store import ConversationError, Conversations
    from knowledge.feedback.store import Feedback, FeedbackRefused

    words, key = terminal_words(settings), f"cli:{name}"
    try:
        last = None
        if settings.conversations_path.exists():  # no conversation file: no answer, and none is made
            feedback = Feedback(Conversations(settings.conversations_path))
            last = await asyncio.to_thread(feedback.last, key)
        if last is None:
            print(words.tr(NOTHING_TO_RATE, name=name), file=out)
            return EXIT_FAILED
        cast = await asyncio.to_thread(feedback.cast, key, last[0], vote)
    except (ConversationError, FeedbackRefused) as exc:
        print(words.tr(NOT_SAVED, why=str(exc)), file=out)
        return EXIT_FAILED
    print(cast_text(cast, words, web_how=WEB_HOW), file=out)
    return EXIT_OK


NO_VOTES = N_("no votes yet — tap 👍 or 👎 under an answer in Telegram, or type /good or /bad in kb chat")


def table_row(v: Vote) -> str:
    """One vote as a line of the table (the time in local time)."""
    when = datetime.fromtimestamp(v.voted_at or v.answered_at).strftime("%Y-%m-%d %H:%M")
    question = " ".join(v.rated.question.split())
    standalone = " ".join(v.rated.standalone.split())
    if standalone and standalone != question:
        question += f"  (searched as: {standalone})"
    return (
        f"{when:<16}  {VOTE_NAMES.get(v.vote or 0, '?'):<4}  {v.rated.door:<5}  {front_of(v.key):<8}  "
        f"{len(v.rated.cited):>5}  {question}"
    )


COMMANDS = {
    "feedback": Command(
        cmd_feedback,
        help="the votes on answers (👍 / 👎 in Telegram, /good and /bad in kb chat, good|bad --conversation NAME); "
        "--json: a regression set",
        description="You vote on an answer with 👍 or 👎 under it in Telegram, with /good or /bad in kb chat "
        "(about the last answer), or with kb feedback good|bad --conversation NAME about the last answer of kb ask "
        "--conversation NAME (after bad, it prints the kb websearch line for the question searched). Without a "
        "vote, list the answers you voted on, newest vote first: when, the vote (good or bad), the door "
        "the answer went through (local: from your documents, web: web candidates, none: neither), where "
        "(telegram, terminal, cli), how many passages it cited, and the question (with the standalone question "
        "searched, when a follow-up was rewritten). A second vote on the same answer replaces the first. "
        "Votes are kept in runs/conversations.sqlite3 until you delete it; an answer never voted on is "
        "forgotten after 30 days. With --json, export every vote as a regression set, oldest first: a list of "
        '{"question","standalone","vote","door","mode","chat","answered_at","at","expected","rejected"}, '
        'where expected (for good) or rejected (for bad) lists the cited passages as {"document_id",'
        '"chunk_id","title","path","lines"}; bench/feedback_replay.py replays such a file against the index. '
        "Exit status: 0 (also when there are no votes), 1 when the conversation has no answer to vote on or "
        "the vote cannot be kept, 2 usage.",
        arguments=_feedback_arguments,
    ),
}
