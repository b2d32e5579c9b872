"""Reading a request: :func:`parse` and one reader per slot (paths and variables, runs,
missing values, synthetic fields, named data, shapes and dtypes, repeats, bounds and
targets, codecs, devices, metrics), each taking the words it uses."""

from __future__ import annotations

import bisect
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfscout.graph.understand.assess import ask_which_dataset, assess, usable_codecs
from perfscout.graph.understand.commands import (
    NOT_A_PROGRAM,
    PROFILE_CUE,
    command_refusal,
    command_words,
    counter_rx,
    profiler_rx,
    program_start,
    split_argv,
    detect_language,
    looks_like_command,
    normalise,
    refusal_reason,
)
from perfscout.graph.understand.messages import MESSAGES, say, say_language
from perfscout.graph.understand.question import account, ask_about_machine_clause, read_question
from perfscout.graph.understand.text import (
    AT_LEAST,
    AT_MOST,
    BOUND_JOIN,
    BARE_FILE,
    BITRATE,
    BOUND_LEAD,
    BOUND_LIST,
    SafeFS,
    PSNR_MODE,
    PSNR_TARGET,
    QUOTE,
    RATIO_TARGET,
    REPEATS,
    RUN_ID,
    RUN_ROLE,
    SHAPE,
    SHAPE_SEP,
    SYNTH,
    VAR,
    NUMBER,
    ZH_NUMBER,
    codec_typo,
    file_variables,
    find_datasets,
    number_list,
    edit_distance,
    path_re,
    RequestText,
    zh_int,
    path_kind,
)
from perfscout.graph.understand.vocab import (
    CATALOGUES,
    filler,
    phrase_pattern,
    phrase_table,
    codec_catalogue,
    dataset_catalogue,
    question_patterns,
    vocabulary,
)
from perfscout.state.intent import CODEC_QUESTIONS, DataRef, Intent, Pending, Target
from perfscout.state.modes import POINTWISE_BOUND_MODES


def parse(text: str) -> Intent:
    """Read a request into an Intent (then :func:`assess` adds what must be asked)."""
    token = CATALOGUES.set({}) if CATALOGUES.get() is None else None
    try:
        return _parse(text)
    finally:
        if token is not None:
            CATALOGUES.reset(token)


#: The longest request the parser reads, in characters. A request is words (32,768 characters
#: is some 5,000 of them); details as long as data belong in a spec file. The parser is linear
#: in the length below it (benchmarks/intents/parse_speed.py), and a longer one is refused at
#: once, whatever it holds.
MAX_REQUEST_CHARS = 32_768


