"""Conversations: what a front end remembers, and follow-ups turned into standalone questions."""
