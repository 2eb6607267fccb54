"""Charset decoding: the label traps and detector cases of reliability.md §3.2–3.4 (vectors 14–19, 25–28)."""

from __future__ import annotations

import codecs
import re
import struct

import pytest

from knowledge.convert.charset import decode_bytes, widen_label
from knowledge.errors import ConversionError

C1 = re.compile("[\x80-\x9f]")

# Paragraph-length samples, each with the character that breaks the literal label.
BIG5_TEXT = (
    "香港特別行政區位於南海北岸、珠江口東側，全境由香港島、九龍半島和新界三大區域組成。根據 2021 年的"
    "人口普查，香港人口約為七百四十萬，是世界上人口密度最高的地區之一。本地居民日常多以粵語交談，在口語"
    "中常把年輕人叫做「𡃁仔」。香港的 MTR 鐵路系統每天接載超過四百萬人次，被認為是全球最有效率的公共交通"
    "網絡之一。"
)
# First XQuAD zh context (CC BY-SA 4.0, /work/shared/data/xquad), plus 镕, which GB2312 lacks.
GBK_TEXT = (
    "黑豹队的防守只丢了 308分，在联赛中排名第六，同时也以 24 次拦截领先国家橄榄球联盟 (NFL)，并且四次入选"
    "职业碗。职业碗防守截锋卡万·肖特以 11 分领先于全队，同时还有三次迫使掉球和两次重新接球。朱镕基曾任"
    "国务院总理，他的名字常被用来检验中文编码是否支持 GBK 字符。"
)
SJIS_TEXT = (
    "日本語の文章を自動的に判定するためには、ある程度の長さの本文が必要です。東京都の人口は約千四百万人で、"
    "日本の首都として政治、経済、文化の中心となっています。次回の会議の議題は次の通りです。①予算の確認、"
    "②来年度の事業計画、③その他の報告事項。参加者は午前十時までに三階の会議室へお集まりください。"
)
# First XQuAD th context (CC BY-SA 4.0), plus €, which exists in windows-874 but not in TIS-620.
THAI_TEXT = (
    "ทีมรับของแพนเธอร์สถอดใจที่คะแนน 308 ได้อันดับที่หกของลีก ในขณะที่เป็นผู้นำในเอ็นเอฟแอลด้วยการอินเตอร์เซป"
    " 24 ครั้งและได้รับเลือกให้เล่นในโปรโบว์ล สี่ ครั้ง คาวันน์ ชอร์ต ผู้เล่นตำแหน่งดีเฟนซีฟแทคเกิลใน โปรโบว์ล"
    " นำทีมด้วยการแซ็ค 11 ครั้ง ราคาบัตรเข้าชมคือ 40 €"
)
CP1252_TEXT = (
    "The committee said the new policy was “a reasonable compromise” – although critics disagreed. "
    "“We’ve heard this before,” one resident said, adding that the café’s owner in Zürich had already "
    "paid €2,000 in fees… It felt like déjà vu; the naïve façade of the señor’s plan fooled no one."
)

# (name, text, bytes codec, label a page would declare, codec kb must use)
SAMPLES = [
    ("big5-hkscs", BIG5_TEXT, "big5hkscs", "big5", "big5hkscs"),
    ("gbk", GBK_TEXT, "gbk", "gb2312", "gb18030"),
    ("shift_jis", SJIS_TEXT, "cp932", "shift_jis", "cp932"),
    ("windows-874", THAI_TEXT, "cp874", "tis-620", "cp874"),
    ("cp1252", CP1252_TEXT, "cp1252", "iso-8859-1", "cp1252"),
]
IDS = [sample[0] for sample in SAMPLES]


def page(body: str, head: str = "") -> str:
    """A small realistic HTML page around ``body``."""
    return (
        f"<!DOCTYPE html><html><head>{head}<title>Sample</title>"
        '<link rel="stylesheet" href="/site.css"></head>'
        f'<body><nav><a href="/">Home</a></nav><main><p>{body}</p></main></body></html>'
    )


def assert_clean(text: str) -> None:
    assert "\ufffd" not in text
    assert not C1.search(text)


@pytest.mark.parametrize(("name", "text", "codec", "label", "expected_codec"), SAMPLES, ids=IDS)
def test_declared_label_is_widened(name: str, text: str, codec: str, label: str, expected_codec: str) -> None:
    decoded, used = decode_bytes(text.encode(codec), declared=label)
    assert decoded == text
    assert used == expected_codec
    assert_clean(decoded)


