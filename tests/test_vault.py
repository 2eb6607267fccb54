"""A note's text as it reads: Obsidian's links as their visible text, embeds as their names, inline #tags
in any script (never in code, headings or URLs), and the link targets; every line keeps its number."""

import pytest

from knowledge.convert.vault import read_note
from knowledge.text import tag_key, tag_name


@pytest.mark.parametrize(
    ("line", "reads", "links"),
    [
        ("See [[Landlord]].", "See Landlord.", ("Landlord",)),
        ("Paid to [[Landlord|Mr Chen]].", "Paid to Mr Chen.", ("Landlord",)),
        ("Paid to [[Bank#Account]].", "Paid to Bank > Account.", ("Bank",)),
        ("Paid to [[Bank#Account|the account]].", "Paid to the account.", ("Bank",)),
        ("Above: [[#Deposit]].", "Above: Deposit.", ()),
        ("As said in [[Minutes^c7f2a1]] and [[Minutes#^c7f2a1]].", "As said in Minutes and Minutes.", ("Minutes",)),
        ("![[scan.png]] and ![[scan.png|300]]", "scan.png and scan.png", ("scan.png",)),
        ("![[Recipes/Bread]]", "Recipes/Bread", ("Recipes/Bread",)),
        ("| [[Landlord\\|Mr Chen]] |", "| Mr Chen |", ("Landlord",)),  # a table escapes the bar
        ("合約見[[押金合約|合約]]。", "合約見合約。", ("押金合約",)),
        ("`[[not a link]]` but [[Real]]", "`[[not a link]]` but Real", ("Real",)),
        ("[[]] and [[ ]] stay", "[[]] and [[ ]] stay", ()),
    ],
)  # fmt: skip
def test_links_read_as_their_visible_text(line, reads, links):
    got = read_note([line])
    assert got.lines == [reads] and got.links == links


@pytest.mark.parametrize(
    ("line", "tags"),
    [
        ("#home and #rent", ("home", "rent")),
        ("押金 #押金 บ้าน #บ้าน", ("押金", "บ้าน")),  # a Thai tone mark is part of the tag
        ("#home/rent, #Home", ("home/rent", "Home")),
        ("#tag at the start of a line", ("tag",)),
        ("# A heading", ()),
        ("## Another #heading", ("heading",)),
        ("http://example.com/page#part and page.md#part", ()),  # a URL's fragment is no tag
        ("&#38; and C# and x#y", ()),  # nor an entity, a language's name, a word's middle
        ("#1 and #2024", ()),  # a tag has a letter
        ("`#code` and ``#more code``", ()),
        ("text `code` #after", ("after",)),
        ("[[Note#Heading]] [[#Heading]]", ()),
        ("#done. #next!", ("done", "next")),
        ("one #rent, two #RENT", ("rent",)),
    ],
)
def test_inline_tags(line, tags):
    assert read_note([line]).tags == tags


def test_fenced_code_is_read_as_written_and_holds_no_tags_or_links():
    lines = ["# Note", "", "```python", "x = 1  # [[not]] #not", "```", "~~~", "#not", "~~~", "#yes [[Yes]]"]
    got = read_note(lines)
    assert got.lines == [*lines[:-1], "#yes Yes"]
    assert got.tags == ("yes",) and got.links == ("Yes",)


def test_every_line_keeps_its_number():
    lines = ["# Lease", "", "See [[A|a]] and [[B]].", "```", "[[C]]", "```", "", "#tag [[D#x]]", ""]
    got = read_note(lines)
    assert len(got.lines) == len(lines)
    assert [n for n, line in enumerate(got.lines) if line != lines[n]] == [2, 7]


@pytest.mark.parametrize(
    ("text", "name", "key"),
    [
        ("#押金", "押金", "押金"),
        ("Rent", "Rent", "rent"),
        ("#Home/Rent/", "Home/Rent", "home/rent"),
        ("ＡＢＣ", "ＡＢＣ", "abc"),  # full-width letters fold to the same key
        ("#1990", None, "1990"),
        ("two words", None, "two words"),
        ("", None, ""),
    ],
)
def test_a_tag_and_its_key(text, name, key):
    assert tag_name(text) == name and tag_key(text) == key
