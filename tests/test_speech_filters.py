"""What kb keeps of Whisper's output: zh/en/th only, no phantom phrases, Chinese in Traditional."""

from __future__ import annotations

import pytest

from knowledge.speech.filters import (
    PHANTOM_MARKS,
    PHANTOM_PHRASES,
    Segment,
    clean_segments,
    drop_reason,
    fold,
    is_phantom,
    join_segments,
    pick_language,
    to_traditional,
)
from knowledge.speech.transcribe import make_transcript


@pytest.mark.parametrize(
    ("probabilities", "language"),
    [
        ({"en": 0.7, "zh": 0.2, "th": 0.1}, "en"),
        ({"th": 0.5, "en": 0.3}, "th"),
        ({"ja": 0.9, "zh": 0.05, "en": 0.04, "th": 0.01}, "zh"),  # never Japanese: the closest of the three
        ({"cy": 0.8, "ko": 0.15, "en": 0.03, "th": 0.02}, "en"),
        ({"yue": 0.5, "en": 0.35, "zh": 0.15}, "zh"),  # Cantonese counts as Chinese: 0.65 against 0.35
        ({}, "zh"),  # nothing known: the first of zh, en, th
    ],
)
def test_the_language_is_always_chinese_english_or_thai(probabilities, language):
    assert pick_language(probabilities) == language


@pytest.mark.parametrize(
    "text",
    [
        "Thank you for watching!",
        " thanks for watching.",
        "THANK YOU SO MUCH FOR WATCHING",
        "Thank you.",
        " you",
        "Please subscribe!",
        "字幕由Amara.org社区提供",
        "字幕由 Amara.org 社群提供",
        "请不吝点赞 订阅 转发 打赏支持明镜与点点栏目",
        "請不吝點贊訂閱轉發打賞支持明鏡與點點欄目",
        "中文字幕志愿者 李宗盛",
        "谢谢观看。",
        "ご視聴ありがとうございました",
        "ขอบคุณที่รับชม",
        "以下是用繁體中文記錄的語音。",  # Whisper repeating kb's own prompt
    ],
)
def test_whispers_phantom_phrases_are_recognised_in_any_spelling(text):
    assert is_phantom(text)
    assert drop_reason(Segment(0.0, 2.0, text)) == "phantom"


@pytest.mark.parametrize(
    "text",
    [
        "How deep is Lake Quillan?",
        "Thank you for the answer, how deep is it?",
        "Did you watch the match?",
        "這個軟體的記憶體有多大",
        "ทีมรับของแพนเธอร์สยอมแพ้ที่คะแนนเท่าไร",
        "What does amara mean?",
    ],
)
def test_real_questions_are_kept(text):
    assert not is_phantom(text)
    assert (
        drop_reason(Segment(0.0, 2.0, text, no_speech_prob=0.1, avg_logprob=-0.3, compression_ratio=1.2))
        is None
    )


@pytest.mark.parametrize(
    ("segment", "reason"),
    [
        (Segment(0, 2, " How deep is it?", no_speech_prob=0.9, avg_logprob=-1.4), "silence"),
        (
            Segment(0, 2, " How deep is it?", no_speech_prob=0.9, avg_logprob=-0.2),
            None,
        ),  # confident words win
        (Segment(0, 2, " How deep is it?", no_speech_prob=0.2, avg_logprob=-1.4), None),  # unsure, but speech
        (Segment(0, 2, " the the the the the the", compression_ratio=3.1), "repetition"),
        (Segment(0, 2, " ... "), "empty"),
        (Segment(0, 2, ""), "empty"),
    ],
)
def test_silence_and_repetition_loops_are_dropped_by_whispers_own_figures(segment, reason):
    assert drop_reason(segment) == reason


def test_clean_segments_keeps_the_order_and_says_why_each_drop_happened():
    segments = [
        Segment(0, 2, " How deep"),
        Segment(2, 4, " Thank you for watching!"),
        Segment(4, 6, " is Lake Quillan?"),
        Segment(6, 8, " la la la la la la la la", compression_ratio=4.0),
    ]
    kept, dropped = clean_segments(segments)
    assert [s.text for s in kept] == [" How deep", " is Lake Quillan?"]
    assert [(s.text, why) for s, why in dropped] == [
        (" Thank you for watching!", "phantom"),
        (" la la la la la la la la", "repetition"),
    ]
    assert join_segments(kept) == "How deep is Lake Quillan?"


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("这个软件的内存有多大", "zh", "這個軟體的記憶體有多大"),  # s2twp: characters and Taiwan phrasing
        ("鼠标和信息", "zh", "滑鼠和資訊"),
        ("臺灣的資料庫使用繁體中文", "zh", "臺灣的資料庫使用繁體中文"),  # already Traditional: unchanged
        ("Hello, how deep is the lake?", "en", "Hello, how deep is the lake?"),
        ("ทะเลสาบลึกเท่าไร", "th", "ทะเลสาบลึกเท่าไร"),
        (
            "What is 软件 in English?",
            "en",
            "What is 軟體 in English?",
        ),  # Han characters anywhere are converted
    ],
)
def test_chinese_comes_out_in_traditional_and_other_text_is_untouched(text, language, expected):
    assert to_traditional(text, language) == expected


def test_a_transcript_is_traditional_without_its_phantoms():
    segments = [
        Segment(0.0, 2.0, " 这个软件的内存", no_speech_prob=0.01, avg_logprob=-0.2),
        Segment(2.0, 3.0, "有多大？"),
        Segment(3.0, 5.0, "字幕由Amara.org社区提供"),
        Segment(5.0, 30.0, "", no_speech_prob=0.95, avg_logprob=-1.9),
    ]
    transcript = make_transcript(segments, language="zh", duration_s=30.0, model="whisper")
    assert transcript.text == "這個軟體的記憶體有多大？"
    assert transcript.language == "zh" and transcript.duration_s == 30.0 and transcript.model == "whisper"
    assert [s.text for s in transcript.segments] == [" 這個軟體的記憶體", "有多大？"]
    assert [why for _, why in transcript.dropped] == ["phantom", "empty"]


def test_the_phantom_lists_stay_small_and_fold_to_distinct_entries():
    assert len(PHANTOM_PHRASES) <= 20 and len(PHANTOM_MARKS) <= 5
    folded = [fold(p) for p in PHANTOM_PHRASES]
    assert all(folded) and len(set(folded)) == len(folded)