@pytest.mark.parametrize(("name", "text", "codec", "label", "expected_codec"), SAMPLES, ids=IDS)
def test_meta_charset_is_widened(name: str, text: str, codec: str, label: str, expected_codec: str) -> None:
    html = page(text, head=f'<meta charset="{label}">')
    decoded, used = decode_bytes(html.encode(codec), is_html=True)
    assert decoded == html
    assert used == expected_codec
    assert_clean(decoded)


@pytest.mark.parametrize(("name", "text", "codec", "label", "expected_codec"), SAMPLES, ids=IDS)
def test_http_equiv_content_type_is_read(
    name: str, text: str, codec: str, label: str, expected_codec: str
) -> None:
    html = page(text, head=f'<meta http-equiv="Content-Type" content="text/html; charset={label}">')
    decoded, used = decode_bytes(html.encode(codec), is_html=True)
    assert decoded == html
    assert used == expected_codec


@pytest.mark.parametrize(("name", "text", "codec", "label", "expected_codec"), SAMPLES, ids=IDS)
def test_undeclared_text_file_is_detected(
    name: str, text: str, codec: str, label: str, expected_codec: str
) -> None:
    decoded, _ = decode_bytes(text.encode(codec))
    assert decoded == text
    assert_clean(decoded)


@pytest.mark.parametrize(("name", "text", "codec", "label", "expected_codec"), SAMPLES, ids=IDS)
def test_undeclared_html_page_is_detected(
    name: str, text: str, codec: str, label: str, expected_codec: str
) -> None:
    html = page(text)
    decoded, _ = decode_bytes(html.encode(codec), is_html=True)
    assert decoded == html
    assert_clean(decoded)


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        (
            "Le comité a déclaré que la nouvelle politique était « un compromis raisonnable » – même si les "
            "critiques n’étaient pas d’accord. Le propriétaire du café à côté de l’église a payé 2 000 € de "
            "frais, après être allé à la mairie où l’on a répondu très brièvement.",
            "cp1252",
        ),
        (
            "El comité afirmó que la nueva política era «un compromiso razonable», aunque los críticos no "
            "estaban de acuerdo. El dueño del café situado junto a la iglesia pagó 2.000 € en tasas después "
            "de que el ayuntamiento tardara más de un año en responder a su petición.",
            "cp1252",
        ),
        (
            "Komisja oświadczyła, że nowa polityka jest „rozsądnym kompromisem”, choć krytycy się z tym nie "
            "zgodzili. Właściciel kawiarni przy kościele zapłacił już dwa tysiące złotych opłat, a decyzja "
            "zapadnie dopiero po marcowym posiedzeniu rady miasta. Mieszkańcy są źli i żądają wyjaśnień.",
            "cp1250",
        ),
        (
            "Комитет заявил, что новая политика является разумным компромиссом, хотя критики с этим не "
            "согласились. Владелец кафе рядом с церковью уже заплатил две тысячи рублей сборов, а решение "
            "будет принято только после мартовского заседания городского совета.",
            "cp1251",
        ),
        (
            "Komite, yeni politikanın makul bir uzlaşma olduğunu açıkladı, ancak eleştirmenler buna "
            "katılmadı. Kilisenin yanındaki kafenin sahibi şimdiden iki bin lira harç ödedi ve karar ancak "
            "mart ayındaki belediye meclisi toplantısından sonra verilecek. Sakinler kızgın ve açıklama "
            "istiyor.",
            "cp1254",
        ),
    ],
    ids=["french-cp1252", "spanish-cp1252", "polish-cp1250", "russian-cp1251", "turkish-cp1254"],
)
def test_detector_tells_western_from_central_european(text: str, codec: str) -> None:
    # charset-normalizer alone calls the French and Spanish paragraphs cp1257/cp1250 (à → ą).
    decoded, _ = decode_bytes(text.encode(codec))
    assert decoded == text


