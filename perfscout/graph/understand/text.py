"""The grammar's pieces: the request text with its used spans, numbers, shapes, paths and their
kinds, quotes, and finding dataset names."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfscout.graph.understand.vocab import CJK, phrase_table, dataset_catalogue, vocabulary

# ---------------------------------------------------------------------------- the text


@dataclass
class RequestText:
    """The request being read: lower-cased working copy plus which characters are used."""

    orig: str
    low: str = ""
    used: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.low = self.orig.lower()
        if len(self.low) != len(self.orig):  # rare casefolds that change length
            self.low = self.orig
        self.used = [False] * len(self.orig)

    def free(self, start: int, end: int) -> bool:
        return not any(self.used[start:end])

    def take(self, start: int, end: int) -> None:
        for i in range(start, end):
            self.used[i] = True

    def finditer(self, pattern: re.Pattern[str] | str, *, take: bool = True) -> list[re.Match[str]]:
        """Matches on free text, consumed as they are found (left to right, no overlap)."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        out = []
        for m in rx.finditer(self.low):
            if m.end() > m.start() and self.free(m.start(), m.end()):
                out.append(m)
                if take:
                    self.take(m.start(), m.end())
        return out

    def original(self, m: re.Match[str], group: int = 0) -> str:
        return self.orig[m.start(group):m.end(group)]

    def leftover(self) -> str:
        return "".join(c if not u else " " for c, u in zip(self.orig, self.used))


# ---------------------------------------------------------------------------- numbers

SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NUM_CORE = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
#: 1e-3, 0.001, 1x10^-3, 1×10⁻³, 10^-3, 10**-3, 0.1%, 5e-4
NUMBER = (rf"(?<!\w)(?<!(?<!\.)\.)(?:(?:{_NUM_CORE})\s*[x×*]\s*10\s*(?:\^|\*\*)\s*[-+]?\d+|10\s*(?:\^|\*\*)\s*[-+]?\d+|"
          rf"{_NUM_CORE}\s*%?)")
_ZH_FRACTION = "|".join(sorted(vocabulary()["zh_fractions"], key=len, reverse=True))
ZH_NUMBER = rf"(?:{_ZH_FRACTION})\s*(?:[一二两三四五六七八九十]|\d+(?:\.\d+)?)+"


def to_number(text: str) -> float | None:
    """The value of one written number (see NUMBER, ZH_NUMBER), or None."""
    s = text.strip().lower().replace(" ", "").replace("×", "x")
    zh = vocabulary()["zh_fractions"]
    for prefix in sorted(zh, key=len, reverse=True):
        if s.startswith(prefix):
            rest = s[len(prefix):]
            digits = vocabulary()["zh_digits"]
            n = float(rest) if rest.replace(".", "", 1).isdigit() else float(digits.get(rest, 0)) or None
            return None if n is None else n * float(zh[prefix])
    try:
        if m := re.fullmatch(r"(.+?)x10(?:\^|\*\*)([-+]?\d+)", s):
            return float(m.group(1)) * 10.0 ** int(m.group(2))
        if m := re.fullmatch(r"10(?:\^|\*\*)([-+]?\d+)", s):
            return 10.0 ** int(m.group(1))
        if s.endswith("%"):
            return float(s[:-1]) / 100.0
        return float(s)
    except (ValueError, OverflowError):
        return None


def number_list(text: str, ranged: bool = False) -> list[float]:
    """All numbers of a list or range ("1e-2, 1e-3 and 1e-4", "1e-2 to 1e-4"; ``ranged``:
    the words before it made it a range, as "between 1e-4 and 1e-2")."""
    values = [v for v in (to_number(t) for t in re.findall(rf"{ZH_NUMBER}|{NUMBER}", text.lower())) if v is not None]
    if len(values) == 2 and (ranged or re.search(r"\bto\b|\.\.|~|～|到|至|through|thru|\s-\s|down to|up to", text)):
        lo, hi = sorted(values)
        decades = math.log10(hi / lo) if lo > 0 else 0
        if lo > 0 and decades >= 1 and all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for v in values):
            n = round(decades)
            series = [hi / 10 ** k for k in range(n + 1)]
            return series if values[0] > values[1] else series[::-1]
    return values


