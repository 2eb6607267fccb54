"""A note found by a name it goes by: a generated Obsidian vault whose notes have aliases in their front
matter, searched by alias.

A vault of N notes (default 300; English, Chinese and Thai in turn) is made in a temporary folder. Each
note's text is two to four sentences of the XQuAD sample bundled with the tests (the same sentences recur
across notes: realistic neighbours), under front matter with a title, two aliases (invented code names
in the note's language that its text never holds), a description and tags. The folder is added with
``kb sources add`` and searched with ``kb search --batch --json`` (in this process), by each note's first
alias alone and inside a question ("what did I write about …?"), in the note's language.

Printed per query form: the share of queries whose note comes first (rank 1) and within the first five,
by words alone (``KB_EMBED=off``) and hybrid (the local e5), each over the same vault.

Run it with the kb to measure on the import path (``PYTHONPATH=DIR``): the figures before and after a
change are two runs.

    PYTHONPATH=. python bench/vault_aliases.py [--notes 300] [--embed off|local|both]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]

from cli.main import main  # noqa: E402

SAMPLE = HERE.parent / "tests" / "data" / "xquad_sample.json"
LANGS = ("en", "zh", "th")
ADJECTIVES = {
    "en": "amber azure crimson dusky ember frosty golden hollow ivory jade lunar misty".split(),
    "zh": "琥珀 蔚藍 緋紅 暮色 餘燼 霜白 金黃 空谷 象牙 翡翠 月影 薄霧".split(),
    "th": "อำพัน ครามใส แดงเข้ม สนธยา ถ่านแดง น้ำค้างแข็ง ทองคำ โพรงลึก งาช้าง หยกเขียว แสงจันทร์ หมอกจาง".split(),
}
NOUNS = {
    "en": "falcon lantern orchard quarry harbor meadow violin compass kettle ferret glacier beacon "
    "walrus tulip anvil pelican saddle thimble".split(),
    "zh": "獵鷹 燈籠 果園 採石場 港灣 草原 提琴 羅盤 水壺 雪貂 冰川 烽火 海象 鬱金香 鐵砧 鵜鶘 馬鞍 頂針".split(),
    "th": "เหยี่ยว โคมไฟ สวนผลไม้ เหมืองหิน ท่าเรือ ทุ่งหญ้า ไวโอลิน เข็มทิศ กาต้มน้ำ เฟอร์เรต ธารน้ำแข็ง "
    "ประภาคาร วอลรัส ทิวลิป ทั่ง นกกระทุง อานม้า ปลอกนิ้ว".split(),
}
QUESTIONS = {
    "en": "what did I write about {alias}?",
    "zh": "我對{alias}記了什麼？",
    "th": "ฉันจดอะไรไว้เกี่ยวกับ{alias}",
}
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|(?<=[\u0e00-\u0e7f])\s+(?=[\u0e00-\u0e7f])")


def sentences(lang: str) -> list[str]:
    """The sample's sentences in one language."""
    contexts = json.loads(SAMPLE.read_text(encoding="utf-8"))["contexts"][lang]
    out = []
    for article in contexts:
        for paragraph in article["paragraphs"]:
            out += [s.strip() for s in _SENTENCE.split(paragraph) if len(s.strip()) > 20]
    return out


def make_vault(folder: Path, notes: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """The notes written under ``folder``; (path, first alias, language) of each."""
    pools = {lang: sentences(lang) for lang in LANGS}
    names = {lang: [a + " " + n if lang == "en" else a + n for a in ADJECTIVES[lang] for n in NOUNS[lang]]
             for lang in LANGS}  # fmt: skip
    for lang in LANGS:
        rng.shuffle(names[lang])
    made = []
    for n in range(notes):
        lang = LANGS[n % 3]
        first, second = names[lang].pop(), names[lang].pop()
        body = " ".join(rng.sample(pools[lang], rng.randint(2, 4)))
        path = f"{lang}/note-{n:04d}.md"
        text = (
            f"---\ntitle: Note {n}\naliases: [{first}, {second}]\ndescription: a note of the {lang} set\n"
            f"tags: [bench, {lang}]\ncreated: 2026-01-{n % 28 + 1:02d}\n---\n\n# Note {n}\n\n{body}\n"
        )
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
        made.append((path, first, lang))
    return made


def kb(home: Path, env: dict[str, str], *args: str) -> str:
    """kb run in this process; its stdout (SystemExit on failure)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["--home", str(home), *args], stdout=out, stderr=err, env=env)
    if code != 0:
        raise SystemExit(f"kb {' '.join(args)} failed ({code}): {err.getvalue()[-2000:]}")
    return out.getvalue()


def ranks(
    home: Path, env: dict[str, str], queries: list[str], wanted: list[str], tmp: Path
) -> list[int | None]:
    """The rank of each query's note in its first five results (None: not there)."""
    batch = tmp / "queries.txt"
    batch.write_text("\n".join(queries) + "\n", encoding="utf-8")
    lines = kb(home, env, "search", "--batch", str(batch), "--json", "-k", "5").splitlines()
    out: list[int | None] = []
    for line, path in zip(lines, wanted, strict=True):
        paths = [r.get("path") for r in json.loads(line)["results"]]
        out.append(paths.index(path) + 1 if path in paths else None)
    return out


def run(notes: int, embed: str, seed: int) -> dict[str, tuple[float, float]]:
    """For each query form: (share at rank 1, share within five)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_EMBED": embed, "KB_MODEL": "", "KB_TOKENIZER": "", "KB_SUMMARIES": "off",
                "KB_TRANSLATE": "off", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = make_vault(root / "Vault", notes, random.Random(seed))
        t0 = time.perf_counter()
        kb(root / "kb", env, "sources", "add", str(root / "Vault"), "--name", "vault")
        print(f"  [{embed}] indexed {notes} notes in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        wanted = [p for p, _, _ in made]
        forms = {
            "alias alone": [a for _, a, _ in made],
            "alias in a question": [QUESTIONS[lang].format(alias=a) for _, a, lang in made],
        }
        out = {}
        for form, queries in forms.items():
            got = ranks(root / "kb", env, queries, wanted, root)
            out[form] = (sum(r == 1 for r in got) / len(got), sum(r is not None for r in got) / len(got))
        return out


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=300)
    parser.add_argument("--embed", choices=("off", "local", "both"), default="both")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    import knowledge

    print(f"kb from {Path(knowledge.__file__).resolve().parent.parent}; {args.notes} notes")
    for embed in ("off", "local") if args.embed == "both" else (args.embed,):
        for form, (first, five) in run(args.notes, embed, args.seed).items():
            print(f"KB_EMBED={embed:5}  {form:20}  rank 1: {first:.2f}  in top 5: {five:.2f}")


if __name__ == "__main__":
    cli()
