"""A Chinese question's words in English from CC-CEDICT: cut longest first, each word's senses its English
terms, and search that puts the right English page first among pages much like it, without a model; and
the dictionary read the other way, an English question's words in Chinese for a Chinese page."""

from __future__ import annotations

import gzip
import threading
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import pytest
import structlog

from knowledge.answer.assistant import Engine, EngineSettings
from knowledge.model.client import ModelClient
from knowledge.model.template import FALLBACK_TEMPLATE, ChatTemplate
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.glossary import OnDemand, held, load, parse
from knowledge.retrieval.search import Meaning, find, rank
from knowledge.retrieval.second import Second, UseEncoder
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import free_port
from tests.test_second import FULL_LEASE

SAMPLE = """# CC-CEDICT
# a few real entries
房租 房租 [fang2 zu1] /rent for a room or house/
押金 押金 [ya1 jin1] /deposit/down payment/
多少 多少 [duo1 shao3] /number/amount/somewhat/
多少 多少 [duo1 shao5] /how much?/how many?/
錢 钱 [Qian2] /surname Qian/
錢 钱 [qian2] /coin/money/CL:筆|笔[bi3]/unit of weight, one tenth of a tael 兩|两[liang3]/
寵物 宠物 [chong3 wu4] /house pet/
可以 可以 [ke3 yi3] /can/may/possible/able to/not bad/
網路 网路 [wang3 lu4] /network (computer, telecom)/Internet/Taiwanese term for 網絡|网络[wang3 luo4]/
金陵 金陵 [Jin1 ling2] /Jinling, old name for Nanjing 南京[Nan2 jing1]/
質數 质数 [zhi4 shu4] /prime number/
數字 数字 [shu4 zi4] /numeral/digit/number/figure/
號碼 号码 [hao4 ma3] /number/
"""

PAGES = [  # (file, title, what it says)
    (
        "dishwasher.md",
        "Dishwasher",
        "Clean the dishwasher filter once a month: twist it out, rinse it under the tap and put it back.",
    ),
    (
        "washer.md",
        "Washing machine",
        "Empty the washing machine's lint trap after every tenth wash and run a hot cycle with vinegar every three months.",
    ),
    (
        "fridge.md",
        "Refrigerator",
        "Defrost the freezer twice a year and vacuum the coils behind the refrigerator every spring.",
    ),
    (
        "oven.md",
        "Oven",
        "The oven's self-cleaning cycle takes three hours; remove the racks first and keep the kitchen aired.",
    ),
    (
        "boiler.md",
        "Boiler",
        "The boiler is serviced every autumn by a registered engineer; the pressure gauge should read between 1 and 1.5 bar.",
    ),
    (
        "aircon.md",
        "Air conditioner",
        "Wash the air conditioner's dust filters every two weeks in summer; replace them once a year.",
    ),
    (
        "vacuum.md",
        "Vacuum cleaner",
        "Empty the vacuum cleaner's bin after each use and wash its foam filter every month; let it dry for a day.",
    ),
    (
        "kettle.md",
        "Kettle",
        "Descale the kettle with lemon juice or citric acid when white scale builds up, about every six weeks.",
    ),
    (
        "smoke.md",
        "Smoke alarm",
        "Test the smoke alarm every month by pressing its button; change its battery every year.",
    ),
    (
        "car.md",
        "Car",
        "The car's oil is changed every 10,000 kilometres; the tyres are rotated at the same time.",
    ),
]
APPLIANCES = {name: f"# {title}\n\n{text}\n" for name, title, text in PAGES}
ASKED = {
    "吸塵器的濾網多久洗一次？": "Vacuum cleaner",  # e5 and the second opinion alone: the dishwasher's filter
    "洗碗機的濾網多久清一次？": "Dishwasher",
    "洗衣機的棉絮網多久清一次？": "Washing machine",
    "冷氣的濾網多久洗一次？": "Air conditioner",
    "冰箱多久要除霜？": "Refrigerator",
    "鍋爐的壓力應該是多少？": "Boiler",
    "煙霧偵測器的電池多久換一次？": "Smoke alarm",
    "汽車多久換一次機油？": "Car",
}


