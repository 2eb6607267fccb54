"""A passage deep in a long article is found by the article's subject, which its own words do not repeat."""

import pytest

from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings


def _article(title: str, opening: str, filler: str, passage: str) -> str:
    lines = [f"{filler} {n}." for n in range(60)]
    return "\n\n".join([f"# {title}", opening, *lines[:30], passage, *lines[30:]]) + "\n"


DOCS = {
    "nitrogen.md": _article(
        "Nitrogen",
        "Nitrogen is the chemical element with symbol N. Nitrogen makes up most of the air. Nitrogen is in every protein.",
        "Fertiliser plants feed farms with ammonia, year after year, line",
        "The gas was first isolated in 1772 by Daniel Rutherford, who called it noxious air.",
    ),
    "oxygen.md": _article(
        "Oxygen",
        "Oxygen is the chemical element with symbol O. Oxygen is made by plants. Oxygen is needed to breathe.",
        "Hospitals keep tanks for patients in wards, day after day, bed",
        "The gas was first isolated in 1773 by Carl Wilhelm Scheele, in Uppsala.",
    ),
    "氮.md": _article(
        "氮氣",
        "氮氣是空氣的主要成分。氮氣無色無味。氮氣在蛋白質中也有。",
        "化肥工廠每年為農田生產氨，第",
        "這種氣體在一七七二年由拉塞福首次分離出來，他稱之為有毒空氣。",
    ),
    "氧.md": _article(
        "氧氣",
        "氧氣是呼吸所需的氣體。氧氣由植物產生。氧氣可以助燃。",
        "醫院每天為病房裡的病人準備氣瓶，第",
        "這種氣體在一七七三年由舍勒在烏普薩拉首次分離出來。",
    ),
    "ไนโตรเจน.md": _article(
        "ไนโตรเจน",
        "ไนโตรเจนเป็นธาตุเคมีที่มีสัญลักษณ์ N ไนโตรเจนเป็นส่วนใหญ่ของอากาศ ไนโตรเจนอยู่ในโปรตีนทุกชนิด",
        "โรงงานปุ๋ยผลิตแอมโมเนียให้ไร่นาทุกปี ลำดับที่",
        "ก๊าซนี้ถูกแยกออกมาได้เป็นครั้งแรกในปี 1772 โดยแดเนียล รัทเทอร์ฟอร์ด",
    ),
    "ออกซิเจน.md": _article(
        "ออกซิเจน",
        "ออกซิเจนเป็นก๊าซที่ใช้หายใจ ออกซิเจนผลิตโดยพืช ออกซิเจนช่วยให้ไฟติด",
        "โรงพยาบาลเตรียมถังก๊าซให้ผู้ป่วยในหอผู้ป่วยทุกวัน เตียงที่",
        "ก๊าซนี้ถูกแยกออกมาได้เป็นครั้งแรกในปี 1773 โดยคาร์ล เชเลอ ที่อุปซอลา",
    ),
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("titles") / "kb")
    ingest_texts(settings, DOCS)
    with Index(settings.index_path) as index:
        yield index


@pytest.mark.parametrize(
    ("question", "source", "says"),
    [
        ("Who first isolated nitrogen?", "nitrogen.md", "Rutherford"),
        ("Who first isolated oxygen?", "oxygen.md", "Scheele"),
        ("氮氣是誰首次分離出來的？", "氮.md", "拉塞福"),
        ("氧氣是誰首次分離出來的？", "氧.md", "舍勒"),
        ("ใครแยกไนโตรเจนออกมาได้เป็นครั้งแรก", "ไนโตรเจน.md", "รัทเทอร์ฟอร์ด"),
        ("ใครแยกออกซิเจนออกมาได้เป็นครั้งแรก", "ออกซิเจน.md", "เชเลอ"),
    ],
)
def test_a_question_naming_the_subject_finds_the_passage_deep_in_its_article(index, question, source, says):
    results = search(index, question, k=3)
    assert results[0].source_name == source and says in results[0].text, [
        (r.source_name, r.text[:60]) for r in results
    ]
    assert not results[0].chunk_id.endswith("-chunk-0001")


def test_a_title_cut_from_a_first_line_is_not_read_before_the_later_chunks(tmp_path):
    settings = make_settings(tmp_path / "kb")
    opening = "Groceries for the cabin trip and the fuel for the generator"
    lines = "\n\n".join(f"Packed a bag {n}." for n in range(60))
    ingest_texts(
        settings,
        {
            "trip.txt": f"{opening}\n\n{lines}\n",
            "tent.md": _article("Tent", "A tent is a shelter.", "Pitched it by the lake", "Blue."),
            "stove.md": f"---\ntitle: Camping stove\n---\nIt burns gas.\n\n{lines}\n",
        },
    )
    with Index(settings.index_path) as index:
        docs = {d.source_name: d for d in index.documents()}
        assert [docs[n].title for n in ("trip.txt", "tent.md", "stove.md")] == [
            opening,
            "Tent",
            "Camping stove",
        ]
        first = dict(index.conn.execute("SELECT id, rowid FROM chunks WHERE seq = 1"))
        tent_1, stove_1 = (
            index.bodies([first[f"{docs[n].id}-chunk-0001"]]).popitem()[1] for n in ("tent.md", "stove.md")
        )
        assert tent_1.startswith("tent | a tent is a shelter")  # under its heading, once
        assert stove_1.startswith("camp stove | it burn ga")  # its front matter's title, before its words
        rowid = dict(index.conn.execute("SELECT id, rowid FROM chunks WHERE seq = 2"))
        later = index.bodies(rowid[f"{d.id}-chunk-0002"] for d in docs.values())
        trip, tent, stove = (
            later[rowid[f"{docs[n].id}-chunk-0002"]] for n in ("trip.txt", "tent.md", "stove.md")
        )
        assert "cabin" not in trip and "generat" not in trip
        assert tent.startswith("tent | ") and stove.startswith("camp stove | ")


@pytest.mark.parametrize(
    ("title", "opening", "named"),
    [
        ("Nitrogen", "# Nitrogen\n\nNitrogen is", True),
        ("Lease", "Rent is due on the fifth.\n", True),  # front matter, a page's or a PDF's own title
        ("Rent is due on the fifth.", "Rent is due on the fifth.\n\nPay by transfer.", False),
        (
            "The Panthers finished the regular season with…",
            "The Panthers finished the regular season with a 15–1 record",
            False,
        ),
        ("房租每月一萬元", "\n房租每月一萬元，五號前繳。\n", False),
        ("ค่าเช่า", "## ค่าเช่า\nจ่ายทุกเดือน", True),
    ],
)
def test_a_title_names_its_subject_unless_it_is_the_first_line_cut_short(title, opening, named):
    from knowledge.store.index import names_subject

    assert names_subject(title, opening) is named
