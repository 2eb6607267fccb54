"""bot/markdown.py: model-written Markdown as Telegram HTML blocks that Telegram's parser accepts."""

import random

import pytest

from bot.markdown import BLOCK_UNITS, markdown_blocks
from bot.pages import MAX_TEXT, split_blocks
from tests.fake_telegram import parse_html


def visible(blocks: list[str]) -> str:
    """What Telegram shows for the blocks joined as one message (raises where Telegram would refuse)."""
    return parse_html("\n\n".join(blocks), strict_ampersand=True)[0]


# --------------------------------------------------------------------------------------------
# Tables of inputs and the HTML they give

LISTS = [
    ("- one\n- two", ["• one\n• two"]),
    ("- **Point**: text\n- **Other**: more", ["• <b>Point</b>: text\n• <b>Other</b>: more"]),
    ("- a\n  - b\n    - c\n- d", ["• a\n  ◦ b\n    ▪ c\n• d"]),
    ("1. first\n2. second", ["1. first\n2. second"]),
    ("3. third\n4. fourth", ["3. third\n4. fourth"]),
    ("1. a\n   - b\n   - c\n2. d", ["1. a\n  ◦ b\n  ◦ c\n2. d"]),
    ("- a\n\n  second paragraph\n  goes on\n- b", ["• a\n  second paragraph\n  goes on\n• b"]),
    ("- item\n  ```py\n  x = 1\n  ```", ['• item\n<pre><code class="language-py">x = 1</code></pre>']),
    ("- a\n-\n- c", ["• a\n•\n• c"]),
    ("Intro:\n\n- a\n- b\n\nAfter.", ["Intro:", "• a\n• b", "After."]),
]

INLINE = [
    ("*In short:* it works.", ["<i>In short:</i> it works."]),
    ("**bold** and *it* and _it_ and ~~gone~~", ["<b>bold</b> and <i>it</i> and <i>it</i> and <s>gone</s>"]),
    ("***both***", ["<i><b>both</b></i>"]),
    ("~~strike **b**~~", ["<s>strike <b>b</b></s>"]),
    ("use `a < b && c` now", ["use <code>a &lt; b &amp;&amp; c</code> now"]),
    # Telegram has no code inside bold: the bold is closed around it
    ("**bold `code` bold**", ["<b>bold </b><code>code</code><b> bold</b>"]),
    ("line one\nline two", ["line one\nline two"]),
    ("hard  \nbreak", ["hard\nbreak"]),
    ("one\n\ntwo", ["one", "two"]),
    ("\\*not em\\*", ["*not em*"]),
]

CODE = [
    ("```python\nx = 1\nprint(x)\n```", ['<pre><code class="language-python">x = 1\nprint(x)</code></pre>']),
    ("```\nplain\n```", ["<pre>plain</pre>"]),
    ("```c++\nint x;\n```", ['<pre><code class="language-c++">int x;</code></pre>']),
    ("```c#\nvar x;\n```", ['<pre><code class="language-c#">var x;</code></pre>']),
    ("```python title=x\nx\n```", ['<pre><code class="language-python">x</code></pre>']),
    ('```"><script>alert(1)</script>\nx\n```', ["<pre>x</pre>"]),
    ('```py"onmouseover="x\nx\n```', ["<pre>x</pre>"]),
    (
        "```py\n</pre><b>&amp;\n```",
        ['<pre><code class="language-py">&lt;/pre&gt;&lt;b&gt;&amp;amp;</code></pre>'],
    ),
    ("    indented <code> & co", ["<pre>indented &lt;code&gt; &amp; co</pre>"]),
    ("```\n**not bold** [not](https://link)\n```", ["<pre>**not bold** [not](https://link)</pre>"]),
    ("```\n\n```", []),
]

BLOCKS = [
    ("### Plan", ["<b>Plan</b>"]),
    ("# A **b** `c`", ["<b>A b </b><code>c</code>"]),
    ("Title\n=====", ["<b>Title</b>"]),
    ("> quoted **text**\n> more", ["<blockquote>quoted <b>text</b>\nmore</blockquote>"]),
    # Telegram's quotes do not nest: the inner one is text of the outer
    ("> a\n>\n> > b\n> - c", ["<blockquote>a\n\nb\n\n• c</blockquote>"]),
    ("a\n\n---\n\nb", ["a", "———", "b"]),
]

