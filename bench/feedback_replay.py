"""Feedback replay: the owner's votes (``kb feedback --json``) searched again against the index as it is now.

For each 👍 item, does one of the passages the owner approved come first (hit@1) or among the first three
(hit@3)? For each 👎 item, does the passage the owner rejected still come first (or among the first
three)? Items without passages (answers from the web, or none) are counted and skipped. The questions
are searched with kb's own search in this process (knowledge.retrieval.search.find: words, fused with
the nearest vectors when the index has them), the standalone question of each item, without the model
(no translations: as ``kb search --no-translate``).

    python bench/feedback_replay.py SET.json [--home DIR]     # a set exported with kb feedback --json
    python bench/feedback_replay.py [--embed local|off] [--keep DIR]   # the sample set below

Without SET, it builds a throw-away knowledge base (twelve short notes in English, Traditional Chinese
and Thai, six of them decoys that share words with another note but do not answer its questions) and a
sample set through kb's own path: each vote is offered and cast in the knowledge base's conversation
file (knowledge.feedback) and exported with ``kb feedback --json``. 👍 items name the note that answers
the question (asked in its language or across scripts); 👎 items name a decoy an answer cited. Figures
only: nothing here is a test.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cli.main import main as kb_main  # noqa: E402
from knowledge.config import Settings, load_settings  # noqa: E402
from knowledge.conversation.store import Conversations  # noqa: E402
from knowledge.feedback.record import BAD, GOOD, Cited, Rated  # noqa: E402
from knowledge.feedback.replay import Replayed, replay  # noqa: E402
from knowledge.feedback.store import Feedback  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.embed import make_embedder  # noqa: E402
from knowledge.retrieval.search import find  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from knowledge.wiring import meaning  # noqa: E402

NOTES = {
    "harbor.md": "# Harbor release checklist\n\nBefore a ship is released from the harbor, a signed cargo manifest is "
    "filed with the harbor master, the departure falls inside a tide window of at least two hours, and a licensed "
    "pilot stays on board until the outer buoy.\n",
    "harbor-history.md": "# A short history of the harbor\n\nThe harbor master's office opened in 1891. The old tide "
    "tables were painted on the pier wall, and ships left whenever the harbor master rang the bell.\n",
    "lease.md": "# 租約重點\n\n押金為兩個月租金，退租後三十天內退還。租期一年，提前解約需在一個月前以書面通知。\n",
    "landlord.md": "# 房東聯絡資料\n\n房東姓林，電話 0912-345-678。每月五號前把租金匯到房東在郵局的帳戶。\n",
    "card.md": "# บัตรเครดิต\n\nธนาคารตัดรอบบัญชีบัตรเครดิตทุกวันที่ 25 ของเดือน และต้องชำระเงินภายในวันที่ 10 ของเดือนถัดไป\n",
    "card-points.md": "# คะแนนสะสมบัตร\n\nคะแนนสะสมจากบัตรเครดิตใช้แลกไมล์ได้ คะแนนจะหมดอายุภายในสองปีนับจากวันที่ได้รับ\n",
    "sourdough.md": "# Sourdough starter\n\nFeed the starter once a day with equal weights of flour and water, and keep "
    "it at room temperature, around 24 degrees.\n",
    "bakery.md": "# Bakery opening hours\n\nThe bakery on Elm Street sells sourdough loaves from 7 am and closes at 2 pm "
    "on Sundays.\n",
    "insurance.md": "# 房屋火險\n\n火險每年三月續保，保費約新台幣一千二百元，保單放在書房第二個抽屜。\n",
    "quillan.md": "# Lake Quillan\n\nLake Quillan lies in the Varn valley; it is 317 metres deep and never freezes.\n",
    "cat.md": "# วัคซีนแมว\n\nแมวต้องฉีดวัคซีนพิษสุนัขบ้าปีละครั้ง ครั้งถัดไปคือเดือนกันยายน ที่คลินิกใกล้บ้าน\n",
    "wifi.md": "# 家裡網路\n\nWi-Fi 名稱 home-5G，密碼貼在冰箱門上。路由器每週日凌晨三點自動重新開機。\n",
}
# (question, the note its passage is from, vote): 👍 the note answers it; 👎 an answer cited that note, wrongly
SAMPLE = [
    ("What does the harbor release checklist require?", "harbor.md", GOOD),
    ("How long must the tide window be before a ship leaves?", "harbor.md", GOOD),
    ("What is the deposit and when is it returned?", "lease.md", GOOD),
    ("押金什麼時候退還？", "lease.md", GOOD),
    ("提前解約要多久前通知？", "lease.md", GOOD),
    ("When is the credit card statement cut?", "card.md", GOOD),
    ("ตัดรอบบัตรวันไหน", "card.md", GOOD),
    ("How often do I feed the sourdough starter?", "sourdough.md", GOOD),
    ("火險什麼時候續保？", "insurance.md", GOOD),
    ("When does the fire insurance renew?", "insurance.md", GOOD),
    ("奎蘭湖有多深？", "quillan.md", GOOD),
    ("แมวต้องฉีดวัคซีนเมื่อไหร่", "cat.md", GOOD),
    ("Wi-Fi 密碼在哪裡？", "wifi.md", GOOD),
    ("What is the wifi password?", "wifi.md", GOOD),
    ("路由器什麼時候重新開機？", "wifi.md", GOOD),
    ("ค่าเช่าต้องโอนก่อนวันที่เท่าไร", "landlord.md", GOOD),
    ("When did the harbor master's office open?", "harbor-history.md", GOOD),
    ("Where is the fire insurance policy kept?", "insurance.md", GOOD),
    ("คะแนนบัตรแลกไมล์ได้ไหม", "card-points.md", GOOD),
    ("What must be filed with the harbor master before a ship leaves?", "harbor-history.md", BAD),
    ("退租時押金怎麼處理？", "landlord.md", BAD),
    ("租約提前解約要通知房東多久？", "landlord.md", BAD),
    ("บัตรเครดิตต้องชำระเงินภายในวันไหน", "card-points.md", BAD),
    ("What is the credit card payment deadline?", "card-points.md", BAD),
    ("How warm should the sourdough starter be kept?", "bakery.md", BAD),
    ("When does the bakery close on Sundays?", "sourdough.md", BAD),
    ("房東的電話是幾號？", "lease.md", BAD),
    ("What is the landlord's phone number?", "lease.md", BAD),
]
WEB_ITEM = "What is the weather in the Varn valley tomorrow?"  # a 👎 on web candidates: no passage to check


def env_for(embed: str) -> dict[str, str]:
    """No KB_ settings from the caller: no model server, no translations, no hub."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    return {**base, "KB_MODEL": "", "KB_TOKENIZER": "", "KB_EMBED": embed, "KB_TRANSLATE": "off",
            "KB_SUMMARIES": "off", "HF_HUB_OFFLINE": "1", "KB_LOG_LEVEL": "warning"}  # fmt: skip


