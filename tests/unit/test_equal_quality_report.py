"""The search outcome reaches the agent's observation, and the agent's report sets the codecs
side by side at equal quality from it (real evaluate_codec calls, real sz3 and zfp)."""

from __future__ import annotations

import copy
from pathlib import Path

from tests.unit.test_graph_tools import _call

from perfscout.graph.nodes import make_act_node
from perfscout.graph.report import write_agent_report

CONTRACT = {"target", "metric", "tolerance", "window", "reached", "trials", "closest_below", "closest_above",
            "too_coarse"}


def _observe(tmp_path: Path, codec: str, mode: str, bound: float, key: str) -> dict:
    reply = _call(make_act_node(), "evaluate_codec", {"dataset": "synthetic:grf:48,64", "codec": codec, "mode": mode,
                                                      "bound": bound, "repeats": 1}, run_dir=str(tmp_path))
    assert reply.artifact["kind"] == "result", reply.content
    data = copy.deepcopy(reply.artifact["data"])
    data["record"]["task_key"] = key  # the agent's call ids name the task; the test's one id does not
    return {"task_key": key, "tool": "evaluate_codec", "kind": "result", "data": data, "summary": reply.content}


def test_evaluate_codec_observations_carry_the_search(tmp_path: Path) -> None:
    obs = [_observe(tmp_path, "sz3", "psnr", 60.0, "t1"), _observe(tmp_path, "zfp", "psnr", 60.0, "t2"),
           _observe(tmp_path, "zfp", "abs", 1e-2, "t3")]
    for o in obs[:2]:
        search = o["data"]["search"]
        assert CONTRACT <= set(search) and search["metric"] == "psnr" and search["window"] == [60.0, 60.5]
        assert search["trials"] and all(len(t) == 2 for t in search["trials"])
        rec = o["data"]["record"]
        assert rec["psnr"] >= 60.0 and (rec["psnr"] <= 60.5 or search["too_coarse"])
    assert "search" not in obs[2]["data"]  # no search ran

    md = write_agent_report(tmp_path, obs, {"run_id": "r1", "plan": {"goal": "best ratio at PSNR 60"}}).read_text()
    assert "## At equal quality" in md
    section = md.split("## At equal quality")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "PSNR 60 dB" in line]
    assert {r.split("|")[3].strip() for r in rows} == {"sz3@cpu", "zfp@cpu"}
    for row in rows:  # each figure says how it was obtained
        how = row.split("|")[6]
        assert "measured:" in how or "interpolated between" in how or "outside the measured range" in how
    sz3 = next(r for r in rows if "sz3@cpu" in r)
    assert "measured:" in sz3 or obs[0]["data"]["search"]["too_coarse"]
