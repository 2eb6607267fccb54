"""Stand-in OCR engines (the OcrEngine protocol) for what the real one cannot show here.

Thai has no RapidOCR model off the Mac, so a scripted engine "reads" Thai lines; slow and stuck
engines show the per-page timeout and the progress heartbeat. They are plain top-level classes, so
they pickle and run inside the conversion worker like the real engine.
"""

from __future__ import annotations

import time

from PIL import Image

from knowledge.convert.ocr_text import OcrLine
from tests.clocks import VirtualClock


def line(text: str, x0: float, y0: float, x1: float, y1: float, confidence: float = 0.95) -> OcrLine:
    """A recognised line at this box, as an engine reports it."""
    return OcrLine(text, confidence, (x0, y0, x1, y1))


def texts(blocks: list[list[OcrLine]]) -> list[list[str]]:
    """The text of lines grouped in blocks (what reading order returns)."""
    return [[item.text for item in block] for block in blocks]


class ScriptedEngine:
    """Reads the given lines, one under the other, from any picture (after ``delay_s``)."""

    def __init__(self, lines: list[str], *, confidence: float = 0.9, delay_s: float = 0.0) -> None:
        self.name = "scripted"
        self.lines = lines
        self.confidence = confidence
        self.delay_s = delay_s

    def read(self, image: Image.Image) -> list[OcrLine]:
        time.sleep(self.delay_s)
        return [
            OcrLine(text, self.confidence, (10.0, 10.0 + 40 * i, 10.0 + 20 * len(text), 40.0 + 40 * i))
            for i, text in enumerate(self.lines)
        ]


class ClockedEngine(ScriptedEngine):
    """Reads like ScriptedEngine, each picture taking ``page_s`` on ``clock`` (a tests.clocks.VirtualClock)
    instead of real time; hand OcrSpec the same clock: pickled together, they stay one in the worker."""

    def __init__(self, lines: list[str], clock: VirtualClock, *, page_s: float) -> None:
        super().__init__(lines)
        self.clock = clock
        self.page_s = page_s

    def read(self, image: Image.Image) -> list[OcrLine]:
        self.clock.advance(self.page_s)
        return super().read(image)


class StuckEngine:
    """Never finishes reading (a page that hangs the recogniser)."""

    name = "stuck"

    def read(self, image: Image.Image) -> list[OcrLine]:
        time.sleep(3600)
        return []


def counted_steps(data: bytes, *, steps: int, step_s: float, progress) -> int:
    """A job of ``steps`` steps of ``step_s`` each, reporting progress after each; returns the steps done."""
    progress(0, steps)
    for done in range(1, steps + 1):
        time.sleep(step_s)
        progress(done, steps)
    return steps