def test_a_question_is_cut_into_the_dictionarys_longest_words_in_either_script():
    words = parse(SAMPLE.splitlines())
    assert words.words("房租多少錢？") == ["房租", "多少", "錢"]
    assert words.words("房租多少钱？") == ["房租", "多少", "钱"]  # simplified as well
    assert words.words("我的房租") == ["房租"]  # characters it does not know are passed over
    assert words.words("How much is the rent?") == []


def test_a_words_senses_become_english_terms_without_surnames_measure_words_or_asides():
    words = parse(SAMPLE.splitlines())
    assert words.terms_of("錢") == ("coin", "monei", "unit", "weight", "on", "tenth", "tael")  # stemmed
    assert words.terms_of("多少") == ("number", "amount", "somewhat")  # "how much?" is all stopwords
    assert words.terms_of("不在") == ()
    assert words.terms_of("網路") == ("network", "internet")  # not "taiwanes", "term" or the pinyin "luo4"
    assert words.terms_of("金陵") == ("jinl", "old", "nanj")  # another entry's characters and pinyin out


def test_each_word_weighs_one_shared_among_its_terms():
    gloss = parse(SAMPLE.splitlines()).gloss("押金多少錢？")
    assert gloss["deposit"] == gloss["down"] == gloss["payment"] == pytest.approx(1 / 3)
    assert sum(gloss.values()) == pytest.approx(3.0)  # three words
    assert parse(SAMPLE.splitlines()).gloss("ค่าเช่าเดือนละเท่าไร") == {}
    assert parse(SAMPLE.splitlines()).gloss("房租はいくらですか") == {}  # Japanese: kanji mean otherwise


def test_an_english_questions_words_become_the_chinese_of_the_entries_that_have_them_as_a_sense():
    words = parse(SAMPLE.splitlines())
    assert words.chinese_gloss("How much is the deposit?") == {"押金": 1.0}  # "how much" asks
    # both forms of an entry share its weight: a passage is written in one of them
    assert words.chinese_gloss("Can I keep a house pet?") == {"寵物": 0.5, "宠物": 0.5}
    # a phrase before its words: "prime number" is 質數, not a prime and a number
    assert words.chinese_gloss("What is a prime number?") == {"質數": 0.5, "质数": 0.5}
    number = words.chinese_gloss("Which number?")  # three entries have it: 多少 as well, 錢 is one character
    assert sum(number.values()) == pytest.approx(1.0) and set(number) == {
        "多少",
        "數字",
        "数字",
        "號碼",
        "号码",
    }
    assert words.chinese_gloss("What is the rent?") == {}  # only "rent for a room or house": too long a sense
    pasted = "What about the " + "deposit " * 300 + "and the prime number?"  # a page pasted, not a question
    assert words.chinese_gloss(pasted) == {"押金": 160.0}  # its first 160 words
    assert set(words.gloss("押金" * 300 + "寵物")) == {"deposit", "down", "payment"}
    for other in (
        "押金多少錢？",
        "ค่ามัดจำเท่าไร",
        "Combien coûte le dépôt ?",
        "Tiền đặt cọc có thể trả lại không?",
    ):
        assert words.chinese_gloss(other) == {}, other


def test_the_gate_looks_for_the_words_that_name_what_is_asked_about(tmp_path):
    words = parse(SAMPLE.splitlines())
    deposit = ("deposit", "down", "payment")
    assert words.held_words("押金多少錢？") == (deposit,)  # 多少 asks; 錢 is one character among longer words
    assert words.held_words("可以養寵物嗎？") == (("hous", "pet"),)  # 可以 asks too
    assert words.held_words("錢？") == (
        words.terms_of("錢"),
    )  # a lone character when there is nothing longer
    assert words.held_words("多少？") == ()
    assert words.held_words("押金はいくらですか") == ()  # Japanese
    assert held((deposit, ("pet",)), {"the", "deposit", "is", "return"}) == 0.5
    assert held((), {"deposit"}) == 0.0
    sample = tmp_path / "cedict.txt.gz"
    sample.write_bytes(gzip.compress(SAMPLE.encode()))
    on_demand = OnDemand(sample)
    assert on_demand.senses("Can I keep a pet?") == () and on_demand.senses("可以養寵物嗎？") == (
        ("hous", "pet"),
    )
    unread = OnDemand(tmp_path / "nowhere.gz")
    with structlog.testing.capture_logs() as logs:  # Korean and Japanese questions never read the dictionary
        assert unread.senses("애완동물 키워도 돼요?") == unread.senses("ペットを飼ってもいいですか？") == ()
    assert logs == []


