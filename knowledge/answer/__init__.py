"""Answering: the assistant engine, prompts within exact budgets, the evidence pack, whole-document summaries."""