def _parse(text: str) -> Intent:
    raw = str(text)
    if len(raw) > MAX_REQUEST_CHARS:
        language = detect_language(raw[:MAX_REQUEST_CHARS])
        return Intent(text=raw[:200], language=language, refusal=say_language(
            language, "too_long", size=len(raw), limit=MAX_REQUEST_CHARS))
    norm = normalise(raw)
    intent = Intent(text=raw, language=detect_language(norm))
    if not norm:
        return assess(intent)
    # 1. quoted spans: the program to profile (exactly as written), or names. A request
    # profiles when it says so, names a profiler, or asks for hardware counters of a program.
    low = norm.lower()
    named_profiler = bool(profiler_rx().search(low))
    profile_cue = bool(PROFILE_CUE.search(low)) or named_profiler or (
        bool(counter_rx().search(low)) and (program_start(norm) is not None or "`" in norm))

    def unquote(m: re.Match[str]) -> str:
        inner = next(g for g in m.groups() if g is not None)
        looks_like_path = bool(path_re().fullmatch(inner.strip())) and " " not in inner.strip()
        right_after_cue = bool(re.search(r"(?:\bprofile|剖析|性能分析|\bprogram|\bcommand|程序|命令)\s*:?\s*$",
                                         norm[max(0, m.start() - 40):m.start()], re.IGNORECASE))
        # a backticked command line is the program to profile, cue or not: its words ("import
        # zlib") are never request words
        if not intent.command and not looks_like_path and (
                profile_cue and (m.group(1) or right_after_cue) or m.group(1) and looks_like_command(inner)):
            intent.command = split_argv(inner)
            return " \u2063 "  # a placeholder the grammar never matches
        if profile_cue and m.group(0)[0] in "'\"":
            return m.group(0)  # an argument of an unquoted program: shlex reads it below
        return " " + inner + " "

    work = normalise(QUOTE.sub(unquote, norm))
    # an unquoted program after "profile" (or, without that word, where the program's path
    # begins): its words up to the first clause boundary
    if profile_cue and not intent.command:
        cue = re.search(r"(?:\bprofile\b|剖析|性能分析)\s*:?\s*(?:the\s+program\s+|program\s+|command\s+|程序\s*)?", work,
                        re.IGNORECASE)
        start = cue.end() if cue else None
        if start is not None:  # "profile with ncu ./app", "用 ncu 剖析 ./app": the profiler is not the program
            lead = re.match(r"\s*(?:(?:with|using|under|via|用|使用)\s+)?", work[start:], re.IGNORECASE)
            tool = profiler_rx().match(work.lower(), start + lead.end())
            if tool:
                start = tool.end()
        words_after = work[start:].split() if start is not None else []
        if (start is None or not words_after or counter_rx().match(work.lower(), start)
                or re.fullmatch(NOT_A_PROGRAM, words_after[0].rstrip(",.?!"), re.IGNORECASE)):
            # "profile my CUDA kernel ./spmv", "why is ./bin/x slow? profile it": the program is the path
            start = program_start(work) if program_start(work) is not None else start
        if start is not None:
            argv, end = command_words(work, start)
            first = argv[0] if argv else ""
            is_profile_file = bool(first) and bool(path_re().fullmatch(first)) and path_kind(first) in ("profile", "csv")
            if argv and not re.fullmatch(r"(?:it|this|that|the|my|a|an|of)", first, re.IGNORECASE) and not is_profile_file:
                intent.command = argv
                work = work[:start] + " \u2063 " + work[end:]
    # 2. refusals, on everything but the program's own argv
    why = refusal_reason(work, intent.language) or command_refusal(intent.command, intent.language)
    if why:
        intent.refusal = why
        return intent
    t = RequestText(work)
    t.finditer(re.compile("\u2063"))
    cue_spans = [(q, m.start(), m.end()) for q, rx in [*phrase_table("questions"), *question_patterns()]
                 for m in t.finditer(rx, take=False)]
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
    read_question(t, intent, cue_spans)
    if intent.question in CODEC_QUESTIONS:
        ask_about_machine_clause(work, intent)
    if intent.question in ("profile", "diagnose") and (intent.codecs or intent.codec_groups or intent.bounds or intent.data):
        # "profile ./a.out and compare sz3 with zfp at ...": one run does one thing; the rest is asked, not dropped
        rest = ", ".join(intent.codecs + [f"{b:g}" for b in intent.bounds] + [d.label() for d in intent.data])
        intent.missing.append(Pending(slot="clause", detail=rest, question=say(intent, "two_requests", first=intent.question,
                                                                                rest=rest)))
    if intent.question == "profile" and named_profiler:
        tool = profiler_rx().search(low).group(0)
        kinds = vocabulary().get("profilers") or {}
        runs_it = any(re.fullmatch(phrase_pattern(str(p)), tool) for k in ("ncu", "perf") for p in kinds.get(k) or [])
        intent.notes.append(say(intent, "profiler_named" if runs_it else "profiler_not_run", tool=tool))
    _one_of_each(intent)
    account(t, intent)
    return assess(intent)


def _one_of_each(intent: Intent) -> None:
    """The same data named twice is one piece of data: one evaluation each, not one per
    mention (30,000 characters of the same bracketed name planned 1,600 identical tasks)."""
    def same(ref: DataRef) -> tuple[Any, ...]:  # what it names, however it was written
        return (ref.kind, ref.name, ref.path, tuple(ref.shape or ()), ref.dtype, ref.endian, ref.var)

    times: dict[tuple[Any, ...], int] = {}
    kept: list[DataRef] = []
    for ref in intent.data:
        if same(ref) not in times:
            kept.append(ref)
        times[same(ref)] = times.get(same(ref), 0) + 1
    if len(kept) < len(intent.data):
        intent.notes += [say(intent, "data_repeated", data=ref.label(), times=times[same(ref)])
                         for ref in kept if times[same(ref)] > 1]
        intent.data = kept


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


def _read_missing_values(t: RequestText, intent: Intent) -> None:
    """How the request says to treat missing values (Intent.masked): filled with a number,
    or kept aside so that only the valid values are evaluated. Unsaid, nothing is assumed:
    the evaluation asks when the data has any."""
    for m in t.finditer(_FILL_MISSING):
        value = float(next(g for g in m.groups() if g))
        if math.isfinite(value) and intent.masked is None:
            intent.masked = value
            intent.notes.append(say(intent, "masked_fill", value=f"{value:g}"))
    for _, rx in phrase_table("missing_values"):
        if t.finditer(rx) and intent.masked is None:
            intent.masked = "nan"
            intent.notes.append(say(intent, "masked_nan"))


