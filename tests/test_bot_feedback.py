"""👍 / 👎 under the bot's answers, through the Bot API stand-in: the row beside the answer's own buttons,
the vote shown and changed (never counted twice), what `kb feedback --json` then holds, "Search the
web" after 👎, the row kept while a web candidate imports, and forged, stale or foreign votes refused."""

import json

from knowledge.answer.reply import Reply
from knowledge.conversation.store import Conversations
from knowledge.feedback.record import rated
from knowledge.feedback.store import Feedback
from tests import bot_env
from tests.bot_env import OWNER, indexed_note, web_offer
from tests.fake_llm import answer, web_step
from tests.fake_search import Result, ddg_results

env = bot_env.env  # the fixture
QUESTION = "How deep is Lake Quillan?"


def labels(message) -> list[list[str]]:
    """A message's buttons as the owner sees them, row by row."""
    return [[b["text"] for b in row] for row in (message.reply_markup or {}).get("inline_keyboard", [])]


async def tap(env, message_id: int, label: str) -> dict:
    """Tap the button with this label; the callback's answer once given."""
    message = env.telegram.message(OWNER, message_id)
    data = next(b["callback_data"] for b in message.buttons if b["text"] == label)
    return await press(env, message_id, data)


async def press(env, message_id: int, data: str) -> dict:
    qid = env.telegram.push_callback(OWNER, OWNER, message_id, data)
    await env.telegram.wait_until(lambda: env.telegram.callback_answer(qid) is not None)
    return env.telegram.callback_answer(qid)


