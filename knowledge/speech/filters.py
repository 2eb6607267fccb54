"""What kb keeps of Whisper's output: the language, the segments worth keeping, Traditional Chinese.

Pure functions of values, shared by every transcriber:

* :func:`pick_language`: Whisper detects among ~100 languages; kb's owner speaks Chinese, English
  or Thai, so the likeliest of those three wins (Cantonese counts as Chinese). Never another one:
  a short or noisy note detected as Japanese or Welsh is transcribed as the closest of the three.
* :func:`clean_segments`: drops what Whisper produces when nobody speaks — segments it flags as
  silence (``no_speech_prob`` above 0.6 with ``avg_logprob`` below -1, Whisper's own rule),
  repetition loops (``compression_ratio`` above 2.4, Whisper's own threshold, still exceeded
  after all its retries), and the phantom phrases it learnt from subtitled videos
  (:data:`PHANTOM_PHRASES`, :data:`PHANTOM_MARKS`).
* :func:`to_traditional`: Chinese text goes through OpenCC ``s2twp`` (Simplified to Traditional
  with Taiwan phrasing), so the owner's notes stay in Traditional characters; other text is untouched.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knowledge.text import opencc_converter

LANGUAGES = ("zh", "en", "th")
FOLDED_INTO = {"yue": "zh"}  # Cantonese speech is written as Chinese

NO_SPEECH_PROB = 0.6
LOGPROB_FLOOR = -1.0
COMPRESSION_CEILING = 2.4

# Given to Whisper before a Chinese note, in Traditional characters, so that it writes Traditional.
ZH_PROMPT = "以下是用繁體中文記錄的語音。"

# Whole segments Whisper invents over silence or noise (credits of the subtitled videos it was trained
# on). Compared after folding (case, punctuation, spaces, Simplified→Traditional), so one spelling each.
PHANTOM_PHRASES = (
    "Thank you for watching",
    "Thanks for watching",
    "Thank you so much for watching",
    "Please subscribe",
    "Thank you",
    "you",
    "謝謝觀看",
    "感謝觀看",
    "請不吝點贊訂閱轉發打賞支持明鏡與點點欄目",
    "字幕由Amara.org社區提供",
    "ご視聴ありがとうございました",
    "ขอบคุณที่รับชม",
    ZH_PROMPT,  # Whisper repeats its prompt when there is nothing else to write
)
# Pieces that mark a whole segment as a subtitle credit wherever they appear in it.
PHANTOM_MARKS = ("Amara.org", "明鏡與點點", "字幕志願者")


@dataclass(frozen=True)
class Segment:
    """A stretch of the recording and Whisper's text and confidence figures for it."""

    start_s: float
    end_s: float
    text: str
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 1.0


def pick_language(probabilities: Mapping[str, float]) -> str:
    """The likeliest of Chinese, English and Thai under Whisper's detection probabilities."""
    scores = dict.fromkeys(LANGUAGES, 0.0)
    for code, p in probabilities.items():
        target = FOLDED_INTO.get(code, code)
        if target in scores:
            scores[target] += p
    return max(LANGUAGES, key=lambda code: scores[code])  # ties: the order of LANGUAGES


def drop_reason(segment: Segment) -> str | None:
    """Why this segment is not speech ("silence", "repetition", "phantom", "empty"), or None to keep it."""
    if not fold(segment.text):
        return "empty"
    if segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < LOGPROB_FLOOR:
        return "silence"
    if segment.compression_ratio > COMPRESSION_CEILING:
        return "repetition"
    if is_phantom(segment.text):
        return "phantom"
    return None


def clean_segments(segments: Sequence[Segment]) -> tuple[list[Segment], list[tuple[Segment, str]]]:
    """The segments to keep, and the dropped ones with their reason."""
    kept: list[Segment] = []
    dropped: list[tuple[Segment, str]] = []
    for segment in segments:
        reason = drop_reason(segment)
        if reason is None:
            kept.append(segment)
        else:
            dropped.append((segment, reason))
    return kept, dropped


def is_phantom(text: str) -> bool:
    """True when ``text`` is one of Whisper's known phantom phrases (or carries a subtitle credit)."""
    folded = fold(text)
    return folded in _phantom_phrases() or any(mark in folded for mark in _phantom_marks())


def fold(text: str) -> str:
    """``text`` for comparison: Traditional characters, case-folded, without punctuation, symbols or spaces."""
    kept = "".join(ch for ch in text if unicodedata.category(ch)[0] not in "PSZC")
    return opencc_converter("s2t")(kept.casefold()) if kept else ""


def to_traditional(text: str, language: str) -> str:
    """Chinese text (language ``zh``, or any text with Han characters) in Traditional, Taiwan phrasing."""
    if language == "zh" or any(_is_han(ch) for ch in text):
        return opencc_converter("s2twp")(text)
    return text


def join_segments(segments: Sequence[Segment]) -> str:
    """The transcript's text: the segments' text as Whisper wrote it (its own spaces), on one line."""
    return " ".join("".join(s.text for s in segments).split())


def _is_han(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" or "\U00020000" <= ch <= "\U0002ebef"


@functools.cache
def _phantom_phrases() -> frozenset[str]:
    return frozenset(fold(p) for p in PHANTOM_PHRASES)


@functools.cache
def _phantom_marks() -> tuple[str, ...]:
    return tuple(fold(m) for m in PHANTOM_MARKS)
