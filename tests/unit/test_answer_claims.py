"""The claims checker: generated record sets answered in both languages, every claim re-derived.

A seeded generator makes runs as the graph stores them (records from CompressionResult, the
evaluate_codec observations with per-repeat timings, search metadata and field facts, the
plan's skipped codecs, reflect's GPU notes): fallbacks, failures, fixed-rate records, noisy
and clearly separated timings, targets met, met within tolerance and missed, skipped codecs,
no GPU. For each: every claim re-derives from the records, every requested codec is
accounted for, both languages render every claim, and a claim altered after it was built is
caught by the checker (so the check is not vacuous).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from perfscout.graph.answer import answer_claims, answer_lines
from perfscout.graph.claims_build import build_claims
from perfscout.graph.claims_check import checked, problem
from perfscout.graph.claims_facts import base_codec, facts_from
from perfscout.state.records import CompressionResult

CODECS = ["sz3", "zfp", "sz2", "szp"]


def _rec(key: str, codec: str, *, dataset="f", mode="abs", bound=1e-3, ratio=8.0, status="ok", ok=True,
         device="cpu", nbytes=4 << 20, shape="1024,1024", psnr=70.0, err=5e-4, cs=0.02, ds=0.01,
         bitrate=None, error="", chunks=1) -> dict[str, Any]:
    r = CompressionResult(
        task_key=key, dataset=dataset, shape=shape, dtype="f32", nbytes=nbytes, codec=codec, device=device,
        mode=mode, bound=bound, abs_bound=bound if mode == "abs" else 1e-3, repeats=5,
        compress_s=cs if ratio is not None else None, decompress_s=ds if ratio is not None else None,
        compress_MBps=nbytes / 1e6 / cs if ratio is not None else None,
        decompress_MBps=nbytes / 1e6 / ds if ratio is not None else None,
        ratio=ratio, bitrate=bitrate if bitrate is not None else (32 / ratio if ratio else None), chunks=chunks,
        max_abs_err=err if ratio is not None else None, psnr=psnr if ratio is not None else None,
        bound_ok=ok, status=status, error=error)
    return r.row()


def _obs(rec: dict[str, Any], *, samples: list[float] | None = None, dsamples: list[float] | None = None,
         search: dict[str, Any] | None = None, fld: dict[str, Any] | None = None) -> dict[str, Any]:
    n = rec["compress_s"] or 0.0
    timing = {"compress": {"samples_s": samples if samples is not None else [n] * 5},
              "decompress": {"samples_s": dsamples if dsamples is not None else [rec["decompress_s"] or 0.0] * 5}}
    data: dict[str, Any] = {"record": rec, "timing": timing, "notes": [],
                            "field": fld or {"dtype": "float32", "min": -1.0, "max": 1.0, "absmax": 1.0,
                                             "nbytes": rec["nbytes"]}}
    if search is not None:
        data["search"] = search
    return {"task_key": rec["task_key"], "tool": "evaluate_codec", "kind": "result", "data": data,
            "args": {"codec": rec["codec"]}}


def _state(question: str, lang: str, *, codecs: list[str], targets=(), devices=(), skipped=(), notes=()):
    plan = {"tasks": [{"key": f"t{i}", "tool": "evaluate_codec", "args": {"codec": c}} for i, c in enumerate(codecs)],
            "skipped": list(skipped)}
    return {"intent": {"question": question, "language": lang, "codecs": list(codecs), "targets": list(targets),
                       "devices": list(devices)}, "plan": plan, "notes": list(notes)}


def _noisy(rng: random.Random, median: float, spread: float, n: int) -> list[float]:
    return [median * (1 + spread * (rng.random() - 0.5)) for _ in range(n)]


def generated_run(seed: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(state, records, final observations) of one generated run."""
    rng = random.Random(seed)
    question = rng.choice(["compare", "best_ratio", "fastest_compress", "fastest_decompress", "lowest_error",
                           "evaluate"])
    lang = rng.choice(["en", "zh"])
    codecs = rng.sample(CODECS, rng.randint(1, 3))
    mode = rng.choice(["abs", "abs", "fixed_rate", "ratio", "psnr"])
    bounds = rng.sample([1e-1, 1e-2, 1e-3, 1e-4], rng.randint(1, 2)) if mode == "abs" else \
        [8.0] if mode == "fixed_rate" else [20.0] if mode == "ratio" else [60.0]
    small = rng.random() < 0.3
    nbytes = 4096 if small else 4 << 20
    gpu = rng.random() < 0.3
    records, finals, notes = [], [], []
    i = 0
    for codec in codecs:
        for b in bounds:
            i += 1
            key = f"t{i:02d}-{codec}"
            fate = rng.choice(["ok", "ok", "ok", "violated", "crashed", "cpu_reference"] if codec == "szp"
                              else ["ok", "ok", "ok", "violated", "crashed"])
            speed = rng.choice([0.01, 0.02, 0.08]) * (nbytes / (4 << 20))
            kw: dict[str, Any] = {"dataset": "f", "mode": mode, "bound": b, "nbytes": nbytes,
                                  "shape": "32,32" if small else "1024,1024", "cs": speed, "ds": speed / 2}
            search = None
            if mode == "fixed_rate":
                kw.update(ok=None, bitrate=b + rng.choice([0.0005, 0.03, 1.5]), ratio=32 / b)
            elif mode == "ratio":
                kw.update(ok=True, ratio=rng.choice([19.98, 20.3, 17.0]))
                search = {"target": 20.0, "metric": "ratio", "tolerance": 0.01, "reached": kw["ratio"] != 17.0,
                          "trials": [[1e-3, kw["ratio"]]], "closest_below": [2e-3, 17.0], "closest_above": [5e-4, 23.0],
                          "too_coarse": kw["ratio"] == 17.0}
            elif mode == "psnr":
                kw.update(psnr=rng.choice([60.2, 59.0, 75.0]), ratio=rng.uniform(4, 30))
            else:
                kw.update(ratio=rng.uniform(2, 40), err=b * rng.uniform(0.2, 1.0))
            if fate == "violated":
                kw.update(ok=False, status="bound_violated", err=(b if mode == "abs" else 1e-3) * 3)
            elif fate == "crashed":
                kw.update(ok=None, status="codec_crashed", ratio=None, error="SIGSEGV")
            elif fate == "cpu_reference":
                kw.update(status="gpu_unavailable", error="gpu_unavailable: no CUDA device")
                notes.append({"task_key": key, "kind": "gpu_unavailable",
                              "message": "gpu_unavailable: no CUDA device; the figures were measured on cpu"})
            r = _rec(key, codec, **kw)
            records.append(r)
            spread = rng.choice([0.01, 0.9])
            finals.append(_obs(r, samples=_noisy(rng, r["compress_s"] or 0.01, spread, rng.choice([1, 3, 5, 9])),
                               dsamples=_noisy(rng, r["decompress_s"] or 0.01, spread, 5), search=search,
                               fld={"dtype": "float32", "min": -rng.choice([1.0, 1e-4]), "max": 1.0,
                                    "absmax": 1.0, "nbytes": nbytes,
                                    **({"dtype_on_disk": "int16", "packed": True, "stored_itemsize": 2}
                                       if rng.random() < 0.2 else {})}))
    skipped = [{"codec": "cuszp", "why": "libcuSZp.so not found"}] if rng.random() < 0.4 else []
    targets = []
    if rng.random() < 0.5:
        targets.append(rng.choice([{"metric": "ratio", "op": ">=", "value": 10.0},
                                   {"metric": "psnr", "op": ">=", "value": 65.0},
                                   {"metric": "bitrate", "op": "<=", "value": 8.0}]))
    state = _state(question, lang, codecs=codecs + [s["codec"] for s in skipped], targets=targets,
                   devices=["cuda"] if gpu else [], skipped=skipped, notes=notes)
    return state, records, finals


