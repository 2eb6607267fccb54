"""Progress of long jobs (ingest, reindex, embedding backfill): a bar on a terminal, silence otherwise.

The bar is tqdm's, drawn on ``stream`` (stderr) only when that stream is a terminal; piped or
redirected output gets nothing extra. Lines the job prints while the bar is up go through
:meth:`Progress.print`, which lifts the bar, prints, and draws it again. The caller prints its
own one-line summary when the job ends, bar or not.

```python
with Progress(len(paths), label="ingest", unit="file", stream=sys.stderr) as bar:
    for path in paths:
        bar.describe(path.name)
        outcome = ingest(path)
        bar.advance()
```
"""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

from tqdm import tqdm


class Progress:
    """A progress bar for ``total`` steps of one job; every method is a no-op when the bar is off."""

    def __init__(self, total: int, *, label: str, unit: str = "it", stream: TextIO) -> None:
        self.is_on = total > 0 and stream.isatty()
        self._bar: tqdm | None = None
        if self.is_on:
            self._bar = tqdm(
                total=total,
                desc=label,
                unit=unit,
                file=stream,
                leave=False,  # the caller's summary line replaces the bar
                dynamic_ncols=True,
                mininterval=0.2,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]"
                "{postfix}",
            )

    def describe(self, item: str) -> None:
        """Name the item being worked on (shown after the counts)."""
        if self._bar is not None:
            self._bar.set_postfix_str(item[:40], refresh=False)

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more as done."""
        if self._bar is not None:
            self._bar.update(steps)

    def print(self, line: str, *, out: TextIO) -> None:
        """Print a line to ``out`` without tearing the bar (both may be the same terminal)."""
        if self._bar is not None:
            self._bar.clear()
        print(line, file=out, flush=True)
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        """Remove the bar from the terminal."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
