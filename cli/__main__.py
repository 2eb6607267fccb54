"""``python -m cli`` and the ``kb`` console script.

Kept light on purpose: it imports nothing until it runs, so a command loads only what it needs, and
a process started as Python's spawn starts one (which imports its parent's main module again) does not
pull in the whole command line.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run kb with the process's arguments, streams and environment."""
    from cli.main import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