def build_sample(home: Path, env: dict[str, str]) -> tuple[Settings, Path]:
    """The sample knowledge base in ``home`` and its votes, exported with kb feedback --json; (settings, set)."""
    settings = load_settings(env, home=home)
    settings.inbox.mkdir(parents=True, exist_ok=True)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        for name, text in NOTES.items():
            (settings.inbox / name).write_text(text, encoding="utf-8")
            assert ingestor.ingest(settings.inbox / name).status in ("indexed", "duplicate"), name
        embedder = make_embedder(settings)
        if embedder is not None:
            embed_missing(index, embedder)
        by_name = {d.source_name: d for d in index.documents()}
        first_chunk = {
            name: index.conn.execute(
                "SELECT id, start_line, end_line FROM chunks WHERE document_id = ? ORDER BY seq LIMIT 1",
                (d.id,),
            ).fetchone()
            for name, d in by_name.items()
        }
    votes = Feedback(Conversations(settings.conversations_path))
    for question, name, vote in SAMPLE:
        doc, (chunk, start, end) = by_name[name], first_chunk[name]
        cited = (Cited(doc.id, chunk, doc.title, doc.raw_path, f"{start}-{end}"),)
        token = votes.offer("tg:1", Rated(question, question, "local", "local", cited))
        votes.cast("tg:1", token, vote)
    votes.cast("tg:1", votes.offer("tg:1", Rated(WEB_ITEM, WEB_ITEM, "web", "web")), BAD)
    out = io.StringIO()
    code = kb_main(["--home", str(home), "feedback", "--json"], stdout=out, stderr=sys.stderr, env=env)
    assert code == 0, code
    path = settings.runs / "feedback-sample.json"
    path.write_text(out.getvalue(), encoding="utf-8")
    return settings, path


