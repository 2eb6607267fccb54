"""A real notes vault kept in three languages: does a note's one-line description in one language find
the same note written in another?

Obsidian's own help vault (github.com/obsidianmd/obsidian-help; not part of kb: clone it and give its
folder) keeps every note in many languages, paired by the ``permalink`` of their front matter, and many
notes carry a one-line ``description`` there. Its English, Traditional Chinese (``zh-TW``) and Thai
folders are added to one kb as three folder sources (``kb sources add``, read in place) and each note's
description, in each language, is searched within another language's folder (``kb search --batch
--json --in NAME``, in this process, no model: no translation), as the owner of a note kept in English
asks for it in Chinese: each pool holds that folder's passages only, judged as in the whole index. The
share of descriptions whose first note found is the same note (r@1) and whose first five notes hold it
(r@5; a note's passages count once), for each pair of languages. A description left untranslated (the
same text as the English one) is not asked in the other language.

Never tuned on: it is the held-out check for cross-language search on real notes.

    git clone --depth 1 https://github.com/obsidianmd/obsidian-help /tmp/obsidian-help
    PYTHONPATH=. python bench/translated_notes.py --vault /tmp/obsidian-help [--embed local|off|both] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from itertools import permutations
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]

from bench.vault_aliases import kb  # noqa: E402  (kb run in this process)

LANGS = ("en", "zh-TW", "th")
RESULTS = 20  # passages asked for: enough for five notes (a note's passages count once)
BUILT = "translated-notes-built"  # written in a kept knowledge base's home once its sources are read
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def field(front: str, key: str) -> str:
    """A one-line front-matter value, unquoted; "" when absent or null."""
    m = re.search(rf"^{key}:[ \t]*(.*)$", front, re.M)
    value = m.group(1).strip().strip("'\"").strip() if m else ""
    return "" if value in ("", "null", "~") else value


def notes(folder: Path) -> dict[str, tuple[str, str]]:
    """permalink → (path relative to the folder, description) of each note with a permalink."""
    out = {}
    for path in sorted(folder.rglob("*.md")):
        m = _FRONT.match(path.read_text(encoding="utf-8", errors="replace"))
        if m and (link := field(m.group(1), "permalink")):
            out[link] = (path.relative_to(folder).as_posix(), field(m.group(1), "description"))
    return out


def run(
    vault: Path, embed: str, keep: Path | None, misses: int
) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(r@1, r@5, questions) for each ordered pair of languages."""
    by_lang = {lang: notes(vault / lang) for lang in LANGS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_EMBED": embed, "KB_MODEL": "", "KB_TOKENIZER": "", "KB_SUMMARIES": "off",
                "KB_TRANSLATE": "off", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = keep / embed if keep else Path(tmp) / "kb"
        if not (home / BUILT).exists():
            t0 = time.perf_counter()
            for lang in LANGS:
                kb(home, env, "sources", "add", str(vault / lang), "--name", lang)
            print(f"  [{embed}] indexed {sum(map(len, by_lang.values()))} notes in"
                  f" {time.perf_counter() - t0:.0f} s", file=sys.stderr)  # fmt: skip
            (home / BUILT).touch()
        for asked, wanted in permutations(LANGS, 2):
            english = by_lang["en"]
            pairs = [
                (desc, by_lang[wanted][link][0])
                for link, (_, desc) in by_lang[asked].items()
                if desc
                and link in by_lang[wanted]
                and (asked == "en" or desc != english.get(link, ("", ""))[1])
            ]
            batch = Path(tmp) / "queries.txt"
            batch.write_text("\n".join(d.replace("\n", " ") for d, _ in pairs) + "\n", encoding="utf-8")
            lines = kb(
                home, env, "search", "--batch", str(batch), "--json", "-k", str(RESULTS), "--in", wanted
            )
            lines = lines.splitlines()
            first = five = 0
            shown = 0
            for line, (desc, path) in zip(lines, pairs, strict=True):
                found = [r.get("path") for r in json.loads(line)["results"] if r.get("source") == wanted]
                found = list(dict.fromkeys(found))[:5]  # the first five notes, a note's passages once
                first += bool(found) and found[0] == path
                five += path in found
                if found[:1] != [path] and shown < misses:
                    shown += 1
                    print(f"    miss {asked}→{wanted}: {desc[:90]!r} wants {path}; got {found[:3]}")
            out[(asked, wanted)] = (first / len(pairs), five / len(pairs), len(pairs))
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vault", type=Path, required=True, help="a clone of obsidianmd/obsidian-help")
    parser.add_argument("--embed", choices=("off", "local", "both"), default="local")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the knowledge bases in this folder")
    parser.add_argument("--misses", type=int, default=0, help="show this many misses at rank 1 per pair")
    args = parser.parse_args()
    missing = [lang for lang in LANGS if not (args.vault / lang).is_dir()]
    if missing:
        parser.error(
            f"{args.vault} has no {', '.join(missing)} folder: give a clone of obsidianmd/obsidian-help"
        )
    import knowledge

    print(f"kb from {Path(knowledge.__file__).resolve().parent.parent}; vault {args.vault}")
    for embed in ("off", "local") if args.embed == "both" else (args.embed,):
        for (asked, wanted), (r1, r5, n) in run(args.vault, embed, args.keep, args.misses).items():
            print(
                f"KB_EMBED={embed:5}  {asked:>5} → {wanted:<5}  r@1 {r1:.3f}  r@5 {r5:.3f}  ({n} descriptions)"
            )


if __name__ == "__main__":
    cli()
