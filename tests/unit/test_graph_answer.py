"""The answer sentences from records: verdicts, violations, failures, targets, languages."""

from __future__ import annotations

from perfscout.graph.answer import answer_lines


def _rec(codec, ratio, *, ok=True, status="ok", mode="rel", bound=1e-3, err=1e-4, psnr=70.0, c=100.0, d=200.0,
         error=""):
    return {"codec": codec, "device": "cpu", "dataset": "f", "mode": mode, "bound": bound, "ratio": ratio,
            "bitrate": 32 / ratio if ratio else None, "max_abs_err": err, "psnr": psnr, "bound_ok": ok,
            "status": status, "compress_MBps": c, "decompress_MBps": d, "error": error, "task_key": codec}


def _state(question, lang="en", **intent):
    return {"intent": {"question": question, "language": lang, **intent}, "plan": {}}


def test_a_violated_bound_is_said_as_a_finding_and_not_counted_as_held():
    recs = [_rec("sz3", 8.0), _rec("zfp", 9.0, ok=False, err=3e-3)]
    lines = answer_lines(_state("compare"), recs, [])
    text = " ".join(lines)
    assert "zfp broke its REL 1e-3 bound on f" in text and "a finding, not averaged away" in text
    assert "sz3" in lines[0] and "held their bound" not in text


def test_a_failed_task_and_a_skipped_codec_are_said():
    recs = [_rec("sz3", 8.0), _rec("sz2", None, ok=None, status="codec_crashed", error="SIGSEGV in sz2")]
    state = _state("best_ratio")
    state["plan"] = {"skipped": [{"codec": "cuszp", "why": "libcuSZp.so not found"}]}
    lines = answer_lines(state, recs, [])
    text = " ".join(lines)
    # what could not be done comes first, with what ran instead
    assert lines[0] == ("cuszp could not run here (libcuSZp.so not found); sz2 did not finish "
                        "(codec_crashed: SIGSEGV in sz2); what ran instead: sz3.")
    assert "only sz3 reaches ratio 8" in text


def test_targets_are_checked_against_the_measured_figures():
    recs = [_rec("sz3", 25.0), _rec("zfp", 12.0)]
    text = " ".join(answer_lines(_state("compare", targets=[{"metric": "ratio", "op": ">=", "value": 20}]), recs, []))
    assert "ratio >= 20x: met by sz3 on f at REL 1e-3, ratio 25x (5x to spare)" in text
    assert "ratio >= 20x: missed by zfp on f at REL 1e-3; the closest is ratio 12x, 8x short" in text
    text = " ".join(answer_lines(_state("compare", targets=[{"metric": "psnr", "op": ">=", "value": 90}]), recs, []))
    assert "psnr >= 90 dB: missed by sz3" in text and "20 dB short" in text


def test_refusals_and_chinese():
    assert "refused" in answer_lines({"refusal": "it asks for a network transfer", "intent": {}}, [], [])[0]
    zh = answer_lines(_state("compare", "zh"), [_rec("sz3", 8.0), _rec("zfp", 4.0)], [])
    assert "sz3 的压缩比最高，为 8；其后 zfp 为 4" in zh[0]
