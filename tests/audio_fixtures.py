"""Audio files the test suite makes itself with PyAV (its wheel's FFmpeg, libopus and LAME encoders).

* ``tone(seconds, rate)`` / ``noise(seconds, rate)``: float32 samples, shape (channels, n);
* ``encode(samples, rate, kind)``: bytes of a file of ``kind`` (see ``KINDS``): a Telegram-style
  OGG/Opus voice note, MP3, M4A (AAC), WAV, FLAC, WebM/Opus;
* ``video_only(seconds)``: an MP4 with a video track and no sound;
* ``wav_header(...)``: a WAV file written by hand, for headers that lie.
"""

from __future__ import annotations

import io
import struct

import numpy as np

# kind: (container format, codec, sample rate)
KINDS = {
    "ogg-opus": ("ogg", "libopus", 48_000),  # what Telegram sends as a voice note
    "mp3": ("mp3", "libmp3lame", 44_100),
    "m4a": ("ipod", "aac", 44_100),
    "wav": ("wav", "pcm_s16le", 44_100),
    "flac": ("flac", "flac", 44_100),
    "webm-opus": ("webm", "libopus", 48_000),
}


def tone(
    seconds: float, rate: int, *, freq: float = 440.0, amp: float = 0.3, channels: int = 1
) -> np.ndarray:
    """A sine tone, (channels, n) float32."""
    t = np.arange(int(seconds * rate)) / rate
    wave = (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    return np.tile(wave, (channels, 1))


def noise(seconds: float, rate: int, *, amp: float = 0.2, seed: int = 0) -> np.ndarray:
    """White noise, (1, n) float32, seeded."""
    rng = np.random.default_rng(seed)
    return (amp * rng.standard_normal((1, int(seconds * rate)))).clip(-1, 1).astype(np.float32)


def encode(samples: np.ndarray, rate: int, kind: str) -> bytes:
    """``samples`` (channels, n) at ``rate`` as a file of ``kind``."""
    import av

    container_format, codec, _ = KINDS[kind]
    layout = "mono" if samples.shape[0] == 1 else "stereo"
    buf = io.BytesIO()
    with av.open(buf, "w", format=container_format) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.layout = layout
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples), format="fltp", layout=layout)
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def voice_note(seconds: float = 3.0, **tone_args: float) -> bytes:
    """A Telegram-style voice note: OGG/Opus, 48 kHz mono, holding a tone."""
    return encode(tone(seconds, 48_000, **tone_args), 48_000, "ogg-opus")


def video_only(seconds: float = 1.0) -> bytes:
    """An MP4 with one MPEG-4 video track and no audio track."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(int(seconds * 10)):
            image = np.full((48, 64, 3), i * 20 % 256, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def wav_header(*, rate: int, channels: int = 1, data_bytes: int) -> bytes:
    """A 16-bit PCM WAV header declaring ``data_bytes`` of samples at ``rate``."""
    block = channels * 2
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * block, block, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data_bytes)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", data_bytes)
    )


def with_declared_length(webm: bytes, seconds: float) -> bytes:
    """A WebM file whose Segment Info claims ``seconds`` (its Duration element rewritten; 1 ms timecodes)."""
    marker = b"\x44\x89\x88"  # the Duration element's id and an 8-byte float size
    at = webm.index(marker) + len(marker)
    return webm[:at] + struct.pack(">d", seconds * 1000) + webm[at + 8 :]