def exported(run_kb, env) -> list[dict]:
    done = run_kb("--home", str(env.settings.home), "feedback", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def quillan_answer(env) -> int:
    """Ask how deep Lake Quillan is, answered from a note; the id of the answer's message."""
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    env.llm.script = [answer("Lake Quillan is 317 metres deep [1].")]
    await env.say(QUESTION)
    final = await env.bot_said(
        lambda c: "317 metres deep" in c.params["text"] and c.params.get("reply_markup")
    )
    return final.result["message_id"]


async def test_a_vote_shows_on_the_answer_a_second_tap_changes_it_and_bad_offers_the_web(env, run_kb):
    env, base = env
    answer_id = await quillan_answer(env)
    assert labels(env.telegram.message(OWNER, answer_id)) == [["Sources"], ["👍", "👎"]]
    assert exported(run_kb, env) == []  # shown, not voted on

    assert (await tap(env, answer_id, "👍"))["text"] == "Thanks — noted."
    await env.telegram.wait_until(lambda: labels(env.telegram.message(OWNER, answer_id))[1] == ["👍 ✓", "👎"])
    [good] = exported(run_kb, env)
    assert (good["question"], good["standalone"], good["vote"], good["door"]) == (
        QUESTION,
        QUESTION,
        "good",
        "local",
    )
    [chunk] = good["expected"]
    assert (
        chunk["title"] == "Lake Quillan"
        and chunk["path"].startswith("raw/quillan-")
        and good["rejected"] == []
    )
    assert chunk["chunk_id"].startswith(chunk["document_id"] + "-chunk-") and good["chat"] == f"tg:{OWNER}"

    assert (await tap(env, answer_id, "👎"))["text"] == "Changed — noted."
    await env.telegram.wait_until(lambda: len(labels(env.telegram.message(OWNER, answer_id))) == 3)
    assert labels(env.telegram.message(OWNER, answer_id)) == [
        ["Sources"],
        ["👍", "👎 ✓"],
        ["🔎 Search the web"],
    ]
    [bad] = exported(run_kb, env)  # changed, not added
    assert bad["vote"] == "bad" and bad["expected"] == [] and bad["rejected"] == [chunk]
    assert (await tap(env, answer_id, "👎 ✓"))["text"] == "Already noted."
    assert len(exported(run_kb, env)) == 1

    varn = Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth")
    env.search.script["ddg"] = [ddg_results("q", [varn])]
    env.llm.responder = web_step("lake quillan depth", "1: YES", "[1] The Varn valley page gives the depth.",
                                 lambda body: answer("I don't know."))  # fmt: skip
    since = len(env.telegram.calls())
    assert (await tap(env, answer_id, "🔎 Search the web"))["text"] == "searching the web…"
    offer = await env.bot_said(
        lambda c: c.index >= since and c.method == "sendMessage" and "web-1" in json.dumps(c.params)
    )
    assert offer.params["text"].startswith("From the web") and "Varn valley" in offer.params["text"]
    assert offer.params["reply_parameters"]["message_id"] == answer_id  # a reply to the answer voted down
    assert labels(env.telegram.message(OWNER, offer.result["message_id"]))[0][0].startswith("web-1 · ")
    assert labels(env.telegram.message(OWNER, answer_id)) == [["Sources"], ["👍", "👎 ✓"]]  # searched once
    answer_message = env.telegram.message(OWNER, answer_id)
    assert (
        answer_message.history == [] and "317 metres deep" in answer_message.text
    )  # the answer is untouched


async def test_a_web_answer_has_no_web_button_after_bad_and_keeps_its_vote_while_a_candidate_imports(env):
    env, base = env
    results = [Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth in metres")]
    offer = await web_offer(
        env, results, "1: YES", 1, lambda body: answer("Lake Quillan is 317 metres deep [1].")
    )
    offer_id = offer.result["message_id"]
    shown = labels(env.telegram.message(OWNER, offer_id))
    assert [row[0][:7] for row in shown] == ["web-1 ·", "👍"] and shown[1] == ["👍", "👎"]
    await tap(env, offer_id, "👎")
    await env.telegram.wait_until(lambda: labels(env.telegram.message(OWNER, offer_id))[-1] == ["👍", "👎 ✓"])
    assert len(labels(env.telegram.message(OWNER, offer_id))) == 2  # the web was searched already
    await tap(env, offer_id, labels(env.telegram.message(OWNER, offer_id))[0][0])  # import web-1
    again = await env.bot_said(
        lambda c: "317 metres deep" in c.params["text"] and c.params.get("reply_markup"), 30
    )
    progress = env.telegram.message(OWNER, offer_id)
    assert "web-1: indexed" in progress.text
    assert [row[0][:7] for row in labels(progress)] == ["✓ web-1", "👍"] and labels(progress)[1] == [
        "👍",
        "👎 ✓",
    ]
    # the answer from the imported page is an answer too: its own row, not yet voted on
    assert labels(env.telegram.message(OWNER, again.result["message_id"]))[-1] == ["👍", "👎"]


async def test_forged_stale_and_foreign_votes_are_refused_and_change_nothing(env, run_kb):
    env, _ = env
    answer_id = await quillan_answer(env)
    before = env.telegram.message(OWNER, answer_id).reply_markup
    token = before["inline_keyboard"][1][0]["callback_data"].split(":")[1]
    elsewhere = Feedback(Conversations(env.settings.conversations_path))
    foreign = elsewhere.offer("tg:99", rated("secret", "secret", Reply("x", "local")))
    cases = {
        f"fb:{foreign}:u": "belongs to another chat",  # another chat's answer
        "fb:AAAAAAAAAAAA:d": "expired",  # no such answer (or forgotten)
        f"fb:{token}:w": "expired",  # no 👎 yet: no web search on offer
        f"fb:{token}:x": "expired",
        "fb:../../etc/pa:u": "expired",
        "fb:" + "x" * 61: "expired",
    }
    for data, says in cases.items():
        answered = await press(env, answer_id, data)
        assert answered["show_alert"] is True and says in answered["text"], (data, answered)
    assert env.telegram.message(OWNER, answer_id).reply_markup == before  # nothing redrawn
    assert exported(run_kb, env) == []
    assert elsewhere.get("tg:99", foreign).vote is None
    assert not [c for c in env.telegram.calls("sendMessage") if "From the web" in c.params.get("text", "")]