def test_the_packages_dictionary_is_read_and_a_broken_one_is_said_once(tmp_path):
    words = load()
    assert words is not None and "rent" in words.terms_of("房租")
    broken = tmp_path / "cedict.txt.gz"
    broken.write_bytes(gzip.compress(SAMPLE.encode())[:40])
    missing = OnDemand(tmp_path / "nowhere.gz")
    with structlog.testing.capture_logs() as logs:
        assert load(broken) is None
        assert missing.get() is None and missing.get() is None
    assert [e["event"] for e in logs] == ["glossary.unreadable", "glossary.unreadable"]


def test_searches_asking_at_once_read_the_dictionary_once():
    words = OnDemand()
    start = threading.Barrier(4)

    def get():
        start.wait()
        return words.get()

    with ThreadPoolExecutor(4) as pool:
        read = list(pool.map(lambda _: get(), range(4)))
    assert read[0] is not None and all(r is read[0] for r in read)


@pytest.fixture(scope="module")
def appliances(tmp_path_factory):
    """Ten English pages on looking after household machines, embedded by e5 and the second encoder."""
    settings = make_settings(tmp_path_factory.mktemp("glossary") / "kb")
    ingest_texts(settings, APPLIANCES)
    e5, second = LocalEmbedder(), Second(UseEncoder())
    with Index(settings.index_path) as index:
        assert embed_missing(index, e5, second=second) == len(APPLIANCES)
    return settings, e5, second


def test_a_chinese_question_finds_its_english_page_among_pages_much_like_it(appliances):
    settings, e5, second = appliances
    with Index(settings.index_path, readonly=True) as index:
        glossed, meaning_only = Meaning.of(e5, second=second), Meaning.of(e5, second=second, glossary=False)
        firsts = {q: find(index, q, k=3, meaning=glossed).results[0].title for q in ASKED}
        vacuum = find(index, "吸塵器的濾網多久洗一次？", k=3, meaning=meaning_only).results
    assert firsts == ASKED
    assert vacuum[0].title == "Dishwasher"  # what the gloss puts right


def test_a_question_in_english_ranks_exactly_as_without_the_glossary(appliances):
    settings, e5, second = appliances
    with Index(settings.index_path, readonly=True) as index:
        for question in (
            "How often is the vacuum filter washed?",
            "Wie oft wird der Staubsaugerfilter gewaschen?",
        ):
            glossed = find(index, question, k=5, meaning=Meaning.of(e5, second=second))
            plain = find(index, question, k=5, meaning=Meaning.of(e5, second=second, glossary=False))
            assert [(r.title, r.score) for r in glossed.results] == [
                (r.title, r.score) for r in plain.results
            ]


