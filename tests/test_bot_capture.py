"""Keeping things from the chat, end to end: forwards (text, album, voice, files), /note, a link with a
comment, duplicates, Undo and "Ask about it" — the real bot against the Bot API stand-in, the daemon
with real OCR on a real inbox, the scripted model and a scripted transcriber."""

from zoneinfo import ZoneInfo

import structlog

from daemon.main import background
from knowledge.ingest.raw import parse
from knowledge.model.tokenizer import ApproxCounter
from knowledge.speech.transcribe import Transcript
from knowledge.store.index import Index
from tests import bot_env
from tests.bot_env import OWNER, ScriptedTranscriber, running_bot, valid_html, wait_indexed
from tests.fake_llm import answer
from tests.test_bot_media import encoded, page_image

env = bot_env.env  # the fixture
ORIGINAL = 1714557600  # 2024-05-01 10:00 UTC


def documents(env):
    try:
        with Index(env.settings.index_path, readonly=True) as index:
            return index.documents()
    except Exception:
        return []


def raw_of(env, doc):
    text = (env.settings.raw.parent / doc.raw_path).read_text(encoding="utf-8")
    return text, parse(text, fallback_name=doc.raw_path, sha256="").meta


def inbox_notes(env):
    return sorted(p.name for p in env.settings.inbox.glob("*.md"))


def buttons_of(env, call):
    message = env.telegram.message(OWNER, call.result["message_id"])
    return {b["text"]: b["callback_data"] for b in message.buttons}


def channel(message_id=42):
    return env_origin("channel", name="Team News", username="teamnews", message_id=message_id)


def env_origin(kind, **kw):
    from tests.fake_telegram import FakeTelegram

    return FakeTelegram.origin(kind, date=ORIGINAL, **kw)


async def test_a_forward_from_a_channel_is_saved_with_its_link_not_answered(env):
    env, _ = env
    text = "Ferry timetable changes on Friday\nThe last ferry leaves at 21:40, see the plan."
    entities = [{"type": "bold", "offset": text.index("21:40"), "length": 5},
                {"type": "text_link", "offset": text.index("plan"), "length": 4, "url": "https://example.org/plan"}]  # fmt: skip
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), text=text, entities=entities)
    saved = await env.bot_said(lambda c: c.params["text"].startswith("Saved: Ferry timetable"))
    assert valid_html(saved) and set(buttons_of(env, saved)) == {"Ask about it", "Undo"}
    assert "Waiting for the daemon" not in saved.params["text"]
    await env.bot_said(lambda c: "Indexed, 1 chunk" in c.params["text"])
    (doc,) = documents(env)
    raw, meta = raw_of(env, doc)
    assert meta.title == "Ferry timetable changes on Friday" and meta.source_url == "https://t.me/teamnews/42"
    assert (meta.origin_type, meta.origin_name) == ("channel", "Team News (@teamnews)")
    assert meta.origin_date == "2024-05-01T10:00:00Z"
    assert "leaves at **21:40**, see the [plan](https://example.org/plan)." in raw
    assert "forwarded from Team News (@teamnews), 2024-05-01 10:00 UTC · <https://t.me/teamnews/42>" in raw
    assert env.llm.requests == []  # saved, not answered


async def test_a_forward_says_where_it_came_from_in_the_owners_words_and_time_zone(tmp_path, varn_site):
    taipei = ZoneInfo("Asia/Taipei")
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), zone=taipei) as (
        env,
        _,
    ):
        env.telegram.set_language(OWNER, "zh-hant")
        origin = env_origin("channel", name="Team_News", username="team_news", message_id=42)
        env.telegram.push_forward(OWNER, OWNER, origin=origin, text="渡輪週五改時刻表")
        await env.bot_said(lambda c: "已建立索引" in c.params["text"])
        (doc,) = documents(env)
        raw, _ = raw_of(env, doc)
    assert (
        "— 轉寄自 Team_News (@team_news)，2024-05-01 18:00 Asia/Taipei · <https://t.me/team_news/42>" in raw
    )


