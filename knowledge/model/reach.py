"""Whether an OpenAI-compatible model server answers, judged from what it says about itself.

Servers differ in what they serve besides ``/v1``: ``mlx_lm.server`` and llama.cpp's
``llama-server`` answer ``GET /health`` with ``{"status": "ok"}`` (llama-server with 503 while it
loads the model), vLLM with 200 and an empty body, and Ollama has no ``/health`` (404). All of
them list their models at ``GET /v1/models``. So a server is reachable when it lists its models;
``/health`` counts only when it is there (its 404 alone is no failure, a 503 is), and a server
that answers neither is not the model server kb wants.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from knowledge.config import DEFAULT_LLM_MODEL

HEALTH_ABSENT = 404  # Ollama and other servers without a /health


@dataclass(frozen=True)
class Reach:
    """What the server said: the models ``/v1/models`` lists (None: no list, ``models_error`` says
    why) and ``/health``'s HTTP status (None: no answer, ``health_error`` says why)."""

    models: tuple[str, ...] | None
    health: int | None
    models_error: str = ""
    health_error: str = ""

    @property
    def level(self) -> str:
        """``ok``, ``warn`` (it answers /health but lists no models) or ``fail``."""
        if self.models is not None:
            return "ok" if self.health in (200, HEALTH_ABSENT, None) else "fail"
        return "warn" if self.health == 200 else "fail"

    @property
    def problem(self) -> str:
        """What is wrong, in one line ('' when nothing is)."""
        return self.problem_in(None)

    def problem_in(self, tr: Callable[..., str] | None) -> str:
        """What is wrong, in one line ('' when nothing is): in English (``tr`` None) with what the server
        said; else in the reader's words (``tr``: the catalog's ``Words.tr``) with its HTTP status only
        (the server's own words are English)."""
        if self.level == "ok":
            return ""
        if self.models is not None:
            if tr is None:
                return f"/v1/models lists its models, but /health {self.health_error}"
            return tr("/v1/models lists its models, but /health answered {status}", status=self.health or "-")
        if self.health == 200:
            if tr is None:
                return f"/health answers, but /v1/models gave no list of models: {self.models_error}"
            status = answered_status(self.models_error) or "-"
            return tr(
                "/health answers, but /v1/models gave no list of models (it answered {status})", status=status
            )
        if tr is None:
            health = f"/health {self.health_error}" if self.health_error else "/health gave no answer"
            return (
                f"neither /v1/models nor /health answered as an OpenAI-compatible server does "
                f"(/v1/models {self.models_error}; {health}): is KB_LLM_URL the server's /v1 address?"
            )
        return tr(
            "neither /v1/models nor /health answered as an OpenAI-compatible server does: is KB_LLM_URL the "
            "server's /v1 address?"
        )


def answered_status(said: str) -> int | None:
    """The HTTP status in what the client said of an answer (``answered 404: not found``), if any."""
    found = re.match(r"answered (\d{3})\b", said)
    return int(found.group(1)) if found else None


def as_written(message: str, /, **facts: object) -> str:
    """A message as written (English), its ``{placeholders}`` filled."""
    return message.format(**facts) if facts else message


def name_problem(reach: Reach, model: str, tr: Callable[..., str] = as_written) -> str:
    """Whether the server serves the model each request names (KB_LLM_MODEL), in one line ('' when it
    does, or when that cannot be told): ``default_model`` is mlx_lm.server's name for the model it was
    started with (llama-server takes any name), but a server without ``/health`` (Ollama) has no such
    model; any other name should be among the models ``/v1/models`` lists."""
    if not reach.models or model in reach.models:
        return ""
    listed = ", ".join(reach.models[:5])
    if model == DEFAULT_LLM_MODEL:
        if reach.health != HEALTH_ABSENT:
            return ""
        return tr(
            "the server has no {default} (it has no /health, as Ollama): it serves {listed}",
            default=DEFAULT_LLM_MODEL,
            listed=listed,
        )
    return tr(
        "KB_LLM_MODEL={model} is not among the models the server lists ({listed})", model=model, listed=listed
    )
