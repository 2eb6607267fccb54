"""Binary data is not text: random bytes under any text name are refused, real text in any charset is not."""

import json
import random

import pytest

from knowledge.convert import Limits, convert_source
from knowledge.errors import ConversionError

SUFFIXES = (".txt", ".md", ".html", ".pdf")


def blobs(n: int, seed: int) -> list[tuple[str, bytes]]:
    """n random blobs of 1-64 KB under text-like names."""
    rng = random.Random(seed)
    return [(f"blob{i}{SUFFIXES[i % 4]}", rng.randbytes(rng.randint(1024, 64 * 1024))) for i in range(n)]


def test_a_thousand_random_blobs_are_all_refused_as_binary() -> None:
    reasons = []
    for name, data in blobs(1000, seed=11):
        with pytest.raises(ConversionError) as caught:
            convert_source(data, name=name, limits=Limits())
        reasons.append(caught.value.reason)
    assert set(reasons) == {"binary"}


REAL_TEXT = [
    ("gbk", "朱镕基在北京会见了代表团。这份报告讨论了经济改革和对外开放的政策，以及未来五年的发展目标。"),
    ("big5", "臺北市政府今天宣布，捷運新路線將於明年通車，沿線居民對交通改善充滿期待。"),
    ("shift_jis", "東京都は新しい防災計画を発表しました。地震に備えて、各家庭で水と食料を準備してください。"),
    ("tis-620", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย มีประชากรมากกว่าแปดล้านคน และเป็นศูนย์กลางเศรษฐกิจ"),
    (
        "cp1252",
        "Café crème à la française: «déjà vu» — naïve façade, 12 € per œuvre. Señor Müller’s “smart” quotes.",
    ),
]


@pytest.mark.parametrize(("codec", "text"), REAL_TEXT, ids=[c for c, _ in REAL_TEXT])
@pytest.mark.parametrize("suffix", [".txt", ".md", ".html"])
def test_real_text_in_legacy_charsets_is_accepted(codec: str, text: str, suffix: str) -> None:
    body = "\n\n".join([text] * 3)
    data = (f"<html><body><p>{body}</p></body></html>" if suffix == ".html" else body).encode(codec)
    converted = convert_source(data, name=f"notes{suffix}", limits=Limits())
    assert text in converted.markdown


def test_a_batch_of_blobs_and_documents_indexes_only_the_documents(tmp_path, run_kb) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, data in blobs(40, seed=12):
        (src / name).write_bytes(data)
    good = {
        "notes.md": "# Harvest\n\nThe harvest festival starts on the first Sunday of October.\n",
        "page.html": "<html><body><p>Before the code: the orchard opens at nine.</p><?php echo $x; ?>"
        "<p>After the code: apples cost two euros a kilo.</p></body></html>",
        "gbk.txt": REAL_TEXT[0][1],
    }
    for name, text in good.items():
        (src / name).write_bytes(text.encode("gbk" if name == "gbk.txt" else "utf-8"))
    home = tmp_path / "kb"
    out = run_kb("--home", str(home), "ingest", str(src))
    assert out.returncode == 1, out.stderr
    assert "3 indexed, 40 failed" in out.stdout and "failed by reason: binary 40" in out.stdout
    failed = home / "knowledge" / "inbox" / "failed"
    records = [json.loads(p.read_text()) for p in failed.glob("*.error.json")]
    assert len(records) == 40 and {r["reason"] for r in records} == {"binary"}
    raw = "".join(p.read_text() for p in (home / "knowledge" / "raw").glob("*.md"))
    assert "apples cost two euros a kilo." in raw and "朱镕基" in raw
