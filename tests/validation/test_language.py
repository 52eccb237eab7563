"""The script-based language check: what it can tell apart, and where it declines to judge."""

from __future__ import annotations

import pytest

from failover.validation import check_language
from failover.validation._language import LANGUAGES, language_text_of


def test_code_and_urls_do_not_count_as_english() -> None:
    text = (
        "Используйте библиотеку requests, чтобы отправить запрос:\n"
        "```python\nimport requests\nresponse = requests.get(url, timeout=10)\nprint(response.json())\n```\n"
        "Подробнее: https://docs.python-requests.org/en/latest/user/quickstart/ и `requests.Session`."
    )
    v = check_language(text, ["ru"])
    assert v.ok and v.dominant == "Cyrillic"
    assert not check_language(text, ["en"]).ok


def test_technical_terms_in_chinese_prose_are_fine() -> None:
    text = "你可以使用 Python 的 requests 库来发送 HTTP 请求。首先安装它：pip install requests"
    assert check_language(text, ["zh"]).ok
    assert not check_language(text, ["en"]).ok


def test_too_short_to_judge_passes() -> None:
    assert check_language("OK 好的", ["ru"]).ok
    assert check_language("42", ["zh"]).units == 0


def test_empty_or_unknown_languages_put_no_constraint() -> None:
    assert check_language("Привет, как дела? Всё хорошо, спасибо большое за помощь сегодня.", []).ok
    assert check_language("Привет, как дела? Всё хорошо, спасибо большое за помощь сегодня.", ["xx"]).ok


def test_language_tags_with_regions_and_scripts() -> None:
    zh = "包裹已于周二离开仓库，预计会在周六比赛之前送达。"
    assert check_language(zh, ["zh-Hans"]).ok and check_language(zh, ["ZH_tw"]).ok
    assert not check_language(zh, ["en-GB"]).ok


def test_same_script_languages_are_not_told_apart() -> None:
    german = "Das Paket hat das Lager am Dienstag verlassen und sollte vor dem Rennen am Samstag ankommen."
    assert check_language(german, ["en"]).ok  # documented: a script check, not a language detector


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("ko", "소포는 화요일에 창고를 떠났으며 토요일 경기 전에 도착할 예정입니다. 감사합니다."),
        ("ar", "غادر الطرد المستودع يوم الثلاثاء ومن المتوقع أن يصل قبل السباق يوم السبت."),
        ("he", "החבילה יצאה מהמחסן ביום שלישי והיא אמורה להגיע לפני המרוץ בשבת הקרובה."),
        ("el", "Το δέμα έφυγε από την αποθήκη την Τρίτη και αναμένεται να φτάσει πριν από τον αγώνα."),
        ("hi", "पार्सल मंगलवार को गोदाम से निकल गया और शनिवार की दौड़ से पहले पहुंच जाना चाहिए।"),
        ("th", "พัสดุออกจากคลังสินค้าเมื่อวันอังคารและน่าจะมาถึงก่อนการแข่งขันในวันเสาร์นี้แน่นอนครับ"),
    ],
)
def test_other_scripts_are_recognised(lang: str, text: str) -> None:
    assert check_language(text, [lang]).ok
    assert not check_language(text, ["en"]).ok


def test_a_little_kana_makes_han_japanese() -> None:
    mostly_kanji = "東京都内の会議室予約完了後の連絡先確認依頼"  # 2 kana in 21 characters: Japanese
    assert check_language(mostly_kanji, ["ja"]).ok
    assert not check_language(mostly_kanji, ["zh"]).ok
    stray = "这家店的招牌上写着の字，看起来很像日本料理店，其实是一家地道的四川火锅店。"  # 1 in 36: still Chinese
    assert check_language(stray, ["zh"]).ok


def test_serbian_accepts_both_of_its_scripts() -> None:
    assert check_language("Пакет је напустио складиште у уторак и требало би да стигне пре суботе.", ["sr"]).ok
    assert check_language("Paket je napustio skladište u utorak i trebalo bi da stigne pre subote.", ["sr"]).ok


def test_json_prose_skips_keys_and_identifier_like_values() -> None:
    value = {"category": "shipping", "id": "ORD-4417", "email": "a@b.co", "reason": "包裹没动", "notes": ["很 急"]}
    assert language_text_of(value) == "包裹没动\n很 急"


def test_the_table_covers_the_common_codes() -> None:
    for code in ("en", "de", "fr", "es", "pt", "it", "nl", "pl", "tr", "vi", "id", "zh", "ja", "ko", "ru", "uk", "ar"):
        assert code in LANGUAGES, code
