"""Normalising a request's text, the refusals read from it, and the program to profile in it
(its argv, as the person wrote it)."""


from __future__ import annotations

import re
import shlex
import unicodedata
from functools import lru_cache
from pathlib import Path

from perfscout.graph.understand.text import (
    SafeFS,
    SUPERSCRIPTS,
    zh_int,
    path_kind,
)
from perfscout.graph.understand.unicode_text import fold_look_alikes, skeleton, strip_invisible
from perfscout.graph.understand.vocab import (
    CJK,
    phrase_pattern,
    vocabulary,
)

# ---------------------------------------------------------------------------- parse


def detect_language(text: str) -> str:
    return "zh" if CJK.search(text) else "en"


def normalise(text: str) -> str:
    """Invisible characters removed, look-alike letters in Latin words folded (unicode_text),
    superscript exponents, full-width forms, dashes and spaces made plain; full-width
    punctuation ends a word ("f.f32（float32，…）": the path ends at the parenthesis)."""
    s = fold_look_alikes(strip_invisible(str(text)))
    s = _outside_quotes(s, lambda part: _WIDE_PUNCT.sub(lambda m: _WIDE_SPACED[m.group(0)], part))
    s = re.sub(r"10([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: "10^" + m.group(1).translate(SUPERSCRIPTS), s)
    s = re.sub(r"(\d)([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: m.group(1) + "^" + m.group(2).translate(SUPERSCRIPTS), s)
    s = unicodedata.normalize("NFKC", s)
    s = s.replace("−", "-").replace("–", " to ").replace("—", " to ").replace("\u00a0", " ")
    s = _ZH_POWER.sub(_zh_power, s)
    s = _PERCENT_WORD.sub(r"\1%", s)  # "0.1 percent" -> "0.1%"
    s = re.sub(r"(?<![\w-])(abs|rel|pw_rel|psnr|rate)(?=\d|\.\d)", r"\1 ", s, flags=re.IGNORECASE)  # "rel1e-3"
    s = _ONE_IN.sub(lambda m: f"{1 / _ONE_IN_WORDS[' '.join(m.group(1).lower().split())]:g}", s)
    return " ".join(_space_scripts(s).split())


#: full-width punctuation that NFKC makes ASCII, given the space a Chinese writer does not type
#: after it (else "数据：/x.f32" glues the path to a colon, "x.f32（" to a parenthesis)
_WIDE_SPACED = {"（": " (", "）": ") ", "：": ": ", "，": ", ", "；": "; ", "！": "! ", "？": "? ",
                "【": " 【", "】": "】 ", "《": " 《", "》": "》 "}
_WIDE_PUNCT = re.compile("|".join(map(re.escape, _WIDE_SPACED)))
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
    n = int(exp) if exp.isdigit() else zh_int(exp)
    if n is None:
        return m.group(0)
    sign = "-" if m.group(2) in ("负", "-") else ""
    return f" {m.group(1) + 'x' if m.group(1) else ''}10^{sign}{n} "


def _outside_quotes(s: str, change) -> str:  # noqa: ANN001 - a str -> str function
    """``change`` applied to the text outside quoted spans (a program's argv stays as written)."""
    out, last = [], 0
    for m in _QUOTED_SPAN.finditer(s):
        out += [change(s[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(change(s[last:]))
    return "".join(out)


def _space_scripts(s: str) -> str:
    """A space where Chinese meets Latin letters or digits ("用SZ3压缩" -> "用 SZ3 压缩"), so
    names and numbers keep their word boundaries; quoted spans are left as written."""
    out, last = [], 0
    for m in _QUOTED_SPAN.finditer(s):
        out += [_SCRIPT_EDGE.sub(" ", s[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(_SCRIPT_EDGE.sub(" ", s[last:]))
    return "".join(out)


def refusal_reason(text: str, language: str = "en") -> str:
    """Why a request (outside its quoted program text) must be refused, or '', in the request's
    language. The patterns read the text's skeleton (unicode_text.skeleton: invisible
    characters, look-alike letters, accents and gaps inside words do not hide a word)."""
    low = skeleton(text)
    for rule in vocabulary()["refusals"]:
        for pattern in rule["patterns"]:
            if m := re.search(pattern, low):
                said = low[m.start():m.end() + 20].strip()
                if language == "zh":
                    return f"{rule.get('reason_zh') or rule['reason']}（请求里写的是“{said}”）"
                return f"{rule['reason']} (it says {said!r})"
    return ""


def command_refusal(argv: list[str], language: str = "en") -> str:
    prog = Path(skeleton(argv[0])).name if argv else ""
    if prog in vocabulary()["refused_programs"]:
        if language == "zh":
            return f"要剖析的程序是 {prog!r}，它会改动系统或访问网络；perfscout 只剖析做计算的程序，不运行系统工具"
        return (f"the program to profile is {prog!r}, which changes the system or reaches the network; "
                "perfscout profiles programs that compute, not shell utilities")
    return ""


def split_argv(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


_WORD_OR_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\S+")
_STOP_WORDS = {"and", "then", "to", "so", "tell", "what", "which", "why", "how", "please", "并", "然后", "看看", "告诉我"}
_SHELL_OPS = {"&&", "||", "|", ">", ">>", "<", ";", "&"}
#: words that end an unquoted argv: prose about the program ("./x slow?", "./x please"), never its arguments
_PROSE_AFTER_ARGV = {"slow", "slower", "fast", "faster", "please", "pls", "now", "here", "quickly", "and", "then", "so",
                     "but", "or", "is", "it", "what", "why", "how", "which", "tell", "show", "give", "for", "if",
                     "bottlenecked", "bottlenecking", "limited", "stuck", "spending", "taking", "slowing", "waiting",
                     "bound", "memory-bound", "compute-bound"}
#: words that put a profiler beside a program: "with ncu", "using perf stat", "under nsight compute"
_TOOL_LEADS = {"with", "using", "under", "via", "through", "in", "on", "by", "用", "使用", "在"}


@lru_cache(maxsize=1)
def profiler_rx() -> re.Pattern[str]:
    """Any profiler's name (vocabulary ``profilers``), longest first."""
    names = sorted({str(p).lower() for ps in (vocabulary().get("profilers") or {}).values() for p in ps}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{phrase_pattern(n)})" for n in names))


@lru_cache(maxsize=1)
def counter_rx() -> re.Pattern[str]:
    """Hardware-counter words ("IPC", "cache misses", "occupancy"): asked of a program, a profile."""
    names = sorted({str(p).lower() for p in vocabulary().get("profile_metrics") or []}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{phrase_pattern(n)})" for n in names))


def command_words(text: str, start: int) -> tuple[list[str], int]:
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
        if argv and not quoted and (CJK.search(token) or profiler_rx().match(text.lower(), m.start())
                                    or bare in _PROSE_AFTER_ARGV
                                    or (token.lower() in _TOOL_LEADS
                                        and profiler_rx().match(text.lower(), m.end() + 1))):
            break
        stop_after = not quoted and token[-1] in ",;:，；：。?？!！" and len(token) > 1
        if stop_after:
            token = token.rstrip(",;:，；：。?？!！")
        argv += split_argv(token) if quoted else [token]
        end = m.end()
        if stop_after or (not quoted and token in _SHELL_OPS):
            break
    return argv, end


PROFILE_CUE = re.compile(r"\bprofil(?:e|ing)\b|剖析|性能分析|\bunder\s+(?:ncu|perf|nsight)\b"
                         r"|\bwhat(?:'s|\s+is)?\s+limit(?:s|ing)\b|\bbottleneck(?:s|ed|ing)?\b|\bholding\s+(?:it|this)\s+back\b"
                         r"|\bwhat(?:'s|\s+is)\s+slowing\b|瓶颈|拖慢|卡在哪|慢在哪|什么限制了")
#: programs that run the program after them: "python3 -c '...'", "mpirun -n 4 ./x", "bash run.sh"
_LAUNCHER = re.compile(r"(?<![\w./-])(?:python(?:3(?:\.\d+)?)?|pypy3?|bash|sh|zsh|julia|Rscript|node|perl|ruby|"
                       r"mpirun|mpiexec|srun|taskset|numactl|env|time|nice|OMP_NUM_THREADS=\d+)"
                       r"(?=\s+(?:-[A-Za-z]|['\"`]|[\w./~-]+\.(?:py|sh|jl|R|js|pl|rb)\b|\./|/))")
#: a path-like word: ./a.out, bin/app, /opt/x/run, ~/bench
_PATHLIKE = re.compile(r"(?<![\w:/.-])((?:~|\.{1,2})?/[^\s,;，；。'\"`()?？!！]+|(?:[\w.+-]+/)+[\w.+-]+|[\w+-]+\.(?:py|sh|out|x|exe))(?=[\s,;，；。?？!！)]|$)")


#: words after "profile" that describe the program rather than start it
NOT_A_PROGRAM = (r"it|this|that|the|my|our|a|an|of|cuda|gpu|cpu|kernel|kernels|program|binary|code|app|application|"
                  r"executable|script|benchmark|solver|simulation|these|those|them|with|using|under|via")


def _program_path(word: str) -> bool:
    """Whether a path names a program rather than data: an executable file here, or (absent)
    a name with no data/profile/spec extension, or a script/binary extension."""
    p = SafeFS.path(word)
    exts = tuple(e for kind, es in vocabulary()["file_kinds"].items() if kind != "program" for e in es)
    programs = tuple(vocabulary()["file_kinds"].get("program") or ())
    name = p.name.lower()
    if name.endswith(programs):
        return True
    if SafeFS.is_dir(p) or name.endswith(exts):
        return False
    if SafeFS.is_file(p):
        import os

        return os.access(p, os.X_OK) and path_kind(word) in ("raw", "")
    return "." not in name or name.endswith(".out")


def looks_like_command(text: str) -> bool:
    """Whether a quoted span is a command line ("python3 -c '...'", "./app --n 4", "mpirun -n 2 ./x"):
    its first word launches a program or is a program's path."""
    words = split_argv(text.strip())
    if not words:
        return False
    if _LAUNCHER.match(text.strip()) and len(words) > 1:
        return True
    first = words[0]
    return bool(_PATHLIKE.fullmatch(first)) and _program_path(first) and "/" in first


def program_start(work: str) -> int | None:
    """Where an unquoted program begins in a request that profiles without saying "profile"
    ("nsys ./train.py", "run ./app under ncu", "给 ./a.out 跑一下 perf stat", "what limits
    python3 -c '...'"): a launcher with its program, or the first program-like path; None when
    the request names none."""
    launcher = _LAUNCHER.search(work)
    paths = [m for m in _PATHLIKE.finditer(work) if _program_path(m.group(1))]
    if launcher and not refusal_reason(launcher.group(0)) and (not paths or launcher.start() < paths[0].start()):
        return launcher.start()
    for m in paths:
        # an interpreter just before the script belongs to the argv ("python3 train.py")
        before = re.search(r"(?<![\w./-])(python3?|bash|sh|mpirun(?:\s+-n\s+\d+)?|srun|julia|Rscript)\s+$", work[:m.start()])
        return before.start() if before and not refusal_reason(before.group(0)) else m.start()
    return None


