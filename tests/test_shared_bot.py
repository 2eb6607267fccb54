"""One bot, several allowed users: what one of them asked stays in their own chat (the digest's
questions left unanswered above all)."""

from tests.bot_env import OWNER, ScriptedTranscriber, running_bot
from tests.fake_llm import answer

PARTNER = 4343  # a second allowed user, in a private chat of their own


async def test_each_users_digest_lists_only_the_questions_asked_in_their_own_chat(tmp_path, varn_site):
    users = {"KB_TELEGRAM_ALLOWED_USERS": f"{OWNER},{PARTNER}", "KB_WEB_SEARCH": "off"}
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), **users) as (env, _):
        env.llm.script = [answer("I don't know.")]
        for user, question in (
            (OWNER, "When is my biopsy appointment?"),
            (PARTNER, "Where is the ferry pier?"),
        ):
            sent = len(env.telegram.calls())
            await env.say(question, user=user)
            await env.bot_said(lambda c, u=user, n=sent: c.index >= n and c.params["chat_id"] == u)
        sent = len(env.telegram.calls())
        await env.say("/digest", user=PARTNER)
        digest = await env.bot_said(lambda c: c.index >= sent and "Digest" in c.params["text"])
    assert digest.params["chat_id"] == PARTNER
    assert "Where is the ferry pier?" in digest.params["text"]
    assert "biopsy" not in digest.params["text"]  # the owner's question is the owner's
