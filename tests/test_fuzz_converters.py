"""Fuzzing the converters: 200 mutated images, PDFs and audio files each, through the isolated worker
(every fifth in make test, all 200 in make fuzz).

Each family starts from a few small valid files made here (pictures and scans of text lines, PDFs
with a text layer and with a scanned page, short tones in every audio container kb reads). Sample
``i`` is one of them mutated by ``mutate(seeds, i)``: the same bytes on every run, so a failing
sample is rebuilt from its family and index alone (``mutate(pdf_seeds(), 17)``).

Images and PDFs go through what the daemon runs: the Ingestor, with the daemon's IsolatedRunner and
real RapidOCR. Audio goes through what the bot runs: ``transcribe_audio`` in ``speech_runner()``'s
worker, with a stand-in for Whisper (no Whisper weights can be had here), so what is tested is the
decoding. Every sample must end as converted (indexed, or transcribed) or refused with a named reason,
never ``internal-error`` (a bug in kb), and within the deadline the worker enforces for it.
"""

import io
import random
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest
import structlog

from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import ConversionError, SpeechError
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.speech.decode import SAMPLE_RATE
from knowledge.speech.transcribe import Transcript, speech_runner, transcribe_audio
from knowledge.store.index import Index
from tests import audio_fixtures, ocr_images, pdfs
from tests.conftest import make_settings

SAMPLES = 200
LINES = ["Lake Quillan is 317 metres deep.", "臺北的港口九點開放。"]

# The deadlines configured for these runs: far above what a sample needs (well under a second), low
# enough that a sample which hangs costs seconds, not minutes.
CONVERT_TIMEOUT_S = 10.0
OCR_PAGE_TIMEOUT_S = 10.0
TRANSCRIBE_TIMEOUT_S = 10.0
# Beyond the worker's deadline: what kb does around a conversion, in CPU seconds of this process (the
# worker is stopped at its deadline by the runner, tested on a virtual clock in test_isolate*.py; CPU time,
# unlike the wall clock, does not grow when the machine is busy).
SLACK_S = 3.0

MUTATIONS = (
    "bit-flip",
    "interesting-bytes",
    "interesting-number",
    "truncate",
    "duplicate-chunk",
    "delete-chunk",
    "splice",
    "scramble-body",
)
# Values at the edges of signed and unsigned fields, in both byte orders; and as text, for PDFs.
INTERESTING_BYTES = (
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\x00\x00",
    b"\xff\xff",
    b"\x7f\xff",
    b"\xff\x7f",
    b"\x80\x00",
    b"\x00\x80",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\x7f",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x00\x80",
    b"\xff\xff\xff\xff\xff\xff\xff\x7f",
)
INTERESTING_NUMBERS = (b"0", b"-1", b"65535", b"2147483648", b"4294967296", b"99999999999999999999")


