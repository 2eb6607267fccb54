"""/find finds words, end to end through the Bot API stand-in: a Taiwanese, a Thai and an English owner
see the documents holding the word as written first, then those related to it without it under a
line saying so; a word in no document is said to be in none."""

import re
from contextlib import asynccontextmanager

from knowledge.errors import IndexError_
from knowledge.retrieval.backfill import coverage
from knowledge.store.index import Index
from knowledge.words.catalog import Words
from tests.bot_env import OWNER, ScriptedTranscriber, drop_note, running_bot, valid_html, wait_indexed
from tests.fake_embeddings import FakeEmbeddings, threaded

RENT = "# 租屋筆記\n\n房東說押金要兩個月，搬走時退還。\n"
FLAT = "# 看房紀錄\n\n第二間公寓的房租比較便宜，房東人很好。\n"
OUTAGE = "# 停電通知\n\n台電通知：明天上午九點到十二點停電。\n"
FORWARD = "# 轉寄的訊息\n\n台灣電力公司：本期電費帳單已寄出，電費請於月底前繳清。\n"
LEASE = "# สัญญาเช่า\n\nค่าเช่าห้องเดือนละห้าพันบาท จ่ายทุกวันที่ห้า\n"


def listing_of(env, call):
    return env.telegram.message(OWNER, call.result["message_id"])


def vectors_made(settings) -> bool:
    try:
        with Index(settings.index_path, readonly=True) as index:
            cov = coverage(index, "url:bow")
            return cov.chunks > 0 and cov.vectors == cov.chunks
    except IndexError_:
        return False


@asynccontextmanager
async def bot_with_vectors(tmp_path, varn_site, notes: dict[str, str]):
    """The bot with the notes indexed and their vectors made (bags of words and characters, by the
    embeddings stand-in), under a low relevance gate: the stand-in's vectors relate little, and a
    related document must pass the gate to be listed, as the owner's forward passed multilingual-e5's."""
    fake = FakeEmbeddings()
    with threaded(fake):
        settings = {"KB_EMBED": "url", "KB_EMBED_URL": fake.base_url, "KB_EMBED_MODEL": "bow",
                    "KB_MIN_RELEVANCE": "0.01"}  # fmt: skip
        async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), **settings) as (
            env,
            _,
        ):
            for name, text in notes.items():
                drop_note(env, name, text)
            await wait_indexed(env, len(notes))
            await env.telegram.wait_until(lambda: vectors_made(env.settings), timeout_s=30)
            yield env


async def test_a_taiwanese_owner_finds_the_note_holding_the_word_before_a_related_forward(
    tmp_path, varn_site
):
    words = Words("zh-Hant")
    notes = {"rent.md": RENT, "flat.md": FLAT, "outage.md": OUTAGE, "fwd.md": FORWARD}
    async with bot_with_vectors(tmp_path, varn_site, notes) as env:
        env.telegram.set_language(OWNER, "zh-hant")

        await env.say("/find 押金")
        call = await env.bot_said(lambda c: "「押金」" in c.params["text"])
        assert valid_html(call)
        listing = listing_of(env, call).text
        assert listing.split("\n")[1].startswith("1. 租屋筆記")
        assert "房東說押金要兩個月" in listing

        await env.say("/find 台電")
        call = await env.bot_said(lambda c: "「台電」" in c.params["text"] and "停電通知" in c.params["text"])
        listing = listing_of(env, call)
        related = words.tr("Related, without “{words}”:", words="台電")
        lines = listing.text.split("\n")
        assert lines[1].startswith("1. 停電通知") and "台電通知" in lines[2]
        assert related in lines and lines.index(related) > 1
        after = lines[lines.index(related) + 1 :]
        assert any(re.match(r"\d\. 轉寄的訊息", line) for line in after)  # the forward, without the word
        assert words.tr("No document holds “{words}”.", words="台電") not in listing.text
        assert [b["text"] for b in listing.buttons][:1] == [words.tr("Open {n}", n=1)]

        await env.say("/find 颱風假")
        nowhere = words.tr("No document holds “{words}”.", words="颱風假")
        none = words.tr("No document matches “{words}”.", words="颱風假")
        await env.bot_said(lambda c: nowhere in c.params["text"] or none in c.params["text"])


async def test_a_thai_owner_finds_the_rent_in_a_thai_lease(tmp_path, varn_site):
    words = Words("th")
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        env.telegram.set_language(OWNER, "th")
        drop_note(env, "lease.md", LEASE)
        drop_note(env, "rent.md", RENT)
        await wait_indexed(env, 2)
        await env.say("/find ค่าเช่า")
        call = await env.bot_said(lambda c: "“ค่าเช่า”" in c.params["text"] and "สัญญาเช่า" in c.params["text"])
        lines = listing_of(env, call).text.split("\n")
        assert lines[1].startswith("1. สัญญาเช่า") and "ค่าเช่าห้อง" in lines[2]
        assert "租屋筆記" not in listing_of(env, call).text
        await env.say("/find ค่าไฟ")
        await env.bot_said(
            lambda c: words.tr("No document matches “{words}”.", words="ค่าไฟ") in c.params["text"]
        )


async def test_an_english_owner_never_sees_a_page_without_the_word_among_its_matches(tmp_path, varn_site):
    notes = {
        "ssd.md": "# New drive\n\nBought a 2 TB SSD for the laptop.\n",
        "disk.md": "# Laptop storage\n\nThe laptop drive is a solid state disk, 2 TB.\n",
        "bread.md": "# Sourdough\n\nSourdough rises with wild yeast.\n",
    }
    async with bot_with_vectors(tmp_path, varn_site, notes) as env:
        await env.say("/find SSD")
        call = await env.bot_said(lambda c: "for “SSD”" in c.params["text"])
        lines = listing_of(env, call).text.split("\n")
        marker = "Related, without “SSD”:"
        literal = lines[1 : lines.index(marker)] if marker in lines else lines[1:]
        assert literal[0].startswith("1. New drive")
        assert all("Laptop storage" not in line and "Sourdough" not in line for line in literal)

        await env.say("/find SSD laptop")
        call = await env.bot_said(lambda c: "for “SSD laptop”" in c.params["text"])
        lines = listing_of(env, call).text.split("\n")
        assert lines[1].startswith("1. New drive") and lines[3] == "Related, without “SSD laptop”:"
        assert lines[4].startswith("2. Laptop storage")  # it says laptop, not SSD

        await env.say("/find drives")  # "drive" is written in two notes, "drives" in none
        call = await env.bot_said(lambda c: "for “drives”" in c.params["text"])
        lines = listing_of(env, call).text.split("\n")
        assert lines[:3] == [
            "No document holds “drives”.",
            "2 documents for “drives”",
            "Related, without “drives”:",
        ]

        await env.say("/find zeppelin")
        await env.bot_said(
            lambda c: (
                "No document holds “zeppelin”." in c.params["text"]
                or "No document matches “zeppelin”." in c.params["text"]
            )
        )
