"""Whether a Chinese or Thai message leans on the conversation: a short question without a subject of
its own, whose words come from what was just said.

Chinese and Thai drop the subject when it is clear: 「押金是幾個月？」 then 「什麼時候退？」 (when is *it*
returned?), 「幾點？要帶什麼？」, "ตัดบัตรวันไหน" (which day is *it* charged?). No pronoun points back:
the evidence is that the message is short, names nothing new (its content words, once the question's
frame is taken off, were in the last messages, the last answer or its sources' titles) or nothing at
all. A question that names something the conversation did not ("火險什麼時候續保？" after a talk about
the internet) is a topic change and stands alone; so does a greeting or a thank-you.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knowledge.conversation.store import Turn
from knowledge.text import is_greeting, language_group

MAX_CJK_CONTENT = 6  # content characters of a short Chinese question
MAX_CJK_NEW = 1  # content characters the conversation did not say: a verb such as 壞 ("broken")
MAX_THAI_CONTENT = 16  # code points of a short Thai question's content
THAI_KNOWN_SHARE = 0.6  # of its content's character trigrams found in the conversation

# A Chinese question's frame: question words, particles, auxiliaries, measure words and time words.
_CJK_FRAME_WORDS = re.compile(
    r"什麼時候|什么时候|甚麼時候|幾時|几时|哪一天|哪天|哪裡|哪里|哪一種|哪一种|哪個|哪个|多少錢|多少钱|多久|"
    r"多少|幾點|几点|幾號|几号|幾天|几天|幾個|几个|什麼|什么|甚麼|怎麼辦|怎么办|怎麼|怎么|為什麼|为什么|"
    r"可以|需要|應該|应该|下次|上次|這次|这次|還是|还是|一次|一下|大約|大约"
)
_CJK_FRAME_CHARS = frozenset(
    "的了嗎吗呢吧啊呀是有在要會会能得到和與与及或也都就還还該该請请問问誰谁哪幾几多少個个次種种天年月日週周號号"
    "點点時时候再又把被給给對对嗎麼么樣样何內内前後后裡里一二三四五六七八九十兩两"
)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9.+-]*|\d+")
# A Thai question's frame: question words, particles, auxiliaries and very common verbs.
_THAI_FRAME = re.compile(
    r"เมื่อไหร่|เมื่อไร|เมื่อไหร|กี่โมง|กี่วัน|กี่บาท|กี่|เท่าไหร่|เท่าไร|วันไหน|ที่ไหน|อันไหน|ไหน|อะไร|ยังไง|"
    r"อย่างไร|หรือเปล่า|หรือยัง|ไหม|มั้ย|ครับ|ค่ะ|คะ|นะ|ล่ะ|แล้ว|จะ|ต้อง|ควร|ได้|เอา|ไป|มา|ด้วย|บ้าง|คือ|"
    r"เป็น|มี|ของ|ที่|ใน|และ|ครั้งละ|ครั้ง|ละ|อีก|ทำ|ใช้|ให้|ถ้า|ก็|ยัง"
)


def leans_on(message: str, turns: Sequence[Turn]) -> bool:
    """Whether a Chinese or Thai message is a short question whose subject is the conversation's
    (False for other scripts, greetings and the first message)."""
    if not turns or is_greeting(message):
        return False
    said = _conversation_text(turns)
    group = language_group(message)
    if group == "cjk":
        return _cjk_leans(message, said)
    if group == "thai":
        return _thai_leans(message, said)
    return False


def _conversation_text(turns: Sequence[Turn]) -> str:
    """What was just said: the last messages, the last answer and its sources' titles."""
    last = turns[-1]
    return " ".join([*(t.message for t in turns[-3:]), last.answer, *last.titles]).lower()


def _cjk_leans(message: str, said: str) -> bool:
    latin = [w.lower() for w in _LATIN.findall(message)]
    if any(w not in said for w in latin if not w.isdigit()):  # a name the conversation did not say
        return False
    content = [c for c in _CJK.findall(_CJK_FRAME_WORDS.sub(" ", message)) if c not in _CJK_FRAME_CHARS]
    if len(content) > MAX_CJK_CONTENT:
        return False
    return sum(c not in said for c in content) <= MAX_CJK_NEW


def _thai_leans(message: str, said: str) -> bool:
    latin = [w.lower() for w in _LATIN.findall(message)]
    if any(w not in said for w in latin if not w.isdigit()):
        return False
    parts = ["".join(ch for ch in part if "\u0e00" <= ch <= "\u0e7f") for part in _THAI_FRAME.split(message)]
    parts = [p for p in parts if p]
    if not parts:
        return True  # nothing but a question's frame: "ต้องเอาอะไรไปบ้าง"
    if sum(map(len, parts)) > MAX_THAI_CONTENT:
        return False
    grams = [p[i : i + 3] for p in parts for i in range(max(1, len(p) - 2))]
    return sum(g in said for g in grams) >= THAI_KNOWN_SHARE * len(grams)
