"""The ``kb`` command: parse, read the settings once, configure logging once, dispatch to a command."""
