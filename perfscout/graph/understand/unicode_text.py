"""What a request's characters are, before any pattern reads them: invisible characters removed,
look-alike letters folded, and the skeleton the refusal patterns are matched against.

A refusal pattern such as ``删除`` or ``\\bdelete\\b`` is only as strong as the text it sees:
a zero-width space (``删\\u200b除``), a bidi override, a soft hyphen, a Cyrillic ``е`` in
``dеlete`` or a space inside a Chinese verb would each slip past it. The parser therefore
reads the request with the invisible characters removed (:func:`strip_invisible`, for every
pattern), and the refusals read a skeleton (:func:`skeleton`) in which look-alike letters
are folded to Latin ones, accents dropped, and letters spelled out one by one joined again.
Folding follows the idea of Unicode's confusables (UTS #39): only letters that render like
a Latin letter are folded, so Chinese text is never changed.
"""

from __future__ import annotations

import re
import unicodedata

#: Cyrillic, Greek and other letters drawn like a Latin letter, and the letter they pass for
_LOOK_ALIKE = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "о": "o", "р": "p",
    "с": "c", "у": "y", "х": "x", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ѵ": "v", "м": "m", "н": "h",
    "к": "k", "т": "t", "г": "r", "ь": "b", "п": "n", "ӏ": "l", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "Ѕ": "S", "І": "I", "Ј": "J", "К": "K", "М": "M", "Н": "H", "О": "O",
    "Р": "P", "С": "C", "Т": "T", "Х": "X", "У": "Y", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W",
    # Greek
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "γ": "y", "ω": "w",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin letters drawn like another Latin letter
    "ı": "i", "ȷ": "j", "ʀ": "r", "ꜱ": "s", "ᴅ": "d", "ᴇ": "e", "ʟ": "l", "ᴏ": "o", "ᴜ": "u",
})

#: Characters that take no space: zero-width spaces and joiners, bidi embeddings, overrides
#: and isolates, the soft hyphen, the word joiner, the BOM, tags (all Unicode category Cf),
#: plus variation selectors and the combining grapheme joiner (marks that show nothing).
_INVISIBLE_MARKS = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
                              "\U000e0100-\U000e01ef]")


def strip_invisible(text: str) -> str:
    """``text`` without the characters that render as nothing (see _INVISIBLE_MARKS)."""
    if text.isascii():
        return text
    out = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return _INVISIBLE_MARKS.sub("", out)


def fold_look_alikes(text: str) -> str:
    """Look-alike letters (Cyrillic ``е``, Greek ``ο`` ...) as the Latin letter they pass for, in
    words that hold a Latin letter too (a spoof: ``dеlete``); a word wholly in another script is
    left as it is."""
    if text.isascii():
        return text
    return _MIXED_WORD.sub(lambda m: m.group(0).translate(_LOOK_ALIKE) if re.search(r"[A-Za-z]", m.group(0))
                           else m.group(0), text)


_MIXED_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_CJK = r"[\u3400-\u9fff\uf900-\ufaff]"
#: separators a request may slip inside a Chinese word ("删 除", "删-除", "删·除")
_CJK_GAP = re.compile(rf"(?<={_CJK})[\s·・\-_*.~]+(?={_CJK})")
#: letters spelled out one by one ("d e l e t e", "r.m"): joined
_SPELLED = re.compile(r"(?<![A-Za-z])(?:[A-Za-z][ .\-_*]){2,}[A-Za-z](?![A-Za-z])")


def skeleton(text: str) -> str:
    """The text the refusal patterns read: invisible characters removed, NFKC, every look-alike
    letter folded (in any word), accents dropped, gaps inside Chinese words and between letters
    spelled one by one removed. Lower-cased."""
    s = unicodedata.normalize("NFKC", strip_invisible(str(text)))
    s = s.translate(_LOOK_ALIKE)
    s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
    s = _CJK_GAP.sub("", s)
    s = _SPELLED.sub(lambda m: re.sub(r"[ .\-_*]", "", m.group(0)), s)
    return s.lower()
