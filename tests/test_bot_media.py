"""Photos, image files, scans and voice notes sent to the bot, end to end: the Bot API stand-in, the
daemon with real OCR on a real inbox, the scripted model, and a scripted transcriber."""

import io
import json
import re

from PIL import Image, ImageDraw, ImageFont

from knowledge.errors import SpeechError
from knowledge.speech.transcribe import Transcript
from knowledge.store.index import Index
from tests import bot_env
from tests.audio_fixtures import voice_note
from tests.bot_env import OWNER, drop_note, indexed_note, running_bot, valid_html, wait_indexed
from tests.fake_llm import answer

env = bot_env.env  # the fixture


def page_image(lines: list[str], *, size: tuple[int, int] = (1000, 360), font_px: int = 36) -> Image.Image:
    """Black lines of text on white, like a photo of a printed page."""
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_px)
    for n, line in enumerate(lines):
        draw.text((40, 40 + n * round(font_px * 1.9)), line, fill="black", font=font)
    return image


def encoded(image: Image.Image, fmt: str = "JPEG") -> bytes:
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def prompt_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"])


async def test_a_photo_is_read_indexed_and_its_caption_answered_from_it(env):
    env, _ = env
    await indexed_note(env, "other.md", "# Brewers\n\nThe Zorblat 5000 brews four cups.\n")
    photo = encoded(page_image(["Zorblat 9000 manual", "It brews twelve cups at once."]))
    env.llm.script = [answer("It brews twelve cups at once [1].")]
    env.telegram.push_photo(
        OWNER, OWNER, photo, width=1000, height=360, caption="How many cups does it brew?"
    )
    status = await env.bot_said(lambda c: "Read 2 lines" in c.params["text"], timeout_s=90)
    text = status.params["text"]
    assert valid_html(status)
    assert re.search(r"photo-\d{8}-\d{6}\.jpg: indexed, 1 chunk", text), text
    assert re.search(r"Read 2 lines \(confidence \d+%\): “Zorblat 9000 manual”", text), text
    assert [b["text"] for b in env.telegram.message(OWNER, status.params["message_id"]).buttons] == [
        "Ask about it",
        "Undo",
    ]
    reply = await env.bot_said(lambda c: "twelve cups at once" in c.params["text"], timeout_s=30)
    assert re.search(r"raw/photo-\d{8}-\d{6}-[0-9a-f]{8}\.md:\d+-\d+", reply.params["text"])
    # The caption is a question about this photo: the other brewer is not in the evidence.
    prompt = prompt_text(env.llm.requests[-1])
    assert "twelve cups" in prompt and "Zorblat 5000" not in prompt
    # The full-size photo was read, not the thumbnail Telegram lists first.
    assert [p for p in env.telegram.downloads if p.startswith("photos/")] == ["photos/file_2.jpg"]
    sidecar = next(env.settings.processed.glob("photo-*.jpg.source.json"))
    assert json.loads(sidecar.read_text())["source"] == "telegram photo"


async def test_an_image_file_is_read_and_searchable_at_once(env):
    env, _ = env
    png = encoded(page_image(["Quillan ferry timetable", "The last ferry leaves at 21:40."]), "PNG")
    env.telegram.push_document(OWNER, OWNER, "ferry.png", png, "image/png")
    status = await env.bot_said(lambda c: "ferry.png: indexed" in c.params["text"], timeout_s=90)
    assert "Read 2 lines" in status.params["text"] and "Quillan ferry timetable" in status.params["text"]
    with Index(env.settings.index_path, readonly=True) as index:
        (doc,) = index.documents()
    raw = (env.settings.raw.parent / doc.raw_path).read_text(encoding="utf-8")
    assert "The last ferry leaves at 21:40." in raw and "ocr_engine:" in raw


async def test_a_scan_shows_its_pages_as_they_are_read(env):
    env, _ = env
    pages = [
        page_image([f"Page {n} of the Varn survey", f"Station {n} measured {n * 7} metres.", "Water was clear."],
                   size=(1240, 1754))
        for n in range(1, 7)  # six pages: a few seconds of OCR, longer than the progress poll
    ]  # fmt: skip
    out = io.BytesIO()
    pages[0].save(out, "PDF", save_all=True, append_images=pages[1:], resolution=150)
    env.telegram.push_document(OWNER, OWNER, "survey.pdf", out.getvalue(), "application/pdf")
    await env.bot_said(
        lambda c: "survey.pdf: converting" in c.params["text"] or "reading page" in c.params["text"]
    )
    await env.say("/status")  # while the pages are read, the chat is not locked
    answered = await env.bot_said(
        lambda c: "model server" in c.params["text"] and "documents" in c.params["text"]
    )
    done = await env.bot_said(lambda c: "survey.pdf: indexed" in c.params["text"], timeout_s=120)
    assert answered.index < done.index  # /status answered before the scan was done
    assert (
        "Station 2 measured 14 metres."
        in (env.settings.raw / next(env.settings.raw.glob("survey*.md")).name).read_text()
    )
    message = env.telegram.message(OWNER, done.params["message_id"])
    assert any(re.search(r"reading page \d of 6", h) for h in message.history), message.history
    assert "Read " in done.params["text"]


async def test_a_photo_with_nothing_legible_is_reported_not_indexed(env):
    env, _ = env
    blank = encoded(Image.new("RGB", (800, 600), (235, 235, 235)))
    env.telegram.push_photo(OWNER, OWNER, blank, width=800, height=600)
    status = await env.bot_said(lambda c: "not added" in c.params["text"], timeout_s=90)
    assert re.search(r"photo-\d{8}-\d{6}\.jpg: not added — .*(legible|text)", status.params["text"])
    with Index(env.settings.index_path, readonly=True) as index:
        assert index.document_count() == 0