async def test_a_forward_from_a_user_and_a_hidden_user(env):
    env, _ = env
    env.telegram.push_forward(OWNER, OWNER, origin=env_origin("user", name="Alice", username="alice"),
                              text="Alice says the boat is blue")  # fmt: skip
    await env.bot_said(lambda c: "Saved: Alice says the boat is blue\nIndexed" in c.params["text"])
    env.telegram.push_forward(
        OWNER, OWNER, origin=env_origin("hidden_user", name="Bob"), text="Bob's quiet word"
    )
    await env.bot_said(lambda c: "Saved: Bob's quiet word\nIndexed" in c.params["text"])
    metas = {raw_of(env, d)[1].origin_name: raw_of(env, d)[1] for d in documents(env)}
    assert set(metas) == {"Alice (@alice)", "Bob (hidden account)"}
    assert metas["Alice (@alice)"].origin_type == "user" and metas["Alice (@alice)"].source_url is None


async def test_a_burst_of_forwards_is_one_note(env):
    env, _ = env
    for n, word in enumerate(["first", "second", "third"], 1):
        env.telegram.push_forward(OWNER, OWNER, origin=channel(message_id=n), text=f"The {word} message")
    await env.bot_said(lambda c: "Saved: The first message\nIndexed" in c.params["text"])
    (doc,) = documents(env)
    raw, _ = raw_of(env, doc)
    assert all(f"The {w} message" in raw for w in ("first", "second", "third"))
    assert [p.name for p in env.settings.processed.glob("forward-*.md")] == ["forward-the-first-message.md"]
    assert sum(c.params["text"].startswith("Saved") for c in env.telegram.calls("sendMessage")) == 1


async def test_the_same_forward_twice_is_already_kept(env):
    env, _ = env
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), text="Keep this once")
    await env.bot_said(lambda c: "Saved: Keep this once\nIndexed" in c.params["text"])
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), text="Keep this once")
    again = await env.bot_said(lambda c: c.params["text"] == "Already kept: Keep this once")
    assert set(buttons_of(env, again)) == {"Ask about it"}
    assert len(documents(env)) == 1


async def test_an_album_of_three_photos_is_one_document_read_by_ocr(env):
    env, _ = env
    pages = [["Quillan ferry timetable"], ["The last ferry leaves at 21:40"], ["Tickets cost nine crowns"]]
    for n, lines in enumerate(pages):
        env.telegram.push_forward(OWNER, OWNER, origin=channel(message_id=10 + n), media_group_id="album-1",
                                  photo=(encoded(page_image(lines)), 1000, 360),
                                  caption="Ferry notes" if n == 0 else None)  # fmt: skip
    done = await env.bot_said(lambda c: "Saved: Ferry notes\nIndexed" in c.params["text"], timeout_s=120)
    assert "Read 3 lines" in done.params["text"]
    (doc,) = documents(env)
    raw, meta = raw_of(env, doc)
    assert meta.title == "Ferry notes" and meta.comment == "Ferry notes" and meta.ocr_pages == "1-3"
    assert "21:40" in raw and "nine crowns" in raw and meta.origin_name == "Team News (@teamnews)"
    assert [p.suffix for p in env.settings.processed.iterdir() if not p.name.endswith(".json")] == [".pdf"]


async def test_a_forwarded_voice_note_is_transcribed_and_kept_not_answered(env):
    env, _ = env
    env.voice.script = [Transcript(text="Remember the spare oars in the shed", language="en", duration_s=4.0)]
    env.telegram.push_forward(OWNER, OWNER, origin=env_origin("user", name="Alice"), voice=(b"OggS voice", 4))
    await env.bot_said(lambda c: "Saved: Remember the spare oars in the shed\nIndexed" in c.params["text"])
    (doc,) = documents(env)
    raw, meta = raw_of(env, doc)
    assert "— voice note (4 s) forwarded from Alice, 2024-05-01 10:00 UTC" in raw
    assert env.voice.heard == [b"OggS voice"] and env.llm.requests == []
    assert not any(c.params["text"].startswith("I heard") for c in env.telegram.calls("editMessageText"))


