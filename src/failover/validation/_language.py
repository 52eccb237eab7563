"""Output language, checked cheaply and conservatively: by writing system, not by language.

The check answers one question: is most of the answer written in a script that none of the
allowed languages use? It tells English from Russian, Chinese, Japanese, Korean, Arabic,
Hebrew, Greek, Hindi or Thai, but NOT English from German or Russian from Ukrainian: languages
sharing a script are one to it. A statistical detector would tell those apart, but the ones
that work offline either ship large models (lingua, fastText), are unmaintained (langdetect),
or guess badly on the short answers a route returns; a wrong "wrong language" costs a paid
repair and can fail a good answer, so this check only fails what it is sure of.

How it counts, in "units" of roughly a word each:

- a run of letters of an alphabetic script (Latin, Cyrillic, Greek, Arabic, Hebrew, Hangul,
  the Indic scripts...) is one unit; each Han or kana character is one unit; Thai, Lao, Khmer,
  Myanmar and Tibetan (no spaces between words) count a unit per 4 characters;
- fenced and inline code, URLs and e-mail addresses are left out (code is Latin in any language);
- Han characters are read as Japanese when kana make up at least 5% of the Han and kana,
  otherwise as Chinese; so ``zh`` rejects text with kana, while ``ja`` accepts Han-only text
  (a kanji-only heading is still Japanese);
- fewer than 8 units: too short to judge, passes;
- fails when less than half of the units are in a writing system of an allowed language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["LANGUAGES", "LanguageVerdict", "check_language", "known_language", "language_text_of"]

MIN_UNITS = 8
ALLOWED_SHARE = 0.5
KANA_SHARE_FOR_JAPANESE = 0.05

# Writing systems (a script, with Han split by the kana rule above).
_RANGES: dict[str, str] = {
    "Latin": "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff\uff21-\uff3a\uff41-\uff5a",
    "Greek": "\u0370-\u03ff\u1f00-\u1fff",
    "Cyrillic": "\u0400-\u052f\u2de0-\u2dff\ua640-\ua69f",
    "Armenian": "\u0531-\u058f",
    "Hebrew": "\u0591-\u05ff\ufb1d-\ufb4f",
    "Arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "Devanagari": "\u0900-\u097f",
    "Bengali": "\u0980-\u09ff",
    "Gurmukhi": "\u0a00-\u0a7f",
    "Gujarati": "\u0a80-\u0aff",
    "Tamil": "\u0b80-\u0bff",
    "Telugu": "\u0c00-\u0c7f",
    "Kannada": "\u0c80-\u0cff",
    "Malayalam": "\u0d00-\u0d7f",
    "Sinhala": "\u0d80-\u0dff",
    "Georgian": "\u10a0-\u10ff",
    "Ethiopic": "\u1200-\u137f",
    "Hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
}
_CONTINUOUS: dict[str, str] = {  # no spaces between words: a unit per 4 characters
    "Thai": "\u0e00-\u0e7f",
    "Lao": "\u0e80-\u0eff",
    "Tibetan": "\u0f00-\u0fff",
    "Myanmar": "\u1000-\u109f",
    "Khmer": "\u1780-\u17ff",
}
_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_BOPOMOFO = "\u3100-\u312f\u31a0-\u31bf"

_RUN = {name: re.compile(f"[{chars}]+") for name, chars in _RANGES.items()}
_CHAR = {name: re.compile(f"[{chars}]") for name, chars in _CONTINUOUS.items()}
_HAN_RX = re.compile(f"[{_HAN}]")
_KANA_RX = re.compile(f"[{_KANA}]")
_BOPOMOFO_RX = re.compile(f"[{_BOPOMOFO}]")

# What is not prose: fenced code, inline code, URLs, e-mail addresses.
_NOT_PROSE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|\b(?:https?|ftp)://\S+|\bwww\.\S+|\S+@\S+\.\w+", re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Lang:
    name: str
    systems: frozenset[str]


# Writing systems -> "code Name" of the languages written in them (ISO 639-1, plus fil).
_TABLE = """
Latin: af Afrikaans; az Azerbaijani; ca Catalan; cs Czech; cy Welsh; da Danish; de German; en English;
    eo Esperanto; es Spanish; et Estonian; eu Basque; fi Finnish; fil Filipino; fr French; ga Irish; gl Galician;
    ha Hausa; hr Croatian; hu Hungarian; id Indonesian; ig Igbo; is Icelandic; it Italian; jv Javanese; la Latin;
    lb Luxembourgish; lt Lithuanian; lv Latvian; mi Maori; ms Malay; mt Maltese; nb Norwegian Bokmål; nl Dutch;
    nn Norwegian Nynorsk; no Norwegian; pl Polish; pt Portuguese; ro Romanian; sk Slovak; sl Slovenian; so Somali;
    sq Albanian; sv Swedish; sw Swahili; tk Turkmen; tl Tagalog; tr Turkish; uz Uzbek; vi Vietnamese; xh Xhosa;
    yo Yoruba; zu Zulu
Cyrillic: be Belarusian; bg Bulgarian; kk Kazakh; ky Kyrgyz; mk Macedonian; mn Mongolian; ru Russian; tg Tajik;
    tt Tatar; uk Ukrainian
