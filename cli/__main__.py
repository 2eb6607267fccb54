"""``python -m cli`` and the ``kb`` console script.

Kept light on purpose: a worker process kb starts (a converter, a transcriber: spawned, never forked)
imports the main module of its parent again, and this one imports nothing until it runs, so a worker
loads only what its job needs rather than the whole command line.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run kb with the process's arguments, streams and environment."""
    from cli.main import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
