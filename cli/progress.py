"""Progress of long jobs (ingest, reindex, embedding backfill): a bar on a terminal, a line a minute otherwise.

The bar is tqdm's, drawn on ``stream`` (stderr) only when that stream is a terminal. Piped or
redirected, a long job (PLAIN_MIN_STEPS steps or more) writes one plain line there once a minute
(PLAIN_EVERY_S: "embed: 1,280/7,143 chunks (18%)"), so a log shows it is alive; a short one nothing.
Lines the job prints while the bar is up go through
:meth:`Progress.print`, which lifts the bar, prints, and draws it again; log records for the
same terminal are written the same way while the bar is up. The caller prints its own
one-line summary when the job ends, bar or not.

```python
with Progress(len(paths), label=words.tr(INGEST), unit=words.tr(FILES), stream=sys.stderr, words=words) as bar:
    for path in paths:
        bar.describe(path.name)
        outcome = ingest(path)
        bar.advance()
```
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from tqdm import tqdm

from cli.terminal import neutralise
from knowledge.words.catalog import ENGLISH, LABELLED, N_, Words

# The bars' labels and units (a folder source's bar is labelled with the source's name)
INGEST, EMBED, REINDEX, BACKUP = N_("ingest"), N_("embed"), N_("reindex"), N_("backup")
FILES, CHUNKS, DOCUMENTS = N_("files"), N_("chunks"), N_("documents")
PLAIN_MIN_STEPS = 200
PLAIN_EVERY_S = 60.0


class Progress:
    """A progress bar for ``total`` steps of one job; every method is a no-op when the bar is off."""

    def __init__(
        self,
        total: int,
        *,
        label: str,
        unit: str = "it",
        stream: TextIO,
        words: Words = ENGLISH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``label`` and ``unit`` are shown as they are (in ``words``' language: the caller's), the
        label followed by a colon as that language writes it. ``clock`` times the plain lines."""
        # The bar draws with carriage returns of its own: under a neutralising stream it writes
        # to the terminal beneath (item names shown in it are neutralised in describe()).
        plain_stream = stream
        stream = getattr(stream, "raw_stream", stream)
        self.is_on = total > 0 and stream.isatty()
        self._plain = None if self.is_on or total < PLAIN_MIN_STEPS else plain_stream
        self._total, self._done, self._clock = total, 0, clock
        self._next = clock() + PLAIN_EVERY_S
        self._head, self._unit, self._words = words.tr(LABELLED, name=label, what=""), unit, words
        self._bar: tqdm | None = None
        self._lifted: list[tuple[logging.Handler, _AroundBar]] = []
        if self.is_on:
            self._bar = tqdm(
                total=total,
                desc=self._head,
                unit=unit,
                file=stream,
                leave=False,  # the caller's summary line replaces the bar
                dynamic_ncols=True,
                mininterval=0.2,
                bar_format="{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]"
                "{postfix}",
            )
            self._lifted = _lift_console_handlers(stream, self)

    def describe(self, item: str) -> None:
        """Name the item being worked on (shown after the counts)."""
        if self._bar is not None:
            self._bar.set_postfix_str(neutralise(item)[:40], refresh=False)

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more as done."""
        if self._bar is not None:
            self._bar.update(steps)
        elif self._plain is not None:
            self._done += steps
            now = self._clock()
            if now >= self._next:
                self._next = now + PLAIN_EVERY_S
                share = self._words.number(round(100 * self._done / self._total))
                line = f"{self._head}{self._words.number(self._done)}/{self._words.number(self._total)} {self._unit} ({share}%)"
                print(line, file=self._plain, flush=True)

    def print(self, line: str, *, out: TextIO) -> None:
        """Print a line to ``out`` without tearing the bar (both may be the same terminal)."""
        self.around(lambda: print(line, file=out, flush=True))

    def close(self) -> None:
        """Remove the bar from the terminal (and give the console log handlers back)."""
        if self._bar is not None:
            _restore_console_handlers(self._lifted)
            self._bar.close()
            self._bar = None

    def around(self, write: Callable[[], None]) -> None:
        """Run ``write`` (something printed to the bar's terminal) with the bar lifted."""
        if self._bar is not None:
            self._bar.clear()
        write()
        if self._bar is not None:
            self._bar.refresh()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _AroundBar(logging.Handler):
    """Stands in for a console handler while a bar is up: the record is written with the bar lifted."""

    def __init__(self, inner: logging.Handler, progress: Progress) -> None:
        super().__init__(inner.level)
        self.inner = inner
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self.progress.around(lambda: self.inner.handle(record))  # the inner handler's own filters apply


def _lift_console_handlers(stream: TextIO, progress: Progress) -> list[tuple[logging.Handler, _AroundBar]]:
    """Swap the root logger's handlers that write to ``stream`` for ones that lift the bar first."""
    root = logging.getLogger()
    swapped = [
        (h, _AroundBar(h, progress))
        for h in root.handlers
        if isinstance(h, logging.StreamHandler) and getattr(h.stream, "raw_stream", h.stream) is stream
    ]
    for inner, outer in swapped:
        root.removeHandler(inner)
        root.addHandler(outer)
    return swapped


def _restore_console_handlers(swapped: list[tuple[logging.Handler, _AroundBar]]) -> None:
    root = logging.getLogger()
    for inner, outer in swapped:
        root.removeHandler(outer)
        root.addHandler(inner)
