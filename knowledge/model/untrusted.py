"""Text kb did not write (documents, titles, URLs, web results, file names), made safe for a chat prompt.

A chat template turns messages into one string with control tokens between turns
(``<|im_start|>system``, ``<|eot_id|>``, ``[INST]``, ``<start_of_turn>``…). The model
server tokenises that string with special tokens enabled, so the same characters inside a
document would open a real system turn. Every message kb sends passes through
``strip_control_tokens``: the ``<|…|>`` family is broken apart so it cannot form again, and
the named tokens of the other common templates are removed until none is left.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

# Tokens of the Llama-2, Mistral, Gemma, DeepSeek and BERT-style templates, and reasoning tags.
_NAMED = re.compile(
    r"</?s>|<unk>|<pad>|<bos>|<eos>|\[/?INST\]|<</?SYS>>|<start_of_turn>|<end_of_turn>|</?think>"
    r"|\[/?(?:SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]|\[(?:CLS|SEP|MASK)\]",
    re.IGNORECASE,
)
_BARS = (("<|", "< |"), ("|>", "| >"), ("<｜", "< ｜"), ("｜>", "｜ >"))


def strip_control_tokens(text: str, extra: Iterable[str] = ()) -> str:
    """text without any chat-template control token (``extra``: the model's own special tokens)."""
    tokens = [t for t in extra if t]
    while True:
        before = text
        for old, new in _BARS:
            text = text.replace(old, new)
        text = _NAMED.sub("", text)
        for token in tokens:
            text = text.replace(token, "")
        if text == before:
            return text


def safe_messages(messages: Sequence[Mapping[str, str]], extra: Iterable[str] = ()) -> list[dict[str, str]]:
    """Messages whose contents carry no control token; roles are kb's own and kept."""
    extra = tuple(extra)
    return [{**m, "content": strip_control_tokens(m.get("content") or "", extra)} for m in messages]
