"""Voice questions: decoding, transcription and the whole `kb ask --audio` flow, timed.

Figures printed (medians and p95; the machine is shared and noisy, so nothing here is a test):

1. decoding a 30 s Telegram-style voice note (OGG/Opus, 48 kHz mono) to 16 kHz mono float32 with
   PyAV, and the same recording as MP3, M4A (AAC) and WAV (target for the voice note: < 0.5 s);
2. transcription through ``transcribe_audio`` in its worker process, with a tiny Whisper model the
   test suite's builder makes (wired to hear a fixed question): the first call (worker start,
   imports, model load) and warm calls, for a 5 s and a 30 s note;
3. the same with a real model when one is available (``--model``: a folder or a hub id already in
   the Hugging Face cache; the default KB_WHISPER_MODEL is used when it is cached); nothing is
   downloaded;
4. the whole ``kb ask --json --audio`` flow as a subprocess (start, decode, transcribe, search, a
   scripted model server's answer, exit) over a one-document knowledge base.

    python bench/voice.py [--runs 10] [--flow-runs 3] [--model SPEC]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures are shared with the tests
from knowledge.config import load_settings  # noqa: E402
from knowledge.errors import SpeechError  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.speech.decode import decode_audio  # noqa: E402
from knowledge.speech.transcribe import find_model, speech_runner, transcribe_audio  # noqa: E402
from tests.audio_fixtures import encode, noise, tone  # noqa: E402
from tests.conftest import ingest_texts, make_settings, subprocess_env  # noqa: E402
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer  # noqa: E402
from tests.tiny_whisper import N_STATE, build_tiny_whisper  # noqa: E402

QUESTION = "How deep is Lake Quillan?"


def speechlike(seconds: float, rate: int):
    """A tone over noise: something a codec has to work at (pure tones compress too well)."""
    return (tone(seconds, rate, amp=0.2) + noise(seconds, rate, amp=0.05)).clip(-1, 1)


def times(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def line(label: str, values: list[float], unit: str = "ms") -> str:
    scale = 1000 if unit == "ms" else 1
    return (
        f"{label:<44} median {statistics.median(values) * scale:8.1f} {unit}   "
        f"p95 {p95(values) * scale:8.1f} {unit}   ({len(values)} runs)"
    )


def bench_decode(runs: int) -> None:
    print("1. decoding 30 s of audio to 16 kHz mono float32 (PyAV)")
    for kind, rate in (("ogg-opus", 48_000), ("mp3", 44_100), ("m4a", 44_100), ("wav", 44_100)):
        data = encode(speechlike(30.0, rate), rate, kind)
        decode_audio(data, max_s=300)  # first call pays the imports
        label = f"   {kind} ({len(data) / 1024:.0f} KiB)" + (
            "  [target < 500 ms]" if kind == "ogg-opus" else ""
        )
        print(line(label, times(lambda data=data: decode_audio(data, max_s=300), runs)))


def bench_transcribe(label: str, model: str, runs: int, home: Path) -> None:
    settings = make_settings(home, KB_WHISPER_MODEL=model, KB_TRANSCRIBE_TIMEOUT_S="3600")
    notes = {s: encode(speechlike(s, 48_000), 48_000, "ogg-opus") for s in (5.0, 30.0)}
    with speech_runner() as runner:

        def hear(data: bytes) -> str:
            try:
                return transcribe_audio(data, settings=settings, runner=runner).text
            except SpeechError as exc:
                return f"({exc.reason})"

        t0 = time.perf_counter()
        heard = hear(notes[5.0])
        print(
            f"   {label}: first call (worker start, imports, model load) {time.perf_counter() - t0:.2f} s; heard {heard!r}"
        )
        for seconds, data in notes.items():
            print(
                line(f"   {label}, {seconds:g} s note, warm", times(lambda data=data: hear(data), runs), "s")
            )


def bench_flow(runs: int, model: Path, work: Path) -> None:
    settings = make_settings(work / "flow-kb")
    ingest_texts(settings, {"quillan.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n"})
    note = work / "question.ogg"
    note.write_bytes(encode(speechlike(5.0, 48_000), 48_000, "ogg-opus"))
    fake = FakeLLM(script=[answer("Lake Quillan is 317 metres deep [1].")])
    elapsed = []
    with ThreadedFakeLLM(fake):
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WHISPER_MODEL=str(model))
        for _ in range(runs):
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "cli", "--home", str(settings.home), "ask", "--json", "--audio",
                 str(note)],
                capture_output=True, text=True, env=env, timeout=600,
            )  # fmt: skip
            elapsed.append(time.perf_counter() - t0)
            if out.returncode != 0:
                raise SystemExit(f"kb ask --audio failed: {out.stderr}")
    reply = json.loads(out.stdout)
    print(line("4. kb ask --json --audio (5 s note, tiny model)", elapsed, "s"))
    print(f"   heard {reply['heard']['text']!r}, answered {reply['text']!r} ({reply['mode']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per figure (default 10)")
    parser.add_argument("--flow-runs", type=int, default=3, help="runs of the whole CLI flow (default 3)")
    parser.add_argument(
        "--model", help="a real Whisper model: folder or cached hub id (default: KB_WHISPER_MODEL)"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())

    bench_decode(args.runs)
    with tempfile.TemporaryDirectory(prefix="kb-bench-voice-") as tmp:
        work = Path(tmp)
        tiny = build_tiny_whisper(work / "tiny-whisper", says=QUESTION)
        print(f"2. transcription in the worker, tiny Whisper model (1 layer, {N_STATE} wide, v3 vocabulary)")
        bench_transcribe("tiny", str(tiny), args.runs, work / "kb")
        spec = args.model or load_settings({}, home=work).whisper_model
        try:
            cached = find_model(spec, own_dir=load_settings().model_dir)  # the kb of the current folder
        except SpeechError as exc:
            cached, reason = None, str(exc)
        else:
            reason = "not in runs/models/ nor the Hugging Face cache (this benchmark downloads nothing)"
        if cached is None:
            print(f"3. real model {spec}: skipped, {reason}")
        else:
            print(f"3. transcription with {spec}")
            bench_transcribe(spec, spec, max(1, args.runs // 5), work / "kb-real")
        bench_flow(args.flow_runs, tiny, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
