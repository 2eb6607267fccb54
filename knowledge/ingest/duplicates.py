"""Pages imported more than once before a new import replaced the old (index migration m006), merged once.

Such an index holds a document per import of the same URL, the stale versions still answering. Migration
m008 notes the repair in the index's ``meta`` (``web_duplicates``) when there is anything to merge; the
next writer to open the index (the daemon, kb ingest, kb rm…) does it: of each URL's documents it keeps
the latest import (the one a new import would replace: latest ``indexed_at``, then id) and removes the
others exactly as ``kb rm`` does (knowledge.ingest.trash: raw file and original to the trash for 30
days, ``kb restore`` brings one back; its chunks, vectors and full-text rows leave the index). The note
goes once every removal is done, so a removal that fails is tried again by the next writer; a document
restored from the trash afterwards is the owner's choice and stays.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

import structlog

from knowledge.ingest import trash
from knowledge.ingest.pipeline import Ingestor
from knowledge.store.schema import DUPLICATE_URLS, WEB_DUPLICATES

log = structlog.get_logger()


def merge_web_duplicates(ingestor: Ingestor, *, now: datetime) -> dict[str, int] | None:
    """Merge the duplicate imports of each URL when the index owes it (None when it does not): counts
    of ``urls`` merged, documents ``forgotten`` (in the trash now), ``failed`` removals. The caller
    holds the writer lock."""
    index = ingestor.index
    if index.meta(WEB_DUPLICATES) is None:
        return None
    urls = [url for (url,) in index.conn.execute(DUPLICATE_URLS).fetchall()]
    forgotten = failed = 0
    for url in urls:
        kept, *older = index.documents_by_url(url)
        for doc in older:
            try:
                entry = trash.remove(ingestor, doc.id, now=now)
            except trash.NotFound:  # its raw file was gone already: the index has let it go too
                forgotten += 1
                continue
            except (OSError, sqlite3.Error, trash.TrashError) as exc:
                failed += 1
                log.warning("ingest.web_duplicate_failed", url=url, doc_id=doc.id, error=str(exc))
                continue
            forgotten += 1
            log.info(
                "ingest.web_duplicate_forgotten",
                url=url,
                doc_id=doc.id,
                kept=kept.id,
                trash_id=entry.trash_id,
            )
    counts = {"urls": len(urls), "forgotten": forgotten, "failed": failed}
    if not failed:
        index.drop_meta(WEB_DUPLICATES)
    log.info("ingest.web_duplicates_merged", **counts)
    return counts
