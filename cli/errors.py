"""kb's errors as the command line says them (``kb: …`` on stderr), in the terminal's language.

English says the error's own message, which names the object and the fix. Another language says what
the error's kind and reason code mean, with the objects the message names that are not words (paths,
settings, addresses): the message itself is English and stays in the log.
"""

from __future__ import annotations

import re

from knowledge.errors import (
    ConfigError,
    ConversionError,
    FetchRefused,
    IndexMissing,
    IndexUnreadable,
    IndexVanished,
    KbError,
    ModelError,
    SearchError,
    SourceRefused,
    SpeechError,
    TokenizerError,
    WriterLockHeld,
)
from knowledge.words.catalog import N_, Words
from knowledge.words.reasons import index_problem_text, not_read, refused, unheard
from knowledge.words.sources import REFUSALS

# What an error of each kind means, when no reason code says more ({what}: the settings, paths or
# addresses its message names)
KINDS = (
    (WriterLockHeld, N_("another kb process is writing the index ({what}): wait for it, or stop it")),
    (IndexVanished, N_("the index was removed while kb was using it: run kb reindex")),
    (TokenizerError, N_("the tokenizer cannot be loaded ({what}): kb doctor says why")),
    (ModelError, N_("the model server did not answer as expected ({what}): kb doctor says why")),
    (SearchError, N_("the web search failed ({what}): kb logs says why")),
    (ConfigError, N_("a setting has a value kb cannot use ({what}): kb config shows the settings")),
)
OTHER = N_("kb could not do it ({what}): kb logs says why")
# The objects a message names that read the same in every language: settings, URLs, paths, names of files
_NAMED = re.compile(
    r"\bKB_\w+|https?://\S+|(?<![\w./~-])(?:~|\.{0,2})/[\w./~-]+"
    r"|(?<![\w-])[\w-]{1,100}\.(?:md|toml|json|env|tar\.gz|sqlite3)\b"  # each try starts a name: linear
)


class Said(KbError):
    """An error already said in the reader's words (printed as it is)."""


def error_text(exc: KbError, words: Words) -> str:
    """What ``kb: …`` says of ``exc`` in ``words``' language."""
    if words.language == "en" or isinstance(exc, Said):
        return str(exc)
    reason = getattr(exc, "reason", "")
    if isinstance(exc, IndexMissing):
        return index_problem_text("empty", words)
    if isinstance(exc, IndexUnreadable):
        return index_problem_text(reason, words)
    if isinstance(exc, SourceRefused) and reason in REFUSALS:
        return words.tr(REFUSALS[reason], **exc.facts)
    if isinstance(exc, FetchRefused):
        return words.tr("refused: {why}", why=refused(reason, words))
    if isinstance(exc, SpeechError):
        return unheard(reason, words)
    if isinstance(exc, ConversionError):
        return not_read(reason, words)
    what = ", ".join(dict.fromkeys(m.rstrip(".,;:)") for m in _NAMED.findall(str(exc)))) or "-"
    message = next((message for kind, message in KINDS if isinstance(exc, kind)), OTHER)
    return words.tr(message, what=what)
