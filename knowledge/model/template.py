"""The model's chat template, rendered exactly as the model server renders it, under a budget.

The model server turns the messages into text with the chat template from the model's
``tokenizer_config.json`` (rendered with Jinja, as Hugging Face's ``apply_chat_template``
does) and counts the tokens of that text. kb renders the same template with the same options
and counts with the same ``tokenizer.json``, so the figure it computes before sending is the
``usage.prompt_tokens`` the server reports.

A template comes from whoever published the model (or a mirror of it), so it is rendered under a
budget: in Jinja's immutable sandbox (``knowledge.model.sandbox``), with the items of all its loops
held to ``LOOP_ITEMS``, the clock to ``RENDER_S`` (looked at on every loop item, call and piece of
text) and the text it makes, repetitions (``'x' * n``) and powers to a size. ``load_template`` renders it once on a short
conversation (``PROBE_MESSAGES``, within ``PROBE_S``); one that fails or goes past a budget there is
not used: prompts are counted as ChatML, a warning is logged and ``ChatTemplate.note`` says why. One
that goes past a budget later, on an answer's messages, is counted as ChatML from then on (the same
warning), so a template cannot hang an answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from knowledge.errors import KbError
from knowledge.model.tokenizer import HfCounter, TokenCounter
from knowledge.text import one_line

if TYPE_CHECKING:
    from jinja2 import Template

# A ChatML template (the Qwen family's shape), for a tokenizer folder without a template.
FALLBACK_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)

log = structlog.get_logger()

# What one render of a chat template may cost. Qwen3's takes a few loop items per message and about a
# millisecond, and its text is the messages plus a few dozen characters each.
RENDER_S = 2.0  # the wall time of one render
OUTPUT_SLACK_CHARS = 65_536  # the text one render may make beyond four times its messages'
# The check at load: one render of a short conversation, within PROBE_S.
PROBE_S = 0.5
PROBE_MESSAGES = (
    {"role": "system", "content": "You answer from the evidence."},
    {"role": "user", "content": "How deep is the lake?"},
    {"role": "assistant", "content": "It is 317 metres deep [1]."},
    {"role": "user", "content": "And how wide is it?"},
)


class PromptError(KbError):
    """The chat template cannot be loaded or rendered."""


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja chat template with the special tokens it may refer to; rendered under a budget."""

    source: str
    special_tokens: Mapping[str, str | None]
    origin: str = ""  # the file the model's template came from ("": given directly)
    refused: str | None = None  # why the model's template in ``origin`` is not used (this is ChatML)
    _over: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def note(self) -> str | None:
        """Why prompts are counted as ChatML rather than with the model's own template, as a sentence
        (None: they are not)."""
        why = self.refused or (self._over[0] if self._over else None)
        if why is None:
            return None
        where = f" in {self.origin}" if self.origin else ""
        return f"the chat template{where} is not used ({why}); prompts are counted as ChatML"

    @cached_property
    def _compiled(self) -> Template:
        """The template compiled once (compiling Qwen's takes tens of milliseconds; rendering, one)."""
        from jinja2 import TemplateError

        from knowledge.model.sandbox import compile_template

        try:
            return compile_template(self.source)
        except (TemplateError, RecursionError) as exc:
            raise PromptError(f"the chat template failed: {one_line(str(exc))}") from exc

    @cached_property
    def _chatml(self) -> ChatTemplate:
        return ChatTemplate(FALLBACK_TEMPLATE, self.special_tokens)

    def render(self, messages: Sequence[Mapping[str, str]], *, enable_thinking: bool = False) -> str:
        """The prompt text the server builds: messages plus the assistant's generation prompt (as
        ChatML, once this template has gone past its budget)."""
        from knowledge.model.sandbox import OverBudget

        if not self._over:
            try:
                return self._render(messages, enable_thinking=enable_thinking, limit_s=RENDER_S)
            except OverBudget as exc:
                self._over.append(str(exc))
                log.warning(
                    "prompt.template_over_budget",
                    origin=self.origin or None,
                    reason=str(exc),
                    messages=len(messages),
                    fallback="chatml",
                )
        try:  # ChatML itself never goes past a budget (one loop item per message), so no fallback of its own
            return self._chatml._render(messages, enable_thinking=enable_thinking, limit_s=RENDER_S)
        except OverBudget as exc:
            raise PromptError(f"the chat template failed: {exc}") from exc

    def problem(self) -> str | None:
        """Why this template cannot be used: it does not compile, or fails or goes past a budget on
        PROBE_MESSAGES (within PROBE_S); None when it can."""
        from knowledge.model.sandbox import OverBudget

        try:
            self._render(PROBE_MESSAGES, enable_thinking=False, limit_s=PROBE_S)
        except OverBudget as exc:
            return f"{exc} on a {len(PROBE_MESSAGES)}-message test conversation"
        except PromptError as exc:
            return "it fails: " + one_line(str(exc).removeprefix("the chat template failed: "))
        return None

    def _render(self, messages: Sequence[Mapping[str, str]], *, enable_thinking: bool, limit_s: float) -> str:
        from knowledge.model.sandbox import BUDGET, LOOP_ITEMS, Budget, OverBudget

        template = self._compiled
        given = sum(len(str(m.get("content", ""))) for m in messages)
        start = time.perf_counter()
        budget = Budget(LOOP_ITEMS, OUTPUT_SLACK_CHARS + 4 * given, start + limit_s, limit_s)
        token = BUDGET.set(budget)
        try:
            parts: list[str] = []
            size = 0
            for part in template.generate(
                messages=list(messages),
                add_generation_prompt=True,
                enable_thinking=enable_thinking,
                **self.special_tokens,
            ):
                size += len(part)
                budget.size(size)
                budget.spend()
                parts.append(part)
            return "".join(parts)
        except OverBudget:
            raise
        except Exception as exc:  # the template is foreign code: whatever it raises is its failure
            raise PromptError(
                f"the chat template failed: {one_line(str(exc)) or type(exc).__name__}"
            ) from exc
        finally:
            BUDGET.reset(token)


