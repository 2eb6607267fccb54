"""Clocks a test drives (virtual seconds), for code that takes a ``clock: Callable[[], float]``.

Plain top-level classes: they pickle, so a clock can travel to the conversion worker with the stand-in
engine that moves it (one pickle keeps them one object).
"""

from __future__ import annotations


class VirtualClock:
    """Seconds that pass only when the test (or a stand-in) says so."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds``."""
        self.now += seconds


class TickingClock:
    """Virtual time that moves ``step_s`` each time it is read; it keeps every reading."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.readings = [0.0]

    def __call__(self) -> float:
        self.readings.append(self.readings[-1] + self.step_s)
        return self.readings[-1]
