"""Claims to sentences, in English or Chinese.

A renderer reads only the claim (its subjects, values, spread, verdict, where and detail):
every number in a sentence is a number the checker has re-derived from the records.
"""

from __future__ import annotations

from typing import Any, Callable

from perfscout.state.claims import Claim


def g(v: Any, spec: str = ".4g") -> str:
    if v is None:
        return "–"
    try:
        return format(float(v), spec)
    except (TypeError, ValueError):
        return str(v)


def bound_label(mode: Any, bound: Any) -> str:
    b = float(bound) if bound is not None else 0.0
    text = f"{b:.0e}".replace("e-0", "e-").replace("e+0", "e") if b and (b < 1e-2 or b >= 1e4) else f"{b:g}"
    return f"{str(mode).upper()} {text}"


_UNIT = {"ratio": "x", "psnr": " dB", "bitrate": " bits/value", "max_abs_err": ""}
_FIG = {"en": {"ratio": "ratio", "psnr": "PSNR", "bitrate": "bitrate", "max_abs_err": "max abs error",
               "compress": "compresses", "decompress": "decompresses"},
        "zh": {"ratio": "压缩比", "psnr": "PSNR", "bitrate": "码率", "max_abs_err": "最大绝对误差",
               "compress": "压缩", "decompress": "解压"}}


def target_label(t: dict[str, Any]) -> str:
    return f"{t['metric']} {t['op']} {float(t['value']):g}{_UNIT.get(t['metric'], '')}"


def setting(w: dict[str, Any], lang: str = "en") -> str:
    """"ABS 1e-3", "fixed rate 8 bits/value", "PSNR 60", in the run's language."""
    if w["mode"] == "fixed_rate":
        return f"固定码率 {g(w['bound'])} 位/值" if lang == "zh" else f"fixed rate {g(w['bound'])} bits/value"
    return bound_label(w["mode"], w["bound"])


def _where(c: Claim, lang: str) -> str:
    w = c.where
    if not w:
        return ""
    if lang == "zh":
        return f"在 {w['dataset']} 上以 {setting(w, 'zh')}"
    return f"At {setting(w)} on {w['dataset']}"


def _close(v: float, target: float) -> str:
    """A value beside its target with enough figures to show how far off it is (8.000488, not 8)."""
    for digits in (4, 6, 8, 10):
        if format(v, f".{digits}g") != format(target, f".{digits}g") or v == target:
            return format(v, f".{digits}g")
    return repr(v)


def _join(items: list[str], lang: str) -> str:
    return ("、" if lang == "zh" else ", ").join(items)


def _figures(fig: dict[str, Any], lang: str) -> str:
    if lang == "zh":
        return (f"压缩比 {g(fig.get('ratio'))}（每个值 {g(fig.get('bitrate'), '.4g')} 位），PSNR {g(fig.get('psnr'))} dB，"
                f"最大绝对误差 {g(fig.get('max_abs_err'), '.3g')}；压缩速度 {g(fig.get('compress_MBps'))} MB/s，"
                f"解压速度 {g(fig.get('decompress_MBps'))} MB/s")
    return (f"ratio {g(fig.get('ratio'))} ({g(fig.get('bitrate'), '.4g')} bits/value), PSNR {g(fig.get('psnr'))} dB, "
            f"max abs error {g(fig.get('max_abs_err'), '.3g')}; it compresses at {g(fig.get('compress_MBps'))} MB/s "
            f"and decompresses at {g(fig.get('decompress_MBps'))} MB/s")


def _pct(x: Any) -> str:
    return f"{float(x):+.0%}".replace("%", " %")


