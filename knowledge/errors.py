"""One error tree for kb.

    KbError
    ├── Refused              the base of every error that carries a stable ``reason`` code
    ├── ConfigError          a setting has a bad value (names the variable)
    ├── ConversionError      a source could not become Markdown (reason code + sentence)
    ├── ConversionInterrupted  a conversion was stopped because kb is shutting down
    ├── IndexError_          the index database is unusable or locked
    │   ├── IndexMissing     there is no index yet (an empty knowledge base)
    │   ├── IndexUnreadable  it cannot be read or written now (reason: disk-full, damaged, io-error, busy)
    │   └── WriterLockHeld   another kb process holds the writer lock
    ├── TokenizerError       the configured tokenizer cannot be loaded
    ├── ModelError           the model server failed or is unreachable
    ├── FetchRefused         the web-import guard refused a URL (reason code)
    ├── SourceRefused        a folder source cannot be added or named (reason code + facts)
    ├── SearchError          a web search provider failed
    └── SpeechError          a voice note could not be turned into text (reason code + sentence)

Foreign exceptions are translated once, at the boundary, with ``raise ... from exc``.
Every message names the object and, where there is one, the fix.
"""

from __future__ import annotations

import errno

# A write refused for want of room: the disk is full, the owner's quota is used up, or a file-size limit.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class KbError(Exception):
    """Base class of every error kb reports to a user."""


class Refused(KbError):
    """An error with a stable ``reason`` code (what the logs, the tests and the words for people key on)
    and a sentence that names the object and, where there is one, the fix."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ConfigError(KbError):
    """A setting has a bad value; the message names the variable."""


class ConversionError(Refused):
    """A source could not be converted; ``reason`` is a stable code such as ``pdf-encrypted``."""


class ConversionInterrupted(KbError):
    """A conversion was stopped because kb is shutting down; the source stays where it was."""


class IndexError_(KbError):
    """The index database cannot be used."""


class IndexMissing(IndexError_):
    """There is no index yet: the knowledge base is empty."""


class IndexUnreadable(Refused, IndexError_):
    """The index exists but cannot be read or written now; ``reason`` is ``disk-full``, ``damaged``,
    ``io-error`` or ``busy``. Never the same as an empty knowledge base."""


class WriterLockHeld(IndexError_):
    """Another process holds the writer lock of this knowledge base."""


class IndexVanished(IndexError_):
    """The index file this writer opened was deleted or replaced under it."""


class TokenizerError(KbError):
    """The configured tokenizer cannot be loaded."""


class ModelError(KbError):
    """The model server failed or cannot be reached."""


class FetchRefused(Refused):
    """The web-import guard refused a URL; ``reason`` is a stable code."""


class SourceRefused(Refused):
    """A folder source refused (``kb sources add``, ``rm``, ``rescan``), or a search scope (a source or a
    tag no document carries, ``unknown-tag``): ``reason`` is a stable code
    (knowledge.words.sources says it in the reader's language) and ``facts`` fill its sentence."""

    def __init__(self, reason: str, message: str, **facts: str) -> None:
        super().__init__(reason, message)
        self.facts = facts


class SearchError(KbError):
    """A web search provider failed."""


class SpeechError(Refused):
    """A voice note or audio file could not be turned into text; ``reason`` is a stable code.

    Reasons: ``audio-unreadable``, ``audio-too-large``, ``audio-too-long``, ``no-speech``,
    ``model-missing``, ``model-unusable``, ``model-download-failed``, ``timeout``, ``transcriber-failed``,
    ``interrupted``.
    The message is one sentence that can be shown to the owner as it is.
    """
