"""Transcribing voice notes with mlx-whisper in a worker process, on tiny Whisper models the suite builds."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import SpeechError
from knowledge.speech.decode import SAMPLE_RATE
from knowledge.speech.transcribe import (
    NO_SPEECH,
    Transcript,
    WhisperTranscriber,
    find_model,
    model_notice,
    speech_runner,
    transcribe_audio,
    whisper_transcriber,
)
from tests.audio_fixtures import encode, noise, voice_note
from tests.conftest import is_reaped, make_settings
from tests.whisper_fixtures import HEARD_EN, HEARD_ZH_TRADITIONAL

NOT_CACHED = "kb-tests/no-such-whisper"


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    """One transcription worker for the module, as the bot keeps one: the model stays loaded between calls."""
    with speech_runner() as r:
        yield r


def settings_for(tmp_path, model, **env):
    return make_settings(tmp_path / "kb", KB_WHISPER_MODEL=str(model), **env)


def test_a_voice_note_is_heard(tmp_path, runner, whisper_en):
    transcript = transcribe_audio(voice_note(3.0), settings=settings_for(tmp_path, whisper_en), runner=runner)
    assert transcript.text == HEARD_EN
    assert transcript.language == "en"
    assert transcript.duration_s == pytest.approx(3.0, abs=0.01)
    assert transcript.model == str(whisper_en)
    assert runner.pid is not None and runner.pid != os.getpid()  # it ran in the worker, which stays up


def loaded_modules() -> set[str]:
    """The modules a process has imported (called in the worker)."""
    import sys

    return set(sys.modules)


def test_the_worker_hears_without_importing_scipy_or_numba(tmp_path, runner, whisper_en):
    # Word timing (scipy.signal, numba: seconds of imports before the first voice note) is never used.
    assert transcribe_audio(voice_note(2.0), settings=settings_for(tmp_path, whisper_en), runner=runner).text
    loaded = runner.call(loaded_modules, timeout_s=60)
    assert "mlx_whisper.transcribe" in loaded
    assert not {name for name in loaded if name.split(".")[0] in ("scipy", "numba")}


def test_chinese_is_heard_in_traditional_characters(tmp_path, runner, whisper_zh):
    transcript = transcribe_audio(voice_note(3.0), settings=settings_for(tmp_path, whisper_zh), runner=runner)
    assert transcript.text == HEARD_ZH_TRADITIONAL  # the model wrote Simplified; kb keeps Traditional
    assert transcript.language == "zh"


def test_an_audio_file_from_a_phone_is_heard_too(tmp_path, runner, whisper_en):
    m4a = encode(noise(4.0, 44_100), 44_100, "m4a")
    transcript = transcribe_audio(m4a, settings=settings_for(tmp_path, whisper_en), runner=runner)
    assert transcript.text == HEARD_EN and transcript.duration_s == pytest.approx(4.0, abs=0.05)


def test_a_phantom_phrase_is_answered_as_nothing_heard(tmp_path, runner, whisper_phantom):
    with pytest.raises(SpeechError) as caught:
        transcribe_audio(voice_note(3.0), settings=settings_for(tmp_path, whisper_phantom), runner=runner)
    assert caught.value.reason == "no-speech"
    assert str(caught.value) == NO_SPEECH
    assert NO_SPEECH.startswith("I could not hear any words in that voice note")


def test_silence_is_nothing_heard_without_asking_the_model(tmp_path, runner, whisper_en):
    # This model hears its question in any sound: only skipping silence makes the answer "no speech".
    with pytest.raises(SpeechError) as caught:
        transcribe_audio(voice_note(3.0, amp=0.0), settings=settings_for(tmp_path, whisper_en), runner=runner)
    assert caught.value.reason == "no-speech"


@pytest.mark.parametrize(
    ("data", "reason", "says"),
    [
        (b"", "audio-unreadable", "the file is empty"),
        (b"this is not audio" * 100, "audio-unreadable", "not a sound file I know"),
        (voice_note(12.0), "audio-too-long", "is 12 s long and I transcribe at most 5 s (KB_VOICE_MAX_S)"),
    ],
    ids=["empty", "not-audio", "too-long"],
)
def test_audio_that_cannot_be_transcribed_is_refused_in_words(
    tmp_path, runner, whisper_en, data, reason, says
):
    settings = settings_for(tmp_path, whisper_en, KB_VOICE_MAX_S="5")
    with pytest.raises(SpeechError) as caught:
        transcribe_audio(data, settings=settings, runner=runner)
    assert caught.value.reason == reason and says in str(caught.value)
    assert transcribe_audio(voice_note(2.0), settings=settings, runner=runner).text == HEARD_EN


def test_a_transcription_past_the_timeout_is_stopped_and_the_worker_replaced(
    tmp_path, runner, whisper_en, whisper_random
):
    assert transcribe_audio(voice_note(2.0), settings=settings_for(tmp_path, whisper_en), runner=runner).text
    warm_pid = runner.pid
    # Ten 30 s windows of noise: the random model retries each at six temperatures, far beyond 1 s.
    long_noise = encode(noise(290.0, 16_000), 16_000, "flac")
    slow = settings_for(tmp_path, whisper_random, KB_TRANSCRIBE_TIMEOUT_S="1")
    with pytest.raises(SpeechError) as caught:  # stopped at the timeout itself: see test_isolate.py
        transcribe_audio(long_noise, settings=slow, runner=runner)
    assert caught.value.reason == "timeout"
    assert str(caught.value) == (
        "Transcribing took longer than 1 s and was stopped; send a shorter voice note, "
        "or raise KB_TRANSCRIBE_TIMEOUT_S."
    )
    assert is_reaped(warm_pid)
    assert transcribe_audio(voice_note(2.0), settings=settings_for(tmp_path, whisper_en), runner=runner).text
    assert runner.pid != warm_pid


def test_a_random_model_gives_a_transcript_in_one_of_the_three_languages(runner, whisper_random):
    samples = noise(5.0, SAMPLE_RATE)[0]
    transcriber = WhisperTranscriber(folder=str(whisper_random), name="random")
    transcript = runner.call(transcriber.transcribe, samples, timeout_s=120)  # raises past 120 s
    # Random weights say nothing sensible; what is knowable is the shape of the answer.
    assert isinstance(transcript, Transcript) and isinstance(transcript.text, str)
    assert transcript.language in ("zh", "en", "th")
    assert transcript.duration_s == 5.0 and transcript.model == "random"
    assert {why for _, why in transcript.dropped} <= {"empty", "silence", "repetition", "phantom"}


def test_damaged_model_weights_are_refused_in_words(tmp_path, runner):
    folder = tmp_path / "broken-whisper"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"n_mels": 128}))
    (folder / "weights.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(SpeechError) as caught:
        transcribe_audio(voice_note(2.0), settings=settings_for(tmp_path, folder), runner=runner)
    assert caught.value.reason == "model-unusable"
    assert f"The speech model {folder} could not be loaded" in str(caught.value)
    assert "KB_WHISPER_MODEL" in str(caught.value)


def test_a_folder_that_is_not_a_model_is_refused_naming_the_setting(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # no weights beside it
    with pytest.raises(SpeechError) as caught:
        find_model(str(tmp_path), own_dir=tmp_path / "models")
    assert caught.value.reason == "model-missing"
    assert str(caught.value).startswith(f"KB_WHISPER_MODEL={tmp_path} is not a Whisper model folder")


def test_a_hub_model_not_downloaded_while_offline_is_a_clear_error(tmp_path):
    assert find_model(NOT_CACHED, own_dir=tmp_path) is None
    with pytest.raises(SpeechError) as caught:
        whisper_transcriber(NOT_CACHED, own_dir=tmp_path, is_offline=True)
    assert caught.value.reason == "model-missing"
    message = str(caught.value)
    assert f"The speech model {NOT_CACHED} is not downloaded and HF_HUB_OFFLINE is set" in message
    assert "KB_WHISPER_MODEL" in message


def test_the_download_notice_is_given_only_when_a_download_will_happen(whisper_en, tmp_path):
    own = tmp_path / "models"
    assert model_notice(str(whisper_en), own_dir=own, is_offline=False) is None
    assert (
        model_notice(NOT_CACHED, own_dir=own, is_offline=True) is None
    )  # no download: the error will say why
    notice = model_notice(NOT_CACHED, own_dir=own, is_offline=False)
    assert notice is not None and notice.startswith(f"Downloading the speech model {NOT_CACHED}")


def test_the_decoded_samples_reach_the_model_unchanged(runner, whisper_en):
    """The worker's transcriber sees 16 kHz float32 samples of the recording's length."""
    samples = np.zeros(SAMPLE_RATE * 2, dtype=np.float32)
    samples[::50] = 0.5
    transcript = runner.call(WhisperTranscriber(str(whisper_en), "en").transcribe, samples, timeout_s=120)
    assert transcript.duration_s == 2.0 and transcript.text == HEARD_EN


@pytest.fixture
def hub_mirror(monkeypatch, tmp_path):
    """A hub stand-in as HF_ENDPOINT, the hub cache in the test's folder, the working folder there too."""
    from tests.fake_hub import Hub
    from tests.fake_llm import ThreadedServer

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.chdir(tmp_path)
    servers = []

    def start(files: dict[str, bytes]) -> Hub:
        hub = Hub(files)
        servers.append(ThreadedServer(hub, hub.start))
        servers[-1].__enter__()
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        return hub

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_the_first_voice_note_downloads_the_model_into_kbs_folder_whatever_the_mirror_says(
    tmp_path, runner, whisper_en, hub_mirror
):
    hub = hub_mirror(
        {name: (whisper_en / name).read_bytes() for name in ("config.json", "weights.safetensors")}
    )
    settings = settings_for(tmp_path, "kbtest/whisper-tiny")
    assert model_notice(settings.whisper_model, own_dir=settings.model_dir) is not None
    for _ in range(2):
        transcript = transcribe_audio(voice_note(2.0), settings=settings, runner=runner)
        assert transcript.text == HEARD_EN
    assert hub.seen == [
        "GET /kbtest/whisper-tiny/resolve/main/config.json",
        "GET /kbtest/whisper-tiny/resolve/main/weights.safetensors",
    ]  # once, then found in kb's folder
    own = settings.model_dir / "kbtest--whisper-tiny"
    assert sorted(p.name for p in own.iterdir()) == ["config.json", "weights.safetensors"]
    assert not (tmp_path / "x").exists() and not (tmp_path / "hub-cache").exists()  # the ETag chose no path
    assert model_notice(settings.whisper_model, own_dir=settings.model_dir) is None


