"""Backups: one archive of everything needed to rebuild a knowledge base elsewhere, and back.

An archive (a ``.tar.gz``, or a folder) holds KB_HOME-relative files and, last, its manifest::

    kb-backup.json                    format, kb version, times, index counts, what was left out and
                                      why, and every file: KB_HOME-relative path → size, sha256
    knowledge/index/kb.sqlite3        the index, copied from one SQLite snapshot while the daemon ran
    knowledge/raw/…                   the raw files
    knowledge/inbox/…                 files waiting, processed/ (the originals), failed/
    knowledge/trash/…                 removed documents
    runs/conversations.sqlite3        what the bot and the chats remember (SQLite backup API too)
    runs/web-search.json, runs/…      the latest web candidates and the other state kb keeps
    .env, kb.toml                     settings, without their secrets (never the Telegram token)

``make.py`` writes one (and says why its order of folders loses nothing while the daemon works) inside
``DEST.part``, kb's own private folder (``part.py``); ``survey.py`` checks an archive from elsewhere
before anything of it is written, ``restore.py`` then verifies and restores it; ``archive.py`` is the
format, ``manifest.py`` its manifest, ``snapshot.py`` the SQLite copies, ``settings_files.py`` the
secrets left out, ``stopping.py`` a clean-up on SIGTERM as on Ctrl-C.
"""

from knowledge.backup.errors import BackupError
from knowledge.backup.make import LEFT_OUT, BackupDone, backup
from knowledge.backup.restore import Restored, Verified, restore, verify
from knowledge.backup.survey import Limits

__all__ = [
    "LEFT_OUT",
    "BackupDone",
    "BackupError",
    "Limits",
    "Restored",
    "Verified",
    "backup",
    "restore",
    "verify",
]
