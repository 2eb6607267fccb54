"""Answering: the model client, prompts within exact budgets, the assistant engine."""