async def test_a_forwarded_file_keeps_its_caption_and_origin(env):
    env, _ = env
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), caption="the minutes",
                              document=("minutes.md", b"# Minutes\n\nWe agreed on green.\n", "text/markdown"))  # fmt: skip
    await env.bot_said(lambda c: "Saved: Minutes\nIndexed" in c.params["text"])
    (doc,) = documents(env)
    _, meta = raw_of(env, doc)
    assert meta.comment == "the minutes" and meta.source_url == "https://t.me/teamnews/42"


async def test_note_command_and_note_as_a_reply(env):
    env, _ = env
    await env.say("/note Buy *two* oars")
    await env.bot_said(lambda c: "Saved: Buy *two* oars\nIndexed" in c.params["text"])
    own = env.telegram.push_message(OWNER, OWNER, "The shed key is under the stone")
    await env.bot_said(lambda c: True)  # answered as a question, as always
    mine = max(
        m.message_id for m in env.telegram.messages(OWNER) if not m.from_bot and m.text.startswith("The shed")
    )
    del own
    env.telegram.push_reply(OWNER, OWNER, "/note", reply_to=mine)
    await env.bot_said(lambda c: "Saved: The shed key is under the stone\nIndexed" in c.params["text"])
    metas = [raw_of(env, d)[1] for d in documents(env)]
    assert {m.origin_type for m in metas} == {"note"} and all(m.origin_date for m in metas)
    await env.say("/note")
    await env.bot_said(lambda c: c.params["text"].startswith("Usage: /note"))


async def test_a_link_with_a_comment_is_imported_with_the_comment(env):
    env, base = env
    await env.say(f"{base}/varn the lake that never freezes")
    done = await env.bot_said(lambda c: c.params["text"].startswith("Saved: The Varn valley"))
    assert "with your comment" in done.params["text"]
    (doc,) = documents(env)
    _, meta = raw_of(env, doc)
    assert meta.comment == "the lake that never freezes" and meta.source_url == f"{base}/varn"
    await env.say(f"{base}/varn")  # a bare link is still offered as an import
    await env.bot_said(lambda c: "Tap to import it." in c.params["text"])


async def test_undo_after_indexing_removes_the_document(env):
    env, _ = env
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), text="A thing to undo")
    saved = await env.bot_said(lambda c: "Saved: A thing to undo\nIndexed" in c.params["text"])
    message_id = saved.result["message_id"]
    undo = buttons_of(env, saved)["Undo"]
    env.telegram.push_callback(OWNER, OWNER, message_id, undo[:-3] + "xyz:u")  # forged: nothing happens
    env.telegram.push_callback(OWNER, OWNER, message_id, undo)
    await env.bot_said(
        lambda c: c.params["text"].startswith("Undone: A thing to undo was removed"), timeout_s=30
    )
    assert documents(env) == []


async def test_ask_about_it_answers_from_the_saved_document(env):
    env, _ = env
    env.telegram.push_forward(OWNER, OWNER, origin=channel(), text="The Zorblat brews nine cups")
    saved = await env.bot_said(lambda c: "Saved: The Zorblat brews nine cups\nIndexed" in c.params["text"])
    env.llm.script = [answer("It brews nine cups [1].")]
    env.telegram.push_callback(
        OWNER, OWNER, saved.result["message_id"], buttons_of(env, saved)["Ask about it"]
    )
    reply = await env.bot_said(lambda c: "It brews nine cups" in c.params["text"], timeout_s=30)
    assert "raw/forward-the-zorblat-brews-nine-cups-" in reply.params["text"]
    assert "What does “The Zorblat brews nine cups” say?" in str(env.llm.requests[-1]["messages"])


