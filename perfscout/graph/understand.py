"""The offline parser: a request in English or Chinese -> an :class:`~perfscout.state.intent.Intent`.

No network, no model, the same text always gives the same intent. What words mean lives
in ``vocabulary.yaml`` beside this file (synonyms, units, refusals); this module holds the
grammar of numbers, shapes, paths and quotes, and the bookkeeping that makes every part
of a request accounted for: each recognised piece marks its characters as used, and what
is left over is either filler, reported as not used, or -- a clause made only of words the
parser could not place -- asked about. A request that asks for anything outside the tool
whitelist is refused as a whole before anything else is read.

:func:`parse` reads a request; :func:`assess` fills ``Intent.missing`` with the questions
that must be answered before anything runs; :func:`apply_answer` folds an answer in.
"""

from __future__ import annotations

import contextvars
import copy
import difflib
import math
import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from perfscout.state.intent import CODEC_QUESTIONS, DataRef, Intent, Pending, Target
from perfscout.state.modes import POINTWISE_BOUND_MODES, REQUEST_MODES

# ---------------------------------------------------------------------------- vocabulary


@lru_cache(maxsize=1)
def vocabulary() -> dict[str, Any]:
    text = resources.files("perfscout.graph").joinpath("vocabulary.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _phrase_pattern(phrase: str) -> str:
    """A phrase as a regex: Latin words on word boundaries, Chinese as a substring."""
    parts = [re.escape(p) for p in phrase.lower().split()]
    body = r"\s*".join(parts) if _CJK.search(phrase) else r"\s+".join(parts)
    if _CJK.search(phrase[:1]) and _CJK.search(phrase[-1:]):
        return body
    left = "" if _CJK.search(phrase[:1]) else r"(?<![\w.-])"
    right = "" if _CJK.search(phrase[-1:]) else r"(?![\w-])"
    return left + body + right


@lru_cache(maxsize=None)
def _table(section: str) -> list[tuple[str, re.Pattern[str]]]:
    """(meaning, compiled phrase) for one vocabulary section, longest phrase first."""
    entries = vocabulary().get(section) or {}
    rows = [(str(meaning), str(p)) for meaning, phrases in entries.items() for p in phrases or []]
    rows.sort(key=lambda r: len(r[1]), reverse=True)
    return [(m, re.compile(_phrase_pattern(p))) for m, p in rows]


@lru_cache(maxsize=1)
def _filler() -> frozenset[str]:
    f = vocabulary()["filler"]
    return frozenset(str(w).lower() for w in f["en"]) | frozenset(str(w) for w in f["zh"])


#: the catalogues, asked once per parse (probing the codecs runs the linker's search; the
#: dataset registry is a YAML file): one request sees one state of the installation
_CATALOGUES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("perfscout_catalogues", default=None)


def _memo(key: str, make: Any) -> Any:
    memo = _CATALOGUES.get()
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return copy.deepcopy(memo[key])


def codec_catalogue() -> dict[str, dict[str, Any]]:
    """Every registered codec by id: device, modes, whether usable here and why not."""
    def make() -> dict[str, dict[str, Any]]:
        try:
            from perfscout.codecs.registry import list_codecs

            return {i.id: i.model_dump() for i in list_codecs()}
        except Exception:  # a broken optional backend must not take the planner down
            return {}

    return _memo("codecs", make)


def dataset_catalogue() -> list[dict[str, Any]]:
    """Registry datasets (name, kind, shape, description); empty if the registry fails."""
    def make() -> list[dict[str, Any]]:
        try:
            from perfscout.datasets import list_datasets

            return [{"name": d.name, "kind": d.kind, "shape": list(d.shape), "description": d.description,
                     "available": d.available, "reason": getattr(d, "reason", "") or ""} for d in list_datasets()]
        except Exception:
            return []

    return _memo("datasets", make)


# ---------------------------------------------------------------------------- the text


@dataclass
class _Text:
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

_SUPER = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
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


def _number_list(text: str, ranged: bool = False) -> list[float]:
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

_QUOTE = re.compile(r"`([^`]+)`|“([^”]+)”|「([^」]+)」|‘([^’]+)’|(?:(?<=\s)|^)'([^']+)'(?=[\s,.;:!?)，。]|$)"
                    r"|(?:(?<=\s)|^)\"([^\"]+)\"(?=[\s,.;:!?)，。]|$)")
_SHAPE_SEP = r"\s*[x×*]\s*"
_SHAPE = re.compile(rf"(?<![\w.])(\d+(?:{_SHAPE_SEP}\d+)+)(?![\w.]|\s*(?:\^|\*\*))|(?<![\w.])(\d+)\s*(?:\^|\*\*)\s*([23])(?!\d)"
                    r"|[(\[]\s*(\d+(?:\s*,\s*\d+)+)\s*[)\]]|\b(?:shape|dims?|dimensions?|size)\s*(?:of\s+)?[:=]?\s*(\d+(?:\s*[, x×*]\s*\d+)*)"
                    r"|(?<![\w.])(\d+)\s+by\s+(\d+)(?:\s+by\s+(\d+))?")
_EN_NUM = r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|twenty"
_REPEATS = re.compile(rf"\b({_EN_NUM})\s*(?:repeats?|repetitions?|reps|trials?|runs each|times each|timed runs|runs(?=\s*[.,;)]|\s*$|\s+(?:each|per)\b)"
                      r"|times(?!\s+(?:smaller|less|fewer|more|larger|bigger|faster|slower|compression|ratio|reduction)))\b|\b(once|twice)\b"
                      rf"|\brepeat(?:ed|ing)?\s+(?:it\s+|each\s+)?({_EN_NUM})\s*(?:times|x)?\b|\brepeats?\s*[=:]?\s*(\d+)\b"
                      r"|重复\s*([\d一二两三四五六七八九十]+)\s*[次遍]|(?<![做跑测试评估来\d])([\d二两三四五六七八九十][\d一二两三四五六七八九十]*|一(?=\s*[遍]))\s*[次遍](?:重复)?")
_AT_LEAST = (r"(?:at\s+least|no\s+less\s+than|not\s+less\s+than|>=|≥|=>|>(?!=)|over|above|more\s+than|greater\s+than|higher\s+than|"
             r"better\s+than|minimum(?:\s+of)?|min|至少|不低于|不小于|大于等于|大于|高于|超过|以上)")
_AT_MOST = (r"(?:at\s+most|no\s+more\s+than|<=|≤|=<|<(?!=)|under|below|less\s+than|lower\s+than|smaller\s+than|"
            r"maximum(?:\s+of)?|max|最多|不超过|不高于|小于等于|小于|低于|以下|以内)")
_RATIO_TARGET = re.compile(
    rf"(?:(?:compression\s+)?ratio\s*(?:of|is|=|:)?\s*{_AT_LEAST}?\s*|(?:压缩比|压缩率)\s*{_AT_LEAST}?\s*|{_AT_LEAST}\s*)"
    rf"(\d+(?:\.\d+)?)\s*(?:x\b|×|:1\b|倍|times\b|fold\b)?"
    rf"|(?<![\d.])(\d+(?:\.\d+)?)\s*(?::1\b|x\s+(?:compression|ratio|smaller)|倍)"
    r"|\bat\s+(?:a\s+|an\s+)?(\d+(?:\.\d+)?)\s*(?:x|×)(?![\w.])")
_PSNR_TARGET = re.compile(rf"psnr\s*(?:of|is|=|:)?\s*({_AT_LEAST}|{_AT_MOST})\s*(\d+(?:\.\d+)?)\s*(?:db)?"
                          rf"|({_AT_LEAST}|{_AT_MOST})\s*(\d+(?:\.\d+)?)\s*db\b(?:\s*psnr)?"
                          rf"|psnr\s*(\d+(?:\.\d+)?)\s*db\s*({_AT_LEAST}|{_AT_MOST})"
                          rf"|(?<![\d.])(\d+(?:\.\d+)?)\s*db\s*(?:of\s+)?psnr")
_BITRATE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:bits?\s*(?:per|/)\s*(?:value|element|sample|float)|bpv\b|-?bit\s+rate)"
                      r"|每个?值\s*(\d+(?:\.\d+)?)\s*(?:位|比特|bit)|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:位|比特)\s*每个?值")
_PSNR_MODE = re.compile(r"\bpsnr\s*(?:mode|bound|of|=|:|at)?\s*(\d+(?:\.\d+)?)\s*(?:db)?(?![\w.])"
                        r"|(?<![\w.])(\d+(?:\.\d+)?)\s*db\b(?:\s*psnr)?")
_BOUND_JOIN = r"(?:\s*(?:,|，|、|/|and|or|&|和|或|以及|及|to|through|thru|down\s+to|up\s+to|\.\.|~|～|到|至|-)\s*)"
_BOUND_LIST = re.compile(rf"(?:{ZH_NUMBER}|{NUMBER})(?:{_BOUND_JOIN}(?:{ZH_NUMBER}|{NUMBER}))*")
_BOUND_LEAD = re.compile(r"\s*(?:error\s+bound|bound|eb|tolerance|tol|error|mode|模式|误差界|误差|容限)?\s*(?:of|is|=|:|at|to|with|为|是|设为|设置为)?\s*$")
_SYNTH = re.compile(r"\bsynthetic[: ]\s*([a-z_]+):(\d+(?:,\d+)*(?::f(?:32|64))?)")
_CLAUSE = re.compile(r"[;；。!！?？\n]|,\s*(?:then|and\s+then|also|after\s+that)\b|\band\b|\bbut\b|\balso\b|，\s*(?:然后|再|接着|并且|另外)|\bthen\b|然后|接着|另外")
_PATH = re.compile(r"(?<![\w:/.-])((?:~|\.{1,2})?/[^\s,;，；。'\"`)]+|(?:[\w.+-]+/)+[\w.+-]*"
                   r"|(?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:%s)(?![\w.]))")
_RUN_LEAD = r"(?:\b(?:runs?|baseline|candidate|reference)\b|运行|基线|候选|基准)"
_RUN_ID = re.compile(rf"{_RUN_LEAD}(?:\s*(?:\brun\b|\bid\b|=|:|为|是|运行))*\s*([A-Za-z0-9][\w.-]*)"
                     rf"(?:\s*(?:\band\b|\bvs\b\.?|\bversus\b|\bagainst\b|和|与|,)\s*(?:(?:the\s+)?{_RUN_LEAD}(?:\s*(?:\brun\b|\bid\b|=|:|为|是|运行))*\s*)?([\w.-]+))?")
#: the role a lead word gives the id after it
_RUN_ROLE = re.compile(r"(baseline|reference|基线|基准)|(candidate|候选)")
_VAR = re.compile(r"\b(?:variable|var|field)\s+(?!(?:of|in|from|the|a|an)\b)[`'\"]?([A-Za-z_][\w.]*)[`'\"]?"
                  r"|\b(?!(?:on|in|of|the|a|an|this|that|my|its|variable|var)\b)([A-Za-z_]\w*)\s+(?:variable|field)\b"
                  r"|变量\s*[`'\"]?([A-Za-z_][\w.]*)")

_YES = {"yes", "y", "ok", "okay", "sure", "correct", "right", "yep", "是", "是的", "对", "对的", "好", "好的", "可以", "没错", "确认"}
_IGNORE = {"ignore", "ignore it", "skip it", "go on", "continue", "proceed", "never mind", "nevermind", "drop it",
           "without it", "忽略", "继续", "跳过", "不用了", "算了"}
_CANCEL = {"cancel", "stop", "abort", "quit", "nothing", "never", "取消", "停止", "退出", "算了吧"}
_NO = {"no", "n", "nope", "wrong", "不", "不是", "不对"}


def _path_kinds() -> dict[str, str]:
    return {ext: kind for kind, exts in vocabulary()["file_kinds"].items() for ext in exts}


def _path_re() -> re.Pattern[str]:
    exts = sorted({e.lstrip(".") for e in _path_kinds()}, key=len, reverse=True)
    return re.compile(_PATH.pattern % "|".join(re.escape(e) for e in exts), re.IGNORECASE)


class _FS:
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
    p = _FS.path(path)
    if _FS.is_dir(p):
        if p.suffix.lower() == ".zarr" or _FS.exists(p / ".zgroup") or _FS.exists(p / "zarr.json") or _FS.exists(p / ".zarray"):
            return "zarr"
        return "dir"
    if _FS.is_file(p):
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
    return "raw" if _FS.is_file(p) else ""


# ---------------------------------------------------------------------------- datasets


@lru_cache(maxsize=1)
def _dataset_aliases() -> list[tuple[str, str]]:
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
    if _CJK.search(alias):
        return re.compile(re.escape(alias))
    return re.compile(r"(?<![\w.])" + r"\s*".join(re.escape(p) for p in alias.split()) + r"(?![\w])")


def _find_datasets(t: _Text) -> list[tuple[str, list[str], int]]:
    """(as written, candidate names, where) per dataset mention: one candidate = resolved."""
    found: list[tuple[str, list[str], int]] = []
    by_alias: dict[str, list[str]] = {}
    for alias, name in _dataset_aliases():
        by_alias.setdefault(alias, []).append(name)
    for alias in sorted(by_alias, key=len, reverse=True):
        for m in t.finditer(_dataset_pattern(alias)):
            found.append((t.original(m), sorted(set(by_alias[alias])), m.start()))
    return found


# ---------------------------------------------------------------------------- parse