@pytest.mark.parametrize("seed", range(60))
def test_generated_runs_answer_with_claims_that_all_re_derive(seed):
    state, records, finals = generated_run(seed)
    facts = facts_from(state, records, finals)
    built = build_claims(facts)
    assert [problem(c, facts) for c in built] == [""] * len(built)  # the builder states only what follows
    for lang in ("en", "zh"):
        language, claims, dropped = answer_claims({**state, "intent": {**state["intent"], "language": lang}},
                                                  records, finals)
        assert language == lang and dropped == []
        assert [c.id for c in claims] == [f"c{i}" for i in range(1, len(claims) + 1)]
        assert all(c.text.strip() for c in claims)
        if lang == "zh":
            assert any("\u4e00" <= ch <= "\u9fff" for c in claims for ch in c.text)
        named = {base_codec(s) for c in claims for s in c.subjects}
        missing = [c for c in facts.requested_codecs() if c not in named]
        assert not missing, f"requested codecs unaccounted for: {missing}"
        # what could not be done comes first
        kinds = [c.kind for c in claims]
        assert kinds.count("could_not_run") <= 1 and kinds.index("could_not_run") == 0 if "could_not_run" in kinds \
            else True


def _speed_claim(claims):
    return next(c for c in claims if c.figure and c.figure.endswith("_MBps"))