#: words that make the path after them an output folder ("into runs/q", "write the results to X")
_OUTPUT_LEAD = re.compile(
    r"(?:\binto|--out(?:put)?(?:\s*=)?|\boutput\s+(?:to|in|into)\b|"
    r"\b(?:write|save|put|store|keep)\s+(?:it\s+|them\s+|(?:the\s+)?(?:results?|outputs?|reports?|sweep)\s+)?(?:to|in|into|under)\b|"
    r"\bresults?\s+(?:in|to|into|under)\b|输出到|写到|写入|保存到|存到|放到|存放到)\s*$")


def _read_paths(t: RequestText, intent: Intent) -> None:
    names = {d["name"].lower() for d in dataset_catalogue()}
    outputs: list[tuple[re.Match[str], str]] = []
    for m in t.finditer(path_re(), take=False):
        path = t.original(m, 1).rstrip(".,:;)?!")
        if path.lower() in names and not SafeFS.exists(Path(path)):
            continue  # a registry name such as 999x999.float
        if _OUTPUT_LEAD.search(t.low[max(0, m.start() - 40):m.start()]) and path_kind(path) not in (
                "netcdf", "hdf5", "zarr", "raw", "spec", "profile", "csv", "program") or (
                _OUTPUT_LEAD.search(t.low[max(0, m.start() - 40):m.start()]) and SafeFS.is_dir(SafeFS.path(path))):
            # "sweep X.yaml into runs/q": the output folder, whether or not it exists yet
            outputs.append((m, path))
            continue
        _take_path(t, intent, m, path)
    # a bare name with any other extension that is a file here ("wmag91.sdat"): a raw file
    for m in t.finditer(BARE_FILE, take=False):
        path = t.original(m, 1).rstrip(".,:;)?!")
        if t.free(m.start(), m.start() + len(path)) and SafeFS.is_file(SafeFS.path(path)) and path_kind(path) != "program":
            _take_path(t, intent, m, path)
    if intent.sweep_spec and outputs:
        m, path = outputs[0]
        intent.sweep_out = path
        t.take(m.start(), m.start() + len(path))
        lead = _OUTPUT_LEAD.search(t.low[max(0, m.start() - 40):m.start()])
        t.take(max(0, m.start() - 40) + lead.start(), m.start())
    else:
        for m, path in outputs:  # no sweep to write: read as any other path
            _take_path(t, intent, m, path)
    files = [d for d in intent.data if d.kind == "file"]
    if files and not files[0].var and not _read_variable_list(t, intent, files[0]):
        _read_variable(t, intent, files[0])


_VAR_NAME = r"[A-Za-z_]\w{0,31}"
_VAR_SEP = r"\s*(?:,\s*(?:and\s+|&\s*)?|\band\b|&|和|与|及|、|以及|/)\s*"
_VAR_LIST = rf"{_VAR_NAME}(?:{_VAR_SEP}{_VAR_NAME})+"
_VAR_LIST_RX = re.compile(rf"(?<![\w.])({_VAR_LIST})")
#: what makes a list of names a list of variables: a word before it ("variables u, v and z",
#: "f.nc 的 u 和 v 变量") or after it ("u and v in f.nc", "u and v fields")
_VAR_LIST_BEFORE = re.compile(r"(?:\b(?:variables?|vars?|fields?)|变量|的|中的|里的|里面的|中)\s*(?:变量\s*)?$")
_VAR_LIST_AFTER = re.compile(r"\s+(?:(?:variables?\s+|fields?\s+)?(?:in|from|of)\b|variables\b|fields\b)|\s*(?:两个|三个|几个)?\s*变量")


def _read_variable_list(t: RequestText, intent: Intent, ref: DataRef) -> bool:
    """Several variables named for one file: one dataset each (the same file, each variable);
    False when the request names no list. Codec names and filler are never variables; where the
    file is readable, a list must hold at least one of its variables (an unknown one among them
    is asked about by assess, never dropped). Lists are found in one left-to-right pass and
    then judged by the words beside them (linear in the request's length)."""
    variables = file_variables(ref.path)
    known = [v["name"] for v in variables]
    codec_words = {c for c, _ in phrase_table("codecs")} | set(codec_catalogue())
    for m in t.finditer(_VAR_LIST_RX, take=False):
        if not (_VAR_LIST_BEFORE.search(t.low[max(0, m.start() - 12):m.start()]) or _VAR_LIST_AFTER.match(t.low, m.end())):
            continue
        words = [w for w in re.split(_VAR_SEP, t.original(m, 1)) if w]
        if any(w.lower() in codec_words or codec_typo(w) or (w.lower() in filler() and w not in known) for w in words):
            continue
        names = list(dict.fromkeys(_resolve_variable(w, variables) for w in words))
        if len(names) < 2 or (known and not any(n in known for n in names)):
            continue
        t.take(m.start(1), m.end(1))
        ref.var = names[0]
        at = intent.data.index(ref)
        intent.data[at + 1:at + 1] = [ref.model_copy(update={"var": n}) for n in names[1:]]
        return True
    return False