def load_template(tokenizer_file: Path | None) -> ChatTemplate:
    """The chat template beside a tokenizer.json (tokenizer_config.json or chat_template.jinja)."""
    if tokenizer_file is not None:
        folder = tokenizer_file.parent
        config: dict[str, object] = {}
        config_file = folder / "tokenizer_config.json"
        if config_file.is_file():
            try:
                config = json.loads(config_file.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise PromptError(f"{config_file} is not valid JSON: {exc}") from exc
        source = config.get("chat_template")
        if isinstance(source, list):  # several named templates: the default one
            source = next((t.get("template") for t in source if t.get("name") == "default"), None)
        origin = config_file
        jinja_file = folder / "chat_template.jinja"
        if not isinstance(source, str) and jinja_file.is_file():
            source, origin = jinja_file.read_text(encoding="utf-8"), jinja_file
        if isinstance(source, str):
            tokens = {
                k: _token_text(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")
            }
            return checked(ChatTemplate(source, tokens, origin=str(origin)))
    return ChatTemplate(FALLBACK_TEMPLATE, {})


def checked(template: ChatTemplate) -> ChatTemplate:
    """The template when it renders a short conversation within its budgets; else ChatML, with a
    warning and a note that say why (a template that fails or never ends cannot hang an answer)."""
    start = time.perf_counter()
    problem = template.problem()
    ms = round((time.perf_counter() - start) * 1000, 1)
    if problem is None:
        log.debug("prompt.template_checked", origin=template.origin, ms=ms)
        return template
    log.warning("prompt.template_refused", origin=template.origin, reason=problem, ms=ms, fallback="chatml")
    return ChatTemplate(FALLBACK_TEMPLATE, template.special_tokens, origin=template.origin, refused=problem)


def _token_text(value: object) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def template_for(counter: TokenCounter) -> ChatTemplate:
    """The chat template of the model whose tokenizer counts (ChatML for the approximate counter)."""
    return load_template(counter.path if isinstance(counter, HfCounter) else None)
