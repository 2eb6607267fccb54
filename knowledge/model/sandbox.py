"""Jinja's immutable sandbox with a budget for one render of a chat template.

A chat template is foreign code (whoever published the model wrote it): it is rendered with the items
of all its loops held to ``LOOP_ITEMS``, the clock looked at on every loop item, call and piece of
text, and the text it makes, repetitions (``'x' * n``) and powers held to a size. Jinja is imported
here only: a command that renders no prompt never loads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import Template, TemplateError, nodes, pass_context
from jinja2.exceptions import SecurityError
from jinja2.ext import loopcontrols
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

LOOP_ITEMS = 100_000  # items all the loops of one render may take (and the longest range)
POWER_BITS = 4_096  # the largest number ``**`` may make


class OverBudget(SecurityError):
    """A render went past one of its budgets; the message says which, as a clause ("it loops…")."""


@dataclass
class Budget:
    """What is left of one render's budget."""

    items: int
    chars: int
    deadline: float
    limit_s: float

    def spend(self, items: int = 0) -> None:
        """Charge loop items (or nothing, only the clock); OverBudget when one runs out."""
        self.items -= items
        if self.items < 0:
            raise OverBudget(f"it loops more than {LOOP_ITEMS:,} times")
        if time.perf_counter() > self.deadline:
            raise OverBudget(f"it takes more than {self.limit_s:g} s")

    def size(self, chars: int) -> None:
        """Refuse a text longer than a render may make."""
        if chars > self.chars:
            raise OverBudget(f"it makes a text longer than {self.chars:,} characters")


# The budget of the render running in this thread (Jinja calls the sandbox's hooks without it).
BUDGET: ContextVar[Budget | None] = ContextVar("kb_chat_template_budget", default=None)


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with repetition, powers and calls held to the render's budget (loops
    are counted by ``_counted``, wrapped around each one when the template is compiled)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """``a * b`` and ``a ** b``, refused when the result would be too large."""
        budget = BUDGET.get()
        if budget is not None:
            budget.spend()
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, str | list | tuple) and _is_int(times):
                        budget.size(len(seq) * times)
            elif (
                _is_int(left)
                and _is_int(right)
                and abs(left) > 1
                and right * abs(left).bit_length() > POWER_BITS
            ):
                raise OverBudget(f"it computes a number of more than {POWER_BITS:,} bits")
        return super().call_binop(context, operator, left, right)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        """A call, refused when a text is asked to be padded past the budget (``'x'.ljust(10**10)``)."""
        budget = BUDGET.get()
        if budget is not None:
            budget.spend()
            if isinstance(getattr(obj, "__self__", None), str) and getattr(obj, "__name__", "") in _PADS:
                for value in (*args, *kwargs.values()):
                    if _is_int(value):
                        budget.size(abs(value))
        return super().call(context, obj, *args, **kwargs)


_PADS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})  # text methods whose int is a width


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _range(*args: int) -> range:
    """``range`` for templates: at most LOOP_ITEMS numbers (Jinja's sandbox allows 100,000 per range,
    and two of them nested never end)."""
    numbers = range(*args)
    try:
        too_long = len(numbers) > LOOP_ITEMS
    except OverflowError:  # more than sys.maxsize
        too_long = True
    if too_long:
        raise OverBudget(f"it asks for a range of more than {LOOP_ITEMS:,} numbers")
    return numbers


@pass_context  # never folded into a constant when the template is compiled: it counts each render
def _counted(context: Context, iterable: Iterable[Any]) -> Iterable[Any]:
    """A loop's items, each charged to the render's budget."""
    budget = BUDGET.get()
    return iterable if budget is None else _charged(iterable, budget)


def _charged(iterable: Iterable[Any], budget: Budget) -> Iterator[Any]:
    for item in iterable:
        budget.spend(1)
        yield item


def _sandbox() -> _Sandbox:
    """The environment Hugging Face's ``apply_chat_template`` renders in, with kb's budgets."""
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.filters["kb_counted"] = _counted
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["range"] = _range
    return env


def compile_template(source: str) -> Template:
    """The template with every ``for`` loop's items counted (``{% for x in xs %}`` read as
    ``{% for x in xs|kb_counted %}``): the same text, a render that cannot loop forever."""
    env = _sandbox()
    tree = env.parse(source)
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, "kb_counted", [], [], None, None, lineno=loop.iter.lineno)
    tree.set_environment(env)
    return env.from_string(tree)


def _raise(message: str) -> None:
    raise TemplateError(message)