# ---------------------------------------------------------------------------- the grammar

QUOTE = re.compile(r"`([^`]+)`|“([^”]+)”|「([^」]+)」|‘([^’]+)’|(?:(?<=\s)|^)'([^']+)'(?=[\s,.;:!?)，。]|$)"
                    r"|(?:(?<=\s)|^)\"([^\"]+)\"(?=[\s,.;:!?)，。]|$)")
SHAPE_SEP = r"\s*[x×*]\s*"
SHAPE = re.compile(rf"(?<![\w.])(\d+(?:{SHAPE_SEP}\d+)+)(?![\w.]|\s*(?:\^|\*\*))|(?<![\w.])(\d+)\s*(?:\^|\*\*)\s*([23])(?!\d)"
                    r"|[(\[]\s*(\d+(?:\s*,\s*\d+)+)\s*[)\]]|\b(?:shape|dims?|dimensions?|size)\s*(?:of\s+)?[:=]?\s*(\d+(?:\s*[, x×*]\s*\d+)*)"
                    r"|(?<![\w.])(\d+)\s+by\s+(\d+)(?:\s+by\s+(\d+))?")
_EN_NUM = r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|twenty"
REPEATS = re.compile(rf"\b({_EN_NUM})\s*(?:repeats?|repetitions?|reps|trials?|runs each|times each|timed runs|runs(?=\s*[.,;)]|\s*$|\s+(?:each|per)\b)"
                      r"|times(?!\s+(?:smaller|less|fewer|more|larger|bigger|faster|slower|compression|ratio|reduction)))\b|\b(once|twice)\b"
                      rf"|\brepeat(?:ed|ing)?\s+(?:it\s+|each\s+)?({_EN_NUM})\s*(?:times|x)?\b|\brepeats?\s*[=:]?\s*(\d+)\b"
                      r"|重复\s*([\d一二两三四五六七八九十]+)\s*[次遍]|(?<![做跑测试评估来\d])([\d二两三四五六七八九十][\d一二两三四五六七八九十]*|一(?=\s*[遍]))\s*[次遍](?:重复)?")
AT_LEAST = (r"(?:at\s+least|no\s+less\s+than|not\s+less\s+than|>=|≥|=>|>(?!=)|over|above|more\s+than|greater\s+than|higher\s+than|"
             r"better\s+than|minimum(?:\s+of)?|min|至少|不低于|不小于|大于等于|大于|高于|超过|以上)")
AT_MOST = (r"(?:at\s+most|no\s+more\s+than|<=|≤|=<|<(?!=)|under|below|less\s+than|lower\s+than|smaller\s+than|"
            r"maximum(?:\s+of)?|max|最多|不超过|不高于|小于等于|小于|低于|以下|以内)")
RATIO_TARGET = re.compile(
    rf"(?:(?:compression\s+)?ratio\s*(?:of|is|=|:)?\s*{AT_LEAST}?\s*|(?:压缩比|压缩率)\s*{AT_LEAST}?\s*|{AT_LEAST}\s*)"
    rf"(\d+(?:\.\d+)?)\s*(?:x\b|×|:1\b|倍|times\b|fold\b)?"
    rf"|(?<![\d.])(\d+(?:\.\d+)?)\s*(?::1\b|x\s+(?:compression|ratio|smaller)|倍)"
    r"|\bat\s+(?:a\s+|an\s+)?(\d+(?:\.\d+)?)\s*(?:x|×)(?![\w.])")