async def test_a_voice_question_is_heard_answered_and_saved_once(env):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    env.voice.script = [Transcript(text="How deep is Lake Quillan?", language="en", duration_s=2.0)]
    env.llm.script = [answer("It is 317 metres deep [1].")]
    env.telegram.push_voice(OWNER, OWNER, b"OggS voice bytes", duration=2)
    heard = await env.bot_said(lambda c: "I heard: “How deep is Lake Quillan?”" in c.params["text"])
    assert env.voice.heard == [b"OggS voice bytes"]
    await env.bot_said(lambda c: "317 metres deep" in c.params["text"] and "raw/quillan-" in c.params["text"])
    button = env.telegram.message(OWNER, heard.params["message_id"]).buttons[0]
    assert button["text"] == "Save as note"
    first = env.telegram.push_callback(OWNER, OWNER, heard.params["message_id"], button["callback_data"])
    saved = await env.bot_said(lambda c: "Saved as a note" in c.params["text"], timeout_s=30)
    assert re.search(r"voice-note-\d{8}-\d{6}\.md: indexed, 1 chunk — Voice note, ", saved.params["text"])
    assert env.telegram.callback_answer(first)["text"] == "saving…"
    again = env.telegram.push_callback(OWNER, OWNER, heard.params["message_id"], button["callback_data"])
    forged = env.telegram.push_callback(OWNER, OWNER, heard.params["message_id"], "note:forged-token")
    await env.telegram.wait_until(lambda: env.telegram.callback_answer(forged) is not None)
    assert env.telegram.callback_answer(again)["text"] == "already saved"
    refused = env.telegram.callback_answer(forged)
    assert refused["show_alert"] is True and "expired" in refused["text"]
    (note,) = env.settings.processed.glob("voice-note-*.md")
    assert "How deep is Lake Quillan?" in note.read_text(encoding="utf-8")
    sidecar = json.loads(note.with_name(note.name + ".source.json").read_text())
    assert sidecar["source"] == "telegram voice note"


async def test_audio_files_are_questions_too(env):
    env, _ = env
    await indexed_note(env, "thailand.md", "# Thailand\n\nThe capital of Thailand is Bangkok.\n")
    env.voice.script = [Transcript(text="What is the capital of Thailand?", language="en", duration_s=3.0)]
    env.llm.script = [answer("Bangkok.")]
    env.telegram.push_audio(OWNER, OWNER, b"\x00\x00\x00 ftypM4A audio", file_name="q.m4a", mime_type="audio/mp4",
                            duration=3)  # fmt: skip
    await env.bot_said(lambda c: "I heard: “What is the capital of Thailand?”" in c.params["text"])
    await env.bot_said(lambda c: "Bangkok." in c.params["text"])


async def test_a_failed_transcription_is_answered_in_words(env):
    env, _ = env
    sentence = "I could not hear any words in that voice note; try again, or type the question."
    env.voice.script = [SpeechError("no-speech", sentence)]
    env.telegram.push_voice(OWNER, OWNER, b"OggS silence", duration=4)
    status = await env.bot_said(lambda c: "could not hear any words" in c.params["text"])
    assert valid_html(status) and env.llm.requests == []


async def test_a_recording_over_the_limit_is_refused_before_download(env):
    env, _ = env
    env.telegram.push_voice(OWNER, OWNER, b"OggS long", duration=3600)
    refused = await env.bot_said(lambda c: "KB_VOICE_MAX_S" in c.params["text"])
    assert "3600 s" in refused.params["text"]
    assert env.voice.heard == [] and not [p for p in env.telegram.downloads if p.startswith("voice/")]


async def test_a_voice_note_through_the_real_transcriber(tmp_path, varn_site, whisper_en, whisper_phantom):
    """A real OGG/Opus note decoded by PyAV and transcribed by mlx-whisper in its worker (a tiny model
    that hears one question whatever is said); a model that hears only Whisper's phantom phrase gets a
    sentence back, not silence."""
    async with running_bot(tmp_path / "kb", varn_site, KB_WHISPER_MODEL=str(whisper_en)) as (env, _):
        drop_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
        await wait_indexed(env, 1)
        env.llm.script = [answer("It is 317 metres deep [1].")]
        env.telegram.push_voice(OWNER, OWNER, voice_note(2.0), duration=2)
        await env.bot_said(lambda c: "I heard: “How deep is Lake Quillan?”" in c.params["text"], timeout_s=90)
        await env.bot_said(lambda c: "317 metres deep" in c.params["text"], timeout_s=30)
    async with running_bot(tmp_path / "kb2", varn_site, KB_WHISPER_MODEL=str(whisper_phantom)) as (env, _):
        env.telegram.push_voice(OWNER, OWNER, voice_note(2.0), duration=2)
        said = await env.bot_said(lambda c: "could not hear any words" in c.params["text"], timeout_s=90)
        assert valid_html(said) and env.llm.requests == []


async def test_a_file_sent_can_be_undone_like_a_forward(env):
    env, _ = env
    env.telegram.push_document(
        OWNER, OWNER, "pier.md", b"# Pier hours\n\nThe pier closes at six.\n", "text/markdown"
    )
    status = await env.bot_said(lambda c: "pier.md: indexed" in c.params["text"], timeout_s=30)
    message = env.telegram.message(OWNER, status.params["message_id"])
    buttons = {b["text"]: b["callback_data"] for b in message.buttons}
    assert set(buttons) == {"Ask about it", "Undo"}
    env.telegram.push_callback(OWNER, OWNER, message.message_id, buttons["Undo"])
    await env.bot_said(lambda c: c.params["text"].startswith("Undone: Pier hours was removed"), timeout_s=30)
    with Index(env.settings.index_path, readonly=True) as index:
        assert index.document_count() == 0
