"""Decoding voice notes and audio files: 16 kHz mono float32 out, a clear refusal for anything else."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.errors import SpeechError
from knowledge.speech.decode import SAMPLE_RATE, check_size, decode_audio, describe_length, is_silent
from tests.audio_fixtures import (
    KINDS,
    encode,
    noise,
    tone,
    video_only,
    voice_note,
    wav_header,
    with_declared_length,
)


def pitch_hz(samples: np.ndarray) -> float:
    """The strongest frequency in 16 kHz samples."""
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.argmax(spectrum)) * SAMPLE_RATE / len(samples)


def test_a_telegram_voice_note_becomes_16khz_mono_float32_of_the_same_length_and_pitch():
    audio = decode_audio(voice_note(3.0, freq=440.0), max_s=300)
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    assert audio.codec == "opus" and audio.source_rate == 48_000 and audio.channels == 1
    assert audio.duration_s == pytest.approx(3.0, abs=0.01)
    assert pitch_hz(audio.samples) == pytest.approx(440.0, abs=2)
    assert 0.25 < float(np.max(np.abs(audio.samples))) < 0.35  # the tone's level, not clipped or amplified


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("channels", [1, 2])
def test_every_supported_format_decodes_to_the_recorded_sound(kind, channels):
    rate = KINDS[kind][2]
    data = encode(tone(2.0, rate, freq=660.0, channels=channels), rate, kind)
    audio = decode_audio(data, max_s=300)
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1  # stereo is mixed down
    assert audio.channels == channels and audio.source_rate == rate
    # AAC adds its encoder delay (~1024 samples) to the end; every other codec is exact here.
    assert audio.duration_s == pytest.approx(2.0, abs=0.05)
    assert pitch_hz(audio.samples) == pytest.approx(660.0, abs=2)


def test_silence_is_recognised_and_a_quiet_voice_is_not():
    assert is_silent(decode_audio(voice_note(2.0, amp=0.0), max_s=300).samples)
    assert not is_silent(decode_audio(voice_note(2.0, amp=0.01), max_s=300).samples)  # -40 dBFS
    assert not is_silent(decode_audio(encode(noise(2.0, 48_000), 48_000, "ogg-opus"), max_s=300).samples)


def test_a_note_cut_off_mid_download_gives_what_arrived():
    note = voice_note(10.0)
    audio = decode_audio(note[: len(note) // 2], max_s=300)
    assert 3.0 < audio.duration_s < 7.0


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "the file is empty"),
        (np.random.default_rng(0).bytes(100_000), "it is not a sound file I know"),
        (b"%PDF-1.7\n" + b"0" * 5000, "it is not a sound file I know"),
        (video_only(), "the file has no sound in it"),
        (wav_header(rate=1, data_bytes=2000) + bytes(2000), "sample rate of 1 Hz"),
    ],
    ids=["empty", "random-bytes", "a-pdf", "video-without-sound", "absurd-sample-rate"],
)
def test_what_is_not_usable_audio_is_refused_with_a_sentence(data, says):
    with pytest.raises(SpeechError) as caught:
        decode_audio(data, max_s=7200)
    assert caught.value.reason == "audio-unreadable"
    message = str(caught.value)
    assert says in message
    assert message.startswith("I could not read that audio") and "send it again as a voice note" in message


def test_a_recording_longer_than_the_limit_is_refused_by_its_declared_length():
    with pytest.raises(SpeechError) as caught:
        decode_audio(voice_note(30.0), max_s=10)
    assert caught.value.reason == "audio-too-long"
    assert str(caught.value) == (
        "That recording is 30 s long and I transcribe at most 10 s (KB_VOICE_MAX_S); send a shorter voice note."
    )


def test_a_recording_that_lies_about_its_length_is_stopped_once_past_the_limit():
    data = with_declared_length(encode(tone(30.0, 48_000), 48_000, "webm-opus"), 2.0)
    with pytest.raises(SpeechError) as caught:
        decode_audio(data, max_s=10)
    assert caught.value.reason == "audio-too-long"
    # Decoding stopped just past 10 s (plus the 1 s grace), not after all 30 s.
    assert "is 11 s long" in str(caught.value)


def test_the_length_limit_has_a_second_of_grace_for_rounded_durations():
    audio = decode_audio(voice_note(10.5), max_s=10)
    assert audio.duration_s == pytest.approx(10.5, abs=0.01)


def test_too_many_bytes_are_refused_before_parsing():
    with pytest.raises(SpeechError) as caught:
        check_size(bytes(2 * 1024 * 1024 + 1), max_bytes=2 * 1024 * 1024)
    assert caught.value.reason == "audio-too-large"
    assert str(caught.value) == (
        "That audio file is 2.0 MiB and I read at most 2 MiB; send a shorter recording."
    )
    with pytest.raises(SpeechError):
        decode_audio(voice_note(1.0), max_s=300, max_bytes=100)


@pytest.mark.parametrize(
    ("seconds", "said"), [(0.4, "0 s"), (45, "45 s"), (300, "5 min"), (372.2, "6 min 12 s")]
)
def test_lengths_are_said_as_a_person_says_them(seconds, said):
    assert describe_length(seconds) == said


@pytest.mark.parametrize(
    "data",
    [
        b"ffconcat version 1.0\nfile 'secret.txt'\nfile '/etc/hostname'\n",  # would read local files
        b"v=0\no=- 0 0 IN IP4 0.0.0.0\ns=x\nc=IN IP4 0.0.0.0\nt=0 0\nm=audio 5004 RTP/AVP 0\n",  # would open a port
        b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n",  # a playlist
    ],
    ids=["ffconcat", "sdp", "hls"],
)
def test_a_voice_note_that_only_looks_like_audio_opens_nothing(data, tmp_path, monkeypatch):
    """Refused from its first bytes, before FFmpeg sees it: no demuxer reads a file or opens a port."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.txt").write_text("not for the speech decoder")
    with pytest.raises(SpeechError) as caught:
        decode_audio(data, max_s=60)
    # the sniffer's words: FFmpeg never saw it (an SDP it opened would hold the worker until its timeout)
    assert caught.value.reason == "audio-unreadable" and "not a sound file I know" in str(caught.value)


def test_the_containers_voice_notes_come_in_are_told_by_their_first_bytes():
    from knowledge.speech.decode import audio_format

    assert audio_format(voice_note(1.0)) == "ogg"
    assert audio_format(b"RIFF\x00\x00\x00\x00WAVEfmt ") == "wav"
    assert audio_format(b"\x00\x00\x00\x20ftypM4A ") == "mov" and audio_format(b"fLaC\x00") == "flac"
    assert audio_format(b"ID3\x04\x00") == audio_format(b"\xff\xfb\x90\x00") == "mp3"
    assert audio_format(b"\xff\xf1\x50\x80") == "aac" and audio_format(b"\x1a\x45\xdf\xa3") == "matroska"
    assert audio_format(b"ffconcat version 1.0") is None and audio_format(b"") is None
