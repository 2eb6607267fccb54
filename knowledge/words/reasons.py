"""Why something could not be done, in words for a phone: the stable reason codes of kb's refusals
(a web import, a voice note) as sentences in the reader's language. A terminal keeps the error's own
message, which names the object and the fix."""

from __future__ import annotations

from knowledge.words.catalog import N_, Words

REFUSED = {
    # the guarded download (knowledge.websearch.fetch.FetchRefused)
    "bad-url": N_("that is not a web address kb can fetch"),
    "scheme": N_("kb only fetches http and https pages"),
    "userinfo": N_("the address carries a user name or password, which kb refuses"),
    "private-address": N_(
        "the address is on this machine or a private network; kb only fetches public pages"
    ),
    "blocked-address": N_(
        "the address is on this machine or a private network; kb only fetches public pages"
    ),
    "port": N_("the address uses a port kb does not fetch from"),
    "dns": N_("the site's name could not be found"),
    "timeout": N_("the site did not answer in time"),
    "network": N_("the site could not be reached"),
    "redirects": N_("the page redirects too many times"),
    "status": N_("the site answered with an error"),
    "type": N_("it is not a web page, a text or a PDF that kb can keep"),
    "too-large": N_("it is larger than kb downloads"),
    # the choice of a candidate (knowledge.websearch.importer.ImportRefused)
    "expired": N_("this list has expired — search again"),
    "nothing-found": N_("the last web search found nothing to import"),
    "not-in-latest": N_("the latest search has no such candidate: choose one of its list"),
    "stale": N_("this list was replaced by a newer search — use the latest one"),
    "other-chat": N_("this list belongs to another chat"),
    "no-search": N_("there is no web search in this chat yet: search first"),
    "bad-id": N_("that is not a candidate: use web-1 … web-5 of the latest search"),
    "extra-arguments": N_("import takes one candidate only, such as web-2"),
}
SPEECH = {
    "audio-unreadable": N_("That recording could not be read as audio."),
    "audio-too-large": N_("That recording is too large (over 64 MB)."),
    "audio-too-long": N_("That recording is longer than kb transcribes (KB_VOICE_MAX_S)."),
    "no-speech": N_("I could not hear any words in that voice note."),
    "model-missing": N_("The speech model is not on {computer} yet and cannot be downloaded now."),
    "model-unusable": N_("The speech model on {computer} cannot be used."),
    "model-download-failed": N_("The speech model could not be downloaded."),
    "timeout": N_("Transcribing took too long and was stopped."),
    "transcriber-failed": N_("The transcription failed."),
    "interrupted": N_("The transcription was interrupted."),
}
# Why the daemon could not take a file (the reasons of knowledge/inbox/failed/NAME.error.json)
FAILED = {
    "empty": N_("the file is empty"),
    "too-large": N_("the file is larger than kb takes (KB_MAX_SOURCE_MB)"),
    "binary": N_("it is not text kb can read"),
    "no-content": N_("it holds no text"),
    "requires-javascript": N_("the page shows its text only with JavaScript"),
    "timeout": N_("reading it took too long"),
    "converter-crashed": N_("reading it crashed kb's converter"),
    "converter-error": N_("reading it needed more memory than kb allows"),
    "pdf-encrypted": N_("the PDF is locked with a password"),
    "pdf-no-text": N_("nothing legible in the PDF"),
    "pdf-malformed": N_("the PDF is damaged"),
    "pdf-limit": N_("the PDF is beyond what kb reads"),
    "pdf-too-many-pages": N_("the PDF has more pages than kb reads (KB_PDF_MAX_PAGES)"),
    "pdf-unsupported": N_("the PDF uses something kb cannot read"),
    "no-text": N_("nothing legible in it: take the picture again closer and sharper"),
    "ocr-unreadable": N_("its text is in a script kb cannot read here"),
    "svg-no-text": N_("it is a drawing without text"),
    "svg-too-deep": N_("the drawing is nested deeper than kb reads"),
    "canvas-no-text": N_("it holds no text"),
    "canvas-malformed": N_("the file is damaged"),
    "base-no-text": N_("it holds no text"),
    "base-malformed": N_("the file is damaged"),
    "ocr-off": N_("it is an image and OCR is off (KB_OCR=off)"),
    "unreadable": N_("the file could not be read"),
    "write-failed": N_("it could not be written (is the disk full?)"),
    "index-failed": N_("it could not be indexed"),
    "internal-error": N_("a bug in kb stopped it (kb logs --event ingest. on {computer} has the details)"),
}
PROGRESS = {"downloading": N_("downloading"), "converting": N_("converting")}
# Why the index cannot be used (IndexUnreadable.reason; "empty": it holds nothing yet), for a terminal
# in another language than English: what is wrong and the command that fixes it (English shows the
# error itself, which also names the file and SQLite's words)
INDEX_PROBLEMS = {
    "disk-full": N_(
        "the disk is full — free some space; the index is kept as it is and used again once there is room"
    ),
    "damaged": N_("the index is damaged — rebuild it from raw/ with: kb reindex"),
    "busy": N_("the index is busy — try again in a moment"),
    "io-error": N_("the index cannot be read — check the disk it is on (kb doctor says more)"),
    "empty": N_("the index holds nothing yet — add files with: kb ingest PATH"),
}


def refused(reason: str, words: Words) -> str:
    """Why a web import was refused, in words."""
    return words.tr(REFUSED[reason]) if reason in REFUSED else words.tr("refused ({reason})", reason=reason)


def unheard(reason: str, words: Words) -> str:
    """Why a voice note gave no text, in words."""
    return words.tr(SPEECH[reason]) if reason in SPEECH else words.tr(SPEECH["transcriber-failed"])


def not_read(reason: str | None, words: Words) -> str:
    """Why the daemon could not take a file, in words (the log has the rest)."""
    if reason in FAILED:
        return words.tr(FAILED[reason])
    return words.tr("kb could not read it (kb logs --event ingest. on {computer} says why)")


def progress(state: str, words: Words) -> str:
    """A step of an import (downloading, converting), in words."""
    return words.tr(PROGRESS[state]) if state in PROGRESS else state


def index_problem_text(reason: str, words: Words) -> str:
    """Why the index cannot be used, and the fix, in a terminal's words."""
    return words.tr(INDEX_PROBLEMS.get(reason, INDEX_PROBLEMS["io-error"]))
