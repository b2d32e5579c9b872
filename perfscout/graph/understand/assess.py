""":func:`assess`: the questions an intent needs answered before anything runs."""

from __future__ import annotations

import math
import re
from pathlib import Path

from perfscout.graph.understand.messages import say
from perfscout.graph.understand.text import AT_LEAST, AT_MOST, SafeFS, file_variables
from perfscout.graph.understand.vocab import codec_catalogue, dataset_catalogue
from perfscout.state.intent import CODEC_QUESTIONS, Intent, Pending, Target
from perfscout.state.modes import POINTWISE_BOUND_MODES


def ask_which_dataset(intent: Intent, written: str, names: list[str], typo: bool = False) -> Pending:
    key = "data_typo" if typo else "data_which"
    return Pending(slot="data", detail=written, candidates=names,
                   question=say(intent, key, detail=written, cands=" or ".join(names)))


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
                p.question = say(intent, "clause", detail=p.detail)
            elif p.slot == "codecs":
                p.question = say(intent, "codecs_unknown", detail=p.detail, cands=" or ".join(p.candidates[:4]),
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
            pending.append(Pending(slot="question", question=say(intent, "question")))
    elif q in CODEC_QUESTIONS:
        pending += _codec_question_gaps(intent)
    elif q == "profile" and not intent.command:
        pending.append(Pending(slot="command", question=say(intent, "command")))
    elif q == "diagnose":
        if not intent.profile_file:
            pending.append(Pending(slot="profile_file", question=say(intent, "profile_file")))
        elif not SafeFS.exists(SafeFS.path(intent.profile_file)):
            pending.append(Pending(slot="profile_file", detail=intent.profile_file,
                                   question=say(intent, "profile_absent", detail=intent.profile_file)))
    elif q == "sweep" and not intent.sweep_spec:
        pending.append(Pending(slot="question", question=say(intent, "sweep")))
    elif q == "compare_runs" and len(intent.runs) < 2:
        pending.append(Pending(slot="runs", question=say(intent, "runs"), candidates=list(intent.runs)))
    seen: set[tuple[str, str, str]] = set()
    intent.missing = [p for p in pending if not ((p.slot, p.detail, p.question) in seen
                                                 or seen.add((p.slot, p.detail, p.question)))]
    return intent


def _codec_question_gaps(intent: Intent) -> list[Pending]:
    gaps: list[Pending] = []
    asked = any(p.slot == "data" for p in intent.missing)
    if not intent.data and not asked:
        known = [d["name"] for d in dataset_catalogue() if d.get("available") and d["kind"] != "synthetic"]
        gaps.append(Pending(slot="data", question=say(intent, "data", known=", ".join(known) or "none"),
                            candidates=known))
    catalogue = {d["name"]: d for d in dataset_catalogue()}
    for ref in intent.data:
        info = catalogue.get(ref.name) if ref.kind == "named" else None
        if info is not None and not info.get("available") and not any(p.slot == "data" for p in gaps):
            known = [d["name"] for d in catalogue.values() if d.get("available") and d["kind"] != "synthetic"]
            gaps.append(Pending(slot="data", detail=ref.name, candidates=known,
                                question=say(intent, "data_unavailable", detail=ref.name,
                                              description=info.get("description") or info.get("kind"),
                                              reason=info.get("reason") or "not found", cands=" or ".join(known))))
        if ref.kind not in ("raw", "file"):
            continue
        p = SafeFS.path(ref.path)
        if not SafeFS.exists(p):
            gaps.append(Pending(slot="data", detail=ref.path, question=say(intent, "data_absent", detail=ref.path)))
            continue
        if ref.kind == "raw" and (ref.shape is None or ref.dtype is None):
            size = SafeFS.size(p)
            guesses = _guess_shapes(p, size, ref.dtype)
            if ref.shape and ref.dtype is None:
                n = math.prod(ref.shape)
                fits = [t for t, s in (("f32", 4), ("f64", 8)) if n * s == size]
                if len(fits) == 1:
                    ref.dtype = fits[0]  # type: ignore[assignment]
                    intent.notes.append(say(intent, "size_gives_dtype", name=p.name, size=size,
                                             shape="x".join(map(str, ref.shape)), itemsize=4 if fits[0] == "f32" else 8,
                                             dtype=fits[0]))
                    continue
                gaps.append(Pending(slot="dtype", detail=ref.path, question=say(intent, "dtype", detail=p.name),
                                    candidates=["float32", "float64"]))
                continue
            if guesses:
                shape_text, dtype_text = guesses[0].split()
                gaps.append(Pending(slot="shape", detail=ref.path, candidates=guesses,
                                    question=say(intent, "shape_guess", detail=p.name, size=size,
                                                  guess=" or ".join(g.replace("x", "×", 2) for g in guesses[:3])),
                                    proposal={"shape": shape_text, "dtype": "f32" if dtype_text == "float32" else "f64"}))
            else:
                gaps.append(Pending(slot="shape", detail=ref.path,
                                    question=say(intent, "shape", detail=p.name, size=size)))
        if ref.kind == "file":
            variables = [v["name"] for v in file_variables(ref.path)]
            if not ref.var:
                if len(variables) == 1:
                    ref.var = variables[0]
                    intent.notes.append(say(intent, "one_variable", name=p.name, var=ref.var))
                else:
                    gaps.append(Pending(slot="var", detail=ref.path, candidates=variables,
                                        question=say(intent, "var", detail=p.name,
                                                      cands=", ".join(variables) or "(none readable)")))
            elif variables and ref.var not in variables:
                gaps.append(Pending(slot="var", detail=ref.path, candidates=variables,
                                    question=say(intent, "var_unknown", detail=p.name, var=ref.var,
                                                  cands=", ".join(variables))))
    if any(p.slot == "codecs" for p in intent.missing):
        pass  # a named codec is already asked about (unknown, not installed, a typo)
    elif not intent.codecs and not intent.codec_groups:
        if intent.question in ("best_ratio", "fastest_compress", "fastest_decompress", "lowest_error"):
            intent.codec_groups = ["all"]
            intent.notes.append(say(intent, "all_codecs"))
        else:
            gaps.append(Pending(slot="codecs", question=say(intent, "codecs", known=", ".join(usable_codecs()) or "none"),
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
        goals.sort(key=lambda t: bool(re.search(rf"{AT_LEAST}|{AT_MOST}|[<>]", t.text.lower())))
        target = goals[0] if goals else None
        if target is not None and target.metric == "bitrate":  # "16 bits per value and 8 bits per value": each a setting
            rates = [t.value for t in goals if t.metric == "bitrate"]
            intent.mode, intent.bounds = "fixed_rate", list(dict.fromkeys(rates))
            intent.notes.append(say(intent, "rates_as_settings", rates=", ".join(f"{r:g}" for r in intent.bounds)))
        elif target is not None:
            intent.mode = {"psnr": "psnr", "ratio": "ratio", "bitrate": "fixed_rate"}[target.metric]  # type: ignore[assignment]
            intent.bounds = [target.value]
            intent.notes.append(say(intent, "target_as_setting", target=target.label(), mode=intent.mode))
        else:
            gaps.append(Pending(slot="bounds", question=say(intent, "bounds")))
    elif intent.bounds and not intent.mode and intent.codecs == ["zfp"] and re.search(r"\btolerance\b|容差|容限", intent.text.lower()):
        intent.mode = "abs"  # zfp's tolerance is its fixed-accuracy mode: an absolute bound
        intent.notes.append(say(intent, "zfp_tolerance"))
    elif intent.bounds and not intent.mode:
        gaps.append(Pending(slot="mode", question=say(intent, "mode", bounds=", ".join(f"{b:g}" for b in intent.bounds)),
                            candidates=list(POINTWISE_BOUND_MODES)))
    elif intent.mode and not intent.bounds:
        gaps.append(Pending(slot="bounds", question=say(intent, "bounds_mode", mode=intent.mode)))
    bad = [b for b in intent.bounds if not (b > 0 and math.isfinite(b))]
    if bad:
        intent.bounds = [b for b in intent.bounds if b not in bad]
        gaps.append(Pending(slot="bounds", detail=", ".join(map(str, bad)),
                            question=say(intent, "bounds_mode" if intent.mode else "bounds", mode=intent.mode or "")))
    return gaps