@pytest.mark.parametrize("seed", range(20))
def test_an_altered_claim_does_not_re_derive_and_is_dropped(seed):
    state, records, finals = generated_run(seed)
    facts = facts_from(state, records, finals)
    for c in build_claims(facts):
        bad = None
        if c.values and c.subjects and c.subjects[0] in c.values and isinstance(c.values[c.subjects[0]], float):
            bad = c.model_copy(update={"values": {**c.values, c.subjects[0]: c.values[c.subjects[0]] * 1.5}})
        elif c.kind == "ranking" and len(c.subjects) > 1:
            bad = c.model_copy(update={"subjects": c.subjects[::-1]})
        elif c.kind == "could_not_run":
            ran = [r["codec"] for r in records if r["ratio"] is not None]
            if ran:  # a codec that did run, said not to have
                items = c.detail["items"] + [[ran[0], "not_run", "invented"]]
                bad = c.model_copy(update={"subjects": c.subjects + [ran[0]], "detail": {**c.detail, "items": items}})
        if bad is not None:
            assert problem(bad, facts), f"an altered {c.kind} claim re-derived: {bad}"
            dropped: list = []
            assert checked([bad], facts, dropped) == [] and dropped[0]["why"] == problem(bad, facts)


# ---- the rules on their own ----------------------------------------------------------

def _one(rec, obs=None, **state_kw):
    state = _state(state_kw.pop("question", "evaluate"), state_kw.pop("lang", "en"), codecs=[rec["codec"]], **state_kw)
    return answer_claims(state, [rec], [obs or _obs(rec)])[1]


def test_a_fixed_rate_stream_header_is_not_a_missed_rate_and_the_figures_asked_for_are_given():
    rec = _rec("t1", "zfp", mode="fixed_rate", bound=8.0, ok=None, ratio=3.99, bitrate=8.0005, psnr=61.2, err=2e-3,
               nbytes=1 << 20, shape="512,512")  # 16 header bytes on 262144 values: +0.0005 bits/value
    claims = _one(rec, targets=[{"metric": "bitrate", "op": "<=", "value": 8.0}])
    target = next(c for c in claims if c.kind == "target")
    assert target.verdict == "met_within_tolerance" and target.detail["margin"] == pytest.approx(0.0005)
    assert "0.0005 bits/value off the target" in target.text and "header" in target.text
    single = next(c for c in claims if c.kind == "single")
    assert "PSNR 61.2 dB" in single.text and "max abs error 0.002" in single.text and "ratio 3.99" in single.text
    assert "fixed rate 8 bits/value" in single.text


def test_a_rate_far_above_the_header_is_missed_with_how_much():
    rec = _rec("t1", "zfp", mode="fixed_rate", bound=8.0, ok=None, ratio=3.0, bitrate=10.67, shape="1024,1024")
    target = next(c for c in _one(rec, targets=[{"metric": "bitrate", "op": "<=", "value": 8.0}]) if c.kind == "target")
    assert target.verdict == "missed" and "2.67 bits/value short" in target.text


def test_a_ratio_search_within_its_tolerance_meets_the_ratio_and_says_so():
    rec = _rec("t1", "sz3", mode="ratio", bound=20.0, ratio=19.98)
    search = {"target": 20.0, "metric": "ratio", "tolerance": 0.01, "reached": True, "trials": [[1e-3, 19.98]],
              "closest_below": 19.98, "closest_above": 20.9, "too_coarse": False}
    claims = _one(rec, _obs(rec, search=search), targets=[{"metric": "ratio", "op": ">=", "value": 20.0}])
    target = next(c for c in claims if c.kind == "target")
    assert target.verdict == "met_within_tolerance" and target.detail["tolerance"] == pytest.approx(0.2)
    assert "met within tolerance" in target.text and "0.02x off the target" in target.text
    # beyond the tolerance it is missed, with the closest value and the control's coarseness
    rec2 = _rec("t1", "zfp", mode="ratio", bound=20.0, ratio=16.0)
    coarse = {**search, "reached": False, "too_coarse": True, "closest_below": [1e-4, 16.0],
              "closest_above": [2e-4, 31.5]}  # (abs_bound, achieved), as the search keeps them
    target = next(c for c in _one(rec2, _obs(rec2, search=coarse)) if c.kind == "target")
    assert target.verdict == "missed" and "the closest is ratio 16x, 4x short" in target.text
    assert "too coarse" in target.text and "above 31.5x at abs bound 0.0002" in target.text


