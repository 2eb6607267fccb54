"""Voice questions: audio bytes → the words said, with a hard timeout, or a sentence saying why not.

:func:`transcribe_audio` is the one entry point (the Telegram bot and ``kb ask --audio`` call it)::

    with speech_runner() as runner:
        notice = model_notice(settings.whisper_model, own_dir=settings.model_dir)  # "Downloading …" or None
        transcript = transcribe_audio(data, settings=settings, runner=runner)
        print("I heard:", transcript.text)

It finds the model (``KB_WHISPER_MODEL``: a local folder, or a Hugging Face hub id looked up in kb's
own ``runs/models/`` and the hub cache, and otherwise downloaded on first use by kb itself into
``runs/models/`` unless ``HF_HUB_OFFLINE`` is set: streamed, size-capped, each file checked before
it is put in place, no path taken from the answer; see knowledge/model/hub.py), then runs decoding and
transcription in the runner's worker process: forked from a fork server, memory-capped, killed when it
takes longer than ``KB_TRANSCRIBE_TIMEOUT_S``. Hostile audio or a stuck model costs the worker, never
the caller.
The worker keeps the model loaded between calls (mlx-whisper's own per-process ``ModelHolder``).

Every failure is a :class:`~knowledge.errors.SpeechError` whose message is a sentence for the owner:
the caller always has words to answer with, never silence.

The transcriber is a :class:`Transcriber`: :class:`WhisperTranscriber` (mlx-whisper; Metal on a Mac,
the CPU elsewhere) in production, any picklable object with the same method in a test.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import types
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import structlog

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConversionError, ConversionInterrupted, SpeechError
from knowledge.model import hub
from knowledge.model.hub import is_hub_id, own_name
from knowledge.speech.decode import SAMPLE_RATE, check_size, decode_audio, describe_length, is_silent
from knowledge.speech.filters import (
    ZH_PROMPT,
    Segment,
    clean_segments,
    join_segments,
    pick_language,
    to_traditional,
)
from knowledge.text import one_line

if TYPE_CHECKING:
    from knowledge.config import Settings

log = structlog.get_logger()

# large-v3-turbo needs ~4 GiB of address space, large-v3 ~6 GiB (weights, activations, the libraries).
SPEECH_MEMORY_BYTES = 8 * 1024**3
MODEL_FILES = ("config.json", "weights.safetensors", "weights.npz")
MODEL_MAX_BYTES = {"config.json": 1 << 20, "weights.safetensors": 8 << 30, "weights.npz": 8 << 30}
DOWNLOAD_TIMEOUT_S = 30.0  # each wait on the network
DOWNLOAD_DEADLINE_S = 4 * 3600.0  # the whole of one file (3.1 GB at 2 Mbit/s takes 3.5 h)
# float16 weights: 809 M and 1.55 G parameters
MODEL_SIZES = {
    "mlx-community/whisper-large-v3-turbo": "about 1.6 GB",
    "mlx-community/whisper-large-v3-mlx": "about 3.1 GB",
}

NO_SPEECH = (
    "I could not hear any words in that voice note; speak a little closer to the microphone and try again."
)


@dataclass(frozen=True)
class Transcript:
    """What was said: ``text`` (Traditional characters for Chinese), ``language`` (zh, en or th)."""

    text: str
    language: str
    duration_s: float
    segments: tuple[Segment, ...] = ()
    dropped: tuple[tuple[str, str], ...] = ()  # (text, reason) of the segments filtered out
    model: str = ""


class Transcriber(Protocol):
    """Speech to text on 16 kHz mono float32 samples; runs in the worker, so it must be picklable."""

    @property
    def name(self) -> str:
        """The model's name, for logs."""
        ...

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """The transcript (its text may be empty); raises SpeechError when the model cannot be used."""
        ...