PSNR_TARGET = re.compile(rf"psnr\s*(?:of|is|=|:)?\s*({AT_LEAST}|{AT_MOST})\s*(\d+(?:\.\d+)?)\s*(?:db)?"
                          rf"|({AT_LEAST}|{AT_MOST})\s*(\d+(?:\.\d+)?)\s*db\b(?:\s*psnr)?"
                          rf"|psnr\s*(\d+(?:\.\d+)?)\s*db\s*({AT_LEAST}|{AT_MOST})"
                          rf"|(?<![\d.])(\d+(?:\.\d+)?)\s*db\s*(?:of\s+)?psnr")
BITRATE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:bits?\s*(?:per|/)\s*(?:value|element|sample|float)|bpv\b|-?bit\s+rate)"
                      r"|每个?值\s*(\d+(?:\.\d+)?)\s*(?:位|比特|bit)|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:位|比特)\s*每个?值")
PSNR_MODE = re.compile(r"\bpsnr\s*(?:mode|bound|of|=|:|at)?\s*(\d+(?:\.\d+)?)\s*(?:db)?(?![\w.])"
                        r"|(?<![\w.])(\d+(?:\.\d+)?)\s*db\b(?:\s*psnr)?")
BOUND_JOIN = r"(?:\s*(?:,|，|、|/|and|or|&|和|或|以及|及|to|through|thru|down\s+to|up\s+to|\.\.|~|～|到|至|-)\s*)"
BOUND_LIST = re.compile(rf"(?:{ZH_NUMBER}|{NUMBER})(?:{BOUND_JOIN}(?:{ZH_NUMBER}|{NUMBER}))*")
BOUND_LEAD = re.compile(r"\s*(?:error\s+bound|bound|eb|tolerance|tol|error|mode|模式|误差界|误差|容限)?\s*(?:of|is|=|:|at|to|with|为|是|设为|设置为)?\s*$")
SYNTH = re.compile(r"\bsynthetic[: ]\s*([a-z_]+):(\d+(?:,\d+)*(?::f(?:32|64))?)")
CLAUSE = re.compile(r"[;；。!！?？\n]|,\s*(?:then|and\s+then|also|after\s+that)\b|\band\b|\bbut\b|\balso\b|，\s*(?:然后|再|接着|并且|另外)|\bthen\b|然后|接着|另外")
#: a path: absolute, ~/ or ./ (up to a space, a comma, a quote or a bracket of any width: "x.f32（float32）"
#: ends at the parenthesis), with folders, or a bare name with a known extension
_PATH = re.compile(r"(?<![\w:/.-])((?:~|\.{1,2})?/[^\s,;，；。、'\"`()\[\]{}<>（）【】「」『』《》]+|(?:[\w.+-]+/)+[\w.+-]*"
                   r"|(?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:%s)(?![\w.]))")
_RUN_LEAD = r"(?:\b(?:runs?|baseline|candidate|reference)\b|运行|基线|候选|基准)"
RUN_ID = re.compile(rf"{_RUN_LEAD}(?:\s*(?:\brun\b|\bid\b|=|:|为|是|运行))*\s*([A-Za-z0-9][\w.-]*)"
                     rf"(?:\s*(?:\band\b|\bvs\b\.?|\bversus\b|\bagainst\b|和|与|,)\s*(?:(?:the\s+)?{_RUN_LEAD}(?:\s*(?:\brun\b|\bid\b|=|:|为|是|运行))*\s*)?([\w.-]+))?")
#: the role a lead word gives the id after it
RUN_ROLE = re.compile(r"(baseline|reference|基线|基准)|(candidate|候选)")
VAR = re.compile(r"\b(?:variable|var|field)\s+(?!(?:of|in|from|the|a|an)\b)[`'\"]?([A-Za-z_][\w.]*)[`'\"]?"
                  r"|\b(?!(?:on|in|of|the|a|an|this|that|my|its|variable|var)\b)([A-Za-z_]\w*)\s+(?:variable|field)\b"
                  r"|变量\s*[`'\"]?([A-Za-z_][\w.]*)")

