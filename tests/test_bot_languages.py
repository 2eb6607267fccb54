"""The bot in Traditional Chinese and in Thai, as a Taiwanese and a Thai owner use it: every word kb
writes (messages, buttons, drafts, callback answers, the command menu) is in their language, and
the model is told to answer in it; /lang is kept across a restart."""

import html
import re

import pytest

from knowledge.speech.transcribe import Transcript
from knowledge.words.catalog import Words
from tests import english
from tests.bot_env import OWNER, ScriptedTranscriber, drop_note, running_bot, wait_indexed
from tests.fake_llm import answer, web_step
from tests.fake_search import Result, ddg_results
from tests.test_bot_converse import answered, turn

TITLES = ["Harbor release checklist", "The Varn valley and Lake Quillan", "The Varn valley", "Quillan tourism",
          "Office kettle notice", "DuckDuckGo Lite", "Lake Quillan"]  # fmt: skip
SAYS = {  # what the scripted model writes, in the reader's language
    "zh-Hant": {"answer": "檢查表要求三件事：簽署的艙單、潮汐窗口和領港員 [1]。", "summary": "[1] 奎蘭湖的深度。",
                "voice": "港口檢查表要求什麼？", "forward": "明天早上九點在碼頭集合", "note": "記得帶備用的槳",
                "question": "港口放行檢查表要求什麼？", "unknown": "奎蘭湖有多深？", "heard": "我聽到的是",
                "menu": "zh", "prompt": "Traditional Chinese"},
    "th": {"answer": "รายการตรวจสอบกำหนดสามอย่าง: บัญชีสินค้า ช่วงน้ำขึ้น และผู้นำร่อง [1]", "summary": "[1] ความลึกของทะเลสาบ",
           "voice": "รายการตรวจสอบท่าเรือต้องทำอะไรบ้าง", "forward": "พรุ่งนี้เก้าโมงเช้าเจอกันที่ท่าเรือ",
           "note": "อย่าลืมเอาไม้พายสำรองไปด้วย", "question": "รายการตรวจสอบการปล่อยเรือต้องทำอะไรบ้าง",
           "unknown": "ทะเลสาบควิลแลนลึกเท่าไร", "heard": "ได้ยินว่า", "menu": "th", "prompt": "Thai"},
}  # fmt: skip
ASCII_COLON_BEFORE_CJK = re.compile(
    r"(?<!https)(?<!http):(?!//)\s*(<[^>]+>)*\s*[\u3400-\u9fff\uff01-\uff5e「（]"
)
HARBOR = (
    "# Harbor release checklist\n\n1. A signed cargo manifest.\n\n2. A tide window of two hours.\n\n"
    "3. A pilot on board.\n\nท่าเรือ รายการตรวจสอบการปล่อยเรือ ต้องทำอะไรบ้าง 港口放行檢查表要求什麼\n"
)


async def tap(env, message_id: int, data: str, predicate, timeout_s: float = 20.0):
    """The owner taps a button; the bot's answer to it."""
    since = len(env.telegram.calls())
    env.telegram.push_callback(OWNER, OWNER, message_id, data)
    return await answered(env, predicate, timeout_s, since=since)


def english_runs(text: str) -> list[str]:
    """Runs of three or more English words in kb's own words (tests/english.py decides), the documents'
    titles and text taken out first."""
    return english.english_runs(text, quoted=[*TITLES, *(line for line in HARBOR.splitlines() if line)])