def test_npz_weights_are_taken_when_there_is_no_safetensors(tmp_path, whisper_en, hub_mirror):
    import io

    weights = io.BytesIO()
    np.savez(weights, w=np.zeros(4))
    hub = hub_mirror(
        {"config.json": (whisper_en / "config.json").read_bytes(), "weights.npz": weights.getvalue()}
    )
    folder = whisper_transcriber("kbtest/whisper-npz", own_dir=tmp_path / "models").folder
    assert sorted(p.name for p in Path(folder).iterdir()) == ["config.json", "weights.npz"]
    assert hub.seen[-1].endswith("/weights.npz")


@pytest.mark.parametrize(
    ("files", "reason", "says"),
    [
        ({"config.json": b"[1, 2]"}, "model-missing", "is not a Whisper model kb can use"),
        ({"config.json": b"{}", "weights.safetensors": b"\xff" * 64}, "model-missing", "bad header size"),
        ({"config.json": b"{}", "weights.safetensors": (9).to_bytes(8, "little") + b"{not json"}, "model-missing",
         "is not a Whisper model kb can use"),
        ({"config.json": b"{}"}, "model-download-failed", "is not on the model hub, or needs a login there"),
    ],
)  # fmt: skip
def test_a_mirror_serving_something_else_leaves_nothing_in_place(tmp_path, hub_mirror, files, reason, says):
    hub_mirror(files)
    own = tmp_path / "models"
    with pytest.raises(SpeechError, match=says) as caught:
        whisper_transcriber("kbtest/whisper-bad", own_dir=own)
    assert caught.value.reason == reason
    assert find_model("kbtest/whisper-bad", own_dir=own) is None  # the next voice note tries again
    assert not list(own.rglob("weights.*")) and not list(own.rglob("*.part"))