def detect_language(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def normalise(text: str) -> str:
    """Superscript exponents, full-width forms, dashes and spaces made plain."""
    s = re.sub(r"10([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: "10^" + m.group(1).translate(_SUPER), str(text))
    s = re.sub(r"(\d)([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: m.group(1) + "^" + m.group(2).translate(_SUPER), s)
    s = unicodedata.normalize("NFKC", s)
    s = s.replace("−", "-").replace("–", " to ").replace("—", " to ").replace("\u00a0", " ")
    s = _ZH_POWER.sub(_zh_power, s)
    s = _PERCENT_WORD.sub(r"\1%", s)  # "0.1 percent" -> "0.1%"
    s = re.sub(r"(?<![\w-])(abs|rel|pw_rel|psnr|rate)(?=\d|\.\d)", r"\1 ", s, flags=re.IGNORECASE)  # "rel1e-3"
    s = _ONE_IN.sub(lambda m: f"{1 / _ONE_IN_WORDS[' '.join(m.group(1).lower().split())]:g}", s)
    return " ".join(_space_scripts(s).split())


_PERCENT_WORD = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)\s*(?:percent|per\s*cent|pct)\b", re.IGNORECASE)
_ONE_IN_WORDS = {"ten": 10, "a hundred": 100, "hundred": 100, "a thousand": 1e3, "thousand": 1e3, "ten thousand": 1e4,
                 "a hundred thousand": 1e5, "hundred thousand": 1e5, "a million": 1e6, "million": 1e6,
                 "100": 100, "1000": 1e3, "10000": 1e4, "100000": 1e5, "1000000": 1e6}
#: "one in a thousand", "1 in 10000": a written fraction, as the number
_ONE_IN = re.compile(r"\b(?:one|1)\s+(?:part\s+)?in\s+(" + "|".join(
    sorted((r"\s+".join(re.escape(w) for w in k.split()) for k in _ONE_IN_WORDS), key=len, reverse=True)) + r")\b",
    re.IGNORECASE)


#: "10的负3次方", "10 的 -3 次方", "1乘10的负三次方": written powers of ten, made 10^-3
_ZH_POWER = re.compile(r"(?<![\d.])(?:(\d+(?:\.\d+)?)\s*(?:乘以|乘|x|×|\*)\s*)?10\s*的\s*(负|-|正|\+)?\s*([0-9]+|[一二两三四五六七八九十]+)\s*次(?:方|幂)")
#: a quoted span, left exactly as written (a program's argv)
_QUOTED_SPAN = re.compile(r"`[^`]*`|“[^”]*”|「[^」]*」|'[^'\s][^']*'|\"[^\"]*\"")
_SCRIPT_EDGE = re.compile(r"(?<=[\u3400-\u9fff\uf900-\ufaff])(?=[A-Za-z0-9./~{])|(?<=[A-Za-z0-9%}])(?=[\u3400-\u9fff\uf900-\ufaff])")


def _zh_power(m: re.Match[str]) -> str:
    exp = m.group(3)
    n = int(exp) if exp.isdigit() else _zh_int(exp)
    if n is None:
        return m.group(0)
    sign = "-" if m.group(2) in ("负", "-") else ""
    return f" {m.group(1) + 'x' if m.group(1) else ''}10^{sign}{n} "


def _space_scripts(s: str) -> str:
    """A space where Chinese meets Latin letters or digits ("用SZ3压缩" -> "用 SZ3 压缩"), so
    names and numbers keep their word boundaries; quoted spans are left as written."""
    out, last = [], 0
    for m in _QUOTED_SPAN.finditer(s):
        out += [_SCRIPT_EDGE.sub(" ", s[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(_SCRIPT_EDGE.sub(" ", s[last:]))
    return "".join(out)


def refusal_reason(text: str) -> str:
    """Why a request (outside its quoted program text) must be refused, or ''."""
    low = text.lower()
    for rule in vocabulary()["refusals"]:
        for pattern in rule["patterns"]:
            if m := re.search(pattern, low):
                return f"{rule['reason']} (it says {text[m.start():m.end() + 20].strip()!r})"
    return ""


def _command_refusal(argv: list[str]) -> str:
    prog = Path(argv[0]).name if argv else ""
    if prog in vocabulary()["refused_programs"]:
        return (f"the program to profile is {prog!r}, which changes the system or reaches the network; "
                "perfscout profiles programs that compute, not shell utilities")
    return ""


def _split_argv(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


_WORD_OR_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\S+")
_STOP_WORDS = {"and", "then", "to", "so", "tell", "what", "which", "why", "how", "please", "并", "然后", "看看", "告诉我"}
_SHELL_OPS = {"&&", "||", "|", ">", ">>", "<", ";", "&"}
#: words that end an unquoted argv: prose about the program ("./x slow?", "./x please"), never its arguments
_PROSE_AFTER_ARGV = {"slow", "slower", "fast", "faster", "please", "pls", "now", "here", "quickly", "and", "then", "so",
                     "but", "or", "is", "it", "what", "why", "how", "which", "tell", "show", "give", "for", "if"}
#: words that put a profiler beside a program: "with ncu", "using perf stat", "under nsight compute"
_TOOL_LEADS = {"with", "using", "under", "via", "through", "in", "on", "by", "用", "使用", "在"}


@lru_cache(maxsize=1)
def _profiler_rx() -> re.Pattern[str]:
    """Any profiler's name (vocabulary ``profilers``), longest first."""
    names = sorted({str(p).lower() for ps in (vocabulary().get("profilers") or {}).values() for p in ps}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{_phrase_pattern(n)})" for n in names))


@lru_cache(maxsize=1)
def _counter_rx() -> re.Pattern[str]:
    """Hardware-counter words ("IPC", "cache misses", "occupancy"): asked of a program, a profile."""
    names = sorted({str(p).lower() for p in vocabulary().get("profile_metrics") or []}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{_phrase_pattern(n)})" for n in names))


def _command_words(text: str, start: int) -> tuple[list[str], int]:
    """The argv of an unquoted command starting at ``start``: words (quoted ones whole, so a
    ``;`` inside ``-c '...'`` is data) up to a clause word, a shell operator, punctuation, a
    Chinese word, or the profiler named beside it ("./app with ncu": the argv is ./app)."""
    argv: list[str] = []
    end = start
    for m in _WORD_OR_QUOTED.finditer(text, start):
        token = m.group(0)
        if token in _SHELL_OPS or (token.lower() in _STOP_WORDS and argv):
            break
        quoted = token[0] in "'\"" and token[-1] == token[0] and len(token) > 1
        bare = token.lower().rstrip(",;:.?!")
        if argv and not quoted and (_CJK.search(token) or _profiler_rx().match(text.lower(), m.start())
                                    or bare in _PROSE_AFTER_ARGV
                                    or (token.lower() in _TOOL_LEADS
                                        and _profiler_rx().match(text.lower(), m.end() + 1))):
            break
        stop_after = not quoted and token[-1] in ",;:，；：。?？!！" and len(token) > 1
        if stop_after:
            token = token.rstrip(",;:，；：。?？!！")
        argv += _split_argv(token) if quoted else [token]
        end = m.end()
        if stop_after or (not quoted and token in _SHELL_OPS):
            break
    return argv, end


_PROFILE_CUE = re.compile(r"\bprofil(?:e|ing)\b|剖析|性能分析|\bunder\s+(?:ncu|perf|nsight)\b|\bwhat\s+limits\s+(?:it|this|the\s+program)")
#: a path-like word: ./a.out, bin/app, /opt/x/run, ~/bench
_PATHLIKE = re.compile(r"(?<![\w:/.-])((?:~|\.{1,2})?/[^\s,;，；。'\"`()?？!！]+|(?:[\w.+-]+/)+[\w.+-]+|[\w+-]+\.(?:py|sh|out|x|exe))(?=[\s,;，；。?？!！)]|$)")


#: words after "profile" that describe the program rather than start it
_NOT_A_PROGRAM = (r"it|this|that|the|my|our|a|an|of|cuda|gpu|cpu|kernel|kernels|program|binary|code|app|application|"
                  r"executable|script|benchmark|solver|simulation|these|those|them|with|using|under|via")


def _program_path(word: str) -> bool:
    """Whether a path names a program rather than data: an executable file here, or (absent)
    a name with no data/profile/spec extension, or a script/binary extension."""
    p = _FS.path(word)
    exts = tuple(e for kind, es in vocabulary()["file_kinds"].items() if kind != "program" for e in es)
    programs = tuple(vocabulary()["file_kinds"].get("program") or ())
    name = p.name.lower()
    if name.endswith(programs):
        return True
    if _FS.is_dir(p) or name.endswith(exts):
        return False
    if _FS.is_file(p):
        import os

        return os.access(p, os.X_OK) and path_kind(word) in ("raw", "")
    return "." not in name or name.endswith(".out")


def _program_start(work: str) -> int | None:
    """Where an unquoted program begins in a request that profiles without saying "profile"
    ("nsys ./train.py", "run ./app under ncu", "给 ./a.out 跑一下 perf stat"): its first
    program-like path; None when the request names none."""
    for m in _PATHLIKE.finditer(work):
        if _program_path(m.group(1)):
            # an interpreter just before the script belongs to the argv ("python3 train.py")
            before = re.search(r"(?<![\w./-])(python3?|bash|sh|mpirun(?:\s+-n\s+\d+)?|srun|julia|Rscript)\s+$", work[:m.start()])
            return before.start() if before and not refusal_reason(before.group(0)) else m.start()
    return None


def parse(text: str) -> Intent:
    """Read a request into an Intent (then :func:`assess` adds what must be asked)."""
    token = _CATALOGUES.set({}) if _CATALOGUES.get() is None else None
    try:
        return _parse(text)
    finally:
        if token is not None:
            _CATALOGUES.reset(token)


def _parse(text: str) -> Intent:
    raw = str(text)
    norm = normalise(raw)
    intent = Intent(text=raw, language=detect_language(norm))
    if not norm:
        return assess(intent)
    # 1. quoted spans: the program to profile (exactly as written), or names. A request
    # profiles when it says so, names a profiler, or asks for hardware counters of a program.
    low = norm.lower()
    named_profiler = bool(_profiler_rx().search(low))
    profile_cue = bool(_PROFILE_CUE.search(low)) or named_profiler or (
        bool(_counter_rx().search(low)) and (_program_start(norm) is not None or "`" in norm))

    def unquote(m: re.Match[str]) -> str:
        inner = next(g for g in m.groups() if g is not None)
        looks_like_path = bool(_path_re().fullmatch(inner.strip())) and " " not in inner.strip()
        right_after_cue = bool(re.search(r"(?:\bprofile|剖析|性能分析|\bprogram|\bcommand|程序|命令)\s*:?\s*$",
                                         norm[:m.start()], re.IGNORECASE))
        if profile_cue and not intent.command and not looks_like_path and (m.group(1) or right_after_cue):
            intent.command = _split_argv(inner)
            return " \u2063 "  # a placeholder the grammar never matches
        if profile_cue and m.group(0)[0] in "'\"":
            return m.group(0)  # an argument of an unquoted program: shlex reads it below
        return " " + inner + " "

    work = normalise(_QUOTE.sub(unquote, norm))
    # an unquoted program after "profile" (or, without that word, where the program's path
    # begins): its words up to the first clause boundary
    if profile_cue and not intent.command:
        cue = re.search(r"(?:\bprofile\b|剖析|性能分析)\s*:?\s*(?:the\s+program\s+|program\s+|command\s+|程序\s*)?", work,
                        re.IGNORECASE)
        start = cue.end() if cue else None
        if start is not None:  # "profile with ncu ./app", "用 ncu 剖析 ./app": the profiler is not the program
            lead = re.match(r"\s*(?:(?:with|using|under|via|用|使用)\s+)?", work[start:], re.IGNORECASE)
            tool = _profiler_rx().match(work.lower(), start + lead.end())
            if tool:
                start = tool.end()
        words_after = work[start:].split() if start is not None else []
        if (start is None or not words_after or _counter_rx().match(work.lower(), start)
                or re.fullmatch(_NOT_A_PROGRAM, words_after[0].rstrip(",.?!"), re.IGNORECASE)):
            # "profile my CUDA kernel ./spmv", "why is ./bin/x slow? profile it": the program is the path
            start = _program_start(work) if _program_start(work) is not None else start
        if start is not None:
            argv, end = _command_words(work, start)
            first = argv[0] if argv else ""
            is_profile_file = bool(first) and bool(_path_re().fullmatch(first)) and path_kind(first) in ("profile", "csv")
            if argv and not re.fullmatch(r"(?:it|this|that|the|my|a|an|of)", first, re.IGNORECASE) and not is_profile_file:
                intent.command = argv
                work = work[:start] + " \u2063 " + work[end:]
    # 2. refusals, on everything but the program's own argv
    why = refusal_reason(work) or _command_refusal(intent.command)
    if why:
        intent.refusal = why
        return intent
    t = _Text(work)
    t.finditer(re.compile("\u2063"))
    cue_spans = [(q, m.start(), m.end()) for q, rx in _table("questions") for m in t.finditer(rx, take=False)]
    _read_paths(t, intent)
    _read_runs(t, intent)
    _read_missing_values(t, intent)  # before bounds: "fill the missing values with 0" is no bound
    _read_synthetic(t, intent)
    if any(d.kind == "raw" for d in intent.data):
        _read_shape_dtype(t, intent)  # "x.raw 512x512" is a shape, not the field named 512x512
        _read_named_data(t, intent)
    else:
        _read_named_data(t, intent)
        _read_shape_dtype(t, intent)
    _read_repeats(t, intent)  # "and 5 repetitions" is a count, not a bound of the list before it
    _read_targets_and_bounds(t, intent)
    _read_codecs(t, intent)
    _read_foreign_codecs(t, intent)
    _read_devices(t, intent)
    _read_metrics(t, intent)
    _read_question(t, intent, cue_spans)
    if intent.question in CODEC_QUESTIONS:
        _ask_about_machine_clause(work, intent)
    if intent.question in ("profile", "diagnose") and (intent.codecs or intent.codec_groups or intent.bounds or intent.data):
        # "profile ./a.out and compare sz3 with zfp at ...": one run does one thing; the rest is asked, not dropped
        rest = ", ".join(intent.codecs + [f"{b:g}" for b in intent.bounds] + [d.label() for d in intent.data])
        intent.missing.append(Pending(slot="clause", detail=rest, question=_say(intent, "two_requests", first=intent.question,
                                                                                rest=rest)))
    if intent.question == "profile" and named_profiler:
        tool = _profiler_rx().search(low).group(0)
        kinds = vocabulary().get("profilers") or {}
        runs_it = any(re.fullmatch(_phrase_pattern(str(p)), tool) for k in ("ncu", "perf") for p in kinds.get(k) or [])
        intent.notes.append(_say(intent, "profiler_named" if runs_it else "profiler_not_run", tool=tool))
    _account(t, intent)
    return assess(intent)


_FILL_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_MISSING_WORDS_ZH = r"(?:缺测值|缺失值|缺测|缺失|掩码点|被掩码的点|无效值|填充值|nan)"
#: "fill the missing values with -999", "缺测值填 280", "用 0 填充缺失值": a variable's masked
#: points filled with a stated value (the phrases that keep them aside are vocabulary data)
_FILL_MISSING = re.compile(
    r"\b(?:fill|replace|set)\s+(?:in\s+)?(?:the\s+|all\s+|any\s+)?(?:missing|masked|fill|nan|invalid|land|undefined)"
    r"\s*(?:values?|points?|data|cells?|entries|ones)?\s+(?:with|by|as|to)\s+(" + _FILL_NUMBER + ")"
    rf"|{_MISSING_WORDS_ZH}\s*(?:用|填|填成|填为|替换为|换成|设为|设成)\s*(" + _FILL_NUMBER + r")(?:\s*(?:来)?(?:填充|填补|替换|代替))?"
    rf"|用\s*(" + _FILL_NUMBER + rf")\s*(?:来)?(?:填充|填补|替换|代替)\s*{_MISSING_WORDS_ZH}",
    re.IGNORECASE)


def _read_missing_values(t: _Text, intent: Intent) -> None:
    """How the request says to treat missing values (Intent.masked): filled with a number,
    or kept aside so that only the valid values are evaluated. Unsaid, nothing is assumed:
    the evaluation asks when the data has any."""
    for m in t.finditer(_FILL_MISSING):
        value = float(next(g for g in m.groups() if g))
        if math.isfinite(value) and intent.masked is None:
            intent.masked = value
            intent.notes.append(_say(intent, "masked_fill", value=f"{value:g}"))
    for _, rx in _table("missing_values"):
        if t.finditer(rx) and intent.masked is None:
            intent.masked = "nan"
            intent.notes.append(_say(intent, "masked_nan"))


def _read_paths(t: _Text, intent: Intent) -> None:
    names = {d["name"].lower() for d in dataset_catalogue()}
    for m in t.finditer(_path_re(), take=False):
        path = t.original(m, 1).rstrip(".,:;)?!")
        if path.lower() in names and not _FS.exists(Path(path)):
            continue  # a registry name such as 999x999.float
        kind = path_kind(path)
        if kind in ("", "raw") and ":" in path and not _FS.exists(Path(path)):
            base, var = path.rsplit(":", 1)  # "f.nc:z": the variable z of f.nc
            if var and path_kind(base) in ("netcdf", "hdf5", "zarr"):
                t.take(m.start(), m.start() + len(path))
                intent.data.append(DataRef(kind="file", path=base, var=var, text=path))
                continue
        if kind == "program":
            continue  # a script or binary is a program to profile, read with the command
        if not kind and not path.startswith(("/", "~", "./", "../")):
            continue  # "runs/q" after "into" is an output folder, read below
        t.take(m.start(), m.start() + len(path))
        if kind in ("profile", "csv"):
            intent.profile_file = intent.profile_file or path
        elif kind == "spec":
            intent.sweep_spec = intent.sweep_spec or path
        elif kind == "dir":
            intent.runs.append(path)
        elif kind in ("netcdf", "hdf5", "zarr"):
            intent.data.append(DataRef(kind="file", path=path, text=path))
        else:
            intent.data.append(DataRef(kind="raw", path=path, text=path))
    if intent.sweep_spec and (m := t.finditer(r"(?:\binto|--out|\boutput\s+(?:to|in)\b|\bwrite\s+(?:it\s+|them\s+)?to\b|\bresults?\s+(?:in|to)\b|输出到|写到)\s*([\w./~-]+/?)", take=False)):
        out = m[0]
        intent.sweep_out = t.original(out, 1).rstrip(".,;")
        t.take(out.start(), out.end())
    files = [d for d in intent.data if d.kind == "file"]
    if files and not files[0].var:
        _read_variable(t, intent, files[0])


def _read_variable(t: _Text, intent: Intent, ref: DataRef) -> None:
    """The variable of a netCDF/HDF5/Zarr file: "variable z", "the z in f.nc", "f.nc:z", "f.nc 中的 z"."""
    if ":" in ref.path and not _FS.exists(Path(ref.path)):
        path, var = ref.path.rsplit(":", 1)
        ref.path, ref.var = path, var
        return
    known = _file_variables(ref.path)
    names = [v["name"] for v in known]
    found = [(m, next(g for g in m.groups() if g)) for m in t.finditer(_VAR, take=False)]
    # "compress variable z": the verb before "variable" is not its name; a name the file has wins
    found = [(m, w) for m, w in found if w in names or _resolve_variable(w, known) in names or w.lower() not in _filler()]
    found.sort(key=lambda mw: _resolve_variable(mw[1], known) not in names)
    if found:
        m, word = found[0]
        t.take(m.start(), m.end())
        ref.var = _resolve_variable(word, known)
        return
    # a bare word that is one of the file's variables, or its long/standard name
    for word_m in t.finditer(r"(?<![\w.])([A-Za-z_][\w]*)(?![\w.])", take=False):
        word = t.original(word_m, 1)
        hit = [v["name"] for v in known if word == v["name"] or word.lower() in
               (str(v.get("long_name", "")).lower().split() + [str(v.get("standard_name", "")).lower()])]
        if hit and word.lower() not in ("in", "of", "the", "from"):
            t.take(word_m.start(), word_m.end())
            if word in [v["name"] for v in known]:
                ref.var = word
            elif not ref.var and len(hit) == 1:
                ref.var = hit[0]
    if not ref.var:
        if m := t.finditer(r"(?<![\w.])([A-Za-z_]\w{0,31})\s+(?:in|from|of)\s+(?:the\s+)?(?:file\s+)?$", take=False):
            pass
        for m in t.finditer(r"(?:the\s+)?(?:[a-z]+\s+)?\b([A-Za-z_]\w{0,31})\s+(?=in\s|from\s|of\s)", take=False):
            word = t.original(m, 1)
            if word.lower() not in _filler() or word in [v["name"] for v in known]:
                ref.var = word
                t.take(m.start(1), m.end(1))
                break
        for m in t.finditer(r"(?:中的|里的|里面的|中)\s*(?:变量\s*)?([A-Za-z_]\w*)", take=False):
            ref.var = t.original(m, 1)
            t.take(m.start(), m.end())
            break


def _resolve_variable(word: str, known: list[dict[str, Any]]) -> str:
    """A variable as written -> the file's own name for it: the name itself, the one name that
    differs only in case ("T" for "t"), or the one whose long/standard name it is ("temperature")."""
    names = [v["name"] for v in known]
    if word in names or not known:
        return word
    low = word.lower()
    for pick in ([n for n in names if n.lower() == low],
                 [v["name"] for v in known if low in (str(v.get("long_name", "")).lower(),
                                                      str(v.get("standard_name", "")).lower())],
                 [v["name"] for v in known if low in str(v.get("long_name", "")).lower().split()]):
        if len(pick) == 1:
            return pick[0]
    return word


def _file_variables(path: str) -> list[dict[str, Any]]:
    """The file's variables (name, long_name, standard_name, shape), [] if unreadable here."""
    try:
        from perfscout import datasets

        describe = getattr(datasets, "describe_file", None)
        if describe is None or not _FS.exists(_FS.path(path)):
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


def _read_runs(t: _Text, intent: Intent) -> None:
    if not re.search(r"\bruns?\b|运行|\bbaseline\b|\bcandidate\b|基线|候选|基准", t.low):
        return
    cue = any(p.search(t.low) for m, p in _table("questions") if m == "compare_runs")
    if not cue:
        return
    found: list[tuple[int, str]] = []
    baseline = ""
    candidate = ""
    for m in t.finditer(_RUN_ID, take=False):
        ids = [(m.start(g), t.original(m, g)) for g in (1, 2) if m.group(g)]
        ids = [(p, i) for p, i in ids if i.lower() not in _filler() and not _table_hit("questions", i)
               and not _RUN_ROLE.fullmatch(i.lower())]
        if ids:
            t.take(m.start(), m.end())
            found += ids
            lead_of = {i: t.low[max(m.start(), p - 24):p] for p, i in ids}
            for i, lead in lead_of.items():  # the role word nearest before each id
                roles = list(_RUN_ROLE.finditer(lead))
                if roles and roles[-1].group(1):
                    baseline = baseline or i
                elif roles and roles[-1].group(2):
                    candidate = candidate or i
    runs = list(dict.fromkeys(i for _, i in sorted(found)))
    if len(runs) >= 2 and (baseline in runs[:2] or candidate in runs[:2]) and (baseline or candidate):
        base = baseline if baseline in runs[:2] else next(r for r in runs[:2] if r != candidate)
        runs[:2] = [base, next(r for r in runs[:2] if r != base)]
    elif len(runs) >= 2:
        first_end = sorted(found)[0][0]
        second = next(p for p, i in sorted(found) if i == runs[1])
        between = t.low[first_end:second]
        after = t.low[second + len(runs[1]):second + len(runs[1]) + 6]
        # "B faster than A", "B against A", "B vs A", "B 和 A 相比": the first named is the candidate
        if baseline == runs[1] or (baseline != runs[0] and (re.search(
                r"\bthan\b|\bagainst\b|\bvs\.?\b|\bversus\b|relative\s+to|compared\s+(?:to|with)|相比|比", between)
                or re.match(r"\s*(?:相比|比较|对比)", after))):
            runs[0], runs[1] = runs[1], runs[0]
    intent.runs += [r for r in runs if r not in intent.runs]
    if len(intent.runs) >= 2 and not (baseline or candidate):  # run folders: "candidate run DIR ... baseline DIR"
        roles = {}
        for r in intent.runs[:2]:
            at = t.low.find(r.lower())
            found_roles = list(_RUN_ROLE.finditer(t.low[max(0, at - 30):at])) if at >= 0 else []
            if found_roles:
                roles[r] = "base" if found_roles[-1].group(1) else "cand"
        a, b = intent.runs[:2]
        if roles.get(a) == "cand" or roles.get(b) == "base":
            intent.runs[:2] = [b, a]


def _table_hit(section: str, word: str) -> bool:
    return any(rx.fullmatch(word.lower()) for _, rx in _table(section))


def _read_targets_and_bounds(t: _Text, intent: Intent) -> None:
    for m in t.finditer(_BITRATE):
        v = float(next(g for g in m.groups() if g))
        intent.targets.append(Target(metric="bitrate", op="<=", value=v, text=t.original(m)))
    for m in t.finditer(_PSNR_TARGET):
        g = m.groups()
        op_text, value = (g[0], g[1]) if g[1] else (g[2], g[3]) if g[3] else (g[5], g[4]) if g[4] else (">=", g[6])
        op = "<=" if op_text and re.fullmatch(_AT_MOST, op_text.strip()) else ">="
        intent.targets.append(Target(metric="psnr", op=op, value=float(value), text=t.original(m)))
    for m in t.finditer(_PSNR_MODE, take=False):
        before = t.low[max(0, m.start() - 12):m.start()]
        if m.group(1) or re.search(r"\bat\s*$|\bpsnr\s*$", before):
            intent.mode = intent.mode or "psnr"
            if intent.mode == "psnr":
                intent.bounds.append(float(m.group(1) or m.group(2)))
            t.take(m.start(), m.end())
    _read_unsupported_modes(t, intent)
    # modes with their bounds: a mode word, then (or before) a list or range of numbers
    mode_hits: list[tuple[int, int, str]] = []
    for mode, rx in _table("modes"):
        for m in t.finditer(rx):
            mode_hits.append((m.start(), m.end(), mode))
    for m in re.finditer(r"(?<![\w.-])[a-z]{6,}(?![\w-])", t.low):  # "relatve", "absolut"
        if t.free(m.start(), m.end()) and m.group(0) not in _filler():
            typo = next((mode for mode, word in (("abs", "absolute"), ("rel", "relative"), ("pw_rel", "pointwise"))
                         if _osa(m.group(0), word) <= 1), None)
            if typo:
                t.take(m.start(), m.end())
                mode_hits.append((m.start(), m.end(), typo))
                intent.notes.append(_say(intent, "typo_read", word=t.original(m), meant=typo))
    mode_hits.sort()
    for s_, e_, mode in mode_hits:  # "绝对误差 10", "abs 5", "absolute error of 2": a plain number is the abs bound
        if mode == "abs" and t.free(e_, e_ + 1) and (plain := re.match(
                r"\s*(?:error\s+bound|bound|error|tolerance|误差界|误差)?\s*(?:of|=|:|为|是|取|设为)?\s*(\d+(?:\.\d+)?)"
                r"(?![\w.%^]|\s*(?:x\b|×|倍|db\b|times\b|repeats?\b|runs?\b|次|遍|bits?\b|bpv\b|:1))", t.low[e_:])):
            if t.free(e_, e_ + plain.end()) and not intent.bounds:
                t.take(e_, e_ + plain.end())
                _take_unit(t, intent, e_ + plain.end(), "abs")
                intent.mode = intent.mode or "abs"
                if intent.mode == "abs":
                    intent.bounds.append(float(plain.group(1)))
    weak = _needs_a_number()
    for s_, e_, mode in list(mode_hits):
        if mode in ("psnr", "ratio", "fixed_rate"):
            # these take plain numbers: "fixed-rate mode at 8", "psnr mode 80", "rate 8", "码率为 8"
            plain = (r"\d+(?:\.\d+)?(?:\s*db\b)?(?![\w.]|\s*(?:x\b|×|倍|:1|%))" if mode == "psnr"  # "40, 60 and 80 dB"
                     else r"\d+(?:\.\d+)?(?![\w.]|\s*(?:x\b|×|倍|:1|db\b|%))")
            lead = r"\s*(?:mode|bounds?|targets?|values?|settings?|模式|分别)?\s*(?:of|at|=|:|with|to|为|是|设为|取)?\s*"
            tail = re.match(rf"{lead}({plain}(?:{_BOUND_JOIN}{plain})*)", t.low[e_:])
            if tail and not t.free(e_, e_ + tail.end()):  # "psnr 80 and 5 repeats": the list stops where a slot begins
                tail = re.match(rf"{lead}({plain})", t.low[e_:])
            if tail and t.free(e_, e_ + tail.end()) and (not intent.bounds or intent.mode == mode):
                t.take(e_, e_ + tail.end())
                intent.mode = intent.mode or mode  # type: ignore[assignment]
                if intent.mode == mode:  # "rate 4, 8 and 16": each is a setting
                    intent.bounds += [v for v in _number_list(tail.group(1)) if v not in intent.bounds]
                continue
            if " ".join(t.low[s_:e_].split()) in weak:
                # "show me the PSNR", "the bit rate": a figure to report, not a mode
                mode_hits.remove((s_, e_, mode))
                intent.notes.append(_say(intent, "metric_reported", metric=t.orig[s_:e_]))
        elif " ".join(t.low[s_:e_].split()) in weak and not re.match(
                rf"\s*(?:is\s+|stays?\s+|remains?\s+|must\s+be\s+|of\s+)?(?:under|below|<=?|≤|less\s+than|at\s+most|within|"
                rf"no\s+(?:larger|more|greater|bigger)\s+than|not\s+above|of|=|:|不超过|小于|低于|为|在)?\s*(?:{NUMBER}|{ZH_NUMBER})",
                t.low[e_:]):
            # "keep the max error under 1e-3" is the abs bound; "report the max error" is a figure
            mode_hits.remove((s_, e_, mode))
            intent.notes.append(_say(intent, "metric_reported", metric=t.orig[s_:e_]))
    lists = []
    for m in _BOUND_LIST.finditer(t.low):
        if not t.free(m.start(), m.end()):  # "1e-2 and 5 repetitions": the list ends where another slot begins
            m = _BOUND_LIST.match(t.low, m.start(), next(i for i in range(m.start(), m.end()) if t.used[i]))
        if m and m.end() > m.start() and t.free(m.start(), m.end()) and _looks_like_bound(m.group(0), t.low, m.start(), m.end()):
            lists.append(m)
    by_mode: dict[str, list[float]] = {intent.mode: list(intent.bounds)} if intent.mode and intent.bounds else {}
    for m in lists:
        ranged = bool(re.search(r"(?:\bbetween|\bfrom|\brange|从|介于)\s*$", t.low[max(0, m.start() - 12):m.start()]))
        values = _number_list(t.original(m), ranged)
        if not values:
            continue
        mode = _nearest_mode(mode_hits, m.start(), m.end(), t.low)
        t.take(m.start(), m.end())
        _take_unit(t, intent, m.end(), mode or intent.mode)
        if mode is None and mode_hits:
            mode = mode_hits[-1][2]
        by_mode.setdefault(mode or intent.mode or "", []).extend(values)
        intent.mode = intent.mode or mode
        intent.bounds += [v for v in values if v not in intent.bounds]
    named = {m_: vs for m_, vs in by_mode.items() if m_}
    if len(named) > 1:
        # "sz3 (rel 1e-3) with zfp (abs 1e-3)", "abs=1e-3 and rel=1e-4": one run has one mode for every codec
        cands = [f"{m_} {', '.join(f'{v:g}' for v in vs)}" for m_, vs in named.items()]
        intent.missing.append(Pending(slot="mode", detail=" / ".join(cands), candidates=cands,
                                      question=_say(intent, "two_modes", cands=" or ".join(cands))))
    if mode_hits and not intent.mode:
        intent.mode = mode_hits[0][2]  # "at the absolute error mode" without a number: the bound is asked
    if not intent.bounds:
        _read_bound_count(t, intent)
    for m in t.finditer(_RATIO_TARGET, take=False):
        value = m.group(1) or m.group(2) or m.group(3)
        written = t.low[m.start():m.end()]
        strong = re.search(rf"{_AT_LEAST}|x\b|×|:1|倍|times|fold|ratio|压缩比|压缩率", written)
        if not strong or float(value) < 1:
            continue
        t.take(m.start(), m.end())
        intent.targets.append(Target(metric="ratio", op=">=", value=float(value), text=t.original(m)))


@lru_cache(maxsize=1)
def _needs_a_number() -> frozenset[str]:
    return frozenset(str(w).lower() for w in vocabulary().get("modes_need_a_number") or [])


def _read_unsupported_modes(t: _Text, intent: Intent) -> None:
    """Error controls perfscout does not run (ZFP's fixed precision, an L2-norm bound, lossless):
    asked about with the reason and the modes it has, never read as another mode."""
    for kind, entry in (vocabulary().get("unsupported_modes") or {}).items():
        phrases = sorted((str(p).lower() for p in entry.get("phrases") or []), key=len, reverse=True)
        alts = [str(p) for p in entry.get("patterns") or []] + [_phrase_pattern(p) for p in phrases]
        rx = re.compile("|".join(f"(?:{a})" for a in alts)) if alts else None
        for m in t.finditer(rx) if rx else []:  # the first mention; the others are the same question
            # its own setting ("fixed precision 16", "精度 16") goes with it
            tail = re.match(r"\s*(?:mode|模式)?\s*[,，]?\s*(?:precision|精度|of|at|=|:|为|取)?\s*(\d+)(?![\w.])", t.low[m.end():])
            if kind == "fixed_precision" and tail and t.free(m.end(), m.end() + tail.end()):
                t.take(m.end(), m.end() + tail.end())
            elif kind == "fixed_precision":  # "..., 精度 16" further on is that mode's setting
                t.finditer(r"(?:precision|精度)\s*(?:of|=|:|为|取)?\s*\d+(?![\w.])")
            cands = {"fixed_precision": ["abs", "rel", "fixed_rate"], "l2": ["abs", "rel", "pw_rel", "psnr"],
                     "lossless": ["abs", "rel"]}.get(kind, list(POINTWISE_BOUND_MODES))
            reason = str(entry.get(intent.language) or entry.get("en"))
            intent.missing.append(Pending(slot="mode", detail=t.original(m), candidates=cands,
                                          question=_say(intent, f"unsupported_{kind}" if f"unsupported_{kind}" in _Q["en"]
                                                        else "unsupported", reason=reason, cands=", ".join(cands))))
            intent.notes.append(reason)
            break


_BOUND_COUNT = re.compile(r"\b(?:at\s+|with\s+|for\s+|over\s+|across\s+)?(\d|two|three|four|five|several|a\s+few|multiple|a\s+couple\s+of)\s+"
                          r"(?:different\s+|error\s+|)(?:error\s+)?(?:bounds|tolerances|levels|settings)\b"
                          r"|(?<![\d两三四五几多])([\d两三四五几多]+)\s*(?:个|种)\s*(?:不同的?)?\s*(?:误差界|误差|精度|设置)")


def _read_bound_count(t: _Text, intent: Intent) -> None:
    """"at 3 error bounds", "三个误差界": how many, not which: asked, with a decade series proposed."""
    for m in t.finditer(_BOUND_COUNT):
        word = (m.group(1) or m.group(2) or "").lower()
        n = _zh_int(word) if _zh_int(word) else {"several": 3, "a few": 3, "multiple": 3, "a couple of": 2, "几": 3,
                                                  "多": 3}.get(" ".join(word.split()), 3)
        n = max(1, min(int(n), 6))
        series = [10.0 ** -(k + 2) for k in range(n)]
        mode = intent.mode if intent.mode in POINTWISE_BOUND_MODES else "rel"
        intent.missing.append(Pending(slot="bounds", detail=t.original(m), proposal={"mode": mode, "bounds": series},
                                      question=_say(intent, "bounds_count", n=n, mode=mode,
                                                    series=", ".join(f"{b:g}" for b in series))))
        return


def _take_unit(t: _Text, intent: Intent, at: int, mode: str | None) -> None:
    """A unit right after a bound ("abs 0.5 K"): used, and for an absolute bound said to be the field's own."""
    unit = _units_rx().match(t.low, at)
    if unit and unit.end() > unit.start() and t.free(unit.start(), unit.end()):
        t.take(unit.start(), unit.end())
        if mode == "abs":
            intent.notes.append(_say(intent, "units", unit=t.original(unit).strip(" ()")))


@lru_cache(maxsize=1)
def _units_rx() -> re.Pattern[str]:
    units = sorted({str(u).lower() for u in vocabulary().get("units") or []}, key=len, reverse=True)
    return re.compile(r"\s*\(?\s*(?:" + "|".join(re.escape(u) for u in units) + r")(?![\w/^*])\s*\)?")


def _looks_like_bound(written: str, low: str, start: int, end: int) -> bool:
    """Bounds have an exponent, a fraction, a % or a 10^k; plain integers are other things."""
    if re.search(r"e-|\^|\*\*|%|\.\d|分之", written):
        return True
    after = low[end:end + 10]
    return bool(re.match(r"\s*(?:db)\b", after))


def _nearest_mode(hits: list[tuple[int, int, str]], start: int, end: int, low: str) -> str | None:
    best, dist = None, 10 ** 9
    for s, e, mode in hits:
        gap = start - e if e <= start else s - end
        between = low[e:start] if e <= start else low[end:s]
        if gap < 0 or gap > 40 or not _BOUND_LEAD.match(between) and not re.fullmatch(r"[\s\w]{0,30}", between):
            continue
        if gap < dist:
            best, dist = mode, gap
    return best


def _zh_int(text: str) -> int | None:
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


def _read_repeats(t: _Text, intent: Intent) -> None:
    for m in t.finditer(_REPEATS):
        n = _zh_int(next(g for g in m.groups() if g))
        if n:
            intent.repeats = n
            return
        if n == 0:
            intent.notes.append(_say(intent, "repeats_zero", written=t.original(m)))


@lru_cache(maxsize=1)
def _synthetic_words() -> tuple[list[tuple[str, re.Pattern[str]]], frozenset[str], re.Pattern[str]]:
    voc = vocabulary().get("synthetic") or {}
    kinds = sorted(((k, str(p).lower()) for k, ps in (voc.get("kinds") or {}).items() for p in ps),
                   key=lambda kp: len(kp[1]), reverse=True)
    markers = sorted((str(p).lower() for p in voc.get("markers") or []), key=len, reverse=True)
    return ([(k, re.compile(_phrase_pattern(p))) for k, p in kinds], frozenset(str(w) for w in voc.get("weak") or []),
            re.compile("|".join(f"(?:{_phrase_pattern(p)})" for p in markers)))


_DIMS_WORD = re.compile(r"(?<![\w.])([123])\s*-?\s*d(?![\w])|([一二三])维")
#: what may stand between a synthetic field's words and its shape: "of", "with shape", "field", "数据"
_SYNTH_GAP = re.compile(r"^[\s,:=(]*(?:(?:of|with|shape|size|sized|field|fields|data|grid|cube|数据|的|形状|大小|为|是|场)\s*[:=]?\s*)*$")


def _read_synthetic(t: _Text, intent: Intent) -> None:
    """Synthetic fields: "synthetic:KIND:SHAPE", or in words with a kind, a shape, 2-D/3-D."""
    for m in t.finditer(_SYNTH, take=False):
        if m.group(1):
            t.take(m.start(), m.end())
            intent.data.append(DataRef(kind="synthetic", name=f"{m.group(1)}:{m.group(2)}", text=t.original(m)))
    kinds, weak, markers = _synthetic_words()
    spans: list[tuple[int, int, str]] = []  # (start, end, kind or "" for a marker)
    for m in markers.finditer(t.low):
        if t.free(m.start(), m.end()):
            spans.append((m.start(), m.end(), ""))
    for kind, rx in kinds:
        for m in rx.finditer(t.low):
            if t.free(m.start(), m.end()) and not any(s <= m.start() < e or s < m.end() <= e for s, e, _ in spans):
                spans.append((m.start(), m.end(), kind))
    spans.sort()
    groups: list[list[tuple[int, int, str]]] = []
    for sp in spans:  # words of one mention: "synthetic 3d gaussian random field"
        if groups and re.fullmatch(r"[\s-]*(?:(?:[123]\s*-?\s*d|[一二三]维|the|a|an|of|random|field|的)[\s-]*)*",
                                   t.low[groups[-1][-1][1]:sp[0]]):
            groups[-1].append(sp)
        else:
            groups.append([sp])
    for group in groups:
        start, end = group[0][0], group[-1][1]
        words = [t.low[s:e] for s, e, _ in group]
        kind = next((k for _, _, k in group if k), "")
        marker = any(not k for _, _, k in group)
        after = t.low[end:end + 40]
        shape_m, shape_span = None, None
        for sm in _SHAPE.finditer(after):
            if _SYNTH_GAP.match(after[:sm.start()]):
                shape_m, shape_span = sm, (end + sm.start(), end + sm.end())
            break
        if shape_m is None:  # "a 256^3 synthetic gaussian field"
            before = t.low[max(0, start - 24):start]
            for sm in _SHAPE.finditer(before):
                if re.fullmatch(r"[\s-]*(?:a|an|的|个)?[\s-]*", before[sm.end():]):
                    shape_m, shape_span = sm, (start - len(before) + sm.start(), start - len(before) + sm.end())
        strong = marker or shape_m is not None or any(w not in weak for w in words if w) or "field" in after[:12] or "场" in after[:3]
        if not strong or not (kind or marker):
            continue
        kind = kind or str((vocabulary().get("synthetic") or {}).get("default_kind") or "grf")
        if not any(k for _, _, k in group):
            intent.notes.append(_say(intent, "synthetic_kind", kind=kind))
        t.take(start, end)
        if t.low[end:end + 8].lstrip().startswith(("field", "场")):
            e2 = end + t.low[end:].index("field" if "field" in t.low[end:end + 8] else "场")
            t.take(e2, e2 + (5 if t.low[e2] == "f" else 1))
        shape: list[int] | None = None
        if shape_m is not None and shape_span is not None and t.free(*shape_span):
            shape = _shape_of(shape_m)
            t.take(*shape_span)
        if shape is None:
            window = t.low[max(0, start - 8):end + 12]
            dims_m = _DIMS_WORD.search(window)
            ndim = (int(dims_m.group(1)) if dims_m.group(1) else "一二三".index(dims_m.group(2)) + 1) if dims_m else None
            if dims_m:
                off = max(0, start - 8)
                t.take(off + dims_m.start(), off + dims_m.end())
            default = next((d["shape"] for d in dataset_catalogue() if d["name"] == kind), [64, 64, 64])
            shape = list(default) if ndim in (None, len(default)) else [64] * ndim if ndim > 1 else [4096]
            intent.notes.append(_say(intent, "synthetic_shape", kind=kind, shape="x".join(map(str, shape))))
        intent.data.append(DataRef(kind="synthetic", name=f"{kind}:{','.join(map(str, shape))}",
                                   text=t.orig[start:end]))


def _read_named_data(t: _Text, intent: Intent) -> None:
    dims = {d["name"]: len(d["shape"]) for d in dataset_catalogue()}
    cue = re.search(r"\b([123])\s*-?\s*d\b|([一二三])维", t.low)
    ndim = (int(cue.group(1)) if cue.group(1) else "一二三".index(cue.group(2)) + 1) if cue else None
    found = _find_datasets(t)
    catalogue = {d["name"]: d for d in dataset_catalogue()}
    for written, names, at in found:
        every = re.search(r"(?:\bboth|\ball|\beach|\bevery|两个|所有|全部|各个)\s*(?:of\s+)?(?:the\s+)?(?:two\s+)?$", t.low[max(0, at - 16):at])
        if len(names) > 1 and every:  # "both vorticity fields": each of them
            t.take(at - len(every.group(0)), at)
        elif len(names) > 1 and (by_shape := _pick_by_shape(t, names, catalogue)):
            names = [by_shape]  # "the 41x128x128 vorticity"
        elif len(names) > 1 and ndim is not None and sum(dims.get(n) == ndim for n in names) == 1:
            names = [n for n in names if dims.get(n) == ndim]  # "the 2-D vorticity"
            t.take(cue.start(), cue.end())
        if len(names) == 1 or every:
            others = [w for w, ns, _ in found if ns != names]
            info = catalogue.get(names[0], {})
            if (len(names) == 1 and others and " " not in written.strip() and "." not in written and "-" not in written
                    and not info.get("available") and info.get("kind") == "remote"):
                # "I need to store CESM output... on 999x999.float": a family word beside named data is context
                intent.ignored.append(_say(intent, "dataset_context", word=written, data=", ".join(others)))
                continue
            for name in names:
                if not any(d.kind == "named" and d.name == name for d in intent.data):
                    intent.data.append(DataRef(kind="named", name=name, text=written))
        else:
            intent.missing.append(_ask_which_dataset(intent, written, names))


def _pick_by_shape(t: _Text, names: list[str], catalogue: dict[str, dict[str, Any]]) -> str:
    """The one candidate whose shape is written in the request (any axis order); '' if none or several."""
    for m in t.finditer(_SHAPE, take=False):
        shape = _shape_of(m)
        hits = [n for n in names if shape and sorted(catalogue.get(n, {}).get("shape") or []) == sorted(shape)]
        if len(hits) == 1:
            t.take(m.start(), m.end())
            return hits[0]
    return ""


def _shape_of(m: re.Match[str]) -> list[int] | None:
    g = m.groups()
    if g[0]:
        return [int(x) for x in re.split(_SHAPE_SEP, g[0])]
    if g[1]:
        return [int(g[1])] * int(g[2])
    if g[3]:
        return [int(x) for x in re.split(r"\s*,\s*", g[3])]
    if g[4]:
        return [int(x) for x in re.split(r"\s*[, x×*]\s*", g[4].strip())]
    if g[5]:
        return [int(x) for x in (g[5], g[6], g[7]) if x]
    return None


_ROWS_COLS = re.compile(r"(?<![\w.])(\d+)\s*rows?\s*(?:and|x|×|by|,)?\s*(\d+)\s*col(?:umn)?s?\b")
_NXYZ = re.compile(r"\bn([xyz])\s*[=:]\s*(\d+)\b")


def _written_shape(t: _Text, intent: Intent) -> list[int] | None:
    """Shapes written in words: "64 rows and 64 columns", "nx=91 ny=91 nz=91" (C order: z, y, x)."""
    for m in t.finditer(_ROWS_COLS):
        return [int(m.group(1)), int(m.group(2))]
    axes = {m.group(1): int(m.group(2)) for m in t.finditer(_NXYZ)}
    if len(axes) >= 2:
        shape = [axes[a] for a in "zyx" if a in axes]
        intent.notes.append(_say(intent, "nxyz_order", shape="x".join(map(str, shape))))
        return shape
    return None


def _read_shape_dtype(t: _Text, intent: Intent) -> None:
    worded = _written_shape(t, intent) if any(d.kind == "raw" for d in intent.data) else None
    dtypes = [(m, dt) for dt, rx in _table("dtypes") for m in t.finditer(rx)]
    endians = [(m, e) for e, rx in _table("endian") for m in t.finditer(rx)]
    shapes = ([worded] if worded else []) + [s for s in (_shape_of(m) for m in t.finditer(_SHAPE)) if s]
    raws = [d for d in intent.data if d.kind in ("raw", "file")]
    target = raws[0] if raws else None
    if target is None and (shapes or dtypes) and not any(d.kind in ("named", "synthetic") for d in intent.data):
        if shapes:
            intent.ignored.append("shape " + " x ".join(map(str, shapes[0])) + " (no raw file to apply it to)")
        return
    if target is None:
        synthetic = [d for d in intent.data if d.kind == "synthetic"]
        if dtypes and synthetic:  # "合成数据 64x64x64 双精度": generated in that precision
            for d in synthetic:
                d.dtype = dtypes[0][1]  # type: ignore[assignment]
                d.name = re.sub(r":f(?:32|64)$", "", d.name) + (":f64" if d.dtype == "f64" else "")
        elif dtypes:
            intent.notes.append(f"dtype {dtypes[0][1]} noted; a registry field keeps its own dtype")
        return
    if shapes:
        target.shape = shapes[0]
    if dtypes:
        target.dtype = dtypes[0][1]  # type: ignore[assignment]
    if endians:
        target.endian = endians[0][1]  # type: ignore[assignment]


#: words just before a codec that leave it out: "except zfp", "but not sz2", "don't use zfp", "不要用 sz2"
_EXCLUDE_BEFORE = re.compile(r"(?:\bexcept(?:\s+for)?|\bbut\s+not|\bbut|\bnot|\bwithout|\bexcluding|\bexclude|\bother\s+than|"
                             r"\bskip(?:ping)?|\bleave\s+out|\bleaving\s+out|\bleave|\bdon'?t\s+(?:use|run|include|want|need|try)|"
                             r"\bdo\s+not\s+(?:use|run|include|want|try)|\bno|\bnever|不要用?|不用|别用|不包括|排除|去掉|除去|不含)"
                             r"\s*(?:the\s+)?(?:codecs?\s+|compressors?\s+)?\(?\s*$")
_ZH_EXCEPT = re.compile(r"除了\s*$")
_ZH_EXCEPT_AFTER = re.compile(r".\s*(?:以外|之外)?\s*的?\s*(?:所有|全部|其他|其它|别的)")


def _read_codecs(t: _Text, intent: Intent) -> None:
    catalogue = codec_catalogue()
    hits: list[tuple[int, str]] = []
    for group, rx in _table("codec_groups"):
        for m in t.finditer(rx):
            if group not in intent.codec_groups:
                intent.codec_groups.append(group)  # type: ignore[arg-type]
    table = list(_table("codecs"))
    # registry ids that the vocabulary does not list yet are still names
    listed = {c for c, _ in table}
    table += [(cid, re.compile(_phrase_pattern(cid))) for cid in catalogue if cid not in listed]
    table.sort(key=lambda r: len(r[1].pattern), reverse=True)
    for codec, rx in table:
        for m in t.finditer(rx):
            hits.append((m.start(), codec))
    excluded_at: list[int] = []
    for at, codec in sorted(hits):
        before = t.low[max(0, at - 28):at]
        after = t.low[at:at + 40]
        listed_after_excluded = excluded_at and re.fullmatch(r"[^\s]*\s*(?:,|，|、|and|or|nor|和|或|及)\s*", t.low[excluded_at[-1]:at])
        if _EXCLUDE_BEFORE.search(before) or (_ZH_EXCEPT.search(before) and _ZH_EXCEPT_AFTER.match(after, len(codec) - 1)
                                               or _ZH_EXCEPT.search(before) and re.search(r"以外|之外", after)) \
                or listed_after_excluded:
            # "all compressors except zfp", "(not zfp)", "不要用 sz2": never measured, said in the plan
            if codec not in intent.excluded_codecs:
                intent.excluded_codecs.append(codec)
            excluded_at.append(at)
            for rx in (_EXCLUDE_BEFORE, _ZH_EXCEPT):  # the negation is used, not left over
                if neg := rx.search(before):
                    t.take(at - len(before) + neg.start(), at)
            if zh := re.match(r"\S*\s*(以外|之外)", after):
                t.take(at + zh.start(1), at + zh.end(1))
            continue
        if catalogue and codec not in catalogue:
            intent.notes.append(f"{codec} is not a codec of this installation")
            intent.missing.append(Pending(slot="codecs", detail=codec, candidates=sorted(catalogue),
                                          question=""))
            continue
        if codec not in intent.codecs:
            intent.codecs.append(codec)


@lru_cache(maxsize=1)
def _foreign_table() -> list[tuple[str, re.Pattern[str]]]:
    rows = [(str(name), str(p).lower()) for name, ps in (vocabulary().get("foreign_codecs") or {}).items() for p in ps]
    rows.sort(key=lambda r: len(r[1]), reverse=True)
    # a variant of the name is the same compressor ("sperr-gpu", "mgard_x", "zstd19")
    return [(n, re.compile(_phrase_pattern(p) if " " in p else rf"(?<![\w.-]){re.escape(p)}(?:[-_]?[\w]+)?(?![\w-])"))
            for n, p in rows]


def _read_foreign_codecs(t: _Text, intent: Intent) -> None:
    """Compressors of the field that perfscout cannot run ("mgard", "sperr", "tthresh"): said so
    and asked about (go on without it, or name another), never dropped or read as another."""
    seen: set[str] = set()
    for name, rx in _foreign_table():
        for m in t.finditer(rx):
            if name in seen:
                continue
            seen.add(name)
            intent.notes.append(_say(intent, "codec_foreign_note", name=name))
            intent.missing.append(Pending(slot="codecs", detail=t.original(m), candidates=usable_codecs(),
                                          question=_say(intent, "codecs_foreign", detail=t.original(m), name=name,
                                                        known=", ".join(usable_codecs()) or "none")))


def _osa(a: str, b: str) -> int:
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


def _codec_typo(word: str) -> list[str]:
    """Codec ids a word is one typo away from ("zpf", "sz33", "cuzsp"); [] for none."""
    lw = word.lower()
    if len(lw) < 3 or not re.search(r"[a-z]", lw):
        return []
    hits = []
    for codec, rx in _table("codecs"):
        alias = rx.pattern
        for a in (vocabulary()["codecs"].get(codec) or []):
            a = str(a).lower()
            if " " in a or len(a) < 3:
                continue
            limit = 1 if len(a) <= 6 else 2
            if abs(len(a) - len(lw)) <= limit and _osa(lw, a) <= limit and lw[0] in a[:2]:
                hits.append(codec)
        del alias
    return sorted(set(hits))


@lru_cache(maxsize=1)
def _metrics_rx() -> re.Pattern[str] | None:
    words = sorted({str(w).lower() for w in vocabulary().get("metrics") or []}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{_phrase_pattern(w)})" for w in words)) if words else None


def _read_metrics(t: _Text, intent: Intent) -> None:
    """Figures a request asks to see ("report PSNR and SSIM", "看看 PSNR"): every result has them,
    so they are accounted for (and said so) rather than asked about."""
    rx = _metrics_rx()
    if rx is None:
        return
    named = [t.original(m) for m in t.finditer(rx)]
    shown = [n for n in dict.fromkeys(named) if n.lower() not in ("compression ratio", "ratio", "压缩比")]
    if shown and not any(n in note for note in intent.notes for n in shown):
        intent.notes.append(_say(intent, "metrics_reported", metrics=", ".join(shown)))


def _read_devices(t: _Text, intent: Intent) -> None:
    for dev, rx in _table("devices"):
        for _ in t.finditer(rx):
            if dev not in intent.devices:
                intent.devices.append(dev)  # type: ignore[arg-type]


def _read_question(t: _Text, intent: Intent, cue_spans: list[tuple[str, int, int]]) -> None:
    """The question, from cue phrases found before other slots took their words."""
    cues = []
    for q, start, end in cue_spans:
        if q not in cues and (t.free(start, end) or q in ("describe_machine", "list_codecs", "compare_runs",
                                                            "best_ratio", "fastest_compress", "fastest_decompress",
                                                            "lowest_error", "diagnose")):
            cues.append(q)
        t.take(start, end)
    order = ["describe_machine", "list_codecs", "compare_runs", "diagnose", "profile", "sweep",
             "best_ratio", "fastest_decompress", "fastest_compress", "lowest_error", "compare", "evaluate"]
    if not cues:
        cues = _typo_cues(t)  # "comapre", "benchmrk", "evalute"
    if intent.command:
        intent.question = "profile"
        return
    if intent.profile_file and not intent.data:
        intent.question = "diagnose"
        return
    if intent.sweep_spec and not intent.data and not intent.codecs and ("sweep" in cues or "evaluate" in cues):
        intent.question = "sweep"  # "sweep X.yaml", "run X.yaml"; "look at X.yaml" is asked about
        return
    for q in order:
        if q in cues:
            if q in ("profile", "diagnose") and not (intent.command or intent.profile_file):
                if intent.data or intent.codecs:
                    continue
            if q == "compare_runs" and (intent.codecs or intent.data) and not intent.runs:
                continue
            if q == "sweep" and not intent.sweep_spec and (intent.codecs or intent.data or intent.codec_groups):
                continue  # "sweep sz3 over rel 1e-1..1e-4 on X": the bounds of one measurement
            if q in ("describe_machine", "list_codecs") and (intent.data or intent.codecs or intent.bounds):
                continue
            intent.question = q  # type: ignore[assignment]
            break
    if intent.question in CODEC_QUESTIONS and not (intent.codecs or intent.codec_groups or intent.data
                                                   or intent.bounds or intent.targets or intent.mode):
        intent.question = None  # "make it faster": a cue word alone is not a request to measure
    if intent.question == "compare" and len(intent.codecs) < 2 and not intent.codec_groups:
        intent.question = "evaluate" if intent.codecs else "compare"
    if intent.question == "fastest_compress" and re.search(r"decompress|解压", t.low) and not re.search(
            r"(?<!de)compress(?:ion|ing)?\s+(?:speed|throughput|time)|(?<!解)压缩速度|compress(?:es|ing)?\s+faster", t.low):
        intent.question = "fastest_decompress"  # "is sz3 faster than sz2 at decompressing X?"
    if intent.question in (None, "evaluate", "compare", "list_codecs", "describe_machine"):
        _read_about_question(t, intent)
    if (intent.question in ("evaluate", "compare") and not intent.codecs and not intent.codec_groups
            and re.search(r"\bwhich\s+(?:codec|compressor|one)s?\b|哪个压缩器|哪种压缩器|哪一个压缩器", t.low)):
        intent.codec_groups = ["all"]  # "which codec ... at 16x": a choice among all of them
        intent.question = "best_ratio"
    if intent.question is None and (intent.codecs or intent.data or intent.bounds or intent.codec_groups):
        intent.question = "compare" if len(intent.codecs) >= 2 or intent.codec_groups else "evaluate"


@lru_cache(maxsize=1)
def _single_word_cues() -> list[tuple[str, str]]:
    return [(str(q), str(p).lower()) for q, ps in vocabulary()["questions"].items() for p in ps
            if re.fullmatch(r"[a-z]{6,}", str(p).lower())]


def _typo_cues(t: _Text) -> list[str]:
    """Question words one typo away from a cue ("comapre" -> compare), when no cue was found."""
    found: list[str] = []
    for m in re.finditer(r"(?<![\w.-])[A-Za-z]{6,}(?![\w-])", t.low):
        word = m.group(0)
        if not t.free(m.start(), m.end()) or word in _filler():
            continue
        for q, cue in _single_word_cues():
            if abs(len(cue) - len(word)) <= 1 and _osa(word, cue) <= (1 if len(cue) < 9 else 2):
                t.take(m.start(), m.end())
                found.append(q)
                break
    return found


@lru_cache(maxsize=None)
def _about_rx(question: str, part: str) -> re.Pattern[str] | None:
    words = sorted({str(w).lower() for w in ((vocabulary().get("about_questions") or {}).get(question) or {}).get(part) or []},
                   key=len, reverse=True)
    return re.compile("|".join(f"(?:{_phrase_pattern(w)})" for w in words)) if words else None


def _ask_about_machine_clause(work: str, intent: Intent) -> None:
    """"compare sz3 and zfp ..., and what is the GPU here?": a second question of its own in a
    measurement request is asked about, not read as a device or dropped."""
    low = work.lower()
    cuts = [0] + [m.end() for m in _CLAUSE.finditer(low)] + [len(low)]
    nouns, asks = _about_rx("describe_machine", "nouns"), _about_rx("describe_machine", "asks")
    if nouns is None or asks is None:
        return
    for a, b in zip(cuts[:-1], cuts[1:]):
        clause = low[a:b]
        if (re.search(r"^\W*(?:what|which|how\s+many|how\s+much|is\s+there|do\s+(?:i|we)\s+have)\b|什么|几个|多少|有没有", clause)
                and nouns.search(clause) and not re.search(r"\d|\bsz|\bzfp|\bszp|cusz|nvcomp", clause)):
            text = work[a:b].strip(" ,;:，；。?？")
            intent.devices = [d for d in intent.devices if not re.search(r"gpu|cuda|显卡|cpu", clause)] or intent.devices
            intent.missing.append(Pending(slot="clause", detail=text, question=_say(
                intent, "two_questions", clause=text, first=intent.question)))
            return


def _read_about_question(t: _Text, intent: Intent) -> None:
    """"What's the GPU on this machine?", "how many cores do I have", "这台机器有什么 GPU",
    "list available compressors": a question about this machine or what is installed, when
    the request names nothing to measure."""
    if (intent.codecs or intent.data or intent.bounds or intent.targets or intent.mode or intent.command
            or intent.profile_file or intent.runs or intent.sweep_spec):
        return
    for question in ("list_codecs", "describe_machine"):
        if question == "list_codecs" and intent.question == "describe_machine":
            continue
        nouns, asks = _about_rx(question, "nouns"), _about_rx(question, "asks")
        if nouns is None or asks is None:
            continue
        noun_hits = list(nouns.finditer(t.low))  # "GPU 是什么型号": the device word counts as the noun too
        ask_hits = list(asks.finditer(t.low))
        if noun_hits and (ask_hits or t.low.rstrip().endswith("?")):
            for m in noun_hits + ask_hits:
                t.take(m.start(), m.end())
            if question == "list_codecs":
                intent.codec_groups = []  # "list all compressors": the list, not a measurement of all
            intent.question = question  # type: ignore[assignment]
            return


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][\w'-]*|[\u3400-\u9fff]+", text)


def _strip_zh_filler(run: str) -> str:
    """A run of Chinese characters with the filler phrases removed (longest first)."""
    for w in sorted((w for w in _filler() if _CJK.search(w)), key=len, reverse=True):
        run = run.replace(w, "")
    return run


_CONTEXT_EN = re.compile(r"^\s*(?:(?:in|for|at|since|because|as|from|after|before|during)\b[^,]{0,60},?\s*)?"
                         r"(?:i|i'm|i've|we|we're|we've|my|our|it|it's|this|that|these|those|they|there|people|most|some|"
                         r"usually|typically|normally|currently|anyway|btw|fyi)\b", re.IGNORECASE)
_CONTEXT_ZH = re.compile(r"^\s*(?:我们|我|这|那|他们|通常|一般|目前|其实|顺便)")
#: words that make a clause a request to do something (asked about when nothing in it is understood)
_REQUEST_CUE = re.compile(r"\b(?:please|can\s+you|could\s+you|would\s+you|will\s+you|you\s+(?:should|must|need|can)|wants?|"
                          r"needs?|would\s+like|'d\s+like|wish|make|translate|write|send|create|build|generate|install|"
                          r"convert|print|order|book|call|buy|open|start|launch|do|run|add)\b|请|帮|要|想|需要|给我|翻译|生成|写|做",
                          re.IGNORECASE)


_CODEC_LEAD = r"(?:with|using|use|evaluate|compare|test|benchmark|try|run|codec|compressor|用|使用|压缩器)"
_CODEC_TAIL = r"(?:at|on|in|for|with|vs\.?|versus|against|and|or|mode|压缩|在|和|与)"


def _in_codec_position(clause: str, word: str) -> bool:
    """Whether an unknown word sits where a codec's name goes: "evaluate X at", "compress with X", "X vs sz3"."""
    w = re.escape(word)
    low = clause.lower()
    return bool(re.search(rf"(?<![\w-]){_CODEC_LEAD}\s+{w.lower()}(?:\s+{_CODEC_TAIL}\b|\s*$|\s*[,;?.])", low)
                or re.search(rf"(?<![\w-]){w.lower()}\s+(?:vs\.?|versus|against)\s", low))


def _is_context(clause: str) -> bool:
    """A statement about the user's work ("we ran WRF last week", "In cosmology we care about
    power spectra"), not a request: its words are reported as not used, not asked about."""
    text = clause.strip(" ,;，；。")
    return bool(_CONTEXT_EN.match(text) or _CONTEXT_ZH.match(text)) and not _REQUEST_CUE.search(text)


def _account(t: _Text, intent: Intent) -> None:
    """Every leftover word: filler, a near-miss name (asked), or reported as not used.
    A clause with leftover words and nothing recognised is asked about as a whole."""
    left = t.leftover()
    clauses = [(m.start(), m.end()) for m in _CLAUSE.finditer(t.low)]
    bounds = [0] + [e for _, e in clauses] + [len(left)]
    starts = [0] + [s for s, _ in clauses] + [len(left)]
    spans = list(zip(bounds[:-1], starts[1:]))
    codec_words = sorted({c for c, _ in _table("codecs")} | set(codec_catalogue()))
    unknown_all: list[str] = []
    aliases = [a for a, _ in _dataset_aliases()]
    for m in re.finditer(r"(?<![\w./-])([A-Za-z][\w-]*[._]\d[\w.]*)(?![\w/])", left):
        # "vort.512_512", "vorticty.128_128_41": a registry name written a little wrong
        close = difflib.get_close_matches(m.group(1).lower(), aliases, n=3, cutoff=0.75)
        if close:
            cands = sorted({n for a, n in _dataset_aliases() if a in close})
            intent.missing.append(_ask_which_dataset(intent, m.group(1), cands, typo=True))
            left = left[:m.start()] + " " * (m.end() - m.start()) + left[m.end():]
    for start, end in spans:
        piece_left = left[start:end]
        piece_full = t.orig[start:end]
        unknown = []
        for w in _words(piece_left):
            lw = w.lower().strip("'")
            if _CJK.search(w):
                rest = _strip_zh_filler(w)
                if len(rest) >= 2:
                    unknown.append(rest)
                continue
            if lw in _filler() or len(lw) <= 1:
                continue
            typo = _codec_typo(lw)
            if typo or re.fullmatch(r"(?:sz|zfp|szp|nvcomp)[\w-]*", lw):
                close = typo or difflib.get_close_matches(lw, codec_words, n=3, cutoff=0.5)
                intent.missing.append(Pending(slot="codecs", detail=w, candidates=close or codec_words,
                                              question=""))
                continue
            if (not intent.codecs and not intent.codec_groups and len(lw) >= 3 and not _CJK.search(w)
                    and _in_codec_position(piece_full, w)):
                # "evaluate fancyzip at rel 1e-3": the codec slot holds a name perfscout does not know
                intent.missing.append(Pending(slot="codecs", detail=w, candidates=usable_codecs(),
                                              question=_say(intent, "codecs_not_known", detail=w,
                                                            known=", ".join(usable_codecs()) or "none")))
                continue
            close = difflib.get_close_matches(lw, [a for a, _ in _dataset_aliases()], n=3, cutoff=0.8)
            if close and len(lw) >= 5:
                cands = sorted({n for a, n in _dataset_aliases() if a in close})
                intent.missing.append(_ask_which_dataset(intent, w, cands, typo=True))
                continue
            unknown.append(w)
        recognised = any(t.used[start:end])
        if unknown and not recognised and _is_context(piece_full):
            unknown_all += unknown  # "In cosmology we care about power spectra": said, not asked
        elif unknown and not recognised and re.sub(r"[\W_]", "", piece_full):
            intent.missing.append(Pending(slot="clause", detail=piece_full.strip(" ,;，；。"), question=""))
        elif unknown:
            unknown_all += unknown
    if unknown_all:
        intent.ignored.append(", ".join(dict.fromkeys(unknown_all)))


# ---------------------------------------------------------------------------- questions

_Q = {
    "en": {
        "clause": "I did not understand \"{detail}\", and none of my tools does that (I can: compare and evaluate "
                  "compressors, find the best ratio or the fastest setting, sweep a spec, profile a program, "
                  "diagnose a profile, describe this machine). Answer 'ignore' to go on without it, or say it "
                  "another way.",
        "question": "What should I find out, and on which data? For example: 'compare sz3 and zfp at rel 1e-3 on "
                    "vorticity.512_512', 'which codec gives the best ratio on FILE at abs 1e-4?', "
                    "'profile `./app` and tell me what limits it'.",
        "codecs_unknown": "\"{detail}\" is not a codec I know. Did you mean {cands}? (codecs here: {known})",
        "codecs": "Which compressor(s)? Usable here: {known}; or 'all'.",
        "codecs_foreign": "\"{detail}\" ({name}) is not a compressor perfscout can run: it has no wrapper for it, so "
                          "it is not installed here. Answer 'ignore' to go on without it, or name one to use instead "
                          "(usable here: {known}).",
        "codecs_not_known": "\"{detail}\" is not a compressor I know, and none by that name is installed here. Which "
                            "one should I use: {known}? (or 'all')",
        "codec_foreign_note": "{name} was asked for, but perfscout has no wrapper for it (not installed here)",
        "data_unavailable": "The field {detail} ({description}) is not available here: {reason}. Which field should I "
                            "use instead: {cands}?",
        "mode": "Is {bounds} an absolute error bound ('abs'), relative to the value range ('rel'), or point-wise "
                "relative ('pw_rel')?",
        "bounds": "Which error bound? For example 'rel 1e-3' (relative to the value range), 'abs 1e-4', 'psnr 80' "
                  "or a list such as 'rel 1e-2, 1e-3, 1e-4'.",
        "bounds_mode": "Which {mode} bound(s)? For example 1e-3, or 1e-2, 1e-3, 1e-4.",
        "bounds_count": "Which {n} error bound(s)? Answer 'yes' for {mode} {series}, or name them (e.g. 'abs 1e-2, "
                        "1e-3, 1e-4').",
        "unsupported": "{reason}. Which should I use instead: {cands}? For example 'abs 1e-3' or 'rel 1e-3'.",
        "unsupported_fixed_precision": "{reason}. ZFP's fixed-accuracy mode is perfscout's 'abs' (the tolerance is the "
                                       "bound, and it is checked). Which should I use instead: {cands}? For example "
                                       "'abs 1e-3', 'rel 1e-3' or 'fixed_rate 16' (bits per value).",
        "profiler_named": "the request names {tool}: the profile step picks the profiler itself (Nsight Compute for a "
                          "CUDA program where ncu and a GPU are here, perf stat otherwise); `perfscout profile --tool "
                          "ncu -- CMD` forces one",
        "masked_nan": "missing values as asked: a variable's masked points and any NaN/Inf are kept aside "
                      "(losslessly, beside the stream) and only the valid values are compressed and checked",
        "masked_fill": "missing values as asked: a variable's masked points are filled with {value}, then "
                       "compressed and checked like data",
        "synthetic_kind": "a synthetic field of no named kind: a Gaussian random field ({kind}) is generated",
        "synthetic_shape": "no shape given for the synthetic {kind} field: using {shape}",
        "nxyz_order": "nx/ny/nz read in C order (slowest axis first): {shape}",
        "rates_as_settings": "no error bound named: run at {rates} bits/value (fixed_rate mode)",
        "units": "the bound is in the field's own units ({unit}), taken as given: perfscout does not convert units",
        "zfp_tolerance": "zfp's tolerance is its fixed-accuracy mode: measured as an absolute bound (abs)",
        "dataset_context": "\"{word}\" (read as context: the data named is {data})",
        "two_requests": "The request asks for two things: to {first}, and a measurement of compressors ({rest}). One "
                        "run does one of them: answer 'ignore' to {first} only, and ask for the measurement in a run of "
                        "its own.",
        "two_questions": "The request also asks \"{clause}\", a question of its own (it describes this machine). One "
                         "run answers one: answer 'ignore' to go on with the measurement ({first}), and ask it in a "
                         "run of its own.",
        "two_modes": "The request names two error modes ({cands}); one run measures every codec in one mode. Which "
                     "one: {cands}?",
        "typo_read": "\"{word}\" read as {meant}",
        "repeats_zero": "\"{written}\" is not a number of timed runs: the default (3) is used",
        "profiler_not_run": "the request names {tool}, which perfscout does not run: it profiles with Nsight Compute "
                            "(a CUDA program where ncu and a GPU are here) or perf stat",
        "metrics_reported": "{metrics}: in every result's figures (the report's table and details)",
        "metric_reported": "{metric} is reported for every result (named without a number, it is a figure to show, "
                           "not the error mode)",
        "data": "Which data? Fields known here: {known}; or a file path (netCDF/HDF5/Zarr with its variable, or a "
                "raw file with its shape and dtype), or synthetic:KIND:SHAPE such as synthetic:grf:64,64.",
        "data_which": "Which field did you mean by \"{detail}\": {cands}?",
        "data_typo": "\"{detail}\" is not a field I know. Did you mean {cands}?",
        "data_absent": "The file {detail} does not exist here. Which file should I use instead?",
        "shape_guess": "The file {detail} has {size:,} bytes: is it {guess}? (answer 'yes', or give the shape and "
                       "dtype, e.g. '512x512 float32')",
        "shape": "The file {detail} has {size:,} bytes: what are its shape (C order, slowest axis first) and element "
                 "type (float32 or float64)? e.g. '512x512 float32'.",
        "dtype": "Is {detail} float32 or float64?",
        "var": "Which variable of {detail}: {cands}?",
        "var_unknown": "{detail} has no variable \"{var}\". Which one: {cands}?",
        "command": "Which program should I profile? Put the command in backticks, e.g. profile `./app --size 4096`.",
        "profile_file": "Which profile file? An Nsight Compute report (.ncu-rep), its CSV export, or a perf stat CSV.",
        "profile_absent": "The profile file {detail} does not exist here. Which file should I read?",
        "sweep": "Which sweep spec (a YAML file such as examples/sweep_quick.yaml)?",
        "runs": "Which two runs should I compare? Give the baseline and the candidate (run ids or run directories).",
    },
    "zh": {
        "clause": "我没有理解“{detail}”，而且我的工具都不做这件事（我可以：比较和评估压缩器、找压缩比最高或最快的设置、运行 sweep、"
                  "剖析一个程序、诊断 profile 文件、描述这台机器）。回答“忽略”跳过它继续，或者换一种说法。",
        "question": "要测什么、用哪份数据？例如：“在 vorticity.512_512 上用相对误差 1e-3 比较 sz3 和 zfp”。",
        "codecs_unknown": "我不认识压缩器“{detail}”。您是指 {cands} 吗？（这里可用：{known}）",
        "codecs": "用哪个（些）压缩器？这里可用：{known}；或者回答“全部”。",
        "codecs_foreign": "“{detail}”（{name}）不是 perfscout 能运行的压缩器：没有它的封装，这里也没有安装。回答“忽略”跳过它继续，"
                          "或者换一个（这里可用：{known}）。",
        "codecs_not_known": "我不认识压缩器“{detail}”，这里也没有叫这个名字的压缩器。用哪个：{known}？（或者“全部”）",
        "codec_foreign_note": "请求里有 {name}，但 perfscout 没有它的封装（这里未安装）",
        "data_unavailable": "场 {detail}（{description}）在这里不可用：{reason}。改用哪个场：{cands}？",
        "mode": "{bounds} 是绝对误差界（abs）、相对于值域的误差界（rel），还是逐点相对误差（pw_rel）？",
        "bounds": "误差界是多少？例如“相对误差 1e-3”、“绝对误差 1e-4”、“psnr 80”，或一组值“rel 1e-2, 1e-3, 1e-4”。",
        "bounds_mode": "{mode} 误差界取多少？例如 1e-3，或 1e-2, 1e-3, 1e-4。",
        "bounds_count": "用哪 {n} 个误差界？回答“是”就用 {mode} {series}，或者直接给出（例如“abs 1e-2, 1e-3, 1e-4”）。",
        "unsupported": "{reason}。改用哪一种：{cands}？例如“abs 1e-3”或“rel 1e-3”。",
        "unsupported_fixed_precision": "{reason}。ZFP 的固定准确度模式就是 perfscout 的 abs（容差即误差界，并会被检查）。"
                                       "改用哪一种：{cands}？例如“abs 1e-3”、“rel 1e-3”或“fixed_rate 16”（每个值的位数）。",
        "profiler_named": "请求里提到了 {tool}：剖析步骤会自己选择剖析器（有 ncu 和 GPU 时对 CUDA 程序用 Nsight Compute，否则用 "
                          "perf stat）；`perfscout profile --tool ncu -- CMD` 可以指定",
        "synthetic_kind": "没有指明合成场的类型：生成高斯随机场（{kind}）",
        "masked_nan": "缺测/被掩码的点和 NaN/Inf 按请求放在一边（无损地存在压缩流旁边），只压缩和检查有效值",
        "masked_fill": "变量被掩码的点（缺测/填充值）按请求填成 {value}，之后和数据一样被压缩和检查",
        "synthetic_shape": "合成场 {kind} 没有给出形状：使用 {shape}",
        "nxyz_order": "nx/ny/nz 按 C 顺序（最慢的轴在前）读取：{shape}",
        "rates_as_settings": "没有给出误差界：以每个值 {rates} 位运行（fixed_rate 模式）",
        "units": "误差界按场本身的单位（{unit}）理解：perfscout 不做单位换算",
        "zfp_tolerance": "zfp 的容差就是它的固定准确度模式：按绝对误差界（abs）测量",
        "dataset_context": "“{word}”（当作背景：指定的数据是 {data}）",
        "two_requests": "这个请求要做两件事：{first}，以及测量压缩器（{rest}）。一次运行只做一件：回答“忽略”只做 {first}，"
                        "测量请另起一次运行。",
        "two_questions": "这个请求还问了“{clause}”，这是另一个问题（描述这台机器）。一次运行只回答一个：回答“忽略”继续测量（{first}），"
                         "这个问题请另起一次运行。",
        "two_modes": "请求里有两种误差模式（{cands}）；一次运行对所有压缩器用同一种模式。用哪一种：{cands}？",
        "typo_read": "“{word}”按 {meant} 理解",
        "repeats_zero": "“{written}”不是计时次数：使用默认的 3 次",
        "profiler_not_run": "请求里提到了 {tool}，perfscout 不运行它：剖析用 Nsight Compute（有 ncu 和 GPU 时的 CUDA 程序）或 perf stat",
        "metrics_reported": "{metrics}：每个结果的指标里都有（报告的表格和详情）",
        "metric_reported": "每个结果都会报告 {metric}（没有数值时它是要看的指标，不是误差模式）",
        "data": "用哪份数据？这里已知的场：{known}；或者一个文件路径（netCDF/HDF5/Zarr 加变量名，或原始二进制文件加形状和类型），"
                "或 synthetic:KIND:SHAPE，例如 synthetic:grf:64,64。",
        "data_which": "“{detail}”指的是哪个场：{cands}？",
        "data_typo": "我不认识数据“{detail}”。您是指 {cands} 吗？",
        "data_absent": "文件 {detail} 在这里不存在。应该用哪个文件？",
        "shape_guess": "文件 {detail} 有 {size:,} 字节：它是 {guess} 吗？（回答“是”，或给出形状和类型，例如“512x512 float32”）",
        "shape": "文件 {detail} 有 {size:,} 字节：它的形状（C 顺序，最慢的轴在前）和元素类型（float32 或 float64）是什么？例如“512x512 float32”。",
        "dtype": "{detail} 是 float32 还是 float64？",
        "var": "用 {detail} 里的哪个变量：{cands}？",
        "var_unknown": "{detail} 里没有变量“{var}”。用哪个：{cands}？",
        "command": "要剖析哪个程序？请把命令放在反引号里，例如：剖析 `./app --size 4096`。",
        "profile_file": "哪个 profile 文件？Nsight Compute 报告（.ncu-rep）、它导出的 CSV，或 perf stat 的 CSV。",
        "profile_absent": "profile 文件 {detail} 在这里不存在。应该读哪个文件？",
        "sweep": "用哪个 sweep 配置（YAML 文件，例如 examples/sweep_quick.yaml）？",
        "runs": "比较哪两次运行？请给出基线和候选（运行 id 或运行目录）。",
    },
}


def _say(intent: Intent, key: str, **kw: Any) -> str:
    return _Q[intent.language][key].format(**kw)


def _ask_which_dataset(intent: Intent, written: str, names: list[str], typo: bool = False) -> Pending:
    key = "data_typo" if typo else "data_which"
    return Pending(slot="data", detail=written, candidates=names,
                   question=_say(intent, key, detail=written, cands=" or ".join(names)))


def usable_codecs(devices: list[str] | None = None) -> list[str]:
    cat = codec_catalogue()
    return [c for c, i in cat.items() if i.get("available") and (not devices or i.get("device") in devices)]


def _guess_shapes(path: Path, size: int, dtype: str | None) -> list[str]:
    """Shapes the file's size allows that its name or a cube/square suggest."""
    out = []
    for itemsize, tag in ((4, "float32"), (8, "float64")):
        if dtype and tag[-2:] != dtype[-2:]:
            continue
        if size % itemsize:
            continue
        n = size // itemsize
        dims = [int(x) for x in re.findall(r"\d+", path.name) if int(x) > 1]
        for k in range(len(dims), 0, -1):
            cand = dims[:k]
            if math.prod(cand) == n:
                out.append(f"{'x'.join(map(str, cand))} {tag}")
                break
            if len(cand) == 1 and cand[0] ** 3 == n:
                out.append(f"{cand[0]}x{cand[0]}x{cand[0]} {tag}")
                break
            if len(cand) == 1 and cand[0] ** 2 == n:
                out.append(f"{cand[0]}x{cand[0]} {tag}")
                break
        for power in (3, 2):
            r = round(n ** (1 / power))
            if r > 1 and r ** power == n:
                shape = "x".join([str(r)] * power) + f" {tag}"
                if shape not in out:
                    out.append(shape)
    return out


def assess(intent: Intent) -> Intent:
    """Fill ``intent.missing`` with what must be asked (unknown words already found stay)."""
    if intent.refusal:
        intent.missing = []
        return intent
    unique: dict[tuple[str, str, float], Target] = {}
    for target in intent.targets:  # "psnr above 60 ... psnr >= 60": one target
        unique.setdefault((target.metric, target.op, target.value), target)
    intent.targets = list(unique.values())
    keep = [p for p in intent.missing if p.slot in ("clause", "codecs", "data", "mode", "bounds") and p.detail]
    pending: list[Pending] = []
    for p in keep:  # near-miss names and unknown clauses, with their questions written now
        if not p.question:
            if p.slot == "clause":
                p.question = _say(intent, "clause", detail=p.detail)
            elif p.slot == "codecs":
                p.question = _say(intent, "codecs_unknown", detail=p.detail, cands=" or ".join(p.candidates[:4]),
                                  known=", ".join(usable_codecs()) or "none")
        if p.slot == "codecs" and p.detail in intent.codecs:
            continue
        if p.slot == "data" and any(d.name in p.candidates for d in intent.data if d.kind == "named"):
            continue
        pending.append(p)
    intent.missing = list(pending)  # the gap checks below see only what is still open
    q = intent.question
    if q is None:
        if not any(p.slot == "clause" for p in pending):
            pending.append(Pending(slot="question", question=_say(intent, "question")))
    elif q in CODEC_QUESTIONS:
        pending += _codec_question_gaps(intent)
    elif q == "profile" and not intent.command:
        pending.append(Pending(slot="command", question=_say(intent, "command")))
    elif q == "diagnose":
        if not intent.profile_file:
            pending.append(Pending(slot="profile_file", question=_say(intent, "profile_file")))
        elif not _FS.exists(_FS.path(intent.profile_file)):
            pending.append(Pending(slot="profile_file", detail=intent.profile_file,
                                   question=_say(intent, "profile_absent", detail=intent.profile_file)))
    elif q == "sweep" and not intent.sweep_spec:
        pending.append(Pending(slot="question", question=_say(intent, "sweep")))
    elif q == "compare_runs" and len(intent.runs) < 2:
        pending.append(Pending(slot="runs", question=_say(intent, "runs"), candidates=list(intent.runs)))
    seen: set[tuple[str, str, str]] = set()
    intent.missing = [p for p in pending if not ((p.slot, p.detail, p.question) in seen
                                                 or seen.add((p.slot, p.detail, p.question)))]
    return intent


def _codec_question_gaps(intent: Intent) -> list[Pending]:
    gaps: list[Pending] = []
    asked = any(p.slot == "data" for p in intent.missing)
    if not intent.data and not asked:
        known = [d["name"] for d in dataset_catalogue() if d.get("available") and d["kind"] != "synthetic"]
        gaps.append(Pending(slot="data", question=_say(intent, "data", known=", ".join(known) or "none"),
                            candidates=known))
    catalogue = {d["name"]: d for d in dataset_catalogue()}
    for ref in intent.data:
        info = catalogue.get(ref.name) if ref.kind == "named" else None
        if info is not None and not info.get("available") and not any(p.slot == "data" for p in gaps):
            known = [d["name"] for d in catalogue.values() if d.get("available") and d["kind"] != "synthetic"]
            gaps.append(Pending(slot="data", detail=ref.name, candidates=known,
                                question=_say(intent, "data_unavailable", detail=ref.name,
                                              description=info.get("description") or info.get("kind"),
                                              reason=info.get("reason") or "not found", cands=" or ".join(known))))
        if ref.kind not in ("raw", "file"):
            continue
        p = _FS.path(ref.path)
        if not _FS.exists(p):
            gaps.append(Pending(slot="data", detail=ref.path, question=_say(intent, "data_absent", detail=ref.path)))
            continue
        if ref.kind == "raw" and (ref.shape is None or ref.dtype is None):
            size = _FS.size(p)
            guesses = _guess_shapes(p, size, ref.dtype)
            if ref.shape and ref.dtype is None:
                n = math.prod(ref.shape)
                fits = [t for t, s in (("f32", 4), ("f64", 8)) if n * s == size]
                if len(fits) == 1:
                    ref.dtype = fits[0]  # type: ignore[assignment]
                    intent.notes.append(f"{p.name}: {size} bytes = {'x'.join(map(str, ref.shape))} x "
                                        f"{4 if fits[0] == 'f32' else 8} bytes, so {fits[0]}")
                    continue
                gaps.append(Pending(slot="dtype", detail=ref.path, question=_say(intent, "dtype", detail=p.name),
                                    candidates=["float32", "float64"]))
                continue
            if guesses:
                shape_text, dtype_text = guesses[0].split()
                gaps.append(Pending(slot="shape", detail=ref.path, candidates=guesses,
                                    question=_say(intent, "shape_guess", detail=p.name, size=size,
                                                  guess=" or ".join(g.replace("x", "×", 2) for g in guesses[:3])),
                                    proposal={"shape": shape_text, "dtype": "f32" if dtype_text == "float32" else "f64"}))
            else:
                gaps.append(Pending(slot="shape", detail=ref.path,
                                    question=_say(intent, "shape", detail=p.name, size=size)))
        if ref.kind == "file":
            variables = [v["name"] for v in _file_variables(ref.path)]
            if not ref.var:
                if len(variables) == 1:
                    ref.var = variables[0]
                    intent.notes.append(f"{p.name} has one variable, {ref.var}: using it")
                else:
                    gaps.append(Pending(slot="var", detail=ref.path, candidates=variables,
                                        question=_say(intent, "var", detail=p.name,
                                                      cands=", ".join(variables) or "(none readable)")))
            elif variables and ref.var not in variables:
                gaps.append(Pending(slot="var", detail=ref.path, candidates=variables,
                                    question=_say(intent, "var_unknown", detail=p.name, var=ref.var,
                                                  cands=", ".join(variables))))
    if any(p.slot == "codecs" for p in intent.missing):
        pass  # a named codec is already asked about (unknown, not installed, a typo)
    elif not intent.codecs and not intent.codec_groups:
        if intent.question in ("best_ratio", "fastest_compress", "fastest_decompress", "lowest_error"):
            intent.codec_groups = ["all"]
            intent.notes.append("no compressor named: every usable one is compared")
        else:
            gaps.append(Pending(slot="codecs", question=_say(intent, "codecs", known=", ".join(usable_codecs()) or "none"),
                                candidates=usable_codecs()))
    same = next((t for t in intent.targets if intent.mode and not intent.bounds and t.metric ==
                 {"psnr": "psnr", "ratio": "ratio", "fixed_rate": "bitrate"}.get(intent.mode)), None)
    if same is not None:  # "fixed-rate mode, 8 bits per value": the target is the setting
        intent.bounds = [same.value]
    if any(p.slot in ("mode", "bounds") for p in intent.missing):
        pass  # a precise question about the mode or the bounds is already open
    elif not intent.mode and not intent.bounds:
        # a goal written without "at least/at most" ("hit ratio 20") before a constraint ("while psnr > 70")
        goals = [t for t in intent.targets if t.metric in ("psnr", "ratio", "bitrate")]
        goals.sort(key=lambda t: bool(re.search(rf"{_AT_LEAST}|{_AT_MOST}|[<>]", t.text.lower())))
        target = goals[0] if goals else None
        if target is not None and target.metric == "bitrate":  # "16 bits per value and 8 bits per value": each a setting
            rates = [t.value for t in goals if t.metric == "bitrate"]
            intent.mode, intent.bounds = "fixed_rate", list(dict.fromkeys(rates))
            intent.notes.append(_say(intent, "rates_as_settings", rates=", ".join(f"{r:g}" for r in intent.bounds)))
        elif target is not None:
            intent.mode = {"psnr": "psnr", "ratio": "ratio", "bitrate": "fixed_rate"}[target.metric]  # type: ignore[assignment]
            intent.bounds = [target.value]
            intent.notes.append(f"no error bound named: each codec is run at the target {target.label()} "
                                f"({intent.mode} mode)")
        else:
            gaps.append(Pending(slot="bounds", question=_say(intent, "bounds")))
    elif intent.bounds and not intent.mode and intent.codecs == ["zfp"] and re.search(r"\btolerance\b|容差|容限", intent.text.lower()):
        intent.mode = "abs"  # zfp's tolerance is its fixed-accuracy mode: an absolute bound
        intent.notes.append(_say(intent, "zfp_tolerance"))
    elif intent.bounds and not intent.mode:
        gaps.append(Pending(slot="mode", question=_say(intent, "mode", bounds=", ".join(f"{b:g}" for b in intent.bounds)),
                            candidates=list(POINTWISE_BOUND_MODES)))
    elif intent.mode and not intent.bounds:
        gaps.append(Pending(slot="bounds", question=_say(intent, "bounds_mode", mode=intent.mode)))
    bad = [b for b in intent.bounds if not (b > 0 and math.isfinite(b))]
    if bad:
        intent.bounds = [b for b in intent.bounds if b not in bad]
        gaps.append(Pending(slot="bounds", detail=", ".join(map(str, bad)),
                            question=_say(intent, "bounds_mode" if intent.mode else "bounds", mode=intent.mode or "")))
    return gaps


# ---------------------------------------------------------------------------- answers


def _normal_answer(answer: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(answer, dict):
        return "", dict(answer)
    if isinstance(answer, (list, tuple)):
        return " ".join(map(str, answer)), {}
    text = str(answer if answer is not None else "").strip()
    if text.startswith("{"):
        import json

        try:
            doc = json.loads(text)
            if isinstance(doc, dict):
                return "", doc
        except ValueError:
            pass
    return text, {}


def apply_answer(intent: Intent, pending: Pending, answer: Any) -> tuple[Intent, str]:
    """Fold the answer to ``pending`` into a copy of ``intent``; (new intent, problem or '').

    The answer is read by the same parser as a request ("rel 1e-3", "vorticity.512_512",
    "91x91x91 float32", "sz3 and zfp"); "yes" accepts the proposal in the question; a
    candidate can be named or numbered; a JSON object may name slots directly; "cancel"
    stops the run and "ignore" drops an unknown clause.
    """
    new = intent.model_copy(deep=True)
    text, doc = _normal_answer(answer)
    low = text.lower().strip(" .!。！")
    if doc.get("skip") is True or doc.get("cancel") is True or low in _CANCEL:
        new.ignored.append(f"the run was cancelled when asked: {pending.question}")
        return _cancelled(new), ""
    new.missing = [p for p in new.missing if p != pending]
    if pending.slot == "clause":
        if low in _IGNORE or low in _YES or doc.get("ignore") is True:
            new.ignored.append(f"\"{pending.detail}\" (the user chose to go on without it)")
            return assess(new), ""
        sub = parse(text) if text else Intent()
        if sub.refusal:
            new.refusal = sub.refusal
            return new, ""
        _merge(new, sub)
        return assess(new), ""
    if low in _YES and pending.proposal:
        doc = dict(pending.proposal)
        text = ""
    if low in _NO and pending.proposal:  # not the guessed shape: ask for it plainly
        plain = pending.model_copy(update={"proposal": {}, "candidates": [],
                                           "question": pending.question.split(":")[0] + ": " + _say(
                                               new, "dtype", detail="it").replace("Is it", "what is its shape, and is it")})
        new.missing.insert(0, plain)
        return new, ""
    if text and pending.candidates:
        pick = _pick_candidate(text, pending.candidates)
        if pick:
            text = pick
    if doc:
        problem = _apply_doc(new, pending, doc)
        if problem:
            new.missing.insert(0, pending)
            return new, problem
        return assess(new), ""
    if not text:
        new.missing.insert(0, pending)
        return new, "the answer was empty."
    before = new.model_dump()
    sub = parse(text)
    if sub.refusal:
        new.refusal = sub.refusal
        return new, ""
    _fill_slot(new, pending, text, sub)
    after = assess(new)
    if after.model_dump() == {**before, "missing": after.model_dump()["missing"]} and any(
            p.slot == pending.slot and p.question == pending.question for p in after.missing):
        return after, f"I could not use the answer {text!r}."
    return after, ""


def _cancelled(intent: Intent) -> Intent:
    """A run the user stopped at a question ends like a refusal: a report, nothing run."""
    intent.question, intent.missing = None, []
    intent.refusal = "cancelled at the user's request"
    return intent


def _pick_candidate(text: str, candidates: list[str]) -> str:
    low = re.sub(r"\s+(?:one|option|choice)$|^(?:use\s+|take\s+)", "", text.lower().strip(" .!。"))
    if low.isdigit() and 1 <= int(low) <= len(candidates):
        return candidates[int(low) - 1]
    ordinal = {"first": 0, "second": 1, "third": 2, "the first": 0, "the second": 1, "第一个": 0, "第二个": 1, "第三个": 2}
    if low in ordinal and ordinal[low] < len(candidates):
        return candidates[ordinal[low]]
    exact = [c for c in candidates if c.lower() == low]
    if exact:
        return exact[0]
    prefix = [c for c in candidates if c.lower().startswith(low) or low in c.lower()]
    return prefix[0] if len(prefix) == 1 else ""


def _merge(into: Intent, sub: Intent) -> None:
    """Slots the answer states fill (or, for lists, extend) the intent's."""
    if sub.question and (into.question is None or into.question in ("evaluate",) and sub.question in CODEC_QUESTIONS):
        into.question = sub.question
    for c in sub.codecs:
        if c not in into.codecs:
            into.codecs.append(c)
    for g in sub.codec_groups:
        if g not in into.codec_groups:
            into.codec_groups.append(g)
    if sub.mode and not into.mode:
        into.mode = sub.mode
    if sub.bounds:
        into.bounds = into.bounds or sub.bounds
    into.targets += [t for t in sub.targets if t not in into.targets]
    for d in sub.data:
        if d not in into.data:
            into.data.append(d)
    for dev in sub.devices:
        if dev not in into.devices:
            into.devices.append(dev)
    into.repeats = into.repeats or sub.repeats
    into.command = into.command or sub.command
    into.profile_file = into.profile_file or sub.profile_file
    into.sweep_spec = into.sweep_spec or sub.sweep_spec
    into.runs += [r for r in sub.runs if r not in into.runs]
    into.notes += sub.notes
    into.missing += [p for p in sub.missing if p.slot in ("codecs", "data") and p.detail]


def _fill_slot(new: Intent, pending: Pending, text: str, sub: Intent) -> None:
    slot = pending.slot
    if slot == "codecs":
        if pending.detail:  # an unknown name was asked about: the answer replaces it
            new.codecs = [c for c in new.codecs if c != pending.detail]
        _merge(new, sub)
        if not sub.codecs and not sub.codec_groups and text.lower() in ("all", "全部", "所有", "every", "everything"):
            new.codec_groups.append("all")
    elif slot == "mode":
        word = text.lower().strip(" .!。")
        mode = sub.mode or (word if word in REQUEST_MODES else None)
        new.mode = mode  # type: ignore[assignment]
        if sub.bounds:  # the answer's own numbers are the newer word
            new.bounds = sub.bounds
        elif mode in ("psnr", "ratio", "fixed_rate") and pending.detail:
            new.bounds = []  # a point-wise value is no PSNR, ratio or rate: asked next
    elif slot == "bounds":
        values = sub.bounds or _number_list(text)
        if sub.mode and not new.mode:
            new.mode = sub.mode
        if sub.mode and new.mode and sub.mode != new.mode:
            new.mode = sub.mode
        new.bounds = [v for v in values if v > 0 and math.isfinite(v)]
        new.targets += [t for t in sub.targets if t not in new.targets]
    elif slot == "data":
        if pending.detail:
            new.data = [d for d in new.data if d.path != pending.detail and not (d.kind == "named" and d.name == pending.detail)]
        if sub.data:
            new.data += [d for d in sub.data if d not in new.data]
        elif pending.candidates and text in pending.candidates:
            new.data.append(DataRef(kind="named", name=text, text=text))
        elif pending.candidates and re.search(r"\b(?:both|all|each|every)\b|两个|都|全部|所有", text.lower()):
            new.data += [DataRef(kind="named", name=c, text=text) for c in pending.candidates]  # "both"
        elif pending.candidates and (dims := re.search(r"\b([123])\s*-?\s*d\b|([一二三])维", text.lower())):
            n = int(dims.group(1)) if dims.group(1) else "一二三".index(dims.group(2)) + 1
            shapes = {d["name"]: len(d["shape"]) for d in dataset_catalogue()}
            picked = [c for c in pending.candidates if shapes.get(c) == n]  # "the 2D one"
            if len(picked) == 1:
                new.data.append(DataRef(kind="named", name=picked[0], text=text))
            else:
                new.missing.insert(0, pending)
        else:
            new.missing += [p for p in sub.missing if p.slot == "data"]
            new.missing.insert(0, pending) if not sub.missing else None
        new.missing += [p for p in sub.missing if p.slot == "codecs" and p.detail]
    elif slot in ("shape", "dtype"):
        ref = next((d for d in new.data if d.path == pending.detail), None)
        if ref is not None:
            t = _Text(normalise(text))
            shapes = [s for s in (_shape_of(m) for m in t.finditer(_SHAPE)) if s]
            if not shapes and re.fullmatch(r"\d+(?:\s*[, ]\s*\d+)+", text.strip()):
                shapes = [[int(x) for x in re.split(r"\s*[, ]\s*", text.strip())]]
            dtypes = [dt for dt, rx in _table("dtypes") if rx.search(t.low)]
            endians = [e for e, rx in _table("endian") if rx.search(t.low)]
            if shapes:
                ref.shape = shapes[0]
            if dtypes:
                ref.dtype = dtypes[0]  # type: ignore[assignment]
            if endians:
                ref.endian = endians[0]  # type: ignore[assignment]
    elif slot == "var":
        ref = next((d for d in new.data if d.path == pending.detail), None)
        if ref is not None:
            word = text.strip().strip("`'\"")
            ref.var = _pick_candidate(word, pending.candidates) or word
    elif slot == "command":
        new.command = _split_argv(text.strip().strip("`"))
        if why := _command_refusal(new.command):
            new.refusal = why
    elif slot == "profile_file":
        new.profile_file = sub.profile_file or text.strip()
    elif slot == "runs":
        new.runs = list(dict.fromkeys(new.runs + (sub.runs or re.findall(r"[\w./~-]+", text))))[:2]
    else:  # question
        _merge(new, sub)


def _apply_doc(new: Intent, pending: Pending, doc: dict[str, Any]) -> str:
    """A JSON answer: keys name slots (dataset, shape, dtype, var, codecs, mode, bound(s), command)."""
    ref = next((d for d in new.data if pending.detail and d.path == pending.detail), None)
    for key, value in doc.items():
        if key in ("shape", "dtype", "endian", "var") and ref is None:
            ref = next((d for d in new.data if d.kind in ("raw", "file")), None)
        if key == "shape":
            shape = value if isinstance(value, list) else re.split(r"\s*[x×,*]\s*", str(value).strip())
            try:
                dims = [int(s) for s in shape]
            except (TypeError, ValueError):
                return f"shape {value!r} is not a list of positive integers."
            if not dims or min(dims) < 1 or ref is None:
                return f"shape {value!r} is not a list of positive integers."
            ref.shape = dims
        elif key == "dtype":
            tag = {"float32": "f32", "f32": "f32", "float64": "f64", "f64": "f64", "float": "f32", "double": "f64"}.get(str(value).lower())
            if tag is None or ref is None:
                return f"dtype must be 'f32' or 'f64', got {value!r}."
            ref.dtype = tag  # type: ignore[assignment]
        elif key == "endian":
            if value not in ("<", ">"):
                return "endian must be '<' (little) or '>' (big)."
            if ref is not None:
                ref.endian = value
        elif key == "var":
            if ref is not None:
                ref.var = str(value)
        elif key in ("dataset", "path", "data"):
            sub = parse(str(value))
            if pending.detail:
                new.data = [d for d in new.data if d.path != pending.detail]
            if sub.data:
                new.data += sub.data
            else:
                new.data.append(DataRef(kind="named", name=str(value), text=str(value)))
        elif key in ("codec", "codecs"):
            names = value if isinstance(value, list) else [value]
            known = codec_catalogue()
            unknown = [n for n in names if known and n not in known and n not in ("all", "cpu", "gpu")]
            if unknown:
                return f"unknown codec(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(known))}."
            if pending.detail:
                new.codecs = [c for c in new.codecs if c != pending.detail]
            for n in names:
                if n in ("all", "cpu", "gpu"):
                    new.codec_groups.append(n)
                elif n not in new.codecs:
                    new.codecs.append(str(n))
        elif key == "mode":
            if value not in REQUEST_MODES:
                return f"mode must be {', '.join(REQUEST_MODES[:-1])} or {REQUEST_MODES[-1]}, got {value!r}."
            new.mode = value
        elif key in ("bound", "bounds"):
            values = value if isinstance(value, list) else [value]
            try:
                nums = [float(v) for v in values]
            except (TypeError, ValueError):
                return f"a bound must be a number, got {value!r}."
            if not all(v > 0 and math.isfinite(v) for v in nums):
                return "bounds must be positive, finite numbers."
            new.bounds = nums
        elif key == "command":
            new.command = value if isinstance(value, list) else _split_argv(str(value))
            if why := _command_refusal(new.command):
                new.refusal = why
        elif key == "runs":
            new.runs = [str(v) for v in (value if isinstance(value, list) else [value])]
        elif key in ("ignore", "proceed") and pending.slot == "clause":
            new.ignored.append(f"\"{pending.detail}\" (the user chose to go on without it)")
        else:
            return f"the answer names {key!r}, which is not something I asked for."
    return ""
