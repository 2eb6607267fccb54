"""kb: a self-hosted knowledge base you talk to from your phone."""

__version__ = "0.1.0"