def test_before_any_vector_is_made_a_chinese_question_still_finds_english_pages_by_the_gloss(tmp_path):
    """Right after a large import the daemon is still making vectors: search is by words, and a Chinese
    question shares none with an English page; its gloss does."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, APPLIANCES)
    e5 = LocalEmbedder()
    with Index(settings.index_path, readonly=True) as index:
        glossed = find(index, "吸塵器的濾網多久洗一次？", k=3, meaning=Meaning.of(e5))
        plain = find(index, "吸塵器的濾網多久洗一次？", k=3, meaning=Meaning.of(e5, glossary=False))
        english = find(index, "How often is the vacuum filter washed?", k=3, meaning=Meaning.of(e5))
    assert glossed.verdict.basis == "words" and glossed.results[0].title == "Vacuum cleaner"
    assert plain.results == []
    assert english.results[0].title == "Vacuum cleaner"


ZH_APPLIANCES = {  # the same household machines, written in Chinese
    "dishwasher.md": "# 洗碗機\n\n洗碗機的濾網每個月清洗一次：轉出濾網，在水龍頭下沖洗後裝回。\n",
    "washer.md": "# 洗衣機\n\n每洗十次清一次洗衣機的棉絮網，每三個月用醋跑一次熱水行程。\n",
    "fridge.md": "# 冰箱\n\n冷凍庫一年除霜兩次，每年春天用吸塵器清理冰箱後面的散熱線圈。\n",
    "oven.md": "# 烤箱\n\n烤箱的自清行程需要三小時；先取出烤架，並保持廚房通風。\n",
    "boiler.md": "# 鍋爐\n\n鍋爐每年秋天由合格技師保養；壓力錶應在一到一點五巴之間。\n",
    "aircon.md": "# 冷氣機\n\n夏天每兩週清洗冷氣機的防塵濾網；每年更換一次。\n",
    "vacuum.md": "# 吸塵器\n\n每次使用後倒空吸塵器的集塵盒，每個月清洗海綿濾網；晾乾一天。\n",
    "kettle.md": "# 熱水壺\n\n白色水垢累積時，用檸檬汁或檸檬酸為熱水壺除垢，大約每六週一次。\n",
    "smoke.md": "# 煙霧警報器\n\n每個月按下按鈕測試煙霧警報器；每年更換電池。\n",
    "car.md": "# 汽車\n\n汽車每一萬公里換一次機油；輪胎同時對調。\n",
}
ASKED_IN_ENGLISH = {
    "How often is the sponge filter washed?": "吸塵器",  # without the gloss: the dishwasher's filter
    "How long does the sponge take to dry?": "吸塵器",  # without the gloss: the washing machine
    "How often is the engine oil changed?": "汽車",
    "When is the battery changed?": "煙霧警報器",
    "How often should I defrost?": "冰箱",
    "How often is lemon juice used?": "熱水壺",
    "How often is the faucet used to rinse the filter?": "洗碗機",
    "How often is vinegar used in a hot cycle?": "洗衣機",
    "How often is the dust screen replaced?": "冷氣機",
    "How long does the oven's self-cleaning cycle take?": "烤箱",
}


def embedded(home, texts):
    """A knowledge base of these texts, embedded by e5 and the second encoder: its settings and both."""
    settings = make_settings(home)
    ingest_texts(settings, texts)
    e5, second = LocalEmbedder(), Second(UseEncoder())
    with Index(settings.index_path) as index:
        embed_missing(index, e5, second=second)
    return settings, e5, second


def test_an_english_question_finds_its_chinese_page_among_pages_much_like_it(tmp_path):
    settings, e5, second = embedded(tmp_path / "kb", ZH_APPLIANCES)
    with Index(settings.index_path) as index:
        glossed, meaning_only = Meaning.of(e5, second=second), Meaning.of(e5, second=second, glossary=False)
        firsts = {q: find(index, q, k=3, meaning=glossed).results[0].title for q in ASKED_IN_ENGLISH}
        plain = [
            find(index, q, k=3, meaning=meaning_only).results[0].title for q in list(ASKED_IN_ENGLISH)[:2]
        ]
    assert firsts == ASKED_IN_ENGLISH
    assert plain == ["洗碗機", "洗衣機"]  # what the gloss puts right


def test_an_english_question_its_own_words_answer_in_english_leaves_the_chinese_pages_as_they_were(tmp_path):
    """The same pages kept in English and in Chinese: a question whose words found its English page is
    not glossed into Chinese, so the Chinese twin cannot come before the page in the owner's language."""
    twins = {**APPLIANCES, **{f"zh-{name}": text for name, text in ZH_APPLIANCES.items()}}
    settings, e5, second = embedded(tmp_path / "kb", twins)
    with Index(settings.index_path) as index:
        glossed, meaning_only = Meaning.of(e5, second=second), Meaning.of(e5, second=second, glossary=False)
        for question in (
            "How often should the dishwasher filter be cleaned?",
            "How do I descale the kettle?",
        ):
            ranked, plain = (rank(index, question, k=5, meaning=m) for m in (glossed, meaning_only))
            assert [(r.rowid, r.score) for r in ranked] == [(r.rowid, r.score) for r in plain], question
        sponge = rank(index, "Which one has a sponge?", k=5, meaning=glossed)
        unglossed = rank(index, "Which one has a sponge?", k=5, meaning=meaning_only)
    assert [r.score for r in sponge] != [r.score for r in unglossed]  # found by no page's words: glossed


