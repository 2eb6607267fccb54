"""Notes from the chat: Telegram text + entities as CommonMark, note files, links with a comment."""

from datetime import UTC, datetime

import pytest

from knowledge.convert.text import text_to_markdown
from knowledge.ingest.note import (
    Entity,
    Origin,
    Piece,
    album_pdf,
    escape,
    link_and_comment,
    note_file,
    to_markdown,
)

WHEN = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
CHANNEL = Origin("channel", "Team News", WHEN, "teamnews", 42)


@pytest.mark.parametrize(
    ("text", "entities", "markdown"),
    [
        ("plain words", [], "plain words"),
        ("bold move", [Entity("bold", 0, 4)], "**bold** move"),
        ("an italic word", [Entity("italic", 3, 6)], "an *italic* word"),
        (
            "see the plan",
            [Entity("text_link", 4, 8, url="https://x.example/p")],
            "see [the plan](https://x.example/p)",
        ),
        ("go https://x.example/a_b now", [Entity("url", 3, 21)], "go <https://x.example/a_b> now"),
        ("run ls -la here", [Entity("code", 4, 6)], "run `ls -la` here"),
        ("x\nprint(1)\ny", [Entity("pre", 2, 8, language="python")], "x\n\n```python\nprint(1)\n```\n\ny"),
        ("strike", [Entity("strikethrough", 0, 6)], "~~strike~~"),
        (
            "bold and link",
            [Entity("bold", 0, 13), Entity("text_link", 9, 4, url="https://l.example")],
            "**bold and [link](https://l.example)**",
        ),
        ("quote", [Entity("blockquote", 0, 5)], "\n> quote\n"),
        ("hi @alice #tag", [Entity("mention", 3, 6), Entity("hashtag", 10, 4)], "hi @alice \\#tag"),
        ("bold ", [Entity("bold", 0, 5)], "**bold** "),
        # UTF-16: an emoji is two code units, so the bold word starts at offset 3, not 2.
        ("😀 ok", [Entity("bold", 3, 2)], "😀 **ok**"),
        ("👍🏽 ไทย", [Entity("italic", 5, 3)], "👍🏽 *ไทย*"),
        ("a *b* [c] <d> _e_", [], "a \\*b\\* \\[c\\] \\<d\\> \\_e\\_"),
        ("@team_news and snake_case_name", [], "@team_news and snake_case_name"),  # no emphasis inside a word
        (
            "# not a heading\n- not a list\n1. not a number",
            [],
            "\\# not a heading\n\\- not a list\n1\\. not a number",
        ),
        (
            "link",
            [Entity("text_link", 0, 4, url="https://x.example/a b(c)")],
            "[link](<https://x.example/a b(c)>)",
        ),
        ("cut", [Entity("bold", 0, 99)], "cut"),  # an entity past the end is ignored
    ],
)
def test_entities_become_commonmark(text, entities, markdown):
    assert to_markdown(text, entities) == markdown


def test_escape_keeps_ordinary_punctuation():
    assert escape("Q&A: 3 > 2, isn't it?") == "Q&A: 3 \\> 2, isn't it?"
    assert escape("&amp;") == "\\&amp;"


def test_a_channel_forward_note_has_its_origin_link_and_date():
    note = note_file(
        [Piece("Meeting moved to Friday\nSee you", (Entity("bold", 17, 6),), CHANNEL)], kind="forward"
    )
    text = note.data.decode()
    assert note.title == "Meeting moved to Friday"
    assert note.name == "forward-meeting-moved-to-friday.md"
    assert text.startswith('---\ntitle: "Meeting moved to Friday"\nkind: "forward"\norigin_type: "channel"\n')
    assert 'origin_name: "Team News (@teamnews)"' in text and 'origin_date: "2024-05-01T10:00:00Z"' in text
    assert 'source_url: "https://t.me/teamnews/42"' in text
    assert "Meeting moved to **Friday**\nSee you" in text
    assert "— forwarded from Team News (@teamnews), 2024-05-01 10:00 UTC · <https://t.me/teamnews/42>" in text
    assert note.sidecar == {
        "origin_type": "channel",
        "origin_name": "Team News (@teamnews)",
        "origin_date": "2024-05-01T10:00:00Z",
        "source_url": "https://t.me/teamnews/42",
    }
    # The pipeline's Markdown converter takes the title from the front matter and drops the rest.
    converted = text_to_markdown(note.data, markdown=True)
    assert converted.title == "Meeting moved to Friday" and converted.markdown.startswith("Meeting moved")