async def test_a_forward_from_a_bot_is_still_refused(env):
    env, _ = env
    with structlog.testing.capture_logs() as logs:
        env.telegram.push_message(OWNER, OWNER, "bot words to keep", forward_from_bot=True)
        await env.say("/help")
        await env.bot_said(lambda c: "answers from your own documents" in c.params["text"])
        await env.telegram.wait_until(lambda: any(e["event"] == "bot.refused" for e in logs))
    # stopped before every handler: the forward collector never saw it, so nothing is saved later either
    assert [e["reason"] for e in logs if e["event"] == "bot.refused"] == ["forwarded from a bot"]
    assert inbox_notes(env) == [] and not any(
        c.params["text"].startswith("Saved") for c in env.telegram.calls("sendMessage")
    )


async def test_with_the_daemon_down_it_waits_then_undo_takes_it_out_of_the_inbox(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), daemon=False) as (
        env,
        _,
    ):
        env.telegram.push_forward(OWNER, OWNER, origin=channel(), text="Waiting words")
        saved = await env.bot_said(lambda c: c.params["text"].startswith("Saved: Waiting words"))
        assert (
            "Waiting for the daemon: it will be indexed when it starts (kb daemon)." in saved.params["text"]
        )
        assert inbox_notes(env) == ["forward-waiting-words.md"]  # in the inbox before "Saved"
        env.telegram.push_callback(OWNER, OWNER, saved.result["message_id"], buttons_of(env, saved)["Undo"])
        await env.bot_said(lambda c: c.params["text"] == "Undone: Waiting words was taken out of the inbox.")
        assert inbox_notes(env) == [] and list(env.settings.inbox.glob("*.source.json")) == []


async def test_a_note_saved_while_the_daemon_is_down_is_indexed_when_it_starts(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), daemon=False) as (
        env,
        _,
    ):
        await env.say("/note Indexed later")
        saved = await env.bot_said(lambda c: c.params["text"].startswith("Saved: Indexed later\nWaiting"))
        with background(env.settings, ApproxCounter()):
            await wait_indexed(env, 1)
            done = await env.bot_said(lambda c: c.params["text"] == "Saved: Indexed later\nIndexed, 1 chunk.")
            assert done.params["message_id"] == saved.result["message_id"]


async def test_a_forwarded_photo_with_ocr_off_is_refused_in_words(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), KB_OCR="off") as (
        env,
        _,
    ):
        env.telegram.push_forward(OWNER, OWNER, origin=channel(), photo=(encoded(page_image(["Ferry"])), 1000, 360),
                                  caption="Ferry notes")  # fmt: skip
        await env.bot_said(
            lambda c: c.params["text"] == "Not kept: kb cannot read photos while OCR is off (KB_OCR=off)."
        )
        assert not any(p.is_file() for p in env.settings.inbox.iterdir())  # nothing kept


async def test_undo_under_a_file_never_deletes_a_newer_file_of_the_same_name(tmp_path, varn_site):
    async with running_bot(
        tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), daemon=False, KB_IMPORT_WAIT_S="0.5"
    ) as (env, _):
        notes = ("notes.txt", b"The first notes.\n", "text/plain")
        env.telegram.push_forward(OWNER, OWNER, origin=channel(41), document=notes)
        first = await env.bot_said(lambda c: c.params["text"].startswith("Saved: notes"))
        inbox = env.settings.inbox / "notes.txt"
        processed = env.settings.processed
        processed.mkdir(parents=True, exist_ok=True)
        for name in ("notes.txt", "notes.txt.source.json"):  # the daemon keeps them while it indexes
            (env.settings.inbox / name).rename(processed / name)
        notes = ("notes.txt", b"The newer notes.\n", "text/plain")
        env.telegram.push_forward(OWNER, OWNER, origin=channel(43), document=notes)
        await env.bot_said(
            lambda c: (
                c.params["text"].startswith("Saved: notes")
                and c.params.get("message_id", c.result["message_id"]) != first.result["message_id"]
            )
        )
        assert inbox.read_bytes() == b"The newer notes.\n"  # the name went to the newer file
        env.telegram.push_callback(OWNER, OWNER, first.result["message_id"], buttons_of(env, first)["Undo"])
        said = await env.bot_said(lambda c: "tap Undo again in a moment" in c.params.get("text", ""))
        assert said.params["message_id"] == first.result["message_id"]
        assert inbox.read_bytes() == b"The newer notes.\n"  # still there, with where it came from
        assert (env.settings.inbox / "notes.txt.source.json").exists()


