"""A note's front matter is metadata: its title, aliases, description and tags are read, the block never
becomes text, and hostile blocks are ignored with a reason while the body is kept."""

import time

import pytest

from knowledge.convert.frontmatter import (
    FRONT_MATTER_MAX_CHARS,
    FrontMatter,
    read_front_matter,
    split_front_matter,
)
from knowledge.convert.text import text_to_markdown

BODY = "# Lease\n\nThe deposit is two months of rent.\n"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("title: Lease", FrontMatter(title="Lease")),
        ("title: 2024", FrontMatter(title="2024")),  # a number is taken as written
        ("title: 2024-03-01", FrontMatter(title="2024-03-01")),  # so is a date
        ('aliases: [押金合約, "Xinyi flat"]', FrontMatter(aliases=("押金合約", "Xinyi flat"))),
        ("alias: Flat, Xinyi flat", FrontMatter(aliases=("Flat", "Xinyi flat"))),  # one text, commas between
        ("aliases:\n  - สัญญาเช่า\n  - สัญญาเช่า", FrontMatter(aliases=("สัญญาเช่า",))),  # each once
        ("description: The flat's   contract", FrontMatter(description="The flat's contract")),
        ("tags: [home, '#rent', home/bills]", FrontMatter(tags=("home", "rent", "home/bills"))),
        ("tags: home, rent", FrontMatter(tags=("home", "rent"))),
        ("tags: '#home #rent'", FrontMatter(tags=("home", "rent"))),
        ("tags:\n  - 押金\n  - บ้าน\n  - 押金", FrontMatter(tags=("押金", "บ้าน"))),
        ("tags: [Rent, rent, RENT]", FrontMatter(tags=("Rent",))),  # one tag, however it is spelled
        # what is not kept: plugins' keys, a CSS class; the block is metadata all the same
        ("cssclasses: [wide]\nkanban-plugin: basic", FrontMatter()),
        # dates are: as ISO 8601 text, a date or a date and time, 'modified' read as 'updated'
        (
            "created: 2024-03-01\ncssclasses: [wide]\nkanban-plugin: basic",
            FrontMatter(dates=(("created", "2024-03-01"),)),
        ),
        (
            "date: 2024-03-01\nupdated: 2024-03-05 18:20\ncreated: '2024-03-01T09:00:30+08:00'",
            FrontMatter(
                dates=(
                    ("date", "2024-03-01"),
                    ("created", "2024-03-01T09:00:30+08:00"),
                    ("updated", "2024-03-05T18:20"),
                )
            ),
        ),
        ("modified: 2024-03-05T18:20:00Z", FrontMatter(dates=(("updated", "2024-03-05T18:20+00:00"),))),
        (
            "modified: 2024-03-05\nupdated: 2024-04-01",
            FrontMatter(dates=(("updated", "2024-04-01"),)),
        ),  # updated first
        ("", FrontMatter()),
    ],
)
def test_the_kept_keys_of_a_block(block, expected):
    assert read_front_matter(block) == expected


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("block", "problems", "kept"),
    [
        ("just a sentence someone wrote", ("not-a-mapping",), FrontMatter()),
        ("- a\n- list", ("not-a-mapping",), FrontMatter()),
        ("title: [unclosed", ("not-yaml",), FrontMatter()),
        ("title: !!python/object/apply:os.system [echo hi]", ("not-yaml",), FrontMatter()),
        ("x: " + "[" * 20_000, ("not-yaml",), FrontMatter()),  # nesting libyaml refuses
        ("title: " + "x" * FRONT_MATTER_MAX_CHARS, ("too-large",), FrontMatter()),
        (BOMB + "tags: *i\ntitle: Bomb", ("tags-not-text",), FrontMatter(title="Bomb")),
        (BOMB + "aliases: *i", ("aliases-not-text",), FrontMatter()),
        ("tags: [home, 3, {a: b}, [x]]\ntitle: Kept", ("tags-not-text",), FrontMatter(title="Kept", tags=("home",))),
        ("tags: [home, 'two words', '#1990']", ("tag-invalid",), FrontMatter(tags=("home",))),
        ("tags: 12\ndescription: [a, b]\ntitle: {a: 1}", ("tags-not-text", "title-not-text", "description-not-text"),
         FrontMatter()),
        ("tags: true", ("tags-not-text",), FrontMatter()),
        # a date kb cannot read is that key's problem, never the whole block's
        ("title: Kept\ncreated: 2024-13-01\nupdated: last Tuesday\ndate: [2024]",
         ("created-not-a-date", "updated-not-a-date", "date-not-a-date"), FrontMatter(title="Kept")),
        ("created: 20240301\nupdated: " + "2024-03-01" * 10, ("created-not-a-date", "updated-not-a-date"), FrontMatter()),
    ],
)  # fmt: skip
def test_a_hostile_block_is_ignored_with_its_reasons(block, problems, kept):
    started = time.process_time()
    got = read_front_matter(block)
    assert time.process_time() - started < 1.0
    assert set(got.problems) == set(problems)
    assert got == FrontMatter(kept.title, kept.aliases, kept.description, kept.tags, got.problems)


@pytest.mark.parametrize(
    "block",
    [
        "title: Lease\ntags: [home]",
        "just a sentence",
        "title: [unclosed",
        BOMB,
        "x" * (FRONT_MATTER_MAX_CHARS + 1),
        "",
    ],
)
def test_the_block_is_never_text_whatever_it_holds(block):
    converted = text_to_markdown(f"---\n{block}\n---\n\n{BODY}".encode(), markdown=True)
    assert converted.markdown == BODY
    assert "title:" not in converted.markdown and "lol" not in converted.markdown


def test_a_note_gives_its_title_aliases_description_and_tags():
    text = (
        "---\ntitle: Apartment lease\naliases: [押金合約]\ndescription: The flat in Xinyi\ntags: [home]\n"
        "created: 2024-03-01\n---\n" + BODY
    )
    got = text_to_markdown(text.encode(), markdown=True)
    assert (got.title, got.aliases, got.description, got.tags) == (
        "Apartment lease",
        ("押金合約",),
        "The flat in Xinyi",
        ("home",),
    )
    assert got.markdown == BODY and got.front_matter_problems == ()
    assert got.dates == (("created", "2024-03-01"),)
    no_title = text_to_markdown(b"---\ntags: [home]\n---\n" + BODY.encode(), markdown=True)
    assert no_title.title == "Lease"  # the heading, as before
    hostile = text_to_markdown(b"---\n- a list\n---\n" + BODY.encode(), markdown=True)
    assert hostile.title == "Lease" and hostile.front_matter_problems == ("not-a-mapping",)


def test_a_plain_text_file_has_no_front_matter():
    text = "---\ntitle: Not metadata\n---\nA text file keeps every line.\n"
    got = text_to_markdown(text.encode(), markdown=False)
    assert got.markdown == text and got.tags == () and got.aliases == ()


def test_a_block_that_never_closes_is_text():
    front, body = split_front_matter("---\ntitle: x\nno closing line\n")
    assert front is None and body.startswith("---\ntitle: x")