def test_an_exact_measurement_has_no_tolerance():
    rec = _rec("t1", "sz3", mode="abs", bound=1e-3, ratio=19.98)
    target = next(c for c in _one(rec, targets=[{"metric": "ratio", "op": ">=", "value": 20.0}]) if c.kind == "target")
    assert target.verdict == "missed"


def _pair(cs_a, cs_b, samples_a, samples_b, question="fastest_compress"):
    a = _rec("t1", "sz3", cs=cs_a)
    b = _rec("t2", "zfp", cs=cs_b)
    state = _state(question, "en", codecs=["sz3", "zfp"])
    return answer_claims(state, [a, b], [_obs(a, samples=samples_a), _obs(b, samples=samples_b)])[1]


def test_clearly_separated_repeats_name_a_winner_and_overlapping_ones_do_not():
    rng = random.Random(1)
    claims = _pair(0.01, 0.05, _noisy(rng, 0.01, 0.05, 9), _noisy(rng, 0.05, 0.05, 9))
    speed = _speed_claim(claims)
    assert speed.kind == "ranking" and speed.verdict == "faster" and speed.subjects[0] == "sz3"
    assert "sz3 compresses fastest" in speed.text
    noisy = _pair(0.010, 0.012, _noisy(rng, 0.010, 0.9, 9), _noisy(rng, 0.012, 0.9, 9))
    speed = _speed_claim(noisy)
    assert speed.kind == "too_close" and speed.verdict == "too_close_to_call"
    assert "too close to call on this machine" in speed.text
    assert all(s in speed.spread and speed.spread[s][0] < speed.spread[s][1] for s in speed.subjects)


def test_three_repeats_decide_only_when_they_do_not_overlap():
    separated = _speed_claim(_pair(0.01, 0.04, [0.0100, 0.0102, 0.0101], [0.040, 0.041, 0.0405]))
    assert separated.verdict == "faster"
    overlapping = _speed_claim(_pair(0.01, 0.04, [0.0100, 0.0102, 0.05], [0.040, 0.041, 0.0405]))
    assert overlapping.verdict == "too_close_to_call"


def test_a_gpu_codec_that_could_not_run_is_the_first_sentence_and_its_cpu_reference_is_labelled():
    sz3 = _rec("t1", "sz3")
    ref = _rec("t2", "szp-gpu", status="gpu_unavailable", error="gpu_unavailable: no CUDA device")
    state = _state("compare", "en", codecs=["cuszp", "sz3", "szp-gpu"], devices=["cuda"],
                   skipped=[{"codec": "cuszp", "why": "libcuSZp.so not found"}])
    claims = answer_claims(state, [sz3, ref], [_obs(sz3), _obs(ref)])[1]
    assert claims[0].kind == "could_not_run" and claims[0].subjects == ["cuszp", "GPU"]
    assert claims[0].text == ("cuszp could not run here (libcuSZp.so not found); the GPU could not be used "
                              "(no CUDA device); what ran instead: sz3, szp-gpu (CPU reference).")
    ranking = next(c for c in claims if c.kind == "ranking")
    assert "szp-gpu (CPU reference)" in ranking.subjects
    assert any(c.kind == "cpu_instead" and "CPU reference" in c.text for c in claims)