async def test_a_file_telegram_fails_to_send_is_said_and_the_rest_of_the_batch_kept(env):
    env, _ = env
    env.telegram.fail_next("getFile", status=502)
    env.telegram.push_forward(OWNER, OWNER, origin=channel(7), text="The ferry leaves at nine")
    env.telegram.push_forward(OWNER, OWNER, origin=channel(8),
                              document=("timetable.md", b"# Timetable\n\nNine sharp.\n", "text/markdown"))  # fmt: skip
    await env.bot_said(
        lambda c: c.params["text"] == "Not kept: timetable.md — Telegram did not send it; forward it again."
    )
    await env.bot_said(lambda c: "Saved: The ferry leaves at nine\nIndexed" in c.params["text"], timeout_s=30)
    assert [d.title for d in documents(env)] == ["The ferry leaves at nine"]
    assert not [c for c in env.telegram.calls("sendMessage") if "something went wrong" in c.params["text"]]


async def test_forwards_are_kept_by_sender_and_known_by_origin_when_forwarded_again(env):
    env, _ = env
    alice = env_origin("user", name="Alice", user_id=9000002)
    env.telegram.push_forward(OWNER, OWNER, origin=channel(51), text="The pier closes at six")
    env.telegram.push_forward(OWNER, OWNER, origin=channel(52), text="Bring a lantern")
    env.telegram.push_forward(OWNER, OWNER, origin=alice, text="I will meet you at the pier")
    await env.bot_said(lambda c: "Saved: The pier closes at six\nIndexed" in c.params["text"], timeout_s=30)
    await env.bot_said(
        lambda c: "Saved: I will meet you at the pier\nIndexed" in c.params["text"], timeout_s=30
    )
    assert sorted(d.title for d in documents(env)) == [
        "I will meet you at the pier",
        "The pier closes at six",
    ]

    sent = len(env.telegram.calls())
    env.telegram.push_forward(
        OWNER, OWNER, origin=channel(52), text="Bring a lantern"
    )  # inside the first note
    again = await env.bot_said(
        lambda c: c.index >= sent and c.params["text"] == "Already kept: The pier closes at six"
    )
    assert set(buttons_of(env, again)) == {"Ask about it"}
    env.telegram.push_forward(OWNER, OWNER, origin=alice, text="I will meet you at the pier")  # no message id
    await env.bot_said(
        lambda c: c.index >= sent and c.params["text"] == "Already kept: I will meet you at the pier"
    )
    assert len(documents(env)) == 2


async def test_what_is_kept_gains_a_summary_written_by_the_model_as_data(tmp_path, varn_site):
    async with running_bot(
        tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), KB_SUMMARIES="on"
    ) as (env, _):
        env.llm.script = [answer("The post says the <b>pier</b> closes at six [1].")]
        env.telegram.push_forward(OWNER, OWNER, origin=channel(61), text="The pier closes at six tonight")
        saved = await env.bot_said(
            lambda c: "Saved: The pier closes at six tonight\nIndexed" in c.params["text"]
        )
        summarised = await env.bot_said(
            lambda c: "closes at six." in c.params["text"] and "<i>" in c.params["text"]
        )
        assert summarised.params["message_id"] == saved.params.get("message_id", saved.result["message_id"])
        assert summarised.params["text"].endswith(
            "\n\n<i>The post says the &lt;b&gt;pier&lt;/b&gt; closes at six.</i>"
        )
        assert set(buttons_of(env, summarised)) == {"Ask about it", "Undo"}  # the buttons stay
        asked = [
            r for r in env.llm.requests if "Summarise the whole document" in r["messages"][-1]["content"]
        ]
        assert len(asked) == 1 and "The pier closes at six tonight" in asked[0]["messages"][-1]["content"]
        await env.say("/find pier")
        found = await env.bot_said(lambda c: "1 document" in c.params["text"])
        assert "\n    The post says the &lt;b&gt;pier&lt;/b&gt; closes at six." in found.params["text"]
