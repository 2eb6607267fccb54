"""keep_chosen: kb's Markdown lines kept where trafilatura's chosen text has their words."""

import pytest

from knowledge.convert.content import coverage, keep_chosen

PAGE = """Home | Recipes | Shop

# How to brew coffee

Good coffee starts with fresh beans and clean water.

## What you need

- Beans, 15 g
- Water, 250 ml

| Step | Time |
|---|---|
| Bloom | 30 s |

> Coffee is a language in itself.
>
> — Jackie Chan

[Tweet this](https://twitter.com/share)

Related: Tea is fine too
"""


@pytest.mark.parametrize(
    ("chosen", "kept"),
    [
        (  # headings come with the content they introduce, lists item by item, tables and quotes whole
            "Good coffee starts with fresh beans and clean water.\nBeans, 15 g\nWater, 250 ml\n"
            "Step | Time\nBloom | 30 s\nCoffee is a language in itself. — Jackie Chan",
            "# How to brew coffee\n\nGood coffee starts with fresh beans and clean water.\n\n## What you need\n\n"
            "- Beans, 15 g\n- Water, 250 ml\n\n| Step | Time |\n|---|---|\n| Bloom | 30 s |\n\n"
            "> Coffee is a language in itself.\n>\n> — Jackie Chan\n",
        ),
        (  # spacing differs between the two renderings: words still match
            "Good coffee starts with fresh beans and clean water .",
            "# How to brew coffee\n\nGood coffee starts with fresh beans and clean water.\n",
        ),
        ("Nothing of this page.", ""),
    ],
    ids=["structure", "spacing", "nothing"],
)
def test_keep_chosen(chosen, kept):
    assert keep_chosen(PAGE, chosen) == kept


def test_a_short_line_is_kept_only_right_after_kept_text():
    markdown = "Share\n\nThe article body is long enough to be matched on its own.\n\nShare\n"
    assert keep_chosen(
        markdown, "The article body is long enough to be matched on its own. Shareholders"
    ) == ("The article body is long enough to be matched on its own.\n\nShare\n")


def test_coverage_counts_the_chosen_text_kb_holds():
    assert coverage("# Title\n\nhalf of it\n", "halfofit Titlexxxxxxx") == pytest.approx(13 / 20)