YES = {"yes", "y", "ok", "okay", "sure", "correct", "right", "yep", "是", "是的", "对", "对的", "好", "好的", "可以", "没错", "确认"}
IGNORE = {"ignore", "ignore it", "skip it", "go on", "continue", "proceed", "never mind", "nevermind", "drop it",
           "without it", "忽略", "继续", "跳过", "不用了", "算了"}
CANCEL = {"cancel", "stop", "abort", "quit", "nothing", "never", "取消", "停止", "退出", "算了吧"}
NO = {"no", "n", "nope", "wrong", "不", "不是", "不对"}


#: a bare file name with any extension ("wmag91.sdat"): a file when it exists in the working directory
BARE_FILE = re.compile(r"(?<![\w:/.-])([\w+-][\w.+-]*\.[A-Za-z0-9_]{1,12})(?![\w/.-])")


def _path_kinds() -> dict[str, str]:
    return {ext: kind for kind, exts in vocabulary()["file_kinds"].items() for ext in exts}


def path_re() -> re.Pattern[str]:
    exts = sorted({e.lstrip(".") for e in _path_kinds()}, key=len, reverse=True)
    return re.compile(_PATH.pattern % "|".join(re.escape(e) for e in exts), re.IGNORECASE)


class SafeFS:
    """File-system questions that never raise: a request can name anything (a 5,000-character
    path, a NUL byte), and an unanswerable question is "no"."""

    @staticmethod
    def exists(p: Path) -> bool:
        try:
            return p.exists()
        except (OSError, ValueError):
            return False

    @staticmethod
    def is_file(p: Path) -> bool:
        try:
            return p.is_file()
        except (OSError, ValueError):
            return False

    @staticmethod
    def is_dir(p: Path) -> bool:
        try:
            return p.is_dir()
        except (OSError, ValueError):
            return False

    @staticmethod
    def path(text: str) -> Path:
        try:
            return Path(text).expanduser()
        except (RuntimeError, ValueError):  # "~nosuchuser/x"
            return Path(text)

    @staticmethod
    def size(p: Path) -> int:
        try:
            return p.stat().st_size if p.is_file() else 0
        except (OSError, ValueError):
            return 0


def path_kind(path: str) -> str:
    """'profile' | 'csv' | 'netcdf' | 'hdf5' | 'zarr' | 'spec' | 'raw' | 'dir' | '' by the file itself where it
    exists (magic bytes), else by its name."""
    p = SafeFS.path(path)
    if SafeFS.is_dir(p):
        if p.suffix.lower() == ".zarr" or SafeFS.exists(p / ".zgroup") or SafeFS.exists(p / "zarr.json") or SafeFS.exists(p / ".zarray"):
            return "zarr"
        return "dir"
    if SafeFS.is_file(p):
        try:
            with p.open("rb") as fh:
                head = fh.read(8)
        except (OSError, ValueError):
            head = b""
        if head.startswith(b"\x89HDF"):
            return "netcdf" if p.suffix.lower() in (".nc", ".nc4", ".netcdf") else "hdf5"
        if head.startswith(b"CDF\x01") or head.startswith(b"CDF\x02") or head.startswith(b"CDF\x05"):
            return "netcdf"
    name = p.name.lower()
    for ext, kind in sorted(_path_kinds().items(), key=lambda kv: len(kv[0]), reverse=True):
        if name.endswith(ext):
            return kind
    return "raw" if SafeFS.is_file(p) else ""


# ---------------------------------------------------------------------------- datasets