def speed_reason(d: dict[str, Any], lang: str) -> str:
    """Why a speed was or was not ranked, from the statistics the claim carries."""
    why, n = d.get("why"), d.get("n", 0)
    if lang == "zh":
        if why == "separated":
            if d.get("ci") is None:
                return f"中位时间相差 {_pct(d['change'])}（编解码器自行计时，没有逐次数据）"
            test = f"，Mann-Whitney p = {g(d['p_value'], '.2g')}" if d.get("strict") else f"，{n} 次重复互不重叠"
            return f"中位时间 {_pct(d['change'])}，95 % 区间 {_pct(d['ci'][0])} 到 {_pct(d['ci'][1])}{test}"
        return {"overlap": f"重复测量相互重叠（每个至少 {n} 次）", "scatter": "差距在重复测量自身的离散范围之内",
                "few_repeats": f"只有 {n} 次计时重复，至少需要 2 次才有离散度",
                "unsampled": "编解码器自行计时、没有逐次数据，且差距不到 3 倍",
                "one_speed": "只测到一个速度"}.get(str(why), "统计上无法判定")
    if why == "separated":
        if d.get("ci") is None:
            return f"median times {_pct(d['change'])} apart (the codec timed itself: no per-repeat times)"
        test = f", Mann-Whitney p = {g(d['p_value'], '.2g')}" if d.get("strict") else f", no overlap in {n} repeats"
        return f"median time {_pct(d['change'])}, 95 % interval {_pct(d['ci'][0])} to {_pct(d['ci'][1])}{test}"
    return {"overlap": f"the repeats overlap (at least {n} each)", "scatter": "the gap is within the repeats' own scatter",
            "few_repeats": f"{n} timed repeat(s): a spread needs at least 2",
            "unsampled": "the codecs timed themselves (no per-repeat times) and are less than 3x apart",
            "one_speed": "only one speed was measured"}.get(str(why), "the statistics do not decide")


def mbps(v: Any) -> str:
    """A throughput without an exponent: whole MB/s from 100 up, three figures below."""
    if v is None:
        return "–"
    return f"{float(v):.0f}" if abs(float(v)) >= 100 else f"{float(v):.3g}"


def _at(c: Claim, s: str, lang: str) -> str:
    """" (at PSNR 84.33 dB)": where a codec landed when the setting was a quality target."""
    at = c.detail.get("at") or {}
    v = (at.get("values") or {}).get(s)
    if not at or v is None:
        return ""
    label = f"PSNR {g(v)} dB" if at["figure"] == "psnr" else (f"压缩比 {g(v)}" if lang == "zh" else f"ratio {g(v)}")
    return f"（{label}）" if lang == "zh" else f" (at {label})"


def _speed(c: Claim, s: str) -> str:
    rng = c.spread.get(s)
    return f"{g(c.values.get(s))} MB/s" + (f" ({mbps(rng[0])}–{mbps(rng[1])})" if rng else "")


# ---- English -----------------------------------------------------------------------

def _en(c: Claim) -> str:
    d, k, w = c.detail, c.kind, _where(c, "en")
    if k == "refused":
        return ("Nothing was run: the run was cancelled when a question was asked." if d.get("cancelled")
                else f"Nothing was run: the request was refused, because {d['why']}.")
    if k == "no_plan":
        return f"Nothing was measured: {d['why']}"
    if k == "nothing":
        return "No result was measured."
    if k == "could_not_run":
        parts = []
        for subject, verdict, why in d["items"]:
            what = "the GPU" if subject == "GPU" else subject
            verb = "could not be used" if subject == "GPU" else "did not finish" if verdict == "failed" else \
                "could not run here"
            parts.append(f"{what} {verb} ({why or 'no reason given'})")
        inst = (f"; what ran instead: {_join(d['instead'], 'en')}" if d.get("instead")
                else "; nothing ran in its place")
        text = "; ".join(parts) + inst + "."
        return text[0].upper() + text[1:] if text.startswith("the GPU") else text
    if k == "cpu_instead":
        s = c.subjects[0]
        verdict = {"held": "bound held", "violated": "bound NOT held"}.get(c.verdict or "", "no bound to check")
        w = w[:1].lower() + w[1:]
        return (f"{s.split(' (')[0]} had no GPU here, so it ran on its CPU reference: {w}, ratio {g(c.values[s])}, "
                f"max abs error {g(d.get('max_abs_err'), '.3g')} ({verdict}); these are CPU figures, labelled "
                f"\"{s}\" below.")
    if k == "single":
        alone = "only " if d.get("alone") else ""
        return f"{w}, {alone}{c.subjects[0]} reaches {_figures(d['figures'], 'en')}."
    if k == "ranking" and c.figure and c.figure.endswith("_MBps"):
        a, b = c.subjects[0], c.subjects[1]
        rest = "".join(f", {s} {_speed(c, s)}" for s in c.subjects[2:4])
        return (f"{w}, {a} {_FIG['en'][d['what']]} fastest: {_speed(c, a)} against {b} {_speed(c, b)}{rest} "
                f"(range over the repeats in brackets; the repeats separate them: {speed_reason(d, 'en')}).")
    if k == "too_close":
        what = "compression" if d.get("what", "compress") == "compress" else "decompression"
        figs = _join([f"{s} {_speed(c, s)}" for s in c.subjects[:4]], "en")
        return (f"{w}, {what} speed is too close to call on this machine: {figs} "
                f"(range over the repeats in brackets; {speed_reason(d, 'en')}).")
    if k == "ranking":
        fig = _FIG["en"][c.figure or "ratio"]
        spec = ".3g" if c.figure == "max_abs_err" else ".4g"
        a = c.subjects[0]
        if c.verdict == "tie":
            return f"{w}, {a} and {c.subjects[1]} give the same {fig}, {g(c.values[a], spec)}."
        best = "highest" if c.verdict == "higher" else "lowest"
        rest = _join([f"{s} {g(c.values[s], spec)}{_at(c, s, 'en')}" for s in c.subjects[1:4]], "en")
        return f"{w}, {a} gives the {best} {fig}, {g(c.values[a], spec)}{_at(c, a, 'en')}; then {rest}."
    if k == "bounds":
        return (f"{w}: all {len(c.subjects)} results held their bound (every value was decompressed and checked)."
                if w else f"All {len(c.subjects)} results held their bound.")
    if k == "target":
        return _target_en(c)
    if k == "violation":
        s = c.subjects[0]
        extra = f" [{d['error']}]" if d.get("error") else ""
        return (f"{s} broke its {bound_label(c.where['mode'], c.where['bound'])} bound on {c.where['dataset']} "
                f"(max abs error {g(c.values[s], '.3g')}){extra}: a finding, not averaged away.")
    if k == "failure":
        return (f"{c.subjects[0]} at {bound_label(c.where['mode'], c.where['bound'])} on {c.where['dataset']} "
                f"did not finish ({d['status']}: {d['error']}).")
    if k == "warning":
        return _warning_en(c)
    return _tool_en(c)


