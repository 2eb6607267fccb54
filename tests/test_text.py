"""The text and Markdown converter: titles from front matter or the first heading, in linear time."""

import pytest

from knowledge.convert.text import heading_text, text_to_markdown


@pytest.mark.parametrize(
    ("source", "title"),
    [
        ("# Title\n\nbody\n", "Title"),
        ("## Closed heading ##\n\nbody\n", "Closed heading"),
        ("# C#\n\nbody\n", "C#"),
        ("#    spaced out   \n\nbody\n", "spaced out"),
        ("intro line\n\n### Third level\n", "Third level"),
        ("---\ntitle:   'Front'  \n---\n\n# Heading\n", "Front"),
        ("#not a heading\n\nfirst line\n", ""),  # a note without a heading: named by its file (below)
    ],
)
def test_titles(source, title):
    assert text_to_markdown(source.encode(), markdown=True).title == title


def test_a_note_without_a_heading_is_named_by_its_file_and_a_text_file_by_its_first_line():
    from knowledge.convert import convert_source
    from knowledge.convert.base import Limits

    note = b"Water the lawn on Tuesdays and Saturdays before 8 am. #water/lawn\n"
    assert convert_source(note, name="Watering schedule.md", limits=Limits()).title == "Watering schedule"
    assert convert_source(note, name="watering.txt", limits=Limits()).title.startswith(
        "Water the lawn on Tuesdays"
    )


def test_heading_text_keeps_a_hash_that_is_part_of_the_word():
    assert heading_text("F# ##") == "F#" and heading_text("###") == "###"


HOSTILE_MARKDOWN = [
    "# " + " " * 100_000 + "x",  # spaces a cubic heading pattern backtracks through
    "#" + " #" * 50_000 + "\x00",
    "# a" + " " * 50_000 + "#" * 50_000 + " b",
    "---\ntitle:" + " " * 100_000 + "\n---\n",
    ("# " + " \t" * 750 + "\n") * 60,  # 1.5 KB lines, many of them
]


@pytest.mark.parametrize("line", HOSTILE_MARKDOWN)
def test_hostile_markdown_converts_in_linear_time(line):
    """Its seconds (linear: milliseconds) are measured by bench/hostile_inputs.py."""
    converted = text_to_markdown(("intro\n" + line + "\nend\n").encode(), markdown=True)
    assert converted.markdown.startswith("intro\n") and converted.markdown.endswith("\nend\n")
