"""A small notes vault on a real folder, and a snapshot of a folder to prove kb left it as it was."""

import os
from pathlib import Path

NOTES = {
    "Projects/NAS upgrade.md": "---\ntitle: NAS upgrade\ntags: [home]\n---\n\n# NAS upgrade\n\n"
    "The new NAS takes four drives of twelve terabytes.\n\nThe old one goes to the cellar.\n",
    "Daily/2026-12-01.md": "# Monday\n\nThe plumber comes on Thursday at nine.\n",
    "Recipes/bread.md": "# Sourdough\n\nFeed the starter with rye flour every evening.\n",
    "notes.txt": "The bicycle lock code is kept in the blue notebook.\n",
}


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and folder under ``folder`` with its bytes and mtime (links as their target text)."""
    out = {}
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(here) / name
            rel = path.relative_to(folder).as_posix()
            st = os.lstat(path)
            if path.is_symlink():
                out[rel] = (os.readlink(path).encode(), st.st_mtime_ns)
            elif path.is_dir():
                out[rel + "/"] = (b"", st.st_mtime_ns)
            else:
                out[rel] = (path.read_bytes(), st.st_mtime_ns)
    return out


def make_vault(root: Path) -> Path:
    """The NOTES written under ``root``."""
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root