def _take_path(t: RequestText, intent: Intent, m: re.Match[str], path: str) -> None:
    """One path of the request, by its kind: a profile, a spec, a run folder, a data file."""
    kind = path_kind(path)
    if kind in ("", "raw") and ":" in path and not SafeFS.exists(Path(path)):
        base, var = path.rsplit(":", 1)  # "f.nc:z": the variable z of f.nc
        if var and path_kind(base) in ("netcdf", "hdf5", "zarr"):
            t.take(m.start(), m.start() + len(path))
            intent.data.append(DataRef(kind="file", path=base, var=var, text=path))
            return
    if kind == "program":
        return  # a script or binary is a program to profile, read with the command
    if not kind and not path.startswith(("/", "~", "./", "../")):
        return  # "runs/q" without a lead word: left to the other readers
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


def _read_variable(t: RequestText, intent: Intent, ref: DataRef) -> None:
    """The variable of a netCDF/HDF5/Zarr file: "variable z", "the z in f.nc", "f.nc:z", "f.nc 中的 z"."""
    if ":" in ref.path and not SafeFS.exists(Path(ref.path)):
        path, var = ref.path.rsplit(":", 1)
        ref.path, ref.var = path, var
        return
    known = file_variables(ref.path)
    names = [v["name"] for v in known]
    found = [(m, next(g for g in m.groups() if g)) for m in t.finditer(VAR, take=False)]
    # "compress variable z": the verb before "variable" is not its name; a name the file has wins
    found = [(m, w) for m, w in found if w in names or _resolve_variable(w, known) in names or w.lower() not in filler()]
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
        for m in t.finditer(r"(?:the\s+)?(?:[a-z]{1,32}\s+)?\b([A-Za-z_]\w{0,31})\s+(?=in\s|from\s|of\s)", take=False):
            word = t.original(m, 1)
            if word.lower() not in filler() or word in [v["name"] for v in known]:
                ref.var = word
                t.take(m.start(1), m.end(1))
                break
        for m in t.finditer(r"(?:中的|里的|里面的|中|的)\s*(?:变量\s*)?([A-Za-z_]\w*)(?=\s*(?:这个|这些)?\s*变量|\s*$|\s*[,;])"
                            r"|(?:中的|里的|里面的|中)\s*(?:变量\s*)?([A-Za-z_]\w*)", take=False):
            ref.var = t.original(m, 1) if m.group(1) else t.original(m, 2)
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


def _read_runs(t: RequestText, intent: Intent) -> None:
    if not re.search(r"\bruns?\b|运行|\bbaseline\b|\bcandidate\b|基线|候选|基准", t.low):
        return
    cue = any(p.search(t.low) for m, p in phrase_table("questions") if m == "compare_runs")
    if not cue:
        return
    found: list[tuple[int, str]] = []
    baseline = ""
    candidate = ""
    for m in t.finditer(RUN_ID, take=False):
        ids = [(m.start(g), t.original(m, g)) for g in (1, 2) if m.group(g)]
        ids = [(p, i) for p, i in ids if i.lower() not in filler() and not _table_hit("questions", i)
               and not RUN_ROLE.fullmatch(i.lower())]
        if ids:
            t.take(m.start(), m.end())
            found += ids
            lead_of = {i: t.low[max(m.start(), p - 24):p] for p, i in ids}
            for i, lead in lead_of.items():  # the role word nearest before each id
                roles = list(RUN_ROLE.finditer(lead))
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
            found_roles = list(RUN_ROLE.finditer(t.low[max(0, at - 30):at])) if at >= 0 else []
            if found_roles:
                roles[r] = "base" if found_roles[-1].group(1) else "cand"
        a, b = intent.runs[:2]
        if roles.get(a) == "cand" or roles.get(b) == "base":
            intent.runs[:2] = [b, a]


def _table_hit(section: str, word: str) -> bool:
    return any(rx.fullmatch(word.lower()) for _, rx in phrase_table(section))