@lru_cache(maxsize=1)
def dataset_aliases() -> list[tuple[str, str]]:
    """(alias, dataset name), longest alias first: the name, the name without its
    extension, its dims written as 512x512, and its family ("vorticity")."""
    out: list[tuple[str, str]] = []
    for d in dataset_catalogue():
        name = d["name"]
        if d["kind"] == "synthetic":
            continue  # synthetic kinds are read by the synthetic grammar
        low = name.lower()
        aliases = {low, low.rsplit(".", 1)[0] if low.endswith((".float", ".double", ".f32", ".f64")) else low}
        dims = re.findall(r"\d+", low)
        family = re.split(r"[._\d]", low)[0].strip("-")
        if len(dims) >= 2:
            for sep in ("x", "×", "_", " x ", "*", " by "):
                aliases.add(sep.join(dims))
                if family:
                    aliases.add(f"{family} {sep.join(dims)}")
                    aliases.add(f"{family}.{sep.join(dims)}")
        if family and len(family) >= 4:
            aliases.add(family)
            aliases.add(family.replace("-", " "))
        for other in (vocabulary().get("dataset_families") or {}).get(family, []):
            aliases.add(str(other).lower())
        for other in (vocabulary().get("dataset_aliases") or {}).get(name, []):
            aliases.add(str(other).lower())
        out += [(a, name) for a in aliases if a]
    out.sort(key=lambda r: len(r[0]), reverse=True)
    return out


def _dataset_pattern(alias: str) -> re.Pattern[str]:
    if CJK.search(alias):
        return re.compile(re.escape(alias))
    return re.compile(r"(?<![\w.])" + r"\s*".join(re.escape(p) for p in alias.split()) + r"(?![\w])")


def find_datasets(t: RequestText) -> list[tuple[str, list[str], int]]:
    """(as written, candidate names, where) per dataset mention: one candidate = resolved."""
    found: list[tuple[str, list[str], int]] = []
    by_alias: dict[str, list[str]] = {}
    for alias, name in dataset_aliases():
        by_alias.setdefault(alias, []).append(name)
    for alias in sorted(by_alias, key=len, reverse=True):
        for m in t.finditer(_dataset_pattern(alias)):
            found.append((t.original(m), sorted(set(by_alias[alias])), m.start()))
    return found


def file_variables(path: str) -> list[dict[str, Any]]:
    """The file's variables (name, long_name, standard_name, shape), [] if unreadable here."""
    try:
        from perfscout import datasets

        describe = getattr(datasets, "describe_file", None)
        if describe is None or not SafeFS.exists(SafeFS.path(path)):
            return []
        out = []
        for v in describe(path):
            if getattr(v, "is_coordinate", False) or not getattr(v, "loadable", True):
                continue  # lat/lon/time axes and non-numeric variables are not fields to compress
            out.append({"name": v.name, "long_name": v.long_name, "standard_name": v.standard_name,
                        "shape": v.shape})
        return out
    except Exception:
        return []


def zh_int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text.lower() in vocabulary()["en_numbers"]:
        return int(vocabulary()["en_numbers"][text.lower()])
    digits = vocabulary()["zh_digits"]
    if text in digits:
        return int(digits[text])
    if len(text) == 2 and text[0] == "十" and text[1] in digits:
        return 10 + int(digits[text[1]])
    if len(text) == 2 and text[1] == "十" and text[0] in digits:
        return 10 * int(digits[text[0]])
    return None


def edit_distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions ("zpf" -> "zfp" is 1): how typos look."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def codec_typo(word: str) -> list[str]:
    """Codec ids a word is one typo away from ("zpf", "sz33", "cuzsp"); [] for none."""
    lw = word.lower()
    if len(lw) < 3 or not re.search(r"[a-z]", lw):
        return []
    hits = []
    for codec, rx in phrase_table("codecs"):
        alias = rx.pattern
        for a in (vocabulary()["codecs"].get(codec) or []):
            a = str(a).lower()
            if " " in a or len(a) < 3:
                continue
            limit = 1 if len(a) <= 6 else 2
            if abs(len(a) - len(lw)) <= limit and edit_distance(lw, a) <= limit and lw[0] in a[:2]:
                hits.append(codec)
        del alias
    return sorted(set(hits))
