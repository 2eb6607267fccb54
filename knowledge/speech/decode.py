"""Audio bytes → 16 kHz mono float32 samples, the input Whisper expects.

Telegram voice notes are OGG/Opus; audio files come as MP3, M4A/AAC, WAV, FLAC or OGG. PyAV
decodes them all with the FFmpeg and libopus built into its wheel (no system ``ffmpeg``), from the
bytes given: nothing else is read or written.

The input is untrusted, so every way it could make decoding long or large is bounded:

* bytes: at most ``max_bytes`` (checked before anything is parsed);
* length: a container that declares more than ``max_s`` is refused before decoding; one that lies
  is refused as soon as the decoded audio passes ``max_s`` (counted at the source rate, before
  resampling, so a tiny declared sample rate cannot blow up into a huge array);
* work: at most ``MAX_PACKETS_PER_S * max_s`` packets are read, so packets that decode to
  nothing cannot loop for long; a packet that does not decode is skipped, and too many of them
  make the file unreadable.

Every failure is a :class:`~knowledge.errors.SpeechError` whose message can be shown to the owner.
Callers that take audio from strangers run this in a worker process with a timeout as well
(:func:`knowledge.speech.transcribe.transcribe_audio` does).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from knowledge.errors import SpeechError

SAMPLE_RATE = 16_000
MIB = 1024 * 1024
MAX_AUDIO_BYTES = 64 * MIB  # 5 min of 48 kHz stereo 16-bit WAV is 55 MiB; a voice note is ~1 MiB
LENGTH_GRACE_S = 1.0  # Telegram rounds a note's length to whole seconds
MAX_PACKETS_PER_S = 1000  # the shortest codec frames are 2.5 ms (Opus): 400 packets per second
MAX_BAD_PACKET_SHARE = 0.5
SOURCE_RATES = (1_000, 768_000)  # sample rates outside this range are not audio kb can use
SILENCE_PEAK = 1e-3  # -60 dBFS: below this everywhere, the recording is silent


@dataclass(frozen=True, eq=False)
class Audio:
    """Decoded audio: ``samples`` are float32, mono, at 16 kHz."""

    samples: np.ndarray
    codec: str
    source_rate: int
    channels: int
    skipped_packets: int = 0

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return len(self.samples) / SAMPLE_RATE


def is_silent(samples: np.ndarray) -> bool:
    """True when the loudest sample is below -60 dBFS (digital silence or a muted microphone)."""
    return samples.size == 0 or float(np.max(np.abs(samples))) < SILENCE_PEAK


def describe_length(seconds: float) -> str:
    """A length as a person says it: "45 s", "6 min 12 s", "5 min"."""
    whole = round(seconds)
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" + (f" {rest} s" if rest else "")


def too_long(seconds: float, max_s: float) -> SpeechError:
    """The refusal for audio longer than ``max_s``."""
    return SpeechError(
        "audio-too-long",
        f"That recording is {describe_length(seconds)} long and I transcribe at most "
        f"{describe_length(max_s)} (KB_VOICE_MAX_S); send a shorter voice note.",
    )


def unreadable(detail: str) -> SpeechError:
    """The refusal for bytes that are not audio kb can decode."""
    return SpeechError(
        "audio-unreadable",
        f"I could not read that audio ({detail}); send it again as a voice note or as an MP3, M4A, OGG, "
        "WAV or FLAC file.",
    )


def check_size(data: bytes, *, max_bytes: int = MAX_AUDIO_BYTES) -> None:
    """Refuse empty data and data over ``max_bytes`` before anything is parsed."""
    if not data:
        raise unreadable("the file is empty")
    if len(data) > max_bytes:
        raise too_large(len(data), max_bytes)


def too_large(n_bytes: int, max_bytes: int = MAX_AUDIO_BYTES) -> SpeechError:
    """The refusal for a file over ``max_bytes``."""
    return SpeechError(
        "audio-too-large",
        f"That audio file is {n_bytes / MIB:.1f} MiB and I read at most {max_bytes / MIB:.0f} MiB; "
        "send a shorter recording.",
    )


def decode_audio(data: bytes, *, max_s: float, max_bytes: int = MAX_AUDIO_BYTES) -> Audio:
    """Decode the first audio stream of ``data`` to 16 kHz mono float32; raises SpeechError."""
    import av  # PyAV: imported here, as only voice questions need it

    check_size(data, max_bytes=max_bytes)
    kind = audio_format(data)
    if kind is None:  # FFmpeg is never left to guess among its ~400 demuxers (ffconcat, sdp, hls…)
        raise unreadable("it is not a sound file I know (OGG, MP3, M4A, WAV, FLAC, WebM or AAC)")
    try:
        container = av.open(io.BytesIO(data), mode="r", format=kind, metadata_errors="ignore")
    except (av.FFmpegError, ValueError, UnicodeError, OverflowError) as exc:
        raise unreadable("it is not a sound file I know, or it is damaged") from exc
    with container:
        if not container.streams.audio:
            raise unreadable("the file has no sound in it")
        stream = container.streams.audio[0]
        declared = declared_length_s(container, stream)
        if declared is not None and declared > max_s + LENGTH_GRACE_S:
            raise too_long(declared, max_s)
        try:
            return _decode_stream(av, container, stream, max_s=max_s)
        except (av.FFmpegError, ValueError, UnicodeError, OverflowError) as exc:
            raise unreadable("its audio data is damaged") from exc
        except (
            AttributeError,
            TypeError,
        ) as exc:  # a stream with no decoder (PyAV gives it no codec context)
            raise unreadable("its audio is in a form no decoder here reads") from exc


def audio_format(data: bytes) -> str | None:
    """The FFmpeg demuxer for these bytes, from their magic numbers; None for anything else.

    Only the containers voice notes and recordings come in: the demuxer is named, so a file
    that only looks like audio ("ffconcat", an SDP description, a playlist) opens nothing.
    """
    head = data[:64]
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"fLaC"):
        return "flac"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[4:8] == b"ftyp":
        return "mov"  # mp4 / m4a / 3gp: one demuxer
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"  # webm and mkv
    if head.startswith(b"ID3") or (
        len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06
    ):
        return "mp3"  # an ID3 tag, or an MPEG audio frame sync (layers I-III)
    if len(head) > 1 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "aac"  # ADTS
    return None


def declared_length_s(container: Any, stream: Any) -> float | None:
    """The length the file claims for ``stream`` (else for the whole container), or None when it says nothing."""
    import av

    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    return None


def _decode_stream(av: Any, container: Any, stream: Any, *, max_s: float) -> Audio:
    """Demux and decode ``stream``, resampling as it goes, within the length and packet limits."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    pieces: list[np.ndarray] = []
    source_s = 0.0
    packets = bad = 0
    max_packets = int(MAX_PACKETS_PER_S * (max_s + LENGTH_GRACE_S)) + 100
    codec = stream.codec_context.name
    rate = channels = 0
    for packet in container.demux(stream):
        packets += 1
        if packets > max_packets:
            raise unreadable("it holds far more pieces of audio than its length allows")
        try:
            frames = packet.decode()
        except av.FFmpegError:  # one damaged packet: skip it, as players do
            bad += 1
            continue
        for frame in frames:
            rate, channels = frame.sample_rate, len(frame.layout.channels)
            if not SOURCE_RATES[0] <= rate <= SOURCE_RATES[1]:
                raise unreadable(f"its sample rate of {rate} Hz is not one audio uses")
            source_s += frame.samples / rate
            if source_s > max_s + LENGTH_GRACE_S:
                raise too_long(source_s, max_s)
            pieces.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(frame))
    pieces.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(None))
    if packets and bad > MAX_BAD_PACKET_SHARE * packets:
        raise unreadable(f"{bad} of its {packets} audio packets are damaged")
    if not pieces:
        raise unreadable("it holds no audio samples")
    samples = np.concatenate(pieces).astype(np.float32, copy=False)
    # Float formats can carry NaN, infinities or values far beyond full scale; Whisper wants [-1, 1].
    samples = np.clip(np.nan_to_num(samples, nan=0.0, posinf=0.0, neginf=0.0), -1.0, 1.0)
    return Audio(samples=samples, codec=codec, source_rate=rate, channels=channels, skipped_packets=bad)