def _read_targets_and_bounds(t: RequestText, intent: Intent) -> None:
    for m in t.finditer(BITRATE):
        v = float(next(g for g in m.groups() if g))
        intent.targets.append(Target(metric="bitrate", op="<=", value=v, text=t.original(m)))
    for m in t.finditer(PSNR_TARGET):
        g = m.groups()
        op_text, value = (g[0], g[1]) if g[1] else (g[2], g[3]) if g[3] else (g[5], g[4]) if g[4] else (">=", g[6])
        op = "<=" if op_text and re.fullmatch(AT_MOST, op_text.strip()) else ">="
        intent.targets.append(Target(metric="psnr", op=op, value=float(value), text=t.original(m)))
    for m in t.finditer(PSNR_MODE, take=False):
        before = t.low[max(0, m.start() - 12):m.start()]
        if m.group(1) or re.search(r"\bat\s*$|\bpsnr\s*$", before):
            intent.mode = intent.mode or "psnr"
            if intent.mode == "psnr":
                intent.bounds.append(float(m.group(1) or m.group(2)))
            t.take(m.start(), m.end())
    _read_unsupported_modes(t, intent)
    # modes with their bounds: a mode word, then (or before) a list or range of numbers
    mode_hits: list[tuple[int, int, str]] = []
    for mode, rx in phrase_table("modes"):
        for m in t.finditer(rx):
            mode_hits.append((m.start(), m.end(), mode))
    for m in re.finditer(r"(?<![\w.-])[a-z]{6,}(?![\w-])", t.low):  # "relatve", "absolut"
        if t.free(m.start(), m.end()) and m.group(0) not in filler():
            typo = next((mode for mode, word in (("abs", "absolute"), ("rel", "relative"), ("pw_rel", "pointwise"))
                         if edit_distance(m.group(0), word) <= 1), None)
            if typo:
                t.take(m.start(), m.end())
                mode_hits.append((m.start(), m.end(), typo))
                intent.notes.append(say(intent, "typo_read", word=t.original(m), meant=typo))
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
            tail = re.match(rf"{lead}({plain}(?:{BOUND_JOIN}{plain})*)", t.low[e_:])
            if tail and not t.free(e_, e_ + tail.end()):  # "psnr 80 and 5 repeats": the list stops where a slot begins
                tail = re.match(rf"{lead}({plain})", t.low[e_:])
            if tail and t.free(e_, e_ + tail.end()) and (not intent.bounds or intent.mode == mode):
                t.take(e_, e_ + tail.end())
                intent.mode = intent.mode or mode  # type: ignore[assignment]
                if intent.mode == mode:  # "rate 4, 8 and 16": each is a setting
                    intent.bounds += [v for v in number_list(tail.group(1)) if v not in intent.bounds]
                continue
            if " ".join(t.low[s_:e_].split()) in weak:
                # "show me the PSNR", "the bit rate": a figure to report, not a mode
                mode_hits.remove((s_, e_, mode))
                intent.notes.append(say(intent, "metric_reported", metric=t.orig[s_:e_]))
        elif " ".join(t.low[s_:e_].split()) in weak and not re.match(
                rf"\s*(?:is\s+|stays?\s+|remains?\s+|must\s+be\s+|of\s+)?(?:under|below|<=?|≤|less\s+than|at\s+most|within|"
                rf"no\s+(?:larger|more|greater|bigger)\s+than|not\s+above|of|=|:|不超过|小于|低于|为|在)?\s*(?:{NUMBER}|{ZH_NUMBER})",
                t.low[e_:]):
            # "keep the max error under 1e-3" is the abs bound; "report the max error" is a figure
            mode_hits.remove((s_, e_, mode))
            intent.notes.append(say(intent, "metric_reported", metric=t.orig[s_:e_]))
    lists = []
    for m in BOUND_LIST.finditer(t.low):
        if not t.free(m.start(), m.end()):  # "1e-2 and 5 repetitions": the list ends where another slot begins
            m = BOUND_LIST.match(t.low, m.start(), next(i for i in range(m.start(), m.end()) if t.used[i]))
        if m and m.end() > m.start() and t.free(m.start(), m.end()) and _looks_like_bound(m.group(0), t.low, m.start(), m.end()):
            lists.append(m)
    by_mode: dict[str, list[float]] = {intent.mode: list(intent.bounds)} if intent.mode and intent.bounds else {}
    for m in lists:
        ranged = bool(re.search(r"(?:\bbetween|\bfrom|\brange|从|介于)\s*$", t.low[max(0, m.start() - 12):m.start()]))
        values = number_list(t.original(m), ranged)
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
                                      question=say(intent, "two_modes", cands=" or ".join(cands))))
    if mode_hits and not intent.mode:
        intent.mode = mode_hits[0][2]  # "at the absolute error mode" without a number: the bound is asked
    if not intent.bounds:
        _read_bound_count(t, intent)
    for m in t.finditer(RATIO_TARGET, take=False):
        value = m.group(1) or m.group(2) or m.group(3)
        written = t.low[m.start():m.end()]
        strong = re.search(rf"{AT_LEAST}|x\b|×|:1|倍|times|fold|ratio|压缩比|压缩率", written)
        if not strong or float(value) < 1:
            continue
        t.take(m.start(), m.end())
        intent.targets.append(Target(metric="ratio", op=">=", value=float(value), text=t.original(m)))