def skip_word_timing() -> None:
    """Keep mlx-whisper from importing its word-timing module in this process.

    ``mlx_whisper`` imports ``mlx_whisper.timing`` (scipy.signal and numba: about 4 CPU-seconds, paid by
    every new transcriber worker before the first voice note is heard) whether or not word timestamps
    are asked for. kb never asks for them, so a module whose one function refuses stands in for it."""
    if "mlx_whisper.timing" in sys.modules:
        return
    timing = types.ModuleType("mlx_whisper.timing", "word timestamps: not used by kb (see skip_word_timing)")

    def add_word_timestamps(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kb transcribes without word timestamps")

    timing.add_word_timestamps = add_word_timestamps  # type: ignore[attr-defined]
    sys.modules["mlx_whisper.timing"] = timing


@dataclass(frozen=True)
class WhisperTranscriber:
    """mlx-whisper on a model folder (``config.json`` + ``weights.safetensors`` or ``weights.npz``)."""

    folder: str
    name: str

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """Detect the language among zh/en/th, transcribe, convert Chinese to Traditional, drop phantoms."""
        import mlx.core as mx

        skip_word_timing()
        import mlx_whisper
        from mlx_whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim
        from mlx_whisper.transcribe import ModelHolder

        try:  # the model mlx_whisper.transcribe uses too: loaded once per worker process
            model = ModelHolder.get_model(self.folder, mx.float16)
        except Exception as exc:  # a damaged or foreign folder: mlx raises many kinds
            raise SpeechError(
                "model-unusable",
                f"The speech model {self.name} could not be loaded ({type(exc).__name__}: {exc}); set "
                "KB_WHISPER_MODEL to a Whisper model converted for mlx (e.g. mlx-community/whisper-large-v3-turbo).",
            ) from exc
        language = "en"
        if model.is_multilingual:
            # As mlx_whisper.transcribe does: the first 30 s, padded with silence before the mel.
            mel = log_mel_spectrogram(samples[:N_SAMPLES], n_mels=model.dims.n_mels, padding=N_SAMPLES)
            _, probabilities = model.detect_language(pad_or_trim(mel, N_FRAMES, axis=-2).astype(mx.float16))
            language = pick_language(probabilities)
        result = mlx_whisper.transcribe(
            samples,
            path_or_hf_repo=self.folder,
            language=language,
            initial_prompt=ZH_PROMPT if language == "zh" else None,
            # Each 30 s window on its own: a hallucination cannot feed the next window.
            condition_on_previous_text=False,
            verbose=None,
        )
        return make_transcript(
            [
                Segment(
                    start_s=float(s["start"]),
                    end_s=float(s["end"]),
                    text=s["text"],
                    no_speech_prob=float(s["no_speech_prob"]),
                    avg_logprob=float(s["avg_logprob"]),
                    compression_ratio=float(s["compression_ratio"]),
                )
                for s in result["segments"]
            ],
            language=language,
            duration_s=len(samples) / SAMPLE_RATE,
            model=self.name,
        )


def make_transcript(segments: list[Segment], *, language: str, duration_s: float, model: str) -> Transcript:
    """A transcript from raw segments: Chinese made Traditional, silence and phantoms dropped."""
    converted = [replace(s, text=to_traditional(s.text, language)) for s in segments]
    kept, dropped = clean_segments(converted)
    return Transcript(
        text=join_segments(kept),
        language=language,
        duration_s=duration_s,
        segments=tuple(kept),
        dropped=tuple((s.text, reason) for s, reason in dropped),
        model=model,
    )


# -- the model: a folder, the hub cache, or a download ------------------------------------------


def is_model_folder(folder: Path) -> bool:
    """True when ``folder`` holds a model mlx-whisper can load."""
    return (folder / "config.json").is_file() and any((folder / f).is_file() for f in MODEL_FILES[1:])


def _is_path(spec: str) -> bool:
    return Path(spec).expanduser().exists() or spec.startswith(("/", "./", "../", "~"))


def find_model(spec: str, *, own_dir: Path) -> Path | None:
    """The folder of model ``spec`` (a folder, or a hub id in ``own_dir`` or the hub cache); None when
    not downloaded yet."""
    if not spec.strip():
        raise SpeechError(
            "model-missing", "KB_WHISPER_MODEL is empty; set it to a Whisper model folder or hub id."
        )
    if _is_path(spec):
        folder = Path(spec).expanduser()
        if not is_model_folder(folder):
            raise SpeechError(
                "model-missing",
                f"KB_WHISPER_MODEL={spec} is not a Whisper model folder (it needs config.json and "
                "weights.safetensors or weights.npz); point it at one, or at a hub id such as "
                "mlx-community/whisper-large-v3-turbo.",
            )
        return folder
    if is_hub_id(spec) and is_model_folder(own_dir / own_name(spec)):
        return own_dir / own_name(spec)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    try:
        folder = Path(snapshot_download(spec, local_files_only=True, allow_patterns=list(MODEL_FILES)))
    except HFValidationError as exc:
        raise SpeechError(
            "model-missing",
            f"KB_WHISPER_MODEL={spec} is neither a folder nor a hub model id; set it to one.",
        ) from exc
    except Exception:  # not in the cache (the hub library raises several kinds for that)
        return None
    return folder if is_model_folder(folder) else None


def model_notice(spec: str, *, own_dir: Path, is_offline: bool | None = None) -> str | None:
    """A sentence to show before a transcription that must first download the model, else None."""
    offline = hub.is_offline() if is_offline is None else is_offline
    try:
        if offline or find_model(spec, own_dir=own_dir) is not None:
            return None
    except SpeechError:
        return None  # transcribe_audio will say what is wrong
    size = f" ({MODEL_SIZES[spec]})" if spec in MODEL_SIZES else ""
    return (
        f"Downloading the speech model {spec}{size} for the first voice note; this happens once and can take "
        "several minutes."
    )


def download_model(
    spec: str,
    *,
    own_dir: Path,
    is_offline: bool | None = None,
    timeout_s: float = DOWNLOAD_TIMEOUT_S,
    stop: threading.Event | None = None,
) -> Path:
    """Download hub model ``spec`` into ``own_dir/owner--name/`` (only the files mlx-whisper loads:
    config.json, then weights.safetensors or else weights.npz); its folder. ``stop`` set (kb is
    stopping) ends it at once; what was fetched is kept and the next download resumes it."""
    if hub.is_offline() if is_offline is None else is_offline:
        raise SpeechError(
            "model-missing",
            f"The speech model {spec} is not downloaded and HF_HUB_OFFLINE is set; download it once "
            f"with `hf download {spec}` (or unset HF_HUB_OFFLINE), or set KB_WHISPER_MODEL to a model folder.",
        )
    if not is_hub_id(spec):
        raise SpeechError(
            "model-missing", f"KB_WHISPER_MODEL={spec} is neither a folder nor a hub model id; set it to one."
        )
    folder = own_dir / own_name(spec)
    log.info("speech.model_download", model=spec, folder=str(folder))
    t0 = time.perf_counter()
    try:
        _fetch(spec, "config.json", folder, timeout_s, check=_check_config, stop=stop)
        try:
            _fetch(spec, "weights.safetensors", folder, timeout_s, check=_check_safetensors, stop=stop)
        except hub.HubError as exc:
            if exc.kind != "missing":
                raise
            _fetch(spec, "weights.npz", folder, timeout_s, check=_check_npz, stop=stop)
    except hub.HubError as exc:
        log.warning("speech.model_download_failed", model=spec, kind=exc.kind, error=str(exc))
        raise SpeechError(*_download_failure(spec, exc)) from exc
    log.info("speech.model_downloaded", model=spec, s=round(time.perf_counter() - t0, 1))
    return folder


def _fetch(
    spec: str,
    name: str,
    folder: Path,
    timeout_s: float,
    *,
    check: Callable[[Path], None],
    stop: threading.Event | None = None,
) -> None:
    step = {"next": 0}

    def progress(got: int, total: int | None) -> None:
        if got >= step["next"]:  # a line every 100 MB
            step["next"] = got + 100_000_000
            log.info("speech.model_progress", model=spec, file=name, mb=got // 1_000_000,
                     of_mb=total // 1_000_000 if total else None)  # fmt: skip

    hub.download(
        spec, name, folder, timeout_s=timeout_s, max_bytes=MODEL_MAX_BYTES[name],
        deadline_s=DOWNLOAD_DEADLINE_S, check=check, progress=progress, stop=stop,
    )  # fmt: skip


def _check_config(path: Path) -> None:
    config = json.loads(path.read_bytes())
    if not isinstance(config, dict) or not isinstance(config.get("n_mels", 0), int):
        raise ValueError("config.json is not a Whisper model configuration")


def _check_safetensors(path: Path) -> None:
    """A safetensors file: an 8-byte little-endian header size, then that much JSON, then the data."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 2 <= length <= min(size - 8, 100 << 20):
            raise ValueError("not a safetensors file (bad header size)")
        header = json.loads(fh.read(length))
    if not isinstance(header, dict) or not header:
        raise ValueError("not a safetensors file (bad header)")


def _check_npz(path: Path) -> None:
    if not zipfile.is_zipfile(path):
        raise ValueError("not an .npz file")


def _download_failure(spec: str, exc: hub.HubError) -> tuple[str, str]:
    """The reason and one sentence for the owner on why the speech model could not be downloaded:
    no URLs (the log has those, as speech.model_download_failed)."""
    later = f"download it once with `hf download {spec}`, or set KB_WHISPER_MODEL to a model folder."
    if exc.kind == "stopped":
        return "interrupted", "kb is shutting down; send the voice note again in a minute."
    if exc.kind == "missing":
        return "model-download-failed", (
            f"The speech model {spec} is not on the model hub, or needs a login there; set KB_WHISPER_MODEL to "
            "a model that is, such as mlx-community/whisper-large-v3-turbo, or to a model folder."
        )
    if exc.kind == "disk-full":
        return "model-download-failed", (
            f"The speech model {spec} could not be downloaded: the disk is full. Free some space and try again."
        )
    if exc.kind in ("too-large", "bad-file"):
        return "model-missing", (
            f"{spec} on the model hub is not a Whisper model kb can use ({exc}); set KB_WHISPER_MODEL to an mlx "
            "conversion such as mlx-community/whisper-large-v3-turbo, or to a model folder."
        )
    return "model-download-failed", (
        f"The speech model {spec} could not be downloaded: the model hub cannot be reached from here. "
        f"Try again when online, or {later}"
    )


def whisper_transcriber(
    spec: str, *, own_dir: Path, is_offline: bool | None = None, stop: threading.Event | None = None
) -> WhisperTranscriber:
    """The mlx-whisper transcriber for ``KB_WHISPER_MODEL``, downloading the model on first use (until
    ``stop`` is set)."""
    folder = find_model(spec, own_dir=own_dir) or download_model(
        spec, own_dir=own_dir, is_offline=is_offline, stop=stop
    )
    return WhisperTranscriber(folder=str(folder), name=spec)


def speech_runner() -> IsolatedRunner:
    """A worker for transcriptions, with room for a large Whisper model (close it when done)."""
    return IsolatedRunner(memory_bytes=SPEECH_MEMORY_BYTES)


# -- the entry point and what runs in the worker ------------------------------------------------


@dataclass(frozen=True)
class _Heard:
    transcript: Transcript
    codec: str
    decode_s: float
    transcribe_s: float


@dataclass(frozen=True)
class _Refused:
    reason: str
    message: str


def transcribe_in_worker(data: bytes, transcriber: Transcriber, max_s: float) -> _Heard | _Refused:
    """Decode and transcribe (in the worker process); refusals come back as values, not exceptions."""
    t0 = time.perf_counter()
    try:
        audio = decode_audio(data, max_s=max_s)
        t1 = time.perf_counter()
        if is_silent(audio.samples):  # Whisper invents words over silence: do not even ask it
            return _Refused("no-speech", NO_SPEECH)
        transcript = transcriber.transcribe(audio.samples)
    except SpeechError as exc:
        return _Refused(exc.reason, str(exc))
    return _Heard(transcript, audio.codec, decode_s=t1 - t0, transcribe_s=time.perf_counter() - t1)


def transcribe_audio(
    data: bytes, *, settings: Settings, runner: IsolatedRunner, transcriber: Transcriber | None = None
) -> Transcript:
    """The words said in ``data`` (a voice note or audio file); raises SpeechError with a sentence for the owner.

    Uses ``settings.whisper_model``, ``settings.voice_max_s`` and ``settings.transcribe_timeout_s``;
    ``transcriber`` replaces Whisper (the model is then not looked for). Blocking: call it from a
    thread in async code. On first use a hub model is downloaded here, in the calling thread and
    before the timeout starts: show :func:`model_notice` to the owner first. A transcript always has
    words: nothing heard is SpeechError ``no-speech``.
    """
    t0 = time.perf_counter()
    try:
        heard = _transcribe(data, settings=settings, runner=runner, transcriber=transcriber)
    except SpeechError as exc:
        log.info(
            "speech.refused", reason=exc.reason, bytes=len(data), ms=round((time.perf_counter() - t0) * 1000)
        )
        raise
    t = heard.transcript
    log.info(
        "speech.transcribed",
        model=t.model,
        codec=heard.codec,
        language=t.language,
        duration_s=round(t.duration_s, 2),
        chars=len(t.text),
        segments=len(t.segments),
        dropped=[reason for _, reason in t.dropped],
        decode_ms=round(heard.decode_s * 1000),
        transcribe_ms=round(heard.transcribe_s * 1000),
        ms=round((time.perf_counter() - t0) * 1000),
    )
    return t


def _transcribe(
    data: bytes, *, settings: Settings, runner: IsolatedRunner, transcriber: Transcriber | None
) -> _Heard:
    check_size(data)  # here too, so that a huge file is not copied to the worker first
    if transcriber is None:
        transcriber = whisper_transcriber(
            settings.whisper_model, own_dir=settings.model_dir, stop=runner.stopping
        )
    try:
        outcome = runner.call(
            transcribe_in_worker,
            data,
            transcriber,
            settings.voice_max_s,
            timeout_s=settings.transcribe_timeout_s,
        )
    except ConversionInterrupted as exc:
        raise SpeechError(
            "interrupted", "kb is shutting down; send the voice note again in a minute."
        ) from exc
    except ConversionError as exc:
        raise _worker_failure(exc, settings.transcribe_timeout_s) from exc
    if isinstance(outcome, _Refused):
        raise SpeechError(outcome.reason, outcome.message)
    if not outcome.transcript.text:
        raise SpeechError("no-speech", NO_SPEECH)
    return outcome


def _worker_failure(exc: ConversionError, timeout_s: float) -> SpeechError:
    """The worker's failure (timeout, crash, memory, a bug) as a sentence for the owner."""
    if exc.reason == "timeout":
        return SpeechError(
            "timeout",
            f"Transcribing took longer than {describe_length(timeout_s)} and was stopped; send a shorter voice "
            "note, or raise KB_TRANSCRIBE_TIMEOUT_S.",
        )
    log.error("speech.failed", reason=exc.reason, error=str(exc), traceback=getattr(exc, "details", None))
    if exc.reason == "converter-crashed":
        why = "the speech worker stopped unexpectedly, out of memory or on damaged audio"
    elif exc.reason == "converter-error":
        why = "the speech worker ran out of memory"
    else:
        why = f"a bug in kb: {one_line(str(exc), 160)}"
    return SpeechError(
        "transcriber-failed",
        f"I could not transcribe that recording ({why}); send it again, and if it keeps failing see: "
        "kb logs --event speech.",
    )