def _target_en(c: Claim) -> str:
    d, s = c.detail, c.subjects[0]
    t = d["target"]
    label = target_label(t)
    unit = _UNIT.get(t["metric"], "")
    v = _close(float(c.values[s]), float(t["value"]))
    by = g(abs(d["margin"]), ".3g")
    on = f"{s} on {c.where['dataset']} at {setting(c.where)}"
    f = d["figures"]
    fig = f"ratio {g(f.get('ratio'))}, PSNR {g(f.get('psnr'))} dB, max abs error {g(f.get('max_abs_err'), '.3g')}"
    if c.verdict == "met":
        return f"{label}: met by {on}, {t['metric']} {v}{unit} ({by}{unit} to spare); {fig}.{_coarse(c, 'en')}"
    if c.verdict == "met_within_tolerance":
        why = ("the stream's own header (and block padding) adds it" if d.get("why") == "header"
               else "the ratio search stops within its tolerance of the target")
        return (f"{label}: met within tolerance by {on}, {t['metric']} {v}{unit}, {by}{unit} off the target, "
                f"inside the tolerance of {g(d['tolerance'], '.3g')}{unit} ({why}); {fig}.")
    return f"{label}: missed by {on}; the closest is {t['metric']} {v}{unit}, {by}{unit} short.{_coarse(c, 'en')}"


def _trial(x: Any, unit: str, lang: str) -> str:
    """A search trial, (abs_bound, achieved) or the achieved value alone."""
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return (f"{g(x[1])}{unit}（绝对误差界 {g(x[0], '.3g')}）" if lang == "zh"
                else f"{g(x[1])}{unit} at abs bound {g(x[0], '.3g')}")
    return f"{g(x)}{unit}"


def _coarse(c: Claim, lang: str) -> str:
    """The search's own word that the codec's control cannot land in the target's window."""
    d = c.detail
    if not d.get("too_coarse"):
        return ""
    unit = _UNIT.get(d["target"]["metric"], "")
    below = _trial(d.get("closest_below"), unit, lang) if d.get("closest_below") is not None else "–"
    above = _trial(d.get("closest_above"), unit, lang) if d.get("closest_above") is not None else "–"
    if lang == "zh":
        return f"{c.subjects[0]} 的控制参数太粗，落不进目标窗口（最近的试验：低于 {below}，高于 {above}）。"
    return f" {c.subjects[0]}'s control is too coarse to land in the target's window (closest trials: below {below}, " \
           f"above {above})."


