"""The commands of ``kb``, one module per group; each registers its own sub-parsers beside its functions."""
