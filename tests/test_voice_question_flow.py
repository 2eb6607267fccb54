"""`kb ask --audio`: a voice note is transcribed, echoed, and answered like a typed question."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.audio_fixtures import voice_note
from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_hub import Hub, ThreadedHub
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer
from tests.whisper_fixtures import HEARD_EN, HEARD_ZH_TRADITIONAL

QUILLAN = "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n"
SPEC = "# 軟體規格\n\n這個軟體的記憶體有 16 GB，儲存空間有 512 GB。\n"


def kb(home, *args, **env):
    """kb as a process, for the tests that set the hub's environment (HF_*): the libraries read it from the process."""
    return subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(home), *args],
        capture_output=True, text=True, env=subprocess_env(**env), timeout=180,
    )  # fmt: skip


def knowledge_base(tmp_path, name, text):
    """A knowledge base in tmp_path/kb holding one document."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, {name: text})
    return settings


@pytest.fixture
def note(tmp_path):
    path = tmp_path / "voice.ogg"
    path.write_bytes(voice_note(3.0))
    return path


def test_a_spoken_question_is_heard_and_answered_from_the_knowledge_base(tmp_path, note, whisper_en, run_kb):
    settings = knowledge_base(tmp_path, "quillan.md", QUILLAN)
    fake = FakeLLM(script=[answer("Lake Quillan is 317 metres deep [1].")])
    with ThreadedFakeLLM(fake):
        out = run_kb(
            "--home", str(settings.home), "ask", "--json", "--audio", str(note),
            env={"KB_LLM_URL": fake.base_url, "KB_WHISPER_MODEL": str(whisper_en)},
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["heard"]["text"] == HEARD_EN and reply["heard"]["language"] == "en"
    assert reply["heard"]["duration_s"] == pytest.approx(3.0, abs=0.01)
    assert reply["mode"] == "local" and reply["text"] == "Lake Quillan is 317 metres deep [1]."
    [citation] = reply["citations"]
    assert citation["title"] == "Lake Quillan" and citation["raw_path"].startswith("raw/quillan-")
    [request] = fake.requests
    assert HEARD_EN in request["messages"][-1]["content"]  # the model was asked what was heard


def test_a_chinese_voice_note_is_echoed_in_traditional_characters_then_answered(
    tmp_path, note, whisper_zh, run_kb
):
    settings = knowledge_base(tmp_path, "spec.md", SPEC)
    fake = FakeLLM(script=[answer("這個軟體的記憶體有 16 GB [1]。")])
    with ThreadedFakeLLM(fake):
        out = run_kb(
            "--home", str(settings.home), "ask", "--audio", str(note),
            env={"KB_LLM_URL": fake.base_url, "KB_WHISPER_MODEL": str(whisper_zh)},
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    heard, _, rest = out.stdout.partition("\n\n")
    assert heard == f"I heard: {HEARD_ZH_TRADITIONAL}"
    assert rest.startswith("這個軟體的記憶體有 16 GB [1]。") and "軟體規格" in rest
    assert HEARD_ZH_TRADITIONAL in fake.requests[0]["messages"][-1]["content"]


def test_a_voice_note_with_no_words_is_answered_with_a_sentence_and_exit_1(
    tmp_path, note, whisper_phantom, run_kb
):
    fake = FakeLLM()
    with ThreadedFakeLLM(fake):
        out = run_kb(
            "--home", str(tmp_path / "kb"), "ask", "--json", "--audio", str(note),
            env={"KB_LLM_URL": fake.base_url, "KB_WHISPER_MODEL": str(whisper_phantom)},
        )  # fmt: skip
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.strip() == (
        "kb: I could not hear any words in that voice note; speak a little closer to the microphone and try again."
    )
    assert fake.requests == []  # nothing was asked


def test_audio_that_is_not_audio_is_refused_in_words(tmp_path, whisper_en, run_kb):
    text = tmp_path / "notes.ogg"
    text.write_text("not a recording at all\n" * 50)
    out = run_kb(
        "--home", str(tmp_path / "kb"), "ask", "--audio", str(text), env={"KB_WHISPER_MODEL": str(whisper_en)}
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("kb: I could not read that audio (it is not a sound file I know")


def test_a_model_that_is_not_downloaded_while_offline_is_explained(tmp_path, note):
    out = kb(
        tmp_path / "kb", "ask", "--audio", str(note),
        KB_WHISPER_MODEL="kb-tests/no-such-whisper", HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
    )  # fmt: skip
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith(
        "kb: The speech model kb-tests/no-such-whisper is not downloaded and HF_HUB_OFFLINE is set"
    )
    assert "KB_WHISPER_MODEL" in out.stderr and "Downloading" not in out.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ask", "--audio", "missing.ogg"], "kb: no such file: missing.ogg"),
        (
            ["ask", "--audio", "voice.ogg", "how", "deep"],
            "kb: ask takes a QUESTION or --audio FILE, not both",
        ),
        (["ask"], "kb: ask needs a QUESTION or --audio FILE"),
    ],
)
def test_usage_mistakes_exit_2_with_a_sentence(tmp_path, note, args, says, run_kb, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the audio files are named relative to the working folder
    out = run_kb("--home", str(tmp_path / "kb"), *args)
    assert out.returncode == 2 and out.stderr.strip() == says


def test_the_first_voice_question_downloads_the_model_once_and_says_so(tmp_path, note, whisper_en):
    settings = knowledge_base(tmp_path, "quillan.md", QUILLAN)
    files = {name: (whisper_en / name).read_bytes() for name in ("config.json", "weights.safetensors")}
    hub, model = Hub(files), "kb-tests/tiny-whisper"
    fake = FakeLLM(script=[answer("Lake Quillan is 317 metres deep [1].")])
    with ThreadedHub(hub), ThreadedFakeLLM(fake):
        env = {
            "KB_LLM_URL": fake.base_url,
            "KB_WHISPER_MODEL": model,
            "HF_ENDPOINT": hub.endpoint,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
        first = kb(settings.home, "ask", "--json", "--audio", str(note), **env)
        fetched = hub.downloads()
        second = kb(settings.home, "ask", "--json", "--audio", str(note), **env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith(
        "kb: Downloading the speech model kb-tests/tiny-whisper for the first voice note"
    )
    assert sorted(fetched) == ["config.json", "weights.safetensors"]
    assert json.loads(first.stdout)["heard"]["text"] == HEARD_EN
    events = [json.loads(line) for line in settings.log_path.read_text().splitlines()]
    assert any(e["event"] == "speech.model_download" and e["model"] == model for e in events)
    assert sorted(p.name for p in (settings.model_dir / "kb-tests--tiny-whisper").iterdir()) == sorted(
        fetched
    )
    assert not (tmp_path / "hf").exists()  # kb's own folder, not the hub cache
    # The second question finds the model in kb's folder: no notice, nothing fetched again.
    assert second.returncode == 0, second.stderr
    assert "Downloading" not in second.stderr and hub.downloads() == fetched
    assert json.loads(second.stdout)["heard"]["text"] == HEARD_EN


def test_a_model_that_cannot_be_downloaded_is_explained(tmp_path, note):
    hub = Hub({})
    with ThreadedHub(hub):
        out = kb(
            tmp_path / "kb", "ask", "--audio", str(note),
            KB_WHISPER_MODEL="kb-tests/gone", HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"),
            HF_HUB_OFFLINE="0",
        )  # fmt: skip
    assert out.returncode == 1 and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "kb: The speech model kb-tests/gone is not on the model hub, or needs a login there;"
    )
    assert "Error" not in last and "http" not in last  # one sentence: no exception names, no URLs


def test_a_hub_out_of_reach_is_one_sentence_for_the_owner(tmp_path, note):
    from tests.fake_llm import free_port

    out = kb(
        tmp_path / "kb", "ask", "--audio", str(note),
        KB_WHISPER_MODEL="kb-tests/tiny-whisper", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}",
        HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="0",
    )  # fmt: skip
    assert out.returncode == 1 and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last == (
        "kb: The speech model kb-tests/tiny-whisper could not be downloaded: the model hub cannot be reached "
        "from here. Try again when online, or download it once with `hf download kb-tests/tiny-whisper`, or set "
        "KB_WHISPER_MODEL to a model folder."
    )
