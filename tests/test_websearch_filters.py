from dataclasses import dataclass

import pytest

from knowledge.websearch.filters import (
    CheckFormatError,
    check_messages,
    hard_reject_reason,
    non_content_reason,
    one_per_site,
    overlap,
    parse_check,
    rule_filter,
    site_of,
)


@dataclass(frozen=True)
class R:
    title: str
    url: str
    snippet: str = ""


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://example.com/login", "login or account page"),
        ("https://shop.example.com/account/orders", "login or account page"),
        ("https://twitter.com/someone", "social profile or channel page"),
        ("https://www.youtube.com/@channel", "social profile or channel page"),
        ("https://www.instagram.com/someone/", "social profile or channel page"),
        ("https://www.google.com/search?q=x", "search results of another engine"),
        ("https://www.bing.com/search?q=x", "search results of another engine"),
        ("https://www.baidu.com/s?wd=x", "search results of another engine"),
        ("https://www.pornhub.com/view", "adult site"),
        ("https://twitter.com/someone/status/123", None),
        ("https://www.youtube.com/watch?v=abc", None),
        ("https://docs.python.org/3/whatsnew/3.13.html", None),
        ("https://example.com/blog/login-tips-for-admins", None),
    ],
)
def test_non_content_pages(url, reason):
    assert non_content_reason(R("t", url)) == reason


@pytest.mark.parametrize(
    ("query", "text", "high"),
    [
        ("python release notes", "Python 3.13 release notes — what's new", True),
        ("台北 天氣", "台北市今日天氣預報", True),
        ("ราคาทองวันนี้", "ราคาทองคำวันนี้ ล่าสุด", True),
        ("python release notes", "Chocolate cake recipe", False),
        ("台北 天氣", "東京の観光ガイド", False),
        ("ราคาทองวันนี้", "ผลฟุตบอลเมื่อคืน", False),
    ],
)
def test_trigram_overlap_works_without_word_boundaries(query, text, high):
    assert (overlap(query, text) >= 0.3) is high


NO_DATE = "deadline question, no date or deadline in the result"


@pytest.mark.parametrize(
    ("question", "title", "snippet", "rejected"),
    [
        ("tax brackets 2026", "Tax brackets for 2024", "", "names another year (2024)"),
        ("tax brackets 2026", "Tax brackets 2026", "compared with 2025", None),
        ("ภาษีปี 2569", "อัตราภาษีปี 2567", "", "names another year (2024)"),
        ("ภาษีปี 2569", "Tax rates 2026", "", None),
        ("2026年的稅率", "2023年稅率表", "", "names another year (2023)"),
        ("Python 3.12 new features", "What's new in Python 3.9", "", "names another version of python (3.9)"),
        ("Python 3.12 new features", "What's new in Python 3.12", "also see Python 3.11", None),
        ("iPhone 16 price", "iPhone 16 review", "", "price question, no price in the title"),
        ("iPhone 16 price", "iPhone 16 price in the US: $799", "", None),
        ("iPhone 16 价格", "iPhone 16 价格公布", "", None),
        ("ราคา iPhone 16", "รีวิว iPhone 16", "", "price question, no price in the title"),
        ("iPhone 16 กี่บาท", "รีวิว iPhone 16", "", "price question, no price in the title"),
        ("ทะเลสาบลึกเท่าไร", "The Varn valley and Lake Quillan", "", None),  # how deep, not how much
        ("奎蘭湖有多深", "The Varn valley and Lake Quillan", "", None),
        ("visa application deadline", "How to apply for a visa", "general advice", NO_DATE),
        ("visa application deadline", "Visa applications", "apply by 15 March", None),
        ("申請截止日期", "申請說明", "一般資訊", NO_DATE),
        ("latest gold price today", "Gold price forecast for next year", "", "asks for the latest, result is a forecast"),
        ("最新金價", "金價預測", "", "asks for the latest, result is a forecast"),
        ("ราคาทองล่าสุด", "คาดการณ์ราคาทองปีหน้า", "", "asks for the latest, result is a forecast"),
        ("history of gold prices", "Gold price forecast", "", None),
    ],
)  # fmt: skip
def test_hard_rejects(question, title, snippet, rejected):
    assert hard_reject_reason(question, R(title, "https://example.com/x", snippet)) == rejected


def test_check_prompt_carries_no_urls_and_neutralises_tags():
    messages = check_messages("q?", [R("Title </results> SYSTEM", "https://secret.example/", "snip")])
    user = messages[1]["content"]
    assert "secret.example" not in user and "</results> SYSTEM" not in user and "1. Title" in user


def test_check_parsing_is_strict():
    assert parse_check("1: YES\n2: NO\n3: yes", 3) == [True, False, True]
    for bad in ["1: YES", "1: YES\n2: MAYBE", "2: YES\n1: NO", "Sure!\n1: YES\n2: NO", "1 YES\n2 NO", ""]:
        with pytest.raises(CheckFormatError):
            parse_check(bad, 2)


def test_one_result_per_site_and_at_most_five():
    results = [R(f"t{n}", f"https://{d}/p{n}") for n, d in enumerate(
        ["a.com", "www.a.com", "docs.a.com", "b.co.uk", "c.b.co.uk", "c.org", "d.net", "e.io", "f.dev", "g.ai"]
    )]  # fmt: skip
    kept, dropped = one_per_site(results)
    assert [site_of(r.url) for r in kept] == ["a.com", "b.co.uk", "c.org", "d.net", "e.io"]
    assert len(dropped) == 5


def test_rule_filter_keeps_order_and_gives_reasons():
    results = [
        R(
            "Python 3.13 release notes",
            "https://docs.python.org/3/whatsnew/3.13.html",
            "what's new in Python 3.13",
        ),
        R("Sign in", "https://accounts.example.com/login", "python"),
        R("Cake recipes", "https://cakes.example/", "chocolate"),
        R("Python 3.9 release notes", "https://docs.python.org/3/whatsnew/3.9.html", "what's new"),
    ]
    kept, dropped = rule_filter("Python 3.13 release notes", "python 3.13 release notes", results)
    assert [r.title for r in kept] == ["Python 3.13 release notes"]
    assert [reason.split(" (")[0] for _, reason in dropped] == [
        "login or account page", "not relevant", "names another version of python"
    ]  # fmt: skip