def test_degenerate_settings_are_warned_with_their_numbers():
    wide = _rec("t1", "sz3", bound=1e-3, nbytes=4 << 20)
    fld = {"dtype": "float32", "min": 0.0, "max": 4.3e-4, "absmax": 4.3e-4, "nbytes": 4 << 20}
    w = [c for c in _one(wide, _obs(wide, fld=fld)) if c.kind == "warning"]
    assert [c.detail["warning"] for c in w] == ["bound_vs_range"]
    assert "0.001" in w[0].text and "0.00043" in w[0].text

    fine = _rec("t1", "sz3", bound=1e-6)
    fld = {"dtype": "float32", "min": 0.0, "max": 1000.0, "absmax": 1000.0, "nbytes": 4 << 20}
    w = [c for c in _one(fine, _obs(fine, fld=fld)) if c.kind == "warning"]
    assert w[0].detail["warning"] == "bound_below_resolution" and w[0].detail["spacing"] == 2.0 ** -14  # float32 spacing at 1000

    packed = _rec("t1", "sz3", ratio=16.0)
    fld = {"dtype": "float64", "min": 0.0, "max": 1.0, "absmax": 1.0, "nbytes": 4 << 20, "dtype_on_disk": "int16",
           "packed": True, "stored_itemsize": 2}
    w = [c for c in _one(packed, _obs(packed, fld=fld)) if c.kind == "warning"]
    assert w[0].detail["ratio_vs_stored"] == pytest.approx(4.0) and "against the stored bytes it is 4" in w[0].text

    small = _rec("t1", "sz3", nbytes=1024, shape="16,16")
    w = [c for c in _one(small, _obs(small)) if c.kind == "warning"]
    assert w[0].detail["warning"] == "small_field" and "1024 bytes" in w[0].text


def test_refusals_and_lines_in_chinese():
    assert "refused" in answer_lines({"refusal": "it asks for a network transfer", "intent": {}}, [], [])[0]
    a, b = _rec("t1", "sz3", ratio=8.0), _rec("t2", "zfp", ratio=4.0)
    zh = answer_lines(_state("compare", "zh", codecs=["sz3", "zfp"]), [a, b], [_obs(a), _obs(b)])
    assert "sz3 的压缩比最高，为 8；其后 zfp 为 4" in zh[0]


def test_a_psnr_search_that_falls_short_is_a_missed_target_not_a_broken_bound():
    rec = _rec("t1", "zfp", mode="psnr", bound=60.0, psnr=59.2, ok=False, status="bound_violated", ratio=9.0,
               error="PSNR target 60 not reached after 5 trial(s)")
    claims = _one(rec)
    assert not [c for c in claims if c.kind == "violation"]
    target = next(c for c in claims if c.kind == "target")
    assert target.verdict == "missed" and target.detail["margin"] == pytest.approx(-0.8)
    assert "psnr >= 60 dB: missed by zfp" in target.text and "0.8 dB short" in target.text


def test_a_psnr_target_overshot_by_a_coarse_control_is_met_and_says_why_it_overshoots():
    rec = _rec("t1", "zfp", mode="psnr", bound=80.0, psnr=84.3, ratio=4.28)
    search = {"target": 80.0, "metric": "psnr", "tolerance": 0.5, "reached": True, "trials": [[1e-6, 84.3]],
              "closest_below": [2e-6, 78.2], "closest_above": [1e-6, 84.3], "too_coarse": True}
    zh = answer_claims(_state("evaluate", "zh", codecs=["zfp"]), [rec], [_obs(rec, search=search)])[1]
    target = next(c for c in _one(rec, _obs(rec, search=search)) if c.kind == "target")
    assert target.verdict == "met" and "4.3 dB to spare" in target.text
    assert "too coarse to land in the target's window" in target.text and "below 78.2 dB" in target.text
    assert "控制参数太粗" in next(c for c in zh if c.kind == "target").text


def test_a_ranking_at_a_psnr_target_shows_where_each_codec_landed():
    a = _rec("t1", "sz3", mode="psnr", bound=80.0, psnr=80.36, ratio=5.713)
    b = _rec("t2", "zfp", mode="psnr", bound=80.0, psnr=84.33, ratio=4.279)
    state = _state("best_ratio", "en", codecs=["sz3", "zfp"])
    finals = [_obs(a), _obs(b)]
    ranking = next(c for c in answer_claims(state, [a, b], finals)[1] if c.kind == "ranking")
    assert "sz3 gives the highest ratio, 5.713 (at PSNR 80.36 dB); then zfp 4.279 (at PSNR 84.33 dB)" in ranking.text
    facts = facts_from(state, [a, b], finals)
    bad = ranking.model_copy(update={"detail": {**ranking.detail, "at": {"figure": "psnr",
                                                                          "values": {"sz3": 80.36, "zfp": 80.4}}}})
    assert problem(ranking, facts) == "" and "landed at" in problem(bad, facts)