TABLES = [
    # narrow: aligned columns in <pre>, alignment kept
    ("| a | b |\n|:-|-:|\n| 1 | 22 |", ["<pre>a |  b\n--+---\n1 | 22</pre>"]),
    # wide characters take two columns, Thai vowel marks none
    (
        "| 名 | x |\n|---|---|\n| 中文 | y |\n| ไทย | z |",
        ["<pre>名   | x\n-----+--\n中文 | y\nไทย  | z</pre>"],
    ),
    # a <pre> cell is plain text: no tags inside it
    ("| k | v |\n|---|---|\n| **b** | [l](https://x) |", ["<pre>k | v\n--+--\nb | l</pre>"]),
    # wider than a phone: one line a row, header bold, formatting kept
    (
        "| name | description |\n|---|---|\n| alpha | a description much too long for a grid |\n"
        "| **b** | [l](https://x) |",
        [
            "<b>name</b> | <b>description</b>\nalpha | a description much too long for a grid\n"
            '<b>b</b> | <a href="https://x">l</a> (x)'
        ],
    ),
]

LINKS = [
    # a label that is not the link's own address is followed by the host it really opens
    ("[ok](https://x.org/?a=1&b=2)", ['<a href="https://x.org/?a=1&amp;b=2">ok</a> (x.org)']),
    ("[ok](http://x.org)", ['<a href="http://x.org">ok</a> (x.org)']),
    ("[ok](HTTPS://X.ORG)", ['<a href="HTTPS://X.ORG">ok</a> (x.org)']),
    # only http(s) links: never tg: (a proxy, another bot) nor mailto:
    ("[mail](mailto:a@b.co)", ["mail"]),
    ("[chan](tg://resolve?domain=x)", ["chan"]),
    ("[https://t.me/harbor_office](tg://resolve?domain=harbor_off1ce_bot)", ["https://t.me/harbor_office"]),
    ("[network](tg://proxy?server=203.0.113.9&port=443&secret=ee)", ["network"]),
    ('[q](https://x.org/"onclick="y)', ['<a href="https://x.org/%22onclick=%22y">q</a> (x.org)']),
    ("[js](javascript:alert(1))", ["js"]),
    ("[js](JavaScript:alert(1))", ["js"]),
    ("[js](<java\tscript:alert(1)>)", ["js"]),
    ("[js](java&#x09;script:alert(1))", ["js"]),
    ("[d](data:text/html,<script>)", ["d"]),
    ("[d](data:text/html;base64,PHNjcmlwdD4=)", ["d"]),
    ("[f](file:///etc/passwd)", ["f"]),
    ("[rel](/relative/path)", ["rel"]),
    ("[rel](//evil.example)", ["rel"]),
    ("[ftp](ftp://x.org)", ["ftp"]),
    ("<https://auto.example>", ['<a href="https://auto.example">https://auto.example</a>']),
    ("<a@b.co>", ["a@b.co"]),
    ("<javascript:alert(1)>", ["javascript:alert(1)"]),
    ("[](https://x.org)", ['<a href="https://x.org">https://x.org</a>']),
    ("[x.org](https://www.x.org/)", ['<a href="https://www.x.org/">x.org</a>']),
    ("**[b](https://b.org)**", ['<b><a href="https://b.org">b</a> (b.org)</b>']),
    # a look-alike address behind a real one: the address it opens is shown
    (
        "[https://harbor.example/rules](https://harb0r.example/rules)",
        ['<a href="https://harb0r.example/rules">https://harbor.example/rules</a> (harb0r.example/rules)'],
    ),
    (
        "[t.me/harbor_office](https://t.me/harbor_off1ce_bot)",
        ['<a href="https://t.me/harbor_off1ce_bot">t.me/harbor_office</a> (t.me/harbor_off1ce_bot)'],
    ),
    (
        "[bank](https://bänk.example/login)",
        ['<a href="https://xn--bnk-qla.example/login">bank</a> (xn--bnk-qla.example)'],
    ),
    # Telegram has no code inside a link: the code is plain text there
    ("[a `c` b](https://x.org)", ['<a href="https://x.org">a c b</a> (x.org)']),
    ("https://bare.example stays text", ["https://bare.example stays text"]),
    ("![diagram](https://x.org/d.png)", ['<a href="https://x.org/d.png">diagram</a> (x.org)']),
    ("![diagram *b*](data:image/png;base64,xx)", ["diagram b"]),
    ("![diagram](javascript:alert(1))", ["diagram"]),
    ("![](https://x.org/d.png)", ['<a href="https://x.org/d.png">https://x.org/d.png</a>']),
    ("[![img](https://i.org/p.png)](https://x.org)", ['<a href="https://x.org">img</a> (x.org)']),
]