@lru_cache(maxsize=1)
def _needs_a_number() -> frozenset[str]:
    return frozenset(str(w).lower() for w in vocabulary().get("modes_need_a_number") or [])


def _read_unsupported_modes(t: RequestText, intent: Intent) -> None:
    """Error controls perfscout does not run (ZFP's fixed precision, an L2-norm bound, lossless):
    asked about with the reason and the modes it has, never read as another mode."""
    for kind, entry in (vocabulary().get("unsupported_modes") or {}).items():
        phrases = sorted((str(p).lower() for p in entry.get("phrases") or []), key=len, reverse=True)
        alts = [str(p) for p in entry.get("patterns") or []] + [phrase_pattern(p) for p in phrases]
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
                                          question=say(intent, f"unsupported_{kind}" if f"unsupported_{kind}" in MESSAGES["en"]
                                                        else "unsupported", reason=reason, cands=", ".join(cands))))
            intent.notes.append(reason)
            break


_BOUND_COUNT = re.compile(r"\b(?:at\s+|with\s+|for\s+|over\s+|across\s+)?(\d|two|three|four|five|several|a\s+few|multiple|a\s+couple\s+of)\s+"
                          r"(?:different\s+|error\s+|)(?:error\s+)?(?:bounds|tolerances|levels|settings)\b"
                          r"|(?<![\d两三四五几多])([\d两三四五几多]+)\s*(?:个|种)\s*(?:不同的?)?\s*(?:误差界|误差|精度|设置)")


def _read_bound_count(t: RequestText, intent: Intent) -> None:
    """"at 3 error bounds", "三个误差界": how many, not which: asked, with a decade series proposed."""
    for m in t.finditer(_BOUND_COUNT):
        word = (m.group(1) or m.group(2) or "").lower()
        n = zh_int(word) if zh_int(word) else {"several": 3, "a few": 3, "multiple": 3, "a couple of": 2, "几": 3,
                                                  "多": 3}.get(" ".join(word.split()), 3)
        n = max(1, min(int(n), 6))
        series = [10.0 ** -(k + 2) for k in range(n)]
        mode = intent.mode if intent.mode in POINTWISE_BOUND_MODES else "rel"
        intent.missing.append(Pending(slot="bounds", detail=t.original(m), proposal={"mode": mode, "bounds": series},
                                      question=say(intent, "bounds_count", n=n, mode=mode,
                                                    series=", ".join(f"{b:g}" for b in series))))
        return


def _take_unit(t: RequestText, intent: Intent, at: int, mode: str | None) -> None:
    """A unit right after a bound ("abs 0.5 K"): used, and for an absolute bound said to be the field's own."""
    unit = _units_rx().match(t.low, at)
    if unit and unit.end() > unit.start() and t.free(unit.start(), unit.end()):
        t.take(unit.start(), unit.end())
        if mode == "abs":
            intent.notes.append(say(intent, "units", unit=t.original(unit).strip(" ()")))


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
    # only the hits that can lie within 40 characters (hits are sorted by start; a mode phrase is
    # short): a request with a thousand bounds and modes stays linear
    lo = bisect.bisect_left(hits, (start - 200,))
    hi = bisect.bisect_right(hits, (end + 41,))
    for s, e, mode in hits[lo:hi]:
        gap = start - e if e <= start else s - end
        between = low[e:start] if e <= start else low[end:s]
        if gap < 0 or gap > 40 or not BOUND_LEAD.match(between) and not re.fullmatch(r"[\s\w]{0,30}", between):
            continue
        if gap < dist:
            best, dist = mode, gap
    return best


def _read_repeats(t: RequestText, intent: Intent) -> None:
    for m in t.finditer(REPEATS):
        n = zh_int(next(g for g in m.groups() if g))
        if n:
            intent.repeats = n
            return
        if n == 0:
            intent.notes.append(say(intent, "repeats_zero", written=t.original(m)))


@lru_cache(maxsize=1)
def _synthetic_words() -> tuple[list[tuple[str, re.Pattern[str]]], frozenset[str], re.Pattern[str]]:
    voc = vocabulary().get("synthetic") or {}
    kinds = sorted(((k, str(p).lower()) for k, ps in (voc.get("kinds") or {}).items() for p in ps),
                   key=lambda kp: len(kp[1]), reverse=True)
    markers = sorted((str(p).lower() for p in voc.get("markers") or []), key=len, reverse=True)
    return ([(k, re.compile(phrase_pattern(p))) for k, p in kinds], frozenset(str(w) for w in voc.get("weak") or []),
            re.compile("|".join(f"(?:{phrase_pattern(p)})" for p in markers)))