@pytest.fixture(scope="module")
def lease(tmp_path_factory):
    """A newcomer's knowledge base: one English lease of two passages, embedded by e5 and the second encoder."""
    return embedded(tmp_path_factory.mktemp("lease") / "kb", {"lease.md": FULL_LEASE})


def test_in_a_newcomers_english_lease_a_chinese_question_it_answers_stays_local_by_its_gloss(lease):
    """e5 and the second encoder alone sent these questions to the web (the model, which would translate
    them, may be down); the words of their gloss are in the lease. Questions it does not answer still go
    to the web, and the passages keep their order."""
    settings, e5, second = lease
    with Index(settings.index_path, readonly=True) as index:
        glossed, plain = Meaning.of(e5, second=second), Meaning.of(e5, second=second, glossary=False)
        for question in ("可以養寵物嗎？", "水電費誰付？", "電費和網路費誰付？"):
            with_gloss, without = (find(index, question, k=3, meaning=m) for m in (glossed, plain))
            assert with_gloss.verdict.answerable and not without.verdict.answerable, question
            assert [r.chunk_id for r in with_gloss.results] == [r.chunk_id for r in without.results]
        for question in ("股票怎麼買？", "高鐵票多少錢？", "台北101有多高？", "今天天氣如何？"):
            assert not find(index, question, k=3, meaning=glossed).verdict.answerable, question


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (
            "可以養寵物嗎？",
            "Pets are allowed with the Landlord's written permission.",
        ),  # by its words' English
        ("ค่าเช่าเดือนละเท่าไร จ่ายวันไหน", "The monthly rent is 1,200 dollars."),  # by the second embedder
    ],
)
async def test_with_the_model_down_a_question_in_another_language_is_shown_the_sentence_that_answers_it(
    lease, question, answer
):
    """Not the lease's opening, which is all a question sharing no word with the page used to get."""
    settings, e5, second = lease
    async with aiohttp.ClientSession() as session:
        engine = Engine(
            lambda: Index(settings.index_path, readonly=True),
            ModelClient(session, f"http://127.0.0.1:{free_port()}/v1", timeout_s=5),
            ApproxCounter(),
            ChatTemplate(FALLBACK_TEMPLATE, {}),
            EngineSettings(),
            meaning=Meaning.of(e5, second=second),
        )
        reply = await engine.ask(question)
    assert reply.mode == "degraded" and reply.route.door == "local"
    assert answer in reply.text
    assert "This lease is made between" not in reply.text


OTHER_LEASES = {
    "uslovia.md": "# Условия аренды\n\nЗалог возвращается в течение тридцати дней после выезда.\n",
    "bail.md": "# Contrat de location\n\nLe dépôt de garantie est restitué dans un délai de trente jours.\n",
}


def test_a_chinese_questions_gloss_is_looked_for_in_english_passages_only(tmp_path):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, {"lease.md": FULL_LEASE, **OTHER_LEASES})
    e5, second = LocalEmbedder(), Second(UseEncoder())
    with Index(settings.index_path) as index:
        embed_missing(index, e5, second=second)
        ranked = rank(index, "押金什麼時候退還？", k=5, meaning=Meaning.of(e5, second=second))
        chunks = index.chunks_by_rowid(r.rowid for r in ranked)
        glosses: dict[str, list[float | None]] = {}
        for r in ranked:
            glosses.setdefault(chunks[r.rowid][1].title, []).append(r.evidence.gloss)
    # the gloss is English: looked for in the lease (押金 deposit, 退還 return), not in the Russian or the
    # French page, which hold none of it and would otherwise lose by it
    assert max(glosses["Residential Lease Agreement"]) == 1.0
    assert glosses["Условия аренды"] == glosses["Contrat de location"] == [None]
