"""The commands of ``kb``, one module per group; each declares its commands in one table at its end
(``COMMANDS``: name → Command), beside the functions that run them."""

import argparse
from collections.abc import Callable
from dataclasses import dataclass

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # every command's exit statuses (a few add their own)


@dataclass(frozen=True)
class Command:
    """One command: the function it runs, ``help`` its line in kb --help, ``description`` what its own
    --help says above its arguments, ``arguments`` adds those arguments to its sub-parser."""

    func: Callable[..., int]
    help: str
    description: str | None = None
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter


def add_command(sub: argparse._SubParsersAction, name: str, command: Command) -> argparse.ArgumentParser:
    """The sub-parser of the command ``name``, which runs ``command.func``."""
    described = (
        command.description or f"{command.help[:1].upper()}{command.help[1:]}."
    )  # never a bare usage line
    p = sub.add_parser(
        name, help=command.help, description=described, formatter_class=command.formatter_class
    )
    p.set_defaults(func=command.func)
    if command.arguments is not None:
        command.arguments(p)
    return p
