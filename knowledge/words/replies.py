"""The engine's replies in words: what kb says about an answer (knowledge.answer.reply.Said), in
the reader's language, for a phone or for a terminal.

A phone is told what is wrong in words ("the model server is not running on the Mac"); a terminal
also gets the error itself and the command that fixes it. Lead sentences come before the reply's
text (the model's words, or the passages' excerpts), notes after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.answer.reply import Reply, Said
from knowledge.text import sentences
from knowledge.websearch.filters import host_of
from knowledge.words.catalog import ENGLISH, N_, Words
from knowledge.words.reasons import index_problem_text
from knowledge.words.sources import REFUSALS

# What kb says before the reply's text, and after it.
LEADS = {
    "nothing-local": N_("The knowledge base has nothing on this."),
    "not-answered": N_("Your documents do not answer this."),
    "web-off": N_("Web search is off."),
    "web-not-searched": N_("No web search was made."),
    "model-still-unavailable": N_("The model is still unavailable."),
    "best-passages": N_("The best matching passages:"),
    "web-found": N_("From the web (nothing imported; pick one to import it):"),
    "web-searched": N_("Searched the web:"),
    "fragment": N_("Say a little more: that message is too short to search for on its own."),
}
NOTES = {
    "web-off-how": N_(
        "Web search is off (KB_WEB_SEARCH=off): set KB_WEB_SEARCH=on, or search when you ask with"
        " /search QUESTION (or kb websearch)."
    ),
    "web-ask-how": N_(
        "Web search runs only when asked (KB_WEB_SEARCH=ask): /search QUESTION (or kb websearch) searches it."
    ),
    "not-from-kb": N_("(Not from your knowledge base: the knowledge base has nothing on this.)"),
    "document-empty": N_("That document has no text to answer from."),
    "document-not-answered": N_("That document does not answer it."),
    "evidence-too-small": N_("(the passages found do not fit the evidence budget)"),
    "cut-off": N_("(The answer was cut off: the model server stopped.)"),
    "not-remembered-disk-full": N_(
        "(Not remembered: the disk is full. The answer stands, but a follow-up will not know it; free some space.)"
    ),
    "not-remembered": N_(
        "(Not remembered: the conversation file cannot be written. The answer stands, but a follow-up will not know it.)"
    ),
}
# Shown in place of the reply's text when it has none (a web search without a summary or results).
BODIES = {
    "web-unsummarised": N_("The web has these candidates; none was summarised."),
    "web-nothing-passed": N_("No web result passed the filters."),
}
# Why the model is not answering, in words (an English terminal is shown the error itself).
UNAVAILABLE = {
    "not-running": N_("The model server is not running on {computer}."),
    "no-answer": N_("The model server did not answer in time."),
    "bad-answer": N_("The model server answered with an error."),
    "empty": N_("The model returned nothing."),
}
# Why the documents cannot be searched now, for a phone (a terminal is shown the error and its fix).
UNREADABLE = {
    "disk-full": N_(
        "Your knowledge base cannot be read right now: {computer}'s disk is full. Free some space; nothing is lost."
    ),
    "damaged": N_(
        "Your knowledge base's index is damaged; kb doctor on {computer} says how to rebuild it. Your documents are safe."
    ),
    "busy": N_("Your knowledge base is busy; try again in a moment."),
    "io-error": N_(
        "Your knowledge base cannot be read right now; kb doctor on {computer} says why. Nothing is lost."
    ),
}


def unavailable_text(reason: str, words: Words) -> str:
    """Why the model is not answering, in words (where it should run named as the owner's computer)."""
    return words.tr(UNAVAILABLE.get(reason, UNAVAILABLE["bad-answer"]))


def unreadable_text(reason: str, words: Words) -> str:
    """Why the documents cannot be searched now (IndexUnreadable.reason), in a phone's words."""
    return words.tr(UNREADABLE.get(reason, UNREADABLE["io-error"]))


# With a detail: a terminal reads the error; a phone, the sentence alone.
DETAILED = {
    "web-rate-limited": (
        N_("Web search is rate-limited: {detail}"),
        N_("Web search is busy right now: try again in a while."),
    ),
    "web-failed": (N_("Web search failed: {detail}"), N_("Web search failed: try again in a while.")),
    "web-note": (N_("{detail}"), N_("Some web searches failed; there may be fewer candidates.")),
}


@dataclass(frozen=True)
class Worded:
    """A reply's words: the lead sentences, the reply's text, the notes."""

    lead: list[str]
    text: str
    notes: list[str]


# Which documents a chat's question searched (``in:NAME``, ``#tag``: knowledge.conversation.scoping).
SCOPED = {
    (True, False): N_("(Searched only the source {source}.)"),
    (False, True): N_("(Searched only the notes tagged #{tag}.)"),
    (True, True): N_("(Searched only the notes tagged #{tag} in the source {source}.)"),
}
SCOPES = ("scoped", "scope-refused")  # the kinds said of a question's scope (a refusal: instead of a reply)


def scope_text(said: Said, words: Words) -> str:
    """The scope a question searched, or why there is none of the name it gave (and what there is)."""
    facts = {k: str(v) for k, v in said.facts.items()}
    if said.kind == "scope-refused":
        return words.tr(REFUSALS[facts.pop("reason")], **facts)
    source, tag = facts.get("source", ""), facts.get("tag", "")
    return words.tr(SCOPED[bool(source), bool(tag)], source=source, tag=tag)


def said_text(said: Said, words: Words, *, terminal: bool) -> str:
    """One thing kb says, in words."""
    facts = dict(said.facts)
    if said.kind in LEADS:
        return words.tr(LEADS[said.kind])
    if said.kind in NOTES:
        return words.tr(NOTES[said.kind])
    if said.kind in BODIES:
        return words.tr(BODIES[said.kind])
    if said.kind == "model-unavailable":
        if terminal and words.language == "en":  # the error's own words, which name the fix
            return words.tr("The model is unavailable ({detail}).", detail=facts.get("detail", ""))
        text = unavailable_text(str(facts.get("reason")), words)
        if terminal and facts.get(
            "fix"
        ):  # the command that starts it is the terminal's, alone at the line's end
            text = sentences([text, words.tr("Start it with: {command}", command=facts["fix"])]) + "\n"
        return text
    if said.kind == "index-unreadable":
        if terminal:  # English reads the error itself; another language, what it means and the fix
            detail = (
                facts.get("detail", "")
                if words.language == "en"
                else index_problem_text(str(facts.get("reason")), words)
            )
            return words.tr("The knowledge base cannot be searched: {detail}", detail=detail)
        return unreadable_text(str(facts.get("reason")), words)
    if said.kind == "model-empty":
        text = words.tr("The model returned an empty answer (or only its reasoning).")
        if facts.get("at_limit"):
            limit = "It stopped at the output limit: raise KB_MAX_OUTPUT_TOKENS, or use a model that does not think aloud."
            text = sentences([text, words.tr(limit)])
        return text
    if said.kind in SCOPES:
        return scope_text(said, words)
    if said.kind in DETAILED:  # the error's own (English) words for an English terminal; else what it means
        technical, phone = DETAILED[said.kind]
        if terminal and words.language == "en":
            return words.tr(technical, detail=facts.get("detail", ""))
        return words.tr(phone)
    raise ValueError(f"no words for {said.kind!r}")  # a kind the engine says must have words here


def worded(reply: Reply, words: Words, *, terminal: bool) -> Worded:
    """The reply's lead sentences, text and notes, in words."""
    lead, body, notes = [], [], []
    for said in reply.said:
        text = said_text(said, words, terminal=terminal)
        if said.kind in BODIES or said.kind == "scope-refused":
            body.append(text)
        elif (
            said.kind in LEADS
            or said.kind == "index-unreadable"
            or (said.kind == "model-unavailable" and reply.mode == "degraded")
        ):
            lead.append(text)
        else:
            notes.append(text)
    return Worded(lead, reply.text or "\n".join(body), notes)


def text_and_note(reply: Reply, words: Words) -> tuple[str, str | None]:
    """The reply as two strings, for ``kb ask --json``'s ``text`` and ``note``: the lead and the text
    (on one line before a web summary, a paragraph before anything else), and the notes."""
    w = worded(reply, words, terminal=True)
    lead = sentences(w.lead)
    if reply.mode == "web":
        text = "\n".join(p for p in (lead, w.text) if p)
    else:
        text = "\n\n".join(p for p in (lead, w.text) if p)
    return text, sentences(w.notes) or None


def plain(reply: Reply, words: Words, *, answer: bool = True) -> str:
    """A reply for a terminal: its words (``answer`` False: the model's answer was shown already, as it
    streamed), what was searched when it differs from what was written, the sources, the candidates."""
    text, note = text_and_note(reply, words)
    if reply.mode == "web":
        text = "\n".join(sourced(line, words) for line in text.splitlines())
    if not answer:
        text = sentences(worded(reply, words, terminal=True).lead)
    parts = [text]
    if reply.searched_differently:
        parts.append(words.tr("(searched as: {query})", query=reply.searched_differently))
    if note:
        parts.append(note)
    if reply.citations:
        parts.append(words.tr("Sources:") + "\n" + "\n".join(c.render() for c in reply.citations))
    if reply.candidates:
        lines = [f"{c.id} · {host_of(c.url)} — {c.title}\n       {c.url}" for c in reply.candidates]
        parts.append(words.tr("Web candidates (not imported):") + "\n" + "\n".join(lines))
    return "\n\n".join(p for p in parts if p)


_SOURCED = re.compile(r"^(.*\[web-\d\]) \[source: (\S+)\]$")


def sourced(line: str, words: Words) -> str:
    """A web summary line ``text [web-N] [source: URL]`` with its source in the reader's words."""
    m = _SOURCED.match(line)
    if m is None:
        return line
    return m.group(1) + " " + words.tr("[source: {url}]", url=m.group(2))


def text_of(reply: Reply, words: Words = ENGLISH) -> str:
    """The reply's text as ``kb ask --json`` gives it (see text_and_note)."""
    return text_and_note(reply, words)[0]


def note_of(reply: Reply, words: Words = ENGLISH) -> str | None:
    """The reply's note as ``kb ask --json`` gives it (see text_and_note)."""
    return text_and_note(reply, words)[1]