_DIMS_WORD = re.compile(r"(?<![\w.])([123])\s*-?\s*d(?![\w])|([一二三])维")
#: what may stand between a synthetic field's words and its shape: "of", "with shape", "field", "数据"
_SYNTH_GAP = re.compile(r"^[\s,:=(]*(?:(?:of|with|shape|size|sized|field|fields|data|grid|cube|数据|的|形状|大小|为|是|场)\s*[:=]?\s*)*$")


def _read_synthetic(t: RequestText, intent: Intent) -> None:
    """Synthetic fields: "synthetic:KIND:SHAPE", or in words with a kind, a shape, 2-D/3-D."""
    for m in t.finditer(SYNTH, take=False):
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
        for sm in SHAPE.finditer(after):
            if _SYNTH_GAP.match(after[:sm.start()]):
                shape_m, shape_span = sm, (end + sm.start(), end + sm.end())
            break
        if shape_m is None:  # "a 256^3 synthetic gaussian field"
            before = t.low[max(0, start - 24):start]
            for sm in SHAPE.finditer(before):
                if re.fullmatch(r"[\s-]*(?:a|an|的|个)?[\s-]*", before[sm.end():]):
                    shape_m, shape_span = sm, (start - len(before) + sm.start(), start - len(before) + sm.end())
        strong = marker or shape_m is not None or any(w not in weak for w in words if w) or "field" in after[:12] or "场" in after[:3]
        if not strong or not (kind or marker):
            continue
        kind = kind or str((vocabulary().get("synthetic") or {}).get("default_kind") or "grf")
        if not any(k for _, _, k in group):
            intent.notes.append(say(intent, "synthetic_kind", kind=kind))
        t.take(start, end)
        if t.low[end:end + 8].lstrip().startswith(("field", "场")):
            e2 = end + t.low[end:].index("field" if "field" in t.low[end:end + 8] else "场")
            t.take(e2, e2 + (5 if t.low[e2] == "f" else 1))
        shape: list[int] | None = None
        if shape_m is not None and shape_span is not None and t.free(*shape_span):
            shape = shape_of(shape_m)
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
            intent.notes.append(say(intent, "synthetic_shape", kind=kind, shape="x".join(map(str, shape))))
        intent.data.append(DataRef(kind="synthetic", name=f"{kind}:{','.join(map(str, shape))}",
                                   text=t.orig[start:end]))


def _read_named_data(t: RequestText, intent: Intent) -> None:
    dims = {d["name"]: len(d["shape"]) for d in dataset_catalogue()}
    cue = re.search(r"\b([123])\s*-?\s*d\b|([一二三])维", t.low)
    ndim = (int(cue.group(1)) if cue.group(1) else "一二三".index(cue.group(2)) + 1) if cue else None
    found = find_datasets(t)
    catalogue = {d["name"]: d for d in dataset_catalogue()}
    shapes = [(m, shape_of(m)) for m in t.finditer(SHAPE, take=False)] if found else []  # once, not per mention
    for written, names, at in found:
        every = re.search(r"(?:\bboth|\ball|\beach|\bevery|两个|所有|全部|各个)\s*(?:of\s+)?(?:the\s+)?(?:two\s+)?$", t.low[max(0, at - 16):at])
        if len(names) > 1 and every:  # "both vorticity fields": each of them
            t.take(at - len(every.group(0)), at)
        elif len(names) > 1 and (by_shape := _pick_by_shape(t, names, catalogue, shapes)):
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
                intent.ignored.append(say(intent, "dataset_context", word=written, data=", ".join(others)))
                continue
            for name in names:
                if not any(d.kind == "named" and d.name == name for d in intent.data):
                    intent.data.append(DataRef(kind="named", name=name, text=written))
        else:
            intent.missing.append(ask_which_dataset(intent, written, names))


def _pick_by_shape(t: RequestText, names: list[str], catalogue: dict[str, dict[str, Any]],
                   shapes: list[tuple[re.Match[str], list[int] | None]]) -> str:
    """The one candidate whose shape is written in the request (any axis order); '' if none or several."""
    for m, shape in shapes:
        if not t.free(m.start(), m.end()):
            continue
        hits = [n for n in names if shape and sorted(catalogue.get(n, {}).get("shape") or []) == sorted(shape)]
        if len(hits) == 1:
            t.take(m.start(), m.end())
            return hits[0]
    return ""


def shape_of(m: re.Match[str]) -> list[int] | None:
    g = m.groups()
    if g[0]:
        return [int(x) for x in re.split(SHAPE_SEP, g[0])]
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


