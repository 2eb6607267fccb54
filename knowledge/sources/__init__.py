"""Folder sources: the owner's folders (a notes vault, Documents) indexed where they are, read-only.

``registry`` keeps the list in the home's ``kb.toml``; ``rules`` says which files a source takes;
``scan`` walks a source; ``plan`` decides what changed (pure); ``state`` keeps what kb knows of each
file in the index; ``sync`` brings a source's documents in line with its files.
"""