def kb_words(env) -> list[str]:
    """Everything the bot showed the owner: messages (as sent and as edited), buttons, drafts,
    callback answers."""
    out = []
    for call in env.telegram.calls():
        if not call.ok:
            continue
        params = call.params
        if call.method in ("sendMessage", "editMessageText", "sendMessageDraft"):
            out.append(str(params.get("text") or ""))
        if call.method == "answerCallbackQuery":
            out.append(str(params.get("text") or ""))
        for row in (params.get("reply_markup") or {}).get("inline_keyboard") or []:
            out += [b["text"] for b in row]
    return out


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
async def test_a_taiwanese_and_a_thai_owner_read_kb_in_their_language(tmp_path, varn_site, language):
    says = SAYS[language]
    voice = ScriptedTranscriber()
    async with running_bot(tmp_path / "kb", varn_site, transcribe=voice) as (env, base):
        env.telegram.set_language(OWNER, "zh-hant" if language == "zh-Hant" else "th")
        drop_note(env, "harbor.md", HARBOR)
        await wait_indexed(env, 1)
        env.search.script["ddg"] = [
            ddg_results("q", [Result("The Varn valley and Lake Quillan", f"{base}/varn", says["unknown"])])
        ]
        env.llm.responder = web_step(
            "lake quillan depth", "1: YES", says["summary"], lambda body: answer(says["answer"])
        )

        await turn(env, "/help", lambda t: "/find" in t)
        got = await turn(env, says["question"], lambda t: says["answer"].split("[")[0][:6] in t)
        system = [r for r in env.llm.requests if "evidence-" in r["messages"][0]["content"]][-1]["messages"][
            0
        ]
        assert f"Answer in {says['prompt']}" in system["content"]
        words = Words(language)
        sources = got.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        await tap(env, got.result["message_id"], sources, lambda t: "raw/harbor-" in t)
        bad = got.params["reply_markup"]["inline_keyboard"][-1][1]["callback_data"]  # 👎 on the answer
        voted = env.telegram.push_callback(OWNER, OWNER, got.result["message_id"], bad)
        await env.telegram.wait_until(lambda: env.telegram.callback_answer(voted) is not None)
        assert env.telegram.callback_answer(voted)["text"] == words.tr("Thanks — noted.") != "Thanks — noted."
        await env.telegram.wait_until(
            lambda: (
                "🔎 " + words.tr("Search the web")
                in str(env.telegram.message(OWNER, got.result["message_id"]).buttons)
            )
        )

        offer = await turn(env, says["unknown"], lambda t: "web-1" in t or "127.0.0.1" in t, timeout_s=30)
        first = offer.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        await tap(env, offer.result["message_id"], first, lambda t: "raw/the-varn-valley" in t, timeout_s=30)

        since = len(env.telegram.calls())
        origin = env.telegram.origin("user", date=1796000000, name="Ann")
        env.telegram.push_forward(OWNER, OWNER, origin=origin, text=says["forward"])
        await answered(env, lambda t: says["forward"][:5] in t, since=since)
        await turn(env, f"/note {says['note']}", lambda t: says["note"][:5] in t)

        listing = await turn(env, "/find harbor", lambda t: "Harbor release checklist" in t)
        [[opening, deleting, _summarising], *_] = listing.params["reply_markup"]["inline_keyboard"]
        await tap(env, listing.result["message_id"], opening["callback_data"], lambda t: "raw/harbor-" in t)
        asked = words.tr("It leaves search; the original is kept in the trash for 30 days.")
        confirm = await tap(
            env, listing.result["message_id"], deleting["callback_data"], lambda t: asked in t
        )
        yes = confirm.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        deleted = words.tr(
            "Deleted: <b>{title}</b>. It is in the trash for 30 days.", title="Harbor release checklist"
        )
        gone = await tap(env, confirm.result["message_id"], yes, lambda t: t == deleted, timeout_s=30)
        undo = env.telegram.message(OWNER, gone.params["message_id"]).buttons[0]["callback_data"]
        back = words.tr("Restored: <b>{title}</b>, searchable again.", title="Harbor release checklist")
        await tap(env, gone.params["message_id"], undo, lambda t: t == back, timeout_s=30)

        status = await turn(env, "/status", lambda t: words.tr("knowledge base") in t)
        assert (
            "127.0.0.1" not in status.params["text"] and str(env.settings.home) not in status.params["text"]
        )
        await turn(env, "/frobnicate", lambda t: "/frobnicate" in t and "/help" in t)
        voice.script = [Transcript(text=says["voice"], language=language[:2], duration_s=2.0)]
        env.llm.responder = None
        env.llm.script = [answer(says["answer"])]
        since = len(env.telegram.calls())
        env.telegram.push_voice(OWNER, OWNER, b"OggS voice", duration=2)
        await answered(env, lambda t: says["heard"] in t, since=since)
        since = len(env.telegram.calls())
        env.telegram.push_document(OWNER, OWNER, "tool.exe", b"MZ\x90\x00", "application/octet-stream")
        await answered(env, lambda t: "tool.exe" in t, since=since)
        lang = await turn(env, "/lang", lambda t: "/lang" not in t and ("中文" in t or "ไทย" in t))
        buttons = [b["text"] for row in lang.params["reply_markup"]["inline_keyboard"] for b in row]
        assert buttons == ["English", "繁體中文", "简体中文", "ภาษาไทย"]

        leaks = {text: runs for text in kb_words(env) if (runs := english_runs(text))}
        assert leaks == {}
        if language == "zh-Hant":  # a full-width colon, never an ASCII one before Chinese
            mixed = [text for text in kb_words(env) if ASCII_COLON_BEFORE_CJK.search(html.unescape(text))]
            assert mixed == [], "\n---\n".join(mixed)
        assert env.telegram.my_commands(language_code=says["menu"])
        menu = [c["description"] for c in env.telegram.my_commands(language_code=says["menu"])]
        assert all(not english_runs(d) for d in menu) and len(menu) == 14
        assert all("/" not in d or "web-2" in d or "/find" in d or "/note" in d for d in menu)