def test_chinese_with_many_latin_words_is_detected() -> None:
    # XQuAD zh (CC BY-SA 4.0): charset-normalizer's default pass finds no candidate for this paragraph.
    text = (
        "ARPANET和SITA HLN于 1969年 开始运营。在1973年引入X.25之前，大约开发了20种不同的网络技术。 两个基本"
        "区别涉及到在网络边缘的主机和网络核心之间划分功能和任务。在数据电报系统中，主机有责任保护数据包的有序"
        "传递。 用户数据电报协议 (UDP) 是数据电报协议的一个例子。在虚拟呼叫系统中，网络保证按顺序向主机发送"
        "数据。这导致了一个比数据电报模型功能更少的更简单的主机接口。X.25协议套件使用这种网络类型。"
    )
    decoded, used = decode_bytes(text.encode("gbk"))
    assert decoded == text
    assert used == "gb18030"


def test_bom_beats_declared_and_meta() -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>Grüße, “Zitat” – 東京</p></body></html>'
    decoded, used = decode_bytes(codecs.BOM_UTF8 + html.encode(), declared="windows-1252", is_html=True)
    assert decoded == html
    assert used == "utf-8"


def test_declared_charset_beats_meta() -> None:
    html = '<html><head><meta charset="windows-1251"></head><body><p>Привет, мир</p></body></html>'
    decoded, used = decode_bytes(html.encode(), declared="text/html; charset=utf-8", is_html=True)
    assert decoded == html
    assert used == "utf-8"


@pytest.mark.parametrize(
    ("label", "codec", "text", "expected_codec"),
    [
        # Too short for the detector (it says cp1250, cp775, cp949): only the <meta> gets these right.
        ("windows-1251", "cp1251", "Привет, мир", "cp1251"),
        ("iso-8859-9", "cp1254", "Günaydın dünya, ışık", "cp1254"),
        ("gb2312", "gbk", "你好世界，朱镕基", "gb18030"),
    ],
)
def test_meta_applies_when_nothing_is_declared(
    label: str, codec: str, text: str, expected_codec: str
) -> None:
    html = f'<html><head><meta charset="{label}"></head><body><p>{text}</p></body></html>'
    decoded, used = decode_bytes(html.encode(codec), is_html=True)
    assert decoded == html
    assert used == expected_codec


def test_meta_after_1024_bytes_of_comments_is_found() -> None:
    # Browsers stop looking after 1,024 bytes; kb looks at 4,096 like w3lib.
    html = "<!--" + "x" * 1100 + '--><html><head><meta charset="koi8-r"></head><body>Привет</body></html>'
    decoded, used = decode_bytes(html.encode("koi8_r"), is_html=True)
    assert decoded == html
    assert used == "koi8-r"


def test_meta_inside_a_comment_is_ignored() -> None:
    html = '<!-- <meta charset="koi8-r"> --><meta charset="gb2312"><p>朱镕基</p>'
    decoded, used = decode_bytes(html.encode("gbk"), is_html=True)
    assert decoded == html
    assert used == "gb18030"


def test_meta_only_counts_for_html() -> None:
    text = '<meta charset="windows-1251"> is how a page declares Cyrillic; café'
    decoded, used = decode_bytes(text.encode())
    assert decoded == text
    assert used == "utf-8"


def test_meta_utf16_on_ascii_page_means_utf8() -> None:
    html = '<html><head><meta charset="utf-16"></head><body><p>Plain ASCII page.</p></body></html>'
    decoded, used = decode_bytes(html.encode("ascii"), is_html=True)
    assert decoded == html
    assert used == "utf-8"


@pytest.mark.parametrize("where", ["declared", "meta"])
def test_unknown_label_falls_back_without_crashing(where: str) -> None:
    html = '<html><head><meta charset="foo-bar"></head><body><p>Café crème, “déjà vu”.</p></body></html>'
    if where == "declared":
        decoded, used = decode_bytes(html.encode("cp1252"), declared="foo-bar")
    else:
        decoded, used = decode_bytes(html.encode("cp1252"), is_html=True)
    assert decoded == html
    assert used == "cp1252"


def test_declared_label_that_does_not_fit_falls_through() -> None:
    # cp1252 bytes 0x93/0x94 would be C1 controls in ISO-8859-2: not accepted silently.
    decoded, used = decode_bytes(CP1252_TEXT.encode("cp1252"), declared="iso-8859-2")
    assert decoded == CP1252_TEXT
    assert used == "cp1252"


def test_declared_utf8_on_gbk_bytes_falls_through_to_detection() -> None:
    decoded, _ = decode_bytes(GBK_TEXT.encode("gbk"), declared="utf-8")
    assert decoded == GBK_TEXT


