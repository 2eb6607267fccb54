"""SVG drawings and Obsidian's canvases and bases: their words are indexed, never their markup; what has no
words (an icon, an empty board) or is broken is skipped with its reason in a source and lands in failed/
with it from the inbox; hostile drawings (entity bombs, deep nesting) end quickly with a plain outcome."""

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from knowledge.convert import Limits, convert_source
from knowledge.convert.sniff import sniff
from knowledge.errors import ConversionError

ICON = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M12 2L2 22h20z"/></svg>\n'
MAP = b"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!-- Created with Inkscape -->
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns="http://www.w3.org/2000/svg" width="400" height="300">
  <title>Allotment   plan</title>
  <desc>Where the   quince tree stands</desc>
  <style>.bed { fill: #9c6; } .secretstyle {}</style>
  <script>var secretscript = 1;</script>
  <g id="beds">
    <rect class="bed" x="10" y="10" width="100" height="50"/>
    <text x="12" y="30">Rhubarb <tspan font-weight="bold">bed</tspan><tspan x="12" dy="1.2em">north side</tspan></text>
    <text x="200" y="30"><![CDATA[Compost & bins]]></text>
  </g>
</svg>
"""
# Nine levels of ten: expanded, &lol9; would be a billion "lol"s (3 GB).
LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE svg [\n <!ENTITY lol "lol">\n'
    + b"".join(
        b'<!ENTITY lol%d "%s">\n'
        % (i, b"".join(b"&lol%s;" % (str(i - 1).encode() if i > 1 else b"") for _ in range(10)))
        for i in range(1, 10)
    )
    + b']>\n<svg xmlns="http://www.w3.org/2000/svg"><text>&lol9;</text></svg>\n'
)
BOARD = {
    "nodes": [
        {"id": "a", "type": "text", "x": 0, "y": 0, "width": 250, "height": 60,
         "text": "# Pond\n\nThe **newts** return to the pond in early March."},
        {"id": "b", "type": "file", "x": 0, "y": 100, "width": 250, "height": 60, "file": "Wildlife/Newts.md",
         "subpath": "#Breeding"},
        {"id": "c", "type": "link", "x": 300, "y": 0, "width": 250, "height": 60, "url": "https://example.org/newts"},
        {"id": "d", "type": "group", "x": -20, "y": -20, "width": 600, "height": 200, "label": "Garden wildlife"},
        {"id": "e", "type": "text", "x": 0, "y": 300, "width": 10, "height": 10, "text": "   "},
    ],
    "edges": [{"id": "x", "fromNode": "a", "toNode": "b", "label": "see the survey"}],
}  # fmt: skip
BASE = b"""filters:
  and:
    - file.hasTag("book")
    - 'secretfilter != ""'
formulas:
  secretformula: 'price / pages'
properties:
  note.author:
    displayName: Author
  formula.secretformula:
    displayName: "Price per page"
views:
  - type: table
    name: Reading list
    order:
      - file.name
  - type: cards
    name: 2024
"""


def converted(data: bytes, name: str):
    return convert_source(data, name=name, limits=Limits())


def refusal(data: bytes, name: str) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        converted(data, name)
    return caught.value


# -- what each file is --------------------------------------------------------------------------------

SNIFFED = [
    (MAP, "allotment.svg", "svg"),
    (MAP, "download", "svg"),  # no name: the root element says it
    (ICON, "icon.txt", "svg"),
    (b"\xef\xbb\xbf<!-- logo -->\n<svg><title>Logo</title></svg>", "logo", "svg"),
    (MAP.decode().encode("utf-16"), "wide", "svg"),
    (b'<?xml version="1.0"?>\n<!-- ' + b"x" * 4000 + b" -->\n<svg/>", "late-root.svg", "svg"),
    (LAUGHS, "laughs", "svg"),
    (b"<svg><title>Logo</title></svg>\n\n# Read me\n\nThe logo above.\n", "README.md", "markdown"),
    (b"<svg width='4'></svg><p>A page that opens with an icon.</p>", "page.html", "html"),
    (b"A note about the svg format.\n", "svg.txt", "text"),
    (b"Sketch of the shed, not XML.\n", "shed.svg", "text"),
    (json.dumps(BOARD).encode(), "Pond.canvas", "canvas"),
    (BASE, "Books.base", "base"),
]


@pytest.mark.parametrize(("data", "name", "kind"), SNIFFED, ids=[n for _, n, _ in SNIFFED])
def test_drawings_and_obsidian_files_are_told_by_their_root_element_or_name(data, name, kind):
    assert sniff(data, name) == kind


# -- SVG ----------------------------------------------------------------------------------------------


def test_a_drawing_gives_its_title_descriptions_and_texts_in_order_and_no_markup():
    doc = converted(MAP, "allotment.svg")
    assert doc.title == "Allotment plan" and doc.converter == "svg"
    assert doc.markdown == (
        "Allotment plan\n\nWhere the quince tree stands\n\nRhubarb bed north side\n\nCompost & bins\n"
    )


def test_a_drawing_in_utf16_reads_the_same():
    assert (
        converted(MAP.decode().encode("utf-16"), "allotment.svg").markdown == converted(MAP, "a.svg").markdown
    )


def test_an_icon_without_text_is_refused_with_its_reason():
    error = refusal(ICON, "icon.svg")
    assert error.reason == "svg-no-text"
    assert str(error) == "icon.svg is a drawing without text (no <title>, <desc> or <text>): nothing to index"
    # only scripts, styles and empty labels are no text either
    bare = b"<svg><script>alert('x')</script><style>p{}</style><title>  </title><text>\n</text></svg>"
    assert refusal(bare, "bare.svg").reason == "svg-no-text"


def test_an_entity_bomb_is_not_expanded():
    doc = converted(LAUGHS, "laughs.svg")
    assert doc.markdown == "&lol9;\n"  # the reference stays as written: nothing declared is expanded
    external = b'<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg><text>&x;</text></svg>'
    assert converted(external, "ext.svg").markdown == "&x;\n"


def test_a_drawing_nested_past_the_limit_is_refused_before_it_is_parsed():
    deep = b"<svg>" + b"<g>" * 20_000 + b"</x>" * 200_000 + b"<text>deep</text></svg>"
    assert refusal(deep, "deep.svg").reason == "svg-too-deep"
    flat = b"<svg>" + b'<rect width="1"/>' * 20_000 + b"<text>many shapes</text></svg>"
    assert converted(flat, "flat.svg").markdown == "many shapes\n"


# -- canvas and base ----------------------------------------------------------------------------------


def test_a_canvas_gives_its_cards_labels_and_references():
    doc = converted(json.dumps(BOARD).encode(), "Pond.canvas")
    assert (doc.title, doc.converter) == ("Pond", "canvas")
    assert doc.markdown == (
        "# Pond\n\nThe **newts** return to the pond in early March.\n\nGarden wildlife\n\n"
        "Wildlife/Newts.md#Breeding\nhttps://example.org/newts\n\nsee the survey\n"
    )


CANVAS_REFUSED = [
    (b'{"nodes": [{"type": "text", "text": "unfinished', "canvas-malformed"),
    (b'["not", "a", "canvas"]', "canvas-malformed"),
    (b'{"nodes": {"a": 1}}', "canvas-malformed"),
    (b"[" * 200_000 + b"]" * 200_000, "canvas-malformed"),
    (b"\xff\xfe\x00garbage", "canvas-malformed"),
    (b"{}", "canvas-no-text"),
    (b'{"nodes": [{"type": "file", "file": "photos/a.png"}, {"type": "text", "text": ""}], "edges": []}',
     "canvas-no-text"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "reason"), CANVAS_REFUSED)
def test_a_broken_or_wordless_canvas_is_refused_with_its_reason(data, reason):
    error = refusal(data, "Board.canvas")
    assert error.reason == reason and str(error).startswith("Board.canvas is ")


def test_a_base_gives_its_view_and_display_names_only():
    doc = converted(BASE, "Books.base")
    assert (doc.title, doc.converter, doc.markdown) == (
        "Books",
        "base",
        "Reading list\n2024\n\nAuthor\nPrice per page\n",
    )
    assert "secret" not in doc.markdown


BASE_REFUSED = [
    (b"views: [unclosed\n  - name: x\n", "base-malformed"),
    (b"- just\n- a list\n", "base-malformed"),
    (b"views:\n  - name: !!python/object/apply:os.system ['true']\n", "base-malformed"),
    (b"filters:\n  and: []\nviews:\n  - type: table\n", "base-no-text"),
    # anchors nine deep: a reference each, never copied, and nothing of them is a name
    (b"a: &a [lol, lol]\n" + b"".join(b"%c: &%c [%s]\n" % (98 + i, 98 + i, b", ".join([b"*%c" % (97 + i)] * 10))
                                      for i in range(8)) + b"views: *i\n", "base-no-text"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "reason"), BASE_REFUSED)
def test_a_broken_or_nameless_base_is_refused_with_its_reason(data, reason):
    assert refusal(data, "Books.base").reason == reason


# -- in a source and in the inbox ---------------------------------------------------------------------


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "Vault"
    (root / "attachments").mkdir(parents=True)
    (root / "owl.md").write_text("# Owls\n\nThe barn owl hunts at dusk over the meadow.\n")
    (root / "attachments" / "icon.svg").write_bytes(ICON)
    (root / "attachments" / "laughs.svg").write_bytes(LAUGHS.replace(b"<text>&lol9;</text>", b""))
    (root / "allotment.svg").write_bytes(MAP)
    (root / "Pond.canvas").write_text(json.dumps(BOARD))
    (root / "Broken.canvas").write_text('{"nodes": [{"type": "text", "text": "half')
    (root / "Books.base").write_bytes(BASE)
    return root


def kb(run_kb, home: Path, *args: str):
    return run_kb("--home", str(home), *args)


def search(run_kb, home: Path, query: str) -> list[dict]:
    return json.loads(kb(run_kb, home, "search", query, "--json").stdout or "[]")


def test_in_a_source_an_icon_is_skipped_with_its_reason_and_a_drawings_words_are_found(
    run_kb, tmp_path, vault
):
    home = tmp_path / "kb"
    added = kb(run_kb, home, "sources", "add", str(vault), "--name", "vault")
    assert added.returncode == 0, added.stderr
    assert "vault: 4 indexed" in added.stdout and "3 skipped, 0 failed" in added.stdout

    listed = json.loads(kb(run_kb, home, "sources", "--json").stdout)[0]
    assert listed["counts"] == {"indexed": 4, "waiting": 0, "skipped": 3, "failed": 0}
    assert {i["path"]: (i["state"], i["reason"]) for i in listed["items"]} == {
        "attachments/icon.svg": ("skipped", "svg-no-text"),
        "attachments/laughs.svg": ("skipped", "svg-no-text"),
        "Broken.canvas": ("skipped", "canvas-malformed"),
    }
    shown = kb(run_kb, home, "sources", "vault").stdout
    assert "attachments/icon.svg: kb cannot read it: icon.svg is a drawing without text" in shown

    (top,) = search(run_kb, home, "quince tree")[:1]
    assert (top["source"], top["path"]) == ("vault", "allotment.svg")
    assert "Where the quince tree stands" in top["text"] and "<" not in top["text"]
    assert search(run_kb, home, "newts return to the pond")[0]["path"] == "Pond.canvas"
    assert search(run_kb, home, "Reading list")[0]["path"] == "Books.base"
    for markup in ("xmlns", "viewBox", "secretscript", "secretstyle", "fromNode"):
        assert search(run_kb, home, markup) == [], markup

    rescanned = kb(run_kb, home, "sources", "rescan", "vault")  # skipped and unchanged: not read again
    assert "0 indexed" in rescanned.stdout and "7 unchanged" in rescanned.stdout


def test_in_the_inbox_a_wordless_or_broken_file_lands_in_failed_with_its_reason(run_kb, tmp_path, vault):
    home = tmp_path / "kb"
    out = kb(run_kb, home, "ingest", str(vault))
    assert out.returncode == 1, out.stderr
    assert "4 indexed, 3 failed" in out.stdout
    failed = home / "knowledge" / "inbox" / "failed"
    records = {
        r["file"]: r["reason"] for r in (json.loads(p.read_text()) for p in failed.glob("*.error.json"))
    }
    assert records == {
        "icon.svg": "svg-no-text",
        "laughs.svg": "svg-no-text",
        "Broken.canvas": "canvas-malformed",
    }
    assert (failed / "icon.svg").read_bytes() == ICON
    raw = "".join(p.read_text() for p in (home / "knowledge" / "raw").glob("*.md"))
    assert "Rhubarb bed north side" in raw and "<svg" not in raw and 'title: "Allotment plan"' in raw


# -- mutated files ------------------------------------------------------------------------------------

REASONS = {"svg-no-text", "svg-too-deep", "canvas-no-text", "canvas-malformed", "base-no-text",
           "base-malformed", "binary", "no-content", "requires-javascript"}  # fmt: skip


def mutated(seed: bytes, i: int) -> bytes:
    """``seed`` with a few bytes flipped, a piece cut, or a piece repeated (the same bytes for each i)."""
    rng = random.Random(i)
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data))
        how = rng.choice(("flip", "cut", "repeat", "truncate"))
        if how == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif how == "cut":
            del data[at : at + rng.randint(1, 40)]
        elif how == "repeat":
            data[at:at] = data[at : at + rng.randint(1, 200)] * rng.randint(2, 50)
        else:
            del data[at:]
        if not data:
            data = bytearray(b"<")
    return bytes(data)


@pytest.mark.parametrize(
    ("seed", "name"),
    [(MAP, "allotment.svg"), (json.dumps(BOARD).encode(), "Pond.canvas"), (BASE, "Books.base")],
)
def test_mutated_drawings_canvases_and_bases_convert_or_are_refused_with_a_reason(seed, name):
    outcomes = Counter()
    for i in range(150):
        try:
            converted(mutated(seed, i), name)
            outcomes["converted"] += 1
        except ConversionError as error:
            assert error.reason in REASONS, (i, error.reason, str(error))
            outcomes[error.reason] += 1
    assert outcomes["converted"] > 0 and len(outcomes) > 1, outcomes
