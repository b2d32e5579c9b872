"""The question a request asks (cue phrases, typos, a question about the machine inside
another), and the bookkeeping that accounts for every word of it."""


from __future__ import annotations

import difflib
import re
from functools import lru_cache

from perfscout.graph.understand.assess import ask_which_dataset, usable_codecs
from perfscout.graph.understand.messages import say
from perfscout.graph.understand.text import (
    CLAUSE,
    codec_typo,
    dataset_aliases,
    edit_distance,
    RequestText,
)
from perfscout.graph.understand.vocab import (
    CJK,
    filler,
    phrase_pattern,
    phrase_table,
    codec_catalogue,
    vocabulary,
)
from perfscout.state.intent import CODEC_QUESTIONS, Intent, Pending


def read_question(t: RequestText, intent: Intent, cue_spans: list[tuple[str, int, int]]) -> None:
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


def _typo_cues(t: RequestText) -> list[str]:
    """Question words one typo away from a cue ("comapre" -> compare), when no cue was found."""
    found: list[str] = []
    for m in re.finditer(r"(?<![\w.-])[A-Za-z]{6,}(?![\w-])", t.low):
        word = m.group(0)
        if not t.free(m.start(), m.end()) or word in filler():
            continue
        for q, cue in _single_word_cues():
            if abs(len(cue) - len(word)) <= 1 and edit_distance(word, cue) <= (1 if len(cue) < 9 else 2):
                t.take(m.start(), m.end())
                found.append(q)
                break
    return found


@lru_cache(maxsize=None)
def _about_rx(question: str, part: str) -> re.Pattern[str] | None:
    words = sorted({str(w).lower() for w in ((vocabulary().get("about_questions") or {}).get(question) or {}).get(part) or []},
                   key=len, reverse=True)
    return re.compile("|".join(f"(?:{phrase_pattern(w)})" for w in words)) if words else None


def ask_about_machine_clause(work: str, intent: Intent) -> None:
    """"compare sz3 and zfp ..., and what is the GPU here?": a second question of its own in a
    measurement request is asked about, not read as a device or dropped."""
    low = work.lower()
    cuts = [0] + [m.end() for m in CLAUSE.finditer(low)] + [len(low)]
    nouns, asks = _about_rx("describe_machine", "nouns"), _about_rx("describe_machine", "asks")
    if nouns is None or asks is None:
        return
    for a, b in zip(cuts[:-1], cuts[1:]):
        clause = low[a:b]
        if (re.search(r"^\W*(?:what|which|how\s+many|how\s+much|is\s+there|do\s+(?:i|we)\s+have)\b|什么|几个|多少|有没有", clause)
                and nouns.search(clause) and not re.search(r"\d|\bsz|\bzfp|\bszp|cusz|nvcomp", clause)):
            text = work[a:b].strip(" ,;:，；。?？")
            intent.devices = [d for d in intent.devices if not re.search(r"gpu|cuda|显卡|cpu", clause)] or intent.devices
            intent.missing.append(Pending(slot="clause", detail=text, question=say(
                intent, "two_questions", clause=text, first=intent.question)))
            return


def _read_about_question(t: RequestText, intent: Intent) -> None:
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
    for w in sorted((w for w in filler() if CJK.search(w)), key=len, reverse=True):
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


def account(t: RequestText, intent: Intent) -> None:
    """Every leftover word: filler, a near-miss name (asked), or reported as not used.
    A clause with leftover words and nothing recognised is asked about as a whole."""
    left = t.leftover()
    clauses = [(m.start(), m.end()) for m in CLAUSE.finditer(t.low)]
    bounds = [0] + [e for _, e in clauses] + [len(left)]
    starts = [0] + [s for s, _ in clauses] + [len(left)]
    spans = list(zip(bounds[:-1], starts[1:]))
    codec_words = sorted({c for c, _ in phrase_table("codecs")} | set(codec_catalogue()))
    unknown_all: list[str] = []
    aliases = [a for a, _ in dataset_aliases()]
    for m in re.finditer(r"(?<![\w./-])([A-Za-z][\w-]*[._]\d[\w.]*)(?![\w/])", left):
        # "vort.512_512", "vorticty.128_128_41": a registry name written a little wrong
        close = difflib.get_close_matches(m.group(1).lower(), aliases, n=3, cutoff=0.75)
        if close:
            cands = sorted({n for a, n in dataset_aliases() if a in close})
            intent.missing.append(ask_which_dataset(intent, m.group(1), cands, typo=True))
            left = left[:m.start()] + " " * (m.end() - m.start()) + left[m.end():]
    for start, end in spans:
        piece_left = left[start:end]
        piece_full = t.orig[start:end]
        unknown = []
        for w in _words(piece_left):
            lw = w.lower().strip("'")
            if CJK.search(w):
                rest = _strip_zh_filler(w)
                if len(rest) >= 2:
                    unknown.append(rest)
                continue
            if lw in filler() or len(lw) <= 1:
                continue
            typo = codec_typo(lw)
            if typo or re.fullmatch(r"(?:sz|zfp|szp|nvcomp)[\w-]*", lw):
                close = typo or difflib.get_close_matches(lw, codec_words, n=3, cutoff=0.5)
                intent.missing.append(Pending(slot="codecs", detail=w, candidates=close or codec_words,
                                              question=""))
                continue
            if (not intent.codecs and not intent.codec_groups and len(lw) >= 3 and not CJK.search(w)
                    and _in_codec_position(piece_full, w)):
                # "evaluate fancyzip at rel 1e-3": the codec slot holds a name perfscout does not know
                intent.missing.append(Pending(slot="codecs", detail=w, candidates=usable_codecs(),
                                              question=say(intent, "codecs_not_known", detail=w,
                                                            known=", ".join(usable_codecs()) or "none")))
                continue
            close = difflib.get_close_matches(lw, [a for a, _ in dataset_aliases()], n=3, cutoff=0.8)
            if close and len(lw) >= 5:
                cands = sorted({n for a, n in dataset_aliases() if a in close})
                intent.missing.append(ask_which_dataset(intent, w, cands, typo=True))
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