def _warning_en(c: Claim) -> str:
    d, s = c.detail, c.subjects[0]
    kind = d["warning"]
    if kind == "bound_vs_range":
        s = " and ".join(c.subjects) if len(c.subjects) < 3 else ", ".join(c.subjects)
        return (f"Warning: the absolute bound {g(d['abs_bound'], '.3g')} of {s} is {g(d['fraction'], '.3g')} of the "
                f"field's value range {g(d['value_range'], '.3g')} on {c.where['dataset']}: at half the range or "
                "more, one constant (the middle of the range) meets it, so the ratio and PSNR say little.")
    if kind == "bound_below_resolution":
        s = " and ".join(c.subjects) if len(c.subjects) < 3 else ", ".join(c.subjects)
        return (f"Warning: the absolute bound {g(d['abs_bound'], '.3g')} of {s} on {c.where['dataset']} is below "
                f"{d['dtype']}'s spacing {g(d['spacing'], '.3g')} at the data's largest magnitude "
                f"{g(d['absmax'], '.3g')}: the largest values can only be kept exactly (near-lossless).")
    if kind == "unpacked":
        how = "packed" if d.get("packed") else "stored"
        return (f"Warning: {c.where['dataset']} is {how} as {d['dtype_on_disk']} and was unpacked to {d['dtype']}: "
                f"{s}'s ratio {g(d['ratio'])} is against the unpacked values; against the stored bytes it is "
                f"{g(d['ratio_vs_stored'])}.")
    return (f"Warning: {s} is {d['nbytes']} bytes, under {d['threshold'] >> 20} MiB: its timings are mostly "
            "start-up cost, so its speeds say little about larger fields.")


def _tool_en(c: Claim) -> str:
    d, k = c.detail, c.kind
    if k == "profile":
        if c.verdict == "failed":
            return f"The program could not be profiled: {d['failed']}."
        if not d.get("id"):
            return f"{c.subjects[0]}: no finding stands out in the measured counters."
        cited = ", ".join(f"{m} = {g(v)}" for m, v in d.get("evidence") or [])
        return (f"{c.subjects[0]}: the primary limiter is {d.get('title') or d['id']} ({d['id']})"
                + (f" ({cited})" if cited else "") + ".")
    if k == "machine":
        mem = g(float(d["mem_bytes"]) / 2**30, ".3g") if d.get("mem_bytes") else "?"
        return (f"This machine: {d['cpu']}, {d['ncpu']} logical CPUs, {mem} GiB of memory; GPUs: "
                f"{', '.join(d['gpus']) or 'none'}.")
    if k == "codecs":
        ok = ", ".join(f"{i} ({dev})" for i, dev in d["ok"]) or "none"
        bad = f" Not usable: {'; '.join(f'{i} ({why})' for i, why in d['bad'])}." if d["bad"] else ""
        return f"Usable here: {ok}.{bad}"
    if k == "sweep":
        counts = ", ".join(f"{a}: {b}" for a, b in d["counts"].items()) or "none"
        best = (" Highest ratio with the bound held: " + "; ".join(
            f"{s} {g(r)} at {bound_label(m, b)} on {ds}" for s, r, m, b, ds in d["best"]) + ".") if d["best"] else ""
        return f"The sweep {c.subjects[0]} has {d['n']} result(s) ({counts}); {d['violations']} bound violation(s).{best}"
    if k == "regression":
        return d["summary"]
    if k == "tool_error":
        return f"{c.records[0]}: {c.subjects[0]} {d['kind']}: {d['error']}"
    if k == "ignored":
        return f"Not used from the request: {'; '.join(d['items'])}."
    if k == "note" and d.get("more_groups"):
        return f"({d['more_groups']} more dataset/bound combinations are in the table below.)"
    return str(d.get("text") or "")


# ---- Chinese -----------------------------------------------------------------------

