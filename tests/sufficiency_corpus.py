"""A small knowledge base in three languages, and questions it does or does not answer.

Notes as an owner keeps them: an English page about SQLite FTS5, a Traditional Chinese note on
brewing oolong tea, a Thai recipe for tom kha gai. Used with the real local embedder.
"""

DOCS = {
    "fts5-limits.md": (
        "# SQLite FTS5: limits and tokenizers\n\n"
        "An FTS5 virtual table can have at most 2000 columns, and each row is identified by its rowid.\n\n"
        "The unicode61 tokenizer splits text on spaces and punctuation and folds case; it does not split "
        "Chinese or Thai text into words, so a phrase written without spaces is indexed as a single token.\n\n"
        "The trigram tokenizer indexes every sequence of three characters. It makes substring search and "
        "LIKE queries fast, at the cost of an index about three times larger than the text.\n\n"
        "The bm25() function ranks matches; a smaller value is a better match, so ORDER BY bm25(t) puts the "
        "best rows first. Column weights can be passed as extra arguments.\n"
    ),
    "oolong.md": (
        "# 高山烏龍茶沖泡筆記\n\n"
        "高山烏龍茶生長在海拔一千公尺以上的茶園，茶湯清香甘甜，帶有花香。\n\n"
        "沖泡時建議使用九十五度的熱水，茶葉大約佔壺身的四分之一。第一泡浸泡五十秒，之後每一泡增加十秒，"
        "好茶可以回沖五到六次。\n\n"
        "茶葉要放在密封罐中，避免陽光與濕氣，開封後最好在三個月內喝完。\n"
    ),
    "tom-kha-gai.md": (
        "# ต้มข่าไก่\n\n"
        "ต้มข่าไก่เป็นแกงน้ำกะทิของไทย รสเปรี้ยว เค็ม หวาน และหอมกลิ่นข่า\n\n"
        "เครื่องปรุง: เนื้อไก่ 300 กรัม กะทิ 2 ถ้วย ข่าหั่นแว่น 10 แว่น ตะไคร้ 2 ต้น ใบมะกรูด 5 ใบ "
        "เห็ดฟาง น้ำปลา และน้ำมะนาว\n\n"
        "วิธีทำ: ตั้งกะทิให้เดือดอ่อน ๆ ใส่ข่า ตะไคร้ และใบมะกรูด แล้วใส่ไก่ต้มจนสุก ใส่เห็ด "
        "ปรุงรสด้วยน้ำปลา ปิดไฟแล้วจึงใส่น้ำมะนาว เพื่อไม่ให้กะทิแตกมัน\n"
    ),
}

# question, the file that answers it (None: nothing here does)
ANSWERABLE = [
    ("How many columns can an FTS5 table have?", "fts5-limits"),
    ("Does the unicode61 tokenizer split Chinese text into words?", "fts5-limits"),
    ("FTS5 的 trigram tokenizer 有什麼代價？", "fts5-limits"),
    ("高山烏龍茶要用幾度的水沖泡？", "oolong"),
    ("How long should the first infusion of high mountain oolong steep?", "oolong"),
    ("ต้มข่าไก่ใช้ข่ากี่แว่น", "tom-kha-gai"),
    ("How do you cook Thai chicken soup with galangal and coconut milk?", "tom-kha-gai"),
]
OFF_TOPIC = [
    "Who won the 2022 FIFA World Cup?",
    "明天台北會下雨嗎？",
    "誰贏得了2022年世界盃？",
    "ฟุตบอลโลก 2022 ทีมไหนได้แชมป์",
    "ราคาทองวันนี้เท่าไหร่",
    "What is the capital of Australia?",
]
# On a topic the notes cover, about something they do not say: retrieval may well pass these to
# the model (they are close in meaning), whose "I don't know" then opens the web door.
SAME_TOPIC_ABSENT = [
    "How do I back up a SQLite database while it is being written?",
    "紅茶的咖啡因比綠茶多嗎？",
    "How do I bake sourdough bread?",
]