def _written_shape(t: RequestText, intent: Intent) -> list[int] | None:
    """Shapes written in words: "64 rows and 64 columns", "nx=91 ny=91 nz=91" (C order: z, y, x)."""
    for m in t.finditer(_ROWS_COLS):
        return [int(m.group(1)), int(m.group(2))]
    axes = {m.group(1): int(m.group(2)) for m in t.finditer(_NXYZ)}
    if len(axes) >= 2:
        shape = [axes[a] for a in "zyx" if a in axes]
        intent.notes.append(say(intent, "nxyz_order", shape="x".join(map(str, shape))))
        return shape
    return None


def _read_shape_dtype(t: RequestText, intent: Intent) -> None:
    worded = _written_shape(t, intent) if any(d.kind == "raw" for d in intent.data) else None
    dtypes = [(m, dt) for dt, rx in phrase_table("dtypes") for m in t.finditer(rx)]
    endians = [(m, e) for e, rx in phrase_table("endian") for m in t.finditer(rx)]
    shapes = ([worded] if worded else []) + [s for s in (shape_of(m) for m in t.finditer(SHAPE)) if s]
    raws = [d for d in intent.data if d.kind in ("raw", "file")]
    target = raws[0] if raws else None
    if target is None and (shapes or dtypes) and not any(d.kind in ("named", "synthetic") for d in intent.data):
        if shapes:
            intent.ignored.append(say(intent, "shape_unused", shape=" x ".join(map(str, shapes[0]))))
        return
    if target is None:
        synthetic = [d for d in intent.data if d.kind == "synthetic"]
        if dtypes and synthetic:  # "合成数据 64x64x64 双精度": generated in that precision
            for d in synthetic:
                d.dtype = dtypes[0][1]  # type: ignore[assignment]
                d.name = re.sub(r":f(?:32|64)$", "", d.name) + (":f64" if d.dtype == "f64" else "")
        elif dtypes:
            intent.notes.append(say(intent, "dtype_kept", dtype=dtypes[0][1]))
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


def _read_codecs(t: RequestText, intent: Intent) -> None:
    catalogue = codec_catalogue()
    hits: list[tuple[int, str]] = []
    for group, rx in phrase_table("codec_groups"):
        for m in t.finditer(rx):
            if group not in intent.codec_groups:
                intent.codec_groups.append(group)  # type: ignore[arg-type]
    table = list(phrase_table("codecs"))
    # registry ids that the vocabulary does not list yet are still names
    listed = {c for c, _ in table}
    table += [(cid, re.compile(phrase_pattern(cid))) for cid in catalogue if cid not in listed]
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
            intent.notes.append(say(intent, "codec_not_here", codec=codec))
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
    return [(n, re.compile(phrase_pattern(p) if " " in p else rf"(?<![\w.-]){re.escape(p)}(?:[-_]?[\w]+)?(?![\w-])"))
            for n, p in rows]


def _read_foreign_codecs(t: RequestText, intent: Intent) -> None:
    """Compressors of the field that perfscout cannot run ("mgard", "sperr", "tthresh"): said so
    and asked about (go on without it, or name another), never dropped or read as another."""
    seen: set[str] = set()
    for name, rx in _foreign_table():
        for m in t.finditer(rx):
            if name in seen:
                continue
            seen.add(name)
            intent.notes.append(say(intent, "codec_foreign_note", name=name))
            intent.missing.append(Pending(slot="codecs", detail=t.original(m), candidates=usable_codecs(),
                                          question=say(intent, "codecs_foreign", detail=t.original(m), name=name,
                                                        known=", ".join(usable_codecs()) or "none")))


@lru_cache(maxsize=1)
def _metrics_rx() -> re.Pattern[str] | None:
    words = sorted({str(w).lower() for w in vocabulary().get("metrics") or []}, key=len, reverse=True)
    return re.compile("|".join(f"(?:{phrase_pattern(w)})" for w in words)) if words else None


def _read_metrics(t: RequestText, intent: Intent) -> None:
    """Figures a request asks to see ("report PSNR and SSIM", "看看 PSNR"): every result has them,
    so they are accounted for (and said so) rather than asked about."""
    rx = _metrics_rx()
    if rx is None:
        return
    named = [t.original(m) for m in t.finditer(rx)]
    shown = [n for n in dict.fromkeys(named) if n.lower() not in ("compression ratio", "ratio", "压缩比")]
    if shown and not any(n in note for note in intent.notes for n in shown):
        intent.notes.append(say(intent, "metrics_reported", metrics=", ".join(shown)))


def _read_devices(t: RequestText, intent: Intent) -> None:
    for dev, rx in phrase_table("devices"):
        for _ in t.finditer(rx):
            if dev not in intent.devices:
                intent.devices.append(dev)  # type: ignore[arg-type]


