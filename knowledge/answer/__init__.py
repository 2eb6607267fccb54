"""Answering: the assistant engine, its replies (and the one without the model), prompts within exact
budgets, the evidence pack, whole-document summaries."""