def test_the_same_forward_gives_the_same_bytes_and_a_typed_note_has_no_date():
    piece = Piece("Same words", (), Origin("user", "Alice", WHEN, "alice"))
    assert note_file([piece], kind="forward").data == note_file([piece], kind="forward").data
    typed = note_file([Piece("Buy milk")], kind="note")
    assert typed.data == b'---\ntitle: "Buy milk"\nkind: "note"\n---\n\nBuy milk\n' and typed.sidecar == {}


def test_origins_of_every_kind():
    assert Origin("user", "Alice", WHEN, "alice").link is None
    assert Origin("hidden_user", "Bob", WHEN).label == "Bob (hidden account)"
    assert Origin("chat", "Club", WHEN, "club", 5).link == "https://t.me/club/5"
    assert Origin("channel", "Private", WHEN, None, 5).link is None  # no username: no public link


def test_several_forwards_are_one_note():
    pieces = [Piece("one", (), CHANNEL), Piece("two", (), Origin("user", "Alice", WHEN)),
              Piece("heard this", (), Origin("hidden_user", "Bob", WHEN), kind="voice", seconds=4)]  # fmt: skip
    note = note_file(pieces, kind="forward")
    text = note.data.decode()
    assert text.count("* * *") == 2 and note.title == "one"
    assert 'origin_type: "channel, user, hidden_user"' in text
    assert "— voice note (4 s) forwarded from Bob (hidden account), 2024-05-01 10:00 UTC" in text


def test_the_provenance_line_in_the_owners_words_and_time_zone():
    from zoneinfo import ZoneInfo

    from knowledge.ingest.note import Footer, provenance

    chinese = Footer("轉寄自 {name}", "語音訊息", "（{n} 秒）", "{line}，{when}", ZoneInfo("Asia/Taipei"))
    voice = Piece("heard this", (), Origin("hidden_user", "Bob", WHEN), kind="voice", seconds=4)
    assert (
        provenance(voice, chinese)
        == "— 語音訊息（4 秒）轉寄自 Bob (hidden account)，2024-05-01 18:00 Asia/Taipei"
    )
    assert provenance(Piece("x", (), CHANNEL), chinese).endswith(
        "，2024-05-01 18:00 Asia/Taipei · <https://t.me/teamnews/42>"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://x.example/a", None),  # a bare link: imported as before
        ("https://x.example/a great read on tides", ("https://x.example/a", "great read on tides")),
        ("Great read: https://x.example/a", ("https://x.example/a", "Great read")),
        ("what does https://x.example/a say?", None),  # a question about it
        ("is https://x.example/a any good?", None),
        ("https://x.example/a https://y.example/b", None),
        ("read https://x.example/a and tell me more", None),  # a link in the middle of a sentence
    ],
)
def test_a_link_with_a_comment(text, expected):
    assert link_and_comment(text) == expected


def test_an_album_is_one_pdf_with_a_page_per_photo_and_the_same_bytes_each_time():
    import io

    from PIL import Image
    from pypdf import PdfReader

    photos = []
    for colour in ("white", "red", "blue"):
        out = io.BytesIO()
        Image.new("RGB", (120, 80), colour).save(out, "JPEG")
        photos.append(out.getvalue())
    pdf = album_pdf(photos, title="Holiday", when=WHEN)
    assert pdf == album_pdf(photos, title="Holiday", when=WHEN)
    reader = PdfReader(io.BytesIO(pdf))
    assert len(reader.pages) == 3 and reader.metadata.title == "Holiday"


def test_a_title_is_the_first_line_with_words_not_a_rule_or_a_fence():
    note = note_file([Piece("---\n***\ntitle: pwned\n---\nhello", ())], kind="forward")
    assert note.title == "title: pwned"
    assert note.data.decode().startswith('---\ntitle: "title: pwned"\n')
    body = note.data.decode().split("\n---\n", 1)[1]  # after kb's own front matter
    assert body == "\n\\---\n\\*\\*\\*\ntitle: pwned\n\\---\nhello\n"  # the forward's fences are text