CITATIONS = [
    ("Answer [1].", ["Answer [1]."]),
    ("Two [2][3] and a list [1, 2].", ["Two [2][3] and a list [1, 2]."]),
    # a definition the model writes stays text and does not turn citations into links
    (
        "See [1] and [docs][1].\n\n[1]: https://evil.example\n[2]: javascript:alert(1)",
        ["See [1] and [docs][1].", "[1]: https://evil.example\n[2]: javascript:alert(1)"],
    ),
    ("[1]: https://evil.example\n\nSee [1].", ["[1]: https://evil.example", "See [1]."]),
    ("- point [1]\n- other [2][3]", ["• point [1]\n• other [2][3]"]),
]

ESCAPES = [
    ("<script>alert(1)</script>", ["&lt;script&gt;alert(1)&lt;/script&gt;"]),
    ("<b onclick=alert(1)>hi</b>", ["&lt;b onclick=alert(1)&gt;hi&lt;/b&gt;"]),
    ("</pre></code></b>", ["&lt;/pre&gt;&lt;/code&gt;&lt;/b&gt;"]),
    ('<a href="javascript:alert(1)">x</a>', ['&lt;a href="javascript:alert(1)"&gt;x&lt;/a&gt;']),
    ("<div>\nblock html\n</div>", ["&lt;div&gt;\nblock html\n&lt;/div&gt;"]),
    ("text <br> more", ["text &lt;br&gt; more"]),
    ("AT&T: a < b > c", ["AT&amp;T: a &lt; b &gt; c"]),
    ("&amp; &lt; &#60; &copy; &bogus;", ["&amp; &lt; &lt; © &amp;bogus;"]),
    ("**<i>**", ["<b>&lt;i&gt;</b>"]),
]

UNCHANGED = [
    "中文回答，没有格式。",
    "日本語の文章です。",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Emoji 😀👍🏽 and 🇹🇭 flags",
    "Ελληνικά и русский текст",
]


@pytest.mark.parametrize(
    ("markdown", "expected"),
    LISTS + INLINE + CODE + BLOCKS + TABLES + LINKS + CITATIONS + ESCAPES,
    ids=lambda v: repr(v)[:40] if isinstance(v, str) else "",
)
def test_markdown_as_telegram_html(markdown, expected):
    blocks = markdown_blocks(markdown)
    assert blocks == expected
    for block in blocks:
        parse_html(block, strict_ampersand=True)


@pytest.mark.parametrize("text", UNCHANGED)
def test_text_without_markup_is_unchanged(text):
    assert markdown_blocks(text) == [text]


@pytest.mark.parametrize("text", ["", " ", "\n\n", "\t \n  \r\n"])
def test_empty_input_gives_no_blocks(text):
    assert markdown_blocks(text) == []


def test_markup_that_shows_nothing_falls_back_to_the_text_as_written():
    assert markdown_blocks("```abc") == ["```abc"]


def test_a_model_answer():
    answer = (
        "### Summary\n\nThe notes say **two** things [1]:\n\n"
        "- **Speed**: `fts5` is fast [2]\n- **Safety**: escape *everything*\n  - even `&`\n\n"
        "*In short:* use FTS5.\n"
    )
    assert markdown_blocks(answer) == [
        "<b>Summary</b>",
        "The notes say <b>two</b> things [1]:",
        "• <b>Speed</b>: <code>fts5</code> is fast [2]\n• <b>Safety</b>: escape <i>everything</i>\n"
        "  ◦ even <code>&amp;</code>",
        "<i>In short:</i> use FTS5.",
    ]


# --------------------------------------------------------------------------------------------
# Long answers: blocks the splitter can cut between


def test_a_long_list_becomes_several_blocks_cut_between_items():
    items = [f"- item {n}: " + "word " * 12 for n in range(200)]
    blocks = markdown_blocks("\n".join(items))
    assert len(blocks) > 1
    for block in blocks:
        assert block.startswith("• item ")
        assert len(visible([block])) <= BLOCK_UNITS
    assert visible(blocks).count("• item ") == 200
    messages = split_blocks(blocks)
    for message in messages:
        assert len(parse_html(message, strict_ampersand=True)[0]) <= MAX_TEXT


def test_a_long_code_block_becomes_several_pre_blocks():
    code = "\n".join(f"line_{n} = {n} & {n} < {n + 1}" for n in range(400))
    blocks = markdown_blocks(f"```python\n{code}\n```")
    assert len(blocks) > 1
    for block in blocks:
        assert block.startswith('<pre><code class="language-python">')
        assert block.endswith("</code></pre>")
        parse_html(block, strict_ampersand=True)
    assert "\n".join(parse_html(b)[0] for b in blocks) == code


