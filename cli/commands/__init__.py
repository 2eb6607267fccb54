"""The commands of ``kb``, one module per group; each registers its own sub-parsers beside its functions."""

import argparse
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # every command's exit statuses (a few add their own)


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    func: Callable[..., int],
    help: str,
    description: str | None = None,
    **options: Any,
) -> argparse.ArgumentParser:
    """The sub-parser of the command ``name``, which runs ``func``: ``help`` is its line in kb --help,
    ``description`` what its own --help says above its arguments; ``options`` go to argparse as they are."""
    p = sub.add_parser(name, help=help, description=description, **options)
    p.set_defaults(func=func)
    return p