def _zh(c: Claim) -> str:
    d, k, w = c.detail, c.kind, _where(c, "zh")
    if k == "refused":
        return ("没有运行任何任务：在提问时运行被取消。" if d.get("cancelled")
                else f"没有运行任何任务：请求被拒绝，原因是{d['why']}。")
    if k == "no_plan":
        return f"没有测量任何结果：{d['why']}"
    if k == "nothing":
        return "没有测到结果。"
    if k == "could_not_run":
        parts = []
        for subject, verdict, why in d["items"]:
            verb = "无法使用" if subject == "GPU" else "未能完成" if verdict == "failed" else "在这里无法运行"
            parts.append(f"{subject} {verb}（{why or '未给出原因'}）")
        inst = f"；改为运行的是：{_join(d['instead'], 'zh')}" if d.get("instead") else "；没有可替代的运行"
        return "；".join(parts) + inst + "。"
    if k == "cpu_instead":
        s = c.subjects[0]
        verdict = {"held": "满足误差界", "violated": "违反误差界"}.get(c.verdict or "", "无误差界可检查")
        return (f"这里没有 GPU，{s.split(' (')[0]} 改在 CPU 参考实现上运行：{w}，压缩比 {g(c.values[s])}，"
                f"最大绝对误差 {g(d.get('max_abs_err'), '.3g')}（{verdict}）；这些是 CPU 上的数字，下文标为“{s}”。")
    if k == "single":
        alone = "只有 " if d.get("alone") else ""
        return f"{w}，{alone}{c.subjects[0]} 的{_figures(d['figures'], 'zh')}。"
    if k == "ranking" and c.figure and c.figure.endswith("_MBps"):
        a, b = c.subjects[0], c.subjects[1]
        rest = "".join(f"，{s} {_speed(c, s)}" for s in c.subjects[2:4])
        return (f"{w}，{a} {_FIG['zh'][d['what']]}最快：{_speed(c, a)}，{b} 为 {_speed(c, b)}{rest}"
                f"（括号内为各次重复的范围；重复测量能区分两者：{speed_reason(d, 'zh')}）。")
    if k == "too_close":
        what = "压缩" if d.get("what", "compress") == "compress" else "解压"
        figs = "；".join(f"{s} {_speed(c, s)}" for s in c.subjects[:4])
        return f"{w}，{what}速度在这台机器上差距太小，无法判定快慢：{figs}（括号内为各次重复的范围；{speed_reason(d, 'zh')}）。"
    if k == "ranking":
        fig = _FIG["zh"][c.figure or "ratio"]
        spec = ".3g" if c.figure == "max_abs_err" else ".4g"
        a = c.subjects[0]
        if c.verdict == "tie":
            return f"{w}，{a} 和 {c.subjects[1]} 的{fig}相同，为 {g(c.values[a], spec)}。"
        best = "最高" if c.verdict == "higher" else "最低"
        rest = "、".join(f"{s} 为 {g(c.values[s], spec)}{_at(c, s, 'zh')}" for s in c.subjects[1:4])
        return f"{w}，{a} 的{fig}{best}，为 {g(c.values[a], spec)}{_at(c, a, 'zh')}；其后 {rest}。"
    if k == "bounds":
        return f"{w}：全部 {len(c.subjects)} 个结果都满足误差界（每个值都解压并逐点检查过）。"
    if k == "target":
        return _target_zh(c)
    if k == "violation":
        s = c.subjects[0]
        extra = f"［{d['error']}］" if d.get("error") else ""
        return (f"{s} 在 {c.where['dataset']} 上违反了 {bound_label(c.where['mode'], c.where['bound'])} 误差界"
                f"（最大绝对误差 {g(c.values[s], '.3g')}）{extra}：这是一个发现，不会被平均掉。")
    if k == "failure":
        return (f"{c.subjects[0]} 在 {c.where['dataset']} 上以 {bound_label(c.where['mode'], c.where['bound'])} "
                f"运行未完成（{d['status']}：{d['error']}）。")
    if k == "warning":
        return _warning_zh(c)
    return _tool_zh(c)


def _target_zh(c: Claim) -> str:
    d, s = c.detail, c.subjects[0]
    t = d["target"]
    label = target_label(t)
    unit = _UNIT.get(t["metric"], "")
    v, by = _close(float(c.values[s]), float(t["value"])), g(abs(d["margin"]), ".3g")
    on = f"{s}（{c.where['dataset']}，{setting(c.where, 'zh')}）"
    f = d["figures"]
    fig = f"压缩比 {g(f.get('ratio'))}，PSNR {g(f.get('psnr'))} dB，最大绝对误差 {g(f.get('max_abs_err'), '.3g')}"
    if c.verdict == "met":
        return f"{label}：{on} 满足，{t['metric']} 为 {v}{unit}（余量 {by}{unit}）；{fig}。{_coarse(c, 'zh')}"
    if c.verdict == "met_within_tolerance":
        why = "这是码流自身的头部（和块填充）带来的" if d.get("why") == "header" else "压缩比搜索在目标的容差内停止"
        return (f"{label}：{on} 在容差内满足，{t['metric']} 为 {v}{unit}，与目标相差 {by}{unit}，"
                f"在容差 {g(d['tolerance'], '.3g')}{unit} 之内（{why}）；{fig}。")
    return f"{label}：{on} 未达到；最接近的是 {t['metric']} {v}{unit}，差 {by}{unit}。{_coarse(c, 'zh')}"