# --------------------------------------------------------------------------------------------
# Hostile input: never raises, always what Telegram accepts, text never lost

BOMBS = [
    ">" * 1000 + " deep",
    "> " * 1000 + "deep",
    "- " * 1000 + "deep",
    "1. " * 1000 + "deep",
    "> - " * 500 + "deep",
    "\n".join("  " * n + "- deep" for n in range(1000)),
    "\n".join(">" * n + " deep" for n in range(1, 300)),
    "*" * 1000 + "deep" + "*" * 1000,
    "**" * 1000 + "deep" + "**" * 1000,
    "~~" * 1000 + "deep" + "~~" * 1000,
    "[" * 1000 + "deep" + "](https://x.org)" * 1000,
    "![" * 1000 + "deep" + "](https://x.org)" * 1000,
    "`" * 1000 + "deep",
    "<" * 1000 + "deep",
    "|" * 1000 + "\n|-|\n" + "| deep " * 1000,
]

# Which entity may not contain which, after tdlib's rules (td/telegram/MessageEntity.cpp):
# code and pre contain nothing and are inside nothing but a quote; links and quotes do not nest.
_CODE = {"code", "pre"}


def nesting_faults(entities: list[dict]) -> list[tuple[str, str]]:
    """(outer, inner) entity types nested in a way Telegram refuses or drops."""
    faults = []
    for outer in entities:
        for inner in entities:
            if inner is outer:
                continue
            inside = (
                outer["offset"] <= inner["offset"]
                and inner["offset"] + inner["length"] <= outer["offset"] + outer["length"]
            )
            if not inside:
                continue
            pair = (outer["type"], inner["type"])
            if (
                outer["type"] in _CODE
                or (inner["type"] in _CODE and outer["type"] != "blockquote")
                or outer["type"] == inner["type"]
            ):
                faults.append(pair)
    return faults


def check(markdown: str) -> list[str]:
    blocks = markdown_blocks(markdown)
    for block in blocks:
        text, entities = parse_html(block, strict_ampersand=True)
        assert text.strip(), (markdown, block)
        assert not nesting_faults(entities), (markdown, block, entities)
    if any(ch.isalpha() for ch in markdown):
        assert visible(blocks).strip(), markdown
    return blocks


@pytest.mark.parametrize("bomb", BOMBS, ids=lambda b: repr(b[:12]))
def test_nesting_bombs_render_and_keep_their_text(bomb):
    blocks = check(bomb)
    assert "deep" in visible(blocks)


PUNCTUATION = list("*_~`[]()<>&#!|-") + [
    "**",
    "~~",
    "```",
    "```py",
    '```"><b>',
    "\n",
    "\n\n",
    " ",
    "  ",
    "> ",
    "- ",
    "1. ",
    "# ",
    "| ",
    " |\n|---|\n",
    "&amp;",
    "&#x1F600;",
    "&bogus;",
    "&#0;",
    "\\",
    "https://x.org",
    "javascript:alert(1)",
    "[1]: https://evil.example\n",
    "<b>",
    "</pre>",
    '<a href="x">',
    "\t",
    "\r\n",
    "\x00",
    "\u200b",
]
WORDS = ["hello", "world", "a", "x1", "中文", "日本語", "한국어", "ไทย", "ภาษาไทย", "😀", "👍🏽", "emoji"]


def hostile(rng: random.Random) -> str:
    """A random mix of Markdown punctuation and words, now and then a nesting bomb."""
    if rng.random() < 0.1:
        k = rng.randint(1, 1000)
        word = rng.choice(WORDS)
        return rng.choice(
            [
                ">" * k + word,
                "- " * k + word,
                "*" * k + word + "*" * rng.randint(0, k),
                "[" * k + word + "](https://x.org)" * rng.randint(0, k),
                "\n".join("  " * n + "- " + word for n in range(k)),
                "`" * k + word + "`" * rng.randint(0, k),
            ]
        )
    return "".join(
        rng.choice(PUNCTUATION if rng.random() < 0.6 else WORDS) for _ in range(rng.randint(1, 80))
    )


def test_hostile_input_always_gives_what_telegram_accepts():
    rng = random.Random(20260828)
    for _ in range(400):
        check(hostile(rng))


def test_a_lone_surrogate_does_not_reach_telegram():
    blocks = markdown_blocks("bad \ud800 char")
    assert blocks == ["bad ? char"]
    "".join(blocks).encode("utf-8")
