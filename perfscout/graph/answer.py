"""The report's first lines: one or two sentences that answer what was asked.

Built only from the stored results of the run (the same records the tables show), for the
question the intent names: which codec compresses most, fastest or with the least error,
how one codec did, what limits a program, what this machine is. Every sentence carries
the measured figures and the verdict on every bound; a part that could not be done (a
codec not installed, no GPU, a failed task) is said, with what ran instead. A request in
Chinese is answered in Chinese.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

_T = {
    "en": {
        "refused": "Nothing was run: the request was refused, because {why}.",
        "cancelled": "Nothing was run: the run was cancelled when a question was asked.",
        "no_plan": "Nothing was measured: {why}",
        "nothing": "No result was measured.",
        "best": "{where}, {a} gives the highest ratio, {ra}{rest}.",
        "best_only": "{where}, only {a} produced a result with the bound held: ratio {ra}.",
        "better": "{where}, {a} gives the better ratio, {ra} vs {rb} for {b}",
        "tie": "{where}, {a} and {b} give the same ratio, {ra}",
        "faster_c": "{a} compresses faster ({sa} vs {sb} MB/s)",
        "fastest_c": "{where}, {a} compresses fastest, {sa} MB/s{rest} (ratio {ra}).",
        "fastest_d": "{where}, {a} decompresses fastest, {sa} MB/s{rest} (ratio {ra}).",
        "lowest_err": "{where}, {a} has the lowest error: max abs error {ea}, PSNR {pa} dB{rest} (ratio {ra}).",
        "single": "{where}, {a} reaches ratio {ra} ({bits} bits/value), PSNR {pa} dB, max abs error {ea}; "
                  "it compresses at {sa} MB/s and decompresses at {da} MB/s.",
        "then": "; then {items}",
        "all_held": "All {n} results held their bound (every value was decompressed and checked).",
        "both_held": "both held the bound",
        "violated": "{a} broke its {mode} bound {b} on {ds} (max abs error {e}){extra}: a finding, not averaged away.",
        "failed": "{a} at {mode} {b} on {ds} did not finish ({status}: {err}).",
        "skipped": "{a} was not run: {why}.",
        "cpu_instead": "{a} had no GPU here, so it ran on the CPU instead: ratio {ra}, max abs error {ea} "
                       "({verdict}) ({why}).",
        "target_met": "Meeting {target}: {items}.",
        "target_none": "No result meets {target}.",
        "profile": "{what}: the primary limiter is {title} ({fid}){extra}.",
        "profile_none": "{what}: no finding stands out in the measured counters.",
        "profile_failed": "The program could not be profiled: {why}.",
        "machine": "This machine: {cpu}, {ncpu} logical CPUs, {mem} GiB of memory; GPUs: {gpus}.",
        "codecs": "Usable here: {ok}.{bad}",
        "codecs_bad": " Not usable: {items}.",
        "sweep": "The sweep {name} has {n} result(s) ({counts}); {viol} bound violation(s).{best}",
        "sweep_best": " Highest ratio with the bound held: {items}.",
        "ignored": "Not used from the request: {items}.",
        "none": "none",
        "sep": "; ",
    },
    "zh": {
        "refused": "没有运行任何任务：请求被拒绝，原因是{why}。",
        "cancelled": "没有运行任何任务：在提问时运行被取消。",
        "no_plan": "没有测量任何结果：{why}",
        "nothing": "没有测到结果。",
        "best": "{where}，{a} 的压缩比最高，为 {ra}{rest}。",
        "best_only": "{where}，只有 {a} 在满足误差界的情况下给出了结果：压缩比 {ra}。",
        "better": "{where}，{a} 的压缩比更高，{ra} 对 {b} 的 {rb}",
        "tie": "{where}，{a} 和 {b} 的压缩比相同，为 {ra}",
        "faster_c": "{a} 压缩更快（{sa} 对 {sb} MB/s）",
        "fastest_c": "{where}，{a} 压缩最快，{sa} MB/s{rest}（压缩比 {ra}）。",
        "fastest_d": "{where}，{a} 解压最快，{sa} MB/s{rest}（压缩比 {ra}）。",
        "lowest_err": "{where}，{a} 的误差最小：最大绝对误差 {ea}，PSNR {pa} dB{rest}（压缩比 {ra}）。",
        "single": "{where}，{a} 的压缩比为 {ra}（每个值 {bits} 位），PSNR {pa} dB，最大绝对误差 {ea}；"
                  "压缩速度 {sa} MB/s，解压速度 {da} MB/s。",
        "then": "；其后是 {items}",
        "all_held": "全部 {n} 个结果都满足误差界（每个值都解压并逐点检查过）。",
        "both_held": "两者都满足误差界",
        "violated": "{a} 在 {ds} 上违反了 {mode} 误差界 {b}（最大绝对误差 {e}）{extra}：这是一个发现，不会被平均掉。",
        "failed": "{a} 在 {ds} 上以 {mode} {b} 运行未完成（{status}：{err}）。",
        "skipped": "{a} 没有运行：{why}。",
        "cpu_instead": "这里没有 GPU，{a} 改在 CPU 上运行：压缩比 {ra}，最大绝对误差 {ea}（{verdict}）（{why}）。",
        "target_met": "满足 {target} 的有：{items}。",
        "target_none": "没有结果满足 {target}。",
        "profile": "{what}：主要瓶颈是 {title}（{fid}）{extra}。",
        "profile_none": "{what}：测得的计数器里没有突出的瓶颈。",
        "profile_failed": "程序无法被剖析：{why}。",
        "machine": "这台机器：{cpu}，{ncpu} 个逻辑 CPU，{mem} GiB 内存；GPU：{gpus}。",
        "codecs": "这里可用：{ok}。{bad}",
        "codecs_bad": "不可用：{items}。",
        "sweep": "sweep {name} 共有 {n} 个结果（{counts}）；{viol} 个违反误差界。{best}",
        "sweep_best": "满足误差界时压缩比最高的：{items}。",
        "ignored": "请求中没有用到的部分：{items}。",
        "none": "无",
        "sep": "；",
    },
}


def _g(v: Any, spec: str = ".4g") -> str:
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


def _ok(r: dict[str, Any]) -> bool:
    return r.get("status") == "ok" and r.get("bound_ok") is True and r.get("ratio") is not None


def _name(r: dict[str, Any]) -> str:
    dev = r.get("device") or "cpu"
    return f"{r.get('codec')}" + (" (GPU)" if dev == "cuda" else "")


def answer_lines(state: dict[str, Any], records: list[dict[str, Any]],
                 finals: list[dict[str, Any]]) -> list[str]:
    """Sentences that answer the request (Markdown, one paragraph per item)."""
    intent = state.get("intent") or {}
    lang = intent.get("language", "en") if intent.get("language") in _T else "en"
    T = _T[lang]
    plan = state.get("plan") or {}
    if state.get("refusal"):
        if state["refusal"].startswith("cancelled"):
            return [T["cancelled"]]
        return [T["refused"].format(why=state["refusal"])]
    if state.get("plan_error"):
        return [T["no_plan"].format(why=state["plan_error"])]
    question = intent.get("question") or ("evaluate" if records else None)
    out: list[str] = []
    if records:
        out += _codec_answer(question or "evaluate", records, intent, T)
    for o in finals:
        if o.get("tool") in ("diagnose_profile", "diagnose_file") and o.get("kind") == "result":
            out += _diagnosis_answer(o.get("data") or {}, T)
        elif o.get("tool") == "profile_command" and o.get("kind") != "result":
            out.append(T["profile_failed"].format(why=(o.get("error") or o.get("summary") or "")[:300]))
        elif o.get("tool") == "platform_snapshot" and o.get("kind") == "result":
            out.append(_machine_answer(o.get("data") or {}, T))
        elif o.get("tool") == "list_codecs" and o.get("kind") == "result":
            out.append(_codecs_answer(o.get("data") or [], T))
        elif o.get("tool") == "run_sweep" and o.get("kind") == "result":
            out.append(_sweep_answer(o.get("data") or {}, T))
        elif o.get("tool") == "compare_runs" and o.get("kind") == "result":
            out.append(str(o.get("summary") or ""))
        elif o.get("tool") not in ("evaluate_codec",) and o.get("kind") in ("error", "refused"):
            out.append(f"{o.get('task_key')}: {o.get('tool')} {o.get('kind')}: {(o.get('error') or '')[:300]}")
    for s in plan.get("skipped") or []:
        out.append(T["skipped"].format(a=s.get("codec"), why=s.get("why")))
    for n in state.get("notes") or []:
        if n.get("kind") in ("gpu_unavailable",) and "measured on" in n.get("message", ""):
            rec = next((r for r in records if r.get("task_key") == n.get("task_key")), {})
            held = rec.get("bound_ok") is True
            verdict = ("bound held" if held else "bound NOT held") if T is _T["en"] else ("满足误差界" if held else "违反误差界")
            line = T["cpu_instead"].format(a=rec.get("codec") or n.get("task_key"), ra=_g(rec.get("ratio")),
                                           ea=_g(rec.get("max_abs_err"), ".3g"), verdict=verdict,
                                           why=n["message"].split(";")[0])
            if line not in out:
                out.append(line)
    if intent.get("ignored"):
        out.append(T["ignored"].format(items="; ".join(intent["ignored"])))
    return out or [T["nothing"]]


def _groups(records: list[dict[str, Any]]) -> dict[tuple[str, str, float], list[dict[str, Any]]]:
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(str(r.get("dataset")), str(r.get("mode")), float(r.get("bound") or 0))].append(r)
    return groups


def _codec_answer(question: str, records: list[dict[str, Any]], intent: dict[str, Any],
                  T: dict[str, str]) -> list[str]:
    out: list[str] = []
    groups = _groups(records)
    for (ds, mode, bound), rows in list(groups.items())[:6]:
        where = f"At {bound_label(mode, bound)} on {ds}" if T is _T["en"] else f"在 {ds} 上以 {bound_label(mode, bound)}"
        good = [r for r in rows if _ok(r)]
        if not good:
            continue
        if question == "fastest_compress":
            key, tmpl, field = (lambda r: -(r.get("compress_MBps") or 0)), "fastest_c", "compress_MBps"
        elif question == "fastest_decompress":
            key, tmpl, field = (lambda r: -(r.get("decompress_MBps") or 0)), "fastest_d", "decompress_MBps"
        elif question == "lowest_error":
            key, tmpl, field = (lambda r: (r.get("max_abs_err") if r.get("max_abs_err") is not None
                                           else float("inf"))), "lowest_err", "max_abs_err"
        else:
            key, tmpl, field = (lambda r: -(r.get("ratio") or 0)), "best", "ratio"
        ranked = sorted(good, key=key)
        a = ranked[0]
        if len({(r.get("codec"), r.get("device")) for r in rows}) == 1 and question in ("evaluate", "compare"):
            out.append(T["single"].format(where=where, a=_name(a), ra=_g(a.get("ratio")), bits=_g(a.get("bitrate"), ".3g"),
                                          pa=_g(a.get("psnr"), ".4g"), ea=_g(a.get("max_abs_err"), ".3g"),
                                          sa=_g(a.get("compress_MBps"), ".4g"), da=_g(a.get("decompress_MBps"), ".4g")))
            continue
        if question in ("compare", "evaluate") and len(ranked) == 2 and len(rows) == 2:
            b = ranked[1]
            line = (T["tie"] if _g(a.get("ratio")) == _g(b.get("ratio")) else T["better"]).format(
                where=where, a=_name(a), b=_name(b), ra=_g(a.get("ratio")), rb=_g(b.get("ratio")))
            fast, slow = sorted((a, b), key=lambda r: -(r.get("compress_MBps") or 0))
            if fast.get("compress_MBps") and slow.get("compress_MBps"):
                line += T["sep"] + T["faster_c"].format(a=_name(fast), sa=_g(fast["compress_MBps"], ".4g"),
                                                        sb=_g(slow["compress_MBps"], ".4g"))
            line += T["sep"] + T["both_held"] + ("." if T is _T["en"] else "。")
            out.append(line)
            continue
        if len(ranked) == 1 and len(rows) > 1:
            out.append(T["best_only"].format(where=where, a=_name(a), ra=_g(a.get("ratio"))))
            continue
        rest = ""
        if len(ranked) > 1:
            items = ", ".join(f"{_name(r)} {_g(r.get(field), '.4g')}" for r in ranked[1:4])
            rest = T["then"].format(items=items)
        out.append(T[tmpl].format(where=where, a=_name(a), ra=_g(a.get("ratio")), sa=_g(a.get(field), ".4g"),
                                  ea=_g(a.get("max_abs_err"), ".3g"), pa=_g(a.get("psnr"), ".4g"), rest=rest))
    if len(groups) > 6:
        out.append(f"({len(groups) - 6} more dataset/bound combinations are in the table below.)")
    for t in intent.get("targets") or []:
        label = _target_label(t)
        met = [r for r in records if _ok(r) and _meets(t, r)]
        if met:
            out.append(T["target_met"].format(target=label, items=", ".join(
                f"{_name(r)} at {bound_label(r.get('mode'), r.get('bound'))} ({t['metric']} {_g(r.get(t['metric']))})"
                for r in met[:5])))
        else:
            out.append(T["target_none"].format(target=label))
    violated = [r for r in records if r.get("bound_ok") is False]
    for r in violated:
        extra = f" [{r.get('error')[:160]}]" if r.get("error") else ""
        out.append(T["violated"].format(a=_name(r), mode=str(r.get("mode")).upper(), b=_g(r.get("bound")),
                                        ds=r.get("dataset"), e=_g(r.get("max_abs_err"), ".3g"), extra=extra))
    for r in records:
        if r.get("status") == "gpu_unavailable" and r.get("ratio") is not None:
            continue  # it ran on the CPU instead: the cpu_instead line says so, with its figures
        if r.get("status") != "ok" and r.get("bound_ok") is not False:
            out.append(T["failed"].format(a=_name(r), mode=str(r.get("mode")).upper(), b=_g(r.get("bound")),
                                          ds=r.get("dataset"), status=r.get("status"),
                                          err=str(r.get("error") or "")[:200]))
    held = [r for r in records if _ok(r)]
    if held and len(held) == len(records):
        out.append(T["all_held"].format(n=len(held)))
    return out


def _target_label(t: dict[str, Any]) -> str:
    unit = {"ratio": "x", "psnr": " dB", "bitrate": " bits/value"}.get(t["metric"], "")
    return f"{t['metric']} {t['op']} {t['value']:g}{unit}"


def _meets(t: dict[str, Any], r: dict[str, Any]) -> bool:
    v = r.get(t["metric"])
    if v is None:
        return False
    return v >= t["value"] if t["op"] == ">=" else v <= t["value"]


def _diagnosis_answer(doc: dict[str, Any], T: dict[str, str]) -> list[str]:
    items = doc.get("kernels") or doc.get("programs") or []
    out = []
    for item in items[:3]:
        what = str(item.get("name") or item.get("command") or "the program")[:80]
        primary = item.get("primary") or {}
        if not primary:
            out.append(T["profile_none"].format(what=what))
            continue
        evidence = primary.get("evidence") or []
        cited = ", ".join(f"{e.get('metric')} = {_g(e.get('value'))}" for e in evidence[:2] if isinstance(e, dict))
        out.append(T["profile"].format(what=what, title=primary.get("title") or primary.get("id"),
                                       fid=primary.get("id"), extra=f" ({cited})" if cited else ""))
    return out


def _machine_answer(d: dict[str, Any], T: dict[str, str]) -> str:
    cpu = d.get("cpu") or {}
    mem = d.get("memory") or {}
    total = mem.get("total_bytes") or mem.get("total") or 0
    gib = _g(float(total) / 2**30, ".3g") if total else "?"
    gpus = ", ".join(g.get("name", "") for g in d.get("gpus") or []) or T["none"]
    return T["machine"].format(cpu=cpu.get("model") or "?", ncpu=cpu.get("logical_cpus", "?"), mem=gib, gpus=gpus)


def _codecs_answer(infos: list[dict[str, Any]], T: dict[str, str]) -> str:
    ok = ", ".join(f"{i['id']} ({i.get('device')})" for i in infos if i.get("available")) or T["none"]
    bad = [f"{i['id']} ({i.get('reason') or '?'})" for i in infos if not i.get("available")]
    return T["codecs"].format(ok=ok, bad=T["codecs_bad"].format(items="; ".join(bad)) if bad else "")


def _sweep_answer(d: dict[str, Any], T: dict[str, str]) -> str:
    counts = ", ".join(f"{k}: {v}" for k, v in (d.get("status_counts") or {}).items()) or T["none"]
    best = d.get("best_ratio") or []
    best_text = T["sweep_best"].format(items="; ".join(
        f"{r['series']} {_g(r['ratio'])} at {bound_label(r['mode'], r['bound'])} on {r['dataset']}" for r in best[:3])
    ) if best else ""
    return T["sweep"].format(name=d.get("name", ""), n=d.get("tasks", 0), counts=counts,
                             viol=len(d.get("violations") or []), best=best_text)