def test_utf8_with_one_stray_byte_stays_utf8() -> None:
    text = "Grüße aus Köln: schöne Bücher über Äpfel und Öfen. " * 40
    data = text.encode()
    data = data[:1000] + b"\xfc" + data[1000:]
    decoded, used = decode_bytes(data)
    assert used == "utf-8"
    assert decoded.count("\ufffd") == 1
    assert decoded.replace("\ufffd", "") == text


@pytest.mark.parametrize(
    ("data", "expected_codec"),
    [
        ("Plain text, größer als 10 €.\n".encode("utf-16-le"), "utf-16-le"),
        ("Plain text, größer als 10 €.\n".encode("utf-16-be"), "utf-16-be"),
        (codecs.BOM_UTF16_LE + "Plain text, größer als 10 €.\n".encode("utf-16-le"), "utf-16-le"),
        (codecs.BOM_UTF16_BE + "Plain text, größer als 10 €.\n".encode("utf-16-be"), "utf-16-be"),
        (codecs.BOM_UTF32_LE + "Plain text, größer als 10 €.\n".encode("utf-32-le"), "utf-32-le"),
        (codecs.BOM_UTF32_BE + "Plain text, größer als 10 €.\n".encode("utf-32-be"), "utf-32-be"),
        (codecs.BOM_UTF8 + "Plain text, größer als 10 €.\n".encode(), "utf-8"),
    ],
    ids=[
        "utf16le-no-bom",
        "utf16be-no-bom",
        "utf16le-bom",
        "utf16be-bom",
        "utf32le-bom",
        "utf32be-bom",
        "utf8-bom",
    ],
)
def test_unicode_encodings(data: bytes, expected_codec: str) -> None:
    decoded, used = decode_bytes(data)
    assert decoded == "Plain text, größer als 10 €.\n"
    assert used == expected_codec


@pytest.mark.parametrize(
    "data",
    [
        struct.pack("<400I", *range(400)),
        b"\x00\x00\x01\x00" + bytes(range(256)) * 8,
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"notes.txt",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64,
        b"\x1f\x8b\x08\x00" + b"compressed",
    ],
    ids=["nul-laden-records", "control-bytes", "zip", "png", "elf", "gzip"],
)
def test_binary_content_is_refused(data: bytes) -> None:
    with pytest.raises(ConversionError) as caught:
        decode_bytes(data)
    assert caught.value.reason == "binary"
    assert "binary data" in str(caught.value)


def test_a_few_nuls_in_text_are_removed() -> None:
    text = "alpha\x00beta gamma. A normal paragraph of notes\x00 with two stray NUL bytes in it."
    decoded, used = decode_bytes(text.encode())
    assert "\x00" not in decoded
    assert decoded == "alpha beta gamma. A normal paragraph of notes  with two stray NUL bytes in it."
    assert "beta" in decoded.split()
    assert used == "utf-8"


def test_empty_input_is_empty_text() -> None:
    assert decode_bytes(b"") == ("", "utf-8")


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("x-sjis", "cp932"),
        ("windows-31j", "cp932"),
        ("Shift_JIS", "cp932"),
        ("sjis", "cp932"),
        ("iso8859-11", "cp874"),
        ("tis620", "cp874"),
        ("TIS-620", "cp874"),
        ("windows-874", "cp874"),
        ("gb_2312-80", "gb18030"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("x-gbk", "gb18030"),
        ("csbig5", "big5hkscs"),
        ("big5", "big5hkscs"),
        ("latin1", "cp1252"),
        ("ISO-8859-1", "cp1252"),
        ("us-ascii", "cp1252"),
        ("x-user-defined", "cp1252"),
        ("utf8", "utf-8"),
        ('"UTF-8"', "utf-8"),
        ("euc-kr", "cp949"),
        ("ks_c_5601-1987", "cp949"),
        ("iso-8859-9", "cp1254"),
        ("windows-1251", "cp1251"),
        ("iso885915", "iso8859-15"),
        ("utf-16", "utf-16-le"),
        ("UTF-16BE", "utf-16-be"),
    ],
)
def test_widen_label(label: str, codec: str) -> None:
    assert widen_label(label) == codec


@pytest.mark.parametrize("label", ["foo-bar", "", "utf-7", "rot13", "base64", "zlib", "hex"])
def test_widen_label_refuses_unknown_and_non_charsets(label: str) -> None:
    assert widen_label(label) is None