Cyrillic|Latin: sr Serbian; bs Bosnian
Arabic: ar Arabic; fa Persian; ku Kurdish; ps Pashto; sd Sindhi; ug Uyghur; ur Urdu
Hebrew: he Hebrew; iw Hebrew; yi Yiddish
Greek: el Greek
Armenian: hy Armenian
Georgian: ka Georgian
Devanagari: hi Hindi; mr Marathi; ne Nepali; sa Sanskrit
Bengali: bn Bengali; as Assamese
Gurmukhi: pa Punjabi
Gujarati: gu Gujarati
Tamil: ta Tamil
Telugu: te Telugu
Kannada: kn Kannada
Malayalam: ml Malayalam
Sinhala: si Sinhala
Ethiopic: am Amharic; ti Tigrinya
Thai: th Thai
Lao: lo Lao
Khmer: km Khmer
Myanmar: my Burmese
Tibetan: bo Tibetan
Chinese: zh Chinese
Japanese|Chinese: ja Japanese
Korean: ko Korean
"""
# ja accepts Han-only text (a kanji-only heading is still Japanese); zh rejects text with kana.


def _parse_table(table: str) -> dict[str, _Lang]:
    out: dict[str, _Lang] = {}
    for block in re.split(r"\n(?=\S)", table.strip()):
        systems, _, entries = block.partition(":")
        for entry in entries.split(";"):
            code, _, name = entry.strip().partition(" ")
            out[code] = _Lang(name.strip(), frozenset(systems.split("|")))
    return out


# ISO 639-1 code (the primary subtag of a language tag) -> its name and writing systems.
LANGUAGES: Mapping[str, _Lang] = _parse_table(_TABLE)

_SYSTEM_NAMES = {"Chinese": "Chinese characters (Han)", "Japanese": "Japanese (kana and kanji)", "Korean": "Hangul"}


def _primary(code: str) -> str:
    """``"en-US"`` -> ``"en"``, ``"zh_Hant"`` -> ``"zh"``, ``"PT"`` -> ``"pt"``."""
    return code.replace("_", "-").split("-", 1)[0].lower()


def known_language(code: str) -> bool:
    return _primary(code) in LANGUAGES


@dataclass(frozen=True, slots=True)
class LanguageVerdict:
    ok: bool
    units: int  # how much prose was weighed (0: nothing to judge)
    dominant: str | None = None  # the writing system with the most units
    share: float = 1.0  # share of units in an allowed writing system
    message: str | None = None  # when not ok: what failed and how to fix it


def _units(text: str) -> dict[str, float]:
    prose = _NOT_PROSE.sub(" ", text)
    counts: dict[str, float] = {}
    if prose.isascii():  # the common case: only Latin letters can be here
        n = len(_RUN["Latin"].findall(prose))
        return {"Latin": n} if n else counts
    for name, rx in _RUN.items():
        n = len(rx.findall(prose))
        if n:
            counts[name] = n
    for name, rx in _CHAR.items():
        n = _count(rx, prose)
        if n:
            counts[name] = n / 4
    han, kana, bopo = _count(_HAN_RX, prose), _count(_KANA_RX, prose), _count(_BOPOMOFO_RX, prose)
    if kana and kana >= KANA_SHARE_FOR_JAPANESE * (han + kana):
        counts["Japanese"] = han + kana
    else:
        if han or bopo:
            counts["Chinese"] = han + bopo
        if kana:
            counts["Japanese"] = kana
    if "Hangul" in counts:
        counts["Korean"] = counts.pop("Hangul")
    return counts


def _count(rx: re.Pattern[str], text: str) -> int:
    return rx.subn("", text)[1]


@lru_cache(maxsize=256)
def _allowed(codes: frozenset[str]) -> tuple[frozenset[str], str, str] | None:
    """(writing systems, "English or German", "Latin script"), or None if any code is unknown."""
    langs = []
    for code in sorted(codes):
        lang = LANGUAGES.get(_primary(code))
        if lang is None:
            return None  # cannot say which script it uses: no constraint
        if lang not in langs:
            langs.append(lang)
    systems = frozenset().union(*(lang.systems for lang in langs))
    names = _or([lang.name for lang in langs])
    scripts = _or(sorted(_SYSTEM_NAMES.get(s, f"{s} script") for s in systems))
    return systems, names, scripts


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def check_language(text: str, languages: Iterable[str]) -> LanguageVerdict:
    """Is ``text`` mostly written in a script of one of ``languages`` (ISO 639-1 codes)?

    Unknown codes and empty ``languages`` put no constraint on the text.
    """
    codes = frozenset(languages)
    allowed = _allowed(codes) if codes else None
    if allowed is None or not text:
        return LanguageVerdict(ok=True, units=0)
    systems, names, scripts = allowed
    counts = _units(text)
    total = sum(counts.values())
    if not counts:
        return LanguageVerdict(ok=True, units=0)
    dominant = max(counts, key=lambda k: counts[k])
    share = sum(n for s, n in counts.items() if s in systems) / total
    if total < MIN_UNITS or share >= ALLOWED_SHARE:
        return LanguageVerdict(ok=True, units=round(total), dominant=dominant, share=share)
    seen = _SYSTEM_NAMES.get(dominant, f"{dominant} script")
    message = (
        f"the answer is mostly written in {seen}, {counts[dominant] / total:.0%} of its words; this route requires"
        f" {names} ({scripts}): write the whole answer in {names}"
    )
    return LanguageVerdict(ok=False, units=round(total), dominant=dominant, share=share, message=message)


def language_text_of(value: object) -> str:
    """The prose inside a structured-output value: its string values, keys left out.

    Strings without whitespace made only of ASCII (enum values, ids, codes, e-mail
    addresses) are left out too: they say nothing about the language of the answer.
    """
    out: list[str] = []
    _collect(value, out, 0)
    return "\n".join(out)


def _collect(value: object, out: list[str], depth: int) -> None:
    if depth > 32:
        return
    if isinstance(value, str):
        if not (value.isascii() and not any(c.isspace() for c in value)):
            out.append(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _collect(v, out, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, out, depth + 1)
