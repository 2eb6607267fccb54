"""The commands of ``kb``, one module per group; each registers its own sub-parsers beside its functions."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # every command's exit statuses (a few add their own)