def mutate(seeds: dict[str, bytes], index: int) -> tuple[str, bytes, str]:
    """Sample ``index``: (the seed's name, the mutated bytes, what was done), the same on every run."""
    rng = random.Random(index)
    name = rng.choice(sorted(seeds))
    data = bytearray(seeds[name])
    n = len(data)
    kind = MUTATIONS[index % len(MUTATIONS)]
    if kind == "bit-flip":
        spots = sorted((rng.randrange(n), rng.randrange(8)) for _ in range(rng.randint(1, 8)))
        for at, bit in spots:
            data[at] ^= 1 << bit
        how = f"bits flipped (offset, bit): {spots}"
    elif kind == "interesting-bytes":
        writes = [(rng.randrange(n), rng.choice(INTERESTING_BYTES)) for _ in range(rng.randint(1, 4))]
        for at, value in writes:
            data[at : at + len(value)] = value
        how = "overwritten (offset, bytes): " + ", ".join(f"({at}, {value.hex()})" for at, value in writes)
    elif kind == "interesting-number":  # a length, count, offset or size written as digits
        runs = [m.span() for m in re.finditer(rb"\d+", data)] or [(n // 2, n // 2)]
        start, end = rng.choice(runs)
        value = rng.choice(INTERESTING_NUMBERS)
        data[start:end] = value
        how = f"the digits at {start}..{end} replaced by {value.decode()}"
    elif kind == "truncate":
        cut = rng.randrange(1, n)
        del data[cut:]
        how = f"cut to {cut} bytes"
    elif kind == "duplicate-chunk":
        start, size, copies = rng.randrange(n), rng.randint(1, max(1, n // 4)), rng.randint(1, 4)
        chunk = data[start : start + size]
        at = rng.randrange(n + 1)
        data[at:at] = chunk * copies
        how = f"bytes {start}..{start + len(chunk)} inserted {copies}x at {at}"
    elif kind == "delete-chunk":
        start, size = rng.randrange(n), rng.randint(1, max(1, n // 4))
        del data[start : start + size]
        how = f"bytes {start}..{min(n, start + size)} deleted"
    elif kind == "splice":
        other = rng.choice(sorted(seeds))
        cut, at = rng.randrange(1, n), rng.randrange(len(seeds[other]))
        data[cut:] = seeds[other][at:]
        how = f"bytes {cut}.. replaced by {other} from byte {at}"
    else:  # scramble-body: the header kept, the rest shuffled in blocks
        keep, block = min(n - 1, rng.randint(8, 128)), rng.choice((1, 16, 256))
        blocks = [data[i : i + block] for i in range(keep, n, block)]
        rng.shuffle(blocks)
        data[keep:] = b"".join(blocks)
        how = f"first {keep} bytes kept, the rest shuffled in blocks of {block}"
    return name, bytes(data), f"{kind} of {name}: {how}"


# -- seeds --------------------------------------------------------------------------------------


def image_seeds() -> dict[str, bytes]:
    """Pictures of two lines of text, in the formats phones, scanners and screenshots produce."""
    image = ocr_images.text_image(LINES)
    return {
        "text.png": ocr_images.encode(image, "PNG"),
        "phone.jpg": ocr_images.phone_jpeg(image, 6),  # EXIF orientation: turned upright before OCR
        "scan.tif": ocr_images.encode(image.convert("L"), "TIFF", compression="tiff_lzw"),
        "screenshot.webp": ocr_images.encode(image, "WEBP"),
        "text.gif": ocr_images.encode(image.convert("P"), "GIF"),
        "text.bmp": ocr_images.encode(image, "BMP"),
    }


def pdf_seeds() -> dict[str, bytes]:
    """A text page with a scanned page (reportlab, compressed), two text pages (uncompressed), a scan."""
    scan = ocr_images.a4_page(LINES, size_pt=14)[0]
    seeds = {
        "mixed.pdf": ocr_images.mixed_pdf(
            ["The harbour of Quillan opens at nine.", "Ferries leave hourly."], scan
        ),
        "text.pdf": pdfs.text_pdf(
            [["Lake Quillan", "is 317 metres deep."], ["It never freezes."]], title="Quillan"
        ),
        "scan.pdf": ocr_images.scanned_pdf([ocr_images.text_image(LINES)]),
    }
    # The same bytes every run: the dates and file identifiers the writers stamp in, pinned (same length).
    for name, data in seeds.items():
        data = re.sub(rb"D:\d{14}", b"D:20250101000000", data)
        seeds[name] = re.sub(rb"<[0-9a-f]{32}>", b"<" + b"0" * 32 + b">", data)
    return seeds


def audio_seeds() -> dict[str, bytes]:
    """A one-second tone in every container and codec kb reads (a Telegram voice note among them)."""
    return {f"tone.{kind}": tone_file(kind) for kind in sorted(audio_fixtures.KINDS)}


def tone_file(kind: str) -> bytes:
    """audio_fixtures.encode of a one-second tone, written bit-exact (no random stream serials or ids)."""
    container_format, codec, rate = audio_fixtures.KINDS[kind]
    frame = av.AudioFrame.from_ndarray(audio_fixtures.tone(1.0, rate), format="fltp", layout="mono")
    frame.sample_rate = rate
    buf = io.BytesIO()
    with av.open(buf, "w", format=container_format, container_options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(codec, rate=rate, options={"flags": "+bitexact"})
        stream.layout = "mono"
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return buf.getvalue()


# -- images and PDFs: through the daemon's pipeline ---------------------------------------------


def ingest_mutants(
    tmp_path: Path, family: str, seeds: dict[str, bytes], samples: range, *, deadline_s: float
) -> Counter:
    """Ingest the samples as the daemon does; assert each is indexed or refused by name, in time."""
    settings = make_settings(
        tmp_path / "kb",
        KB_OCR="rapidocr",
        KB_CONVERT_TIMEOUT_S=str(CONVERT_TIMEOUT_S),
        KB_OCR_PAGE_TIMEOUT_S=str(OCR_PAGE_TIMEOUT_S),
        KB_OCR_DPI="72",  # scanned pages read as usual, from a quarter of the pixels
    )
    settings.inbox.mkdir(parents=True)
    outcomes: Counter = Counter()
    problems: list[str] = []
    started = time.monotonic()
    with (
        Index(settings.index_path) as index,
        IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20) as runner,  # the daemon's worker
    ):
        ingestor = Ingestor(settings, index, ApproxCounter(), runner=runner)
        for i in samples:
            seed, data, how = mutate(seeds, i)
            path = settings.inbox / f"{family}-{i:03d}{Path(seed).suffix}"
            path.write_bytes(data)
            t0 = time.process_time()
            where = f"{family} sample {i} ({how})"
            with structlog.testing.capture_logs(processors=[structlog.processors.format_exc_info]) as logs:
                try:
                    outcome = ingestor.ingest(path)
                except Exception as exc:  # the file must end somewhere: this is a bug too
                    problems.append(f"{where}: raised {exc!r}\n{traceback.format_exc()}")
                    continue
            took = time.process_time() - t0
            outcomes[outcome.reason if outcome.status == "failed" else outcome.status] += 1
            if outcome.reason == "internal-error":
                problems.append(f"{where}: internal-error: {outcome.message}\n{traceback_in(logs)}")
            elif not (
                outcome.status in ("indexed", "duplicate") or (outcome.status == "failed" and outcome.reason)
            ):
                problems.append(f"{where}: ended as {outcome.status}: {outcome.message}")
            if took > deadline_s + SLACK_S:
                problems.append(f"{where}: took {took:.1f} CPU s here, over its {deadline_s:g} s deadline")
    total = time.monotonic() - started
    print(f"{family}: {len(samples)} samples in {total:.1f} s: {dict(sorted(outcomes.items()))}")
    assert not problems, "\n".join(problems)
    return outcomes


def traceback_in(logs: list[dict]) -> str:
    """The traceback kb logged for an internal error: the worker's, or this process's."""
    found = [e.get("traceback") or e.get("exception") for e in logs if e["event"] == "ingest.internal_error"]
    return "\n".join(str(t) for t in found if t) or "(no traceback logged)"


@pytest.mark.fuzz
@pytest.mark.parametrize(
    ("family", "seeds", "deadline_s", "refusal"),
    [
        # A photo: the conversion timeout, moved on by the OCR heartbeat.
        ("image", image_seeds, CONVERT_TIMEOUT_S + OCR_PAGE_TIMEOUT_S + 5, "image-corrupt"),
        # A PDF: the conversion timeout + 5 s, moved by each scanned page read (the seeds have at most two pages).
        ("pdf", pdf_seeds, CONVERT_TIMEOUT_S + 5 + 2 * (OCR_PAGE_TIMEOUT_S + 5), "pdf-malformed"),
    ],
    ids=["images", "pdfs"],
)
def test_mutated_files_are_indexed_or_refused_with_a_named_reason(
    tmp_path, fuzz_indices, family, seeds, deadline_s, refusal
):
    # deadline_s: the worker's deadline for one file of the family.
    outcomes = ingest_mutants(tmp_path, family, seeds(), fuzz_indices(SAMPLES), deadline_s=deadline_s)
    assert outcomes["indexed"] > 0 and outcomes[refusal] > 0  # both ways out were taken


# -- audio: through the bot's transcription, Whisper stood in for -------------------------------

HEARD = "heard mono float32 samples in [-1, 1]"


@dataclass(frozen=True)
class SamplesChecker:
    """Stands in for Whisper in the worker: says whether it got what Whisper takes (mono float32 in [-1, 1])."""

    name: str = "samples-checker"

    def transcribe(self, samples: np.ndarray) -> Transcript:
        is_whisper_input = (
            samples.dtype == np.float32
            and samples.ndim == 1
            and bool(np.all(np.abs(samples) <= 1.0))  # False for NaN too
        )
        text = HEARD if is_whisper_input else f"unexpected samples: {samples.dtype}, {samples.shape}"
        return Transcript(text=text, language="en", duration_s=len(samples) / SAMPLE_RATE, model=self.name)


@pytest.mark.fuzz
def test_mutated_audio_is_decoded_or_refused_with_a_named_reason(tmp_path, fuzz_indices):
    settings = make_settings(tmp_path / "kb", KB_TRANSCRIBE_TIMEOUT_S=str(TRANSCRIBE_TIMEOUT_S))
    seeds = audio_seeds()
    outcomes: Counter = Counter()
    problems: list[str] = []
    started = time.monotonic()
    samples = fuzz_indices(SAMPLES)
    with speech_runner() as runner:
        for i in samples:
            _, data, how = mutate(seeds, i)
            where = f"audio sample {i} ({how})"
            t0 = time.process_time()
            try:
                transcript = transcribe_audio(
                    data, settings=settings, runner=runner, transcriber=SamplesChecker()
                )
            except SpeechError as exc:
                cause = exc.__cause__
                worker = cause.reason if isinstance(cause, ConversionError) else None
                outcomes[f"{exc.reason} ({worker})" if worker else exc.reason] += 1
                if worker == "internal-error":
                    problems.append(f"{where}: internal-error: {cause}\n{getattr(cause, 'details', '')}")
            except Exception as exc:  # the caller always gets a sentence: anything else is a bug too
                problems.append(f"{where}: raised {exc!r}\n{traceback.format_exc()}")
            else:
                outcomes["transcribed"] += 1
                if transcript.text != HEARD:
                    problems.append(f"{where}: decoded to {transcript.text}")
            took = time.process_time() - t0
            if took > TRANSCRIBE_TIMEOUT_S + SLACK_S:
                problems.append(
                    f"{where}: took {took:.1f} CPU s here, over its {TRANSCRIBE_TIMEOUT_S:g} s deadline"
                )
    total = time.monotonic() - started
    print(f"audio: {len(samples)} samples in {total:.1f} s: {dict(sorted(outcomes.items()))}")
    assert not problems, "\n".join(problems)
    assert outcomes["transcribed"] > 0 and outcomes["audio-unreadable"] > 0