def _warning_zh(c: Claim) -> str:
    d, s = c.detail, c.subjects[0]
    kind = d["warning"]
    if kind == "bound_vs_range":
        s = "、".join(c.subjects)
        return (f"警告：{s} 的绝对误差界 {g(d['abs_bound'], '.3g')} 是 {c.where['dataset']} 取值范围 "
                f"{g(d['value_range'], '.3g')} 的 {g(d['fraction'], '.3g')} 倍：达到范围的一半或更多时，"
                "一个常数（范围的中点）就能满足它，压缩比和 PSNR 说明不了什么。")
    if kind == "bound_below_resolution":
        s = "、".join(c.subjects)
        return (f"警告：{s} 在 {c.where['dataset']} 上的绝对误差界 {g(d['abs_bound'], '.3g')} 小于 {d['dtype']} "
                f"在数据最大幅值 {g(d['absmax'], '.3g')} 处的间隔 {g(d['spacing'], '.3g')}：最大的值只能原样保存（近乎无损）。")
    if kind == "unpacked":
        how = "打包" if d.get("packed") else "存储"
        return (f"警告：{c.where['dataset']} 以 {d['dtype_on_disk']} {how}，解包成了 {d['dtype']}：{s} 的压缩比 "
                f"{g(d['ratio'])} 是相对解包后的值；相对存储的字节是 {g(d['ratio_vs_stored'])}。")
    return (f"警告：{s} 只有 {d['nbytes']} 字节，小于 {d['threshold'] >> 20} MiB：计时主要是启动开销，"
            "速度不能代表更大的场。")


def _tool_zh(c: Claim) -> str:
    d, k = c.detail, c.kind
    if k == "profile":
        if c.verdict == "failed":
            return f"程序无法被剖析：{d['failed']}。"
        if not d.get("id"):
            return f"{c.subjects[0]}：测得的计数器里没有突出的瓶颈。"
        cited = "，".join(f"{m} = {g(v)}" for m, v in d.get("evidence") or [])
        return f"{c.subjects[0]}：主要瓶颈是 {d.get('title') or d['id']}（{d['id']}）" + (f"（{cited}）" if cited else "") + "。"
    if k == "machine":
        mem = g(float(d["mem_bytes"]) / 2**30, ".3g") if d.get("mem_bytes") else "?"
        return f"这台机器：{d['cpu']}，{d['ncpu']} 个逻辑 CPU，{mem} GiB 内存；GPU：{'、'.join(d['gpus']) or '无'}。"
    if k == "codecs":
        ok = "、".join(f"{i}（{dev}）" for i, dev in d["ok"]) or "无"
        bad = f"不可用：{'；'.join(f'{i}（{why}）' for i, why in d['bad'])}。" if d["bad"] else ""
        return f"这里可用：{ok}。{bad}"
    if k == "sweep":
        counts = "，".join(f"{a}: {b}" for a, b in d["counts"].items()) or "无"
        best = ("满足误差界时压缩比最高的：" + "；".join(
            f"{s} {g(r)}（{bound_label(m, b)}，{ds}）" for s, r, m, b, ds in d["best"]) + "。") if d["best"] else ""
        return f"sweep {c.subjects[0]} 共有 {d['n']} 个结果（{counts}）；{d['violations']} 个违反误差界。{best}"
    if k == "ignored":
        return f"请求中没有用到的部分：{'；'.join(d['items'])}。"
    if k == "note" and d.get("more_groups"):
        return f"（另有 {d['more_groups']} 个数据集/误差界组合见下表。）"
    return _tool_en(c)


RENDERERS: dict[str, Callable[[Claim], str]] = {"en": _en, "zh": _zh}


def render(c: Claim, language: str) -> str:
    """The claim's sentence in ``language`` ("en" or "zh")."""
    return RENDERERS.get(language, _en)(c)