def run(settings: Settings, items: list[dict], *, verbose: bool) -> tuple[Replayed, list[float]]:
    """Replay ``items`` against the settings' index; the figures and each search's milliseconds."""
    took: list[float] = []
    with Index(settings.index_path, readonly=True) as index:
        searching = meaning(settings)
        print(f"index: {index.document_count()} documents, {index.chunk_count()} chunks; search: words"
              + (f" + meaning ({searching.embedder.name})" if searching is not None else " only"), flush=True)  # fmt: skip

        def ranked(question: str) -> list[str]:
            started = time.perf_counter()
            found = find(index, question, k=3, meaning=searching)
            took.append((time.perf_counter() - started) * 1000)
            if verbose:
                print(
                    f"  {question}\n    → "
                    + " | ".join(f"{r.title} ({r.chunk_id[-4:]})" for r in found.results)
                )
            return [r.chunk_id for r in found.results]

        return replay(items, ranked), took


def report(figures: Replayed, took: list[float]) -> None:
    def line(label: str, n: int, of: int) -> str:
        rate = figures.rate(n, of)
        return f"{label:<28} {n:>3}/{of:<3} {rate:.3f}" if rate is not None else f"{label:<28}   -"

    print(line("hit@1 of 👍 passages", figures.hit1, figures.good))
    print(line("hit@3 of 👍 passages", figures.hit3, figures.good))
    print(line("👎 passage still first", figures.bad_first, figures.bad))
    print(line("👎 passage still in top 3", figures.bad_top3, figures.bad))
    print(f"{'skipped (no passage)':<28} {figures.skipped:>3}")
    if took:
        print(f"{'search, median / max':<28} {statistics.median(took):.1f} / {max(took):.1f} ms")
    for question in figures.not_first:
        print(f"  👍 not first{' (nor in the top 3)' if question in figures.misses else ''}: {question}")
    for question in figures.still_first:
        print(f"  👎 still first:      {question}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "set", nargs="?", type=Path, help="a regression set from kb feedback --json (default: the sample)"
    )
    parser.add_argument(
        "--home", type=Path, help="the knowledge base to replay against (default: $KB_HOME or .)"
    )
    parser.add_argument(
        "--embed", choices=("local", "off"), default="local", help="the sample's search (default local)"
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="build the sample knowledge base in DIR and keep it"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print each question's first three passages"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())  # the figures alone on the terminal
    if args.set is not None:
        settings = load_settings(os.environ, home=args.home)
        items = json.loads(args.set.read_text(encoding="utf-8"))
        print(f"set: {args.set} ({len(items)} votes); knowledge base: {settings.home}")
        report(*run(settings, items, verbose=args.verbose))
        return 0
    with tempfile.TemporaryDirectory(prefix="kb-feedback-") as tmp:
        home = args.keep or Path(tmp) / "kb"
        started = time.perf_counter()
        settings, path = build_sample(home, env_for(args.embed))
        items = json.loads(path.read_text(encoding="utf-8"))
        good = sum(i["vote"] == "good" for i in items)
        print(f"sample: {len(NOTES)} notes, {len(items)} votes ({good} 👍, {len(items) - good} 👎) exported to "
              f"{path if args.keep else 'a temporary folder'} in {time.perf_counter() - started:.1f} s")  # fmt: skip
        report(*run(settings, items, verbose=args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