async def test_lang_is_kept_across_a_restart_and_wins_over_the_client(tmp_path, varn_site):
    home = tmp_path / "kb"
    async with running_bot(home, varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        env.telegram.set_language(OWNER, "en")
        lang = await turn(env, "/lang", lambda t: "English" in t)
        thai = lang.params["reply_markup"]["inline_keyboard"][3][0]["callback_data"]
        env.telegram.push_callback(OWNER, OWNER, lang.result["message_id"], thai)
        await answered(env, lambda t: "ภาษาไทย" in t and "ต่อจากนี้" in t, since=len(env.telegram.calls()) - 1)
    async with running_bot(home, varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        env.telegram.set_language(OWNER, "zh-hant")
        await turn(env, "/new", lambda t: "บทสนทนาใหม่" in t)  # Thai: the choice, not the client's language


COMPUTER = {"linux": {"zh-Hant": "電腦", "th": "คอมพิวเตอร์"}, "darwin": {"zh-Hant": "Mac", "th": "Mac"}}
DOWN = {"zh-Hant": "模型伺服器沒有在執行", "th": "ไม่ได้ทำงานอยู่"}


@pytest.mark.parametrize("platform", ["linux", "darwin"])
@pytest.mark.parametrize("language", ["zh-Hant", "th"])
async def test_the_bot_names_the_owners_computer_as_what_it_is(tmp_path, varn_site, language, platform):
    """The phone is told where to look (kb feedback, the model server) on "the Mac" only when kb runs on
    one: on Linux the words say the computer."""
    from tests.fake_llm import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    async with running_bot(
        tmp_path / "kb", varn_site, platform=platform, KB_LLM_URL=dead, KB_WEB_SEARCH="off"
    ) as (env, _):
        env.telegram.set_language(OWNER, "zh-hant" if language == "zh-Hant" else "th")
        drop_note(env, "harbor.md", HARBOR)
        await wait_indexed(env, 1)
        shown = [
            (await turn(env, "/help", lambda t: "/find" in t)).params["text"],
            (await turn(env, SAYS[language]["question"], lambda t: DOWN[language] in t)).params["text"],
        ]
    word = COMPUTER[platform][language]
    assert all(word in text for text in shown), shown
    assert all(("Mac" in text) == (platform == "darwin") for text in shown), shown
