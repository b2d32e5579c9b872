"""`perfscout diagnose` with an LLM endpoint: the explanation is added, checked, and never
changes the diagnosis. A real endpoint that refuses the connection, and a real model
(SmolLM2-135M served by llama.cpp on 127.0.0.1, as in test_agent_llm_real.py) that answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis.llm_explain import _METRIC as METRIC
from tests.integration.test_agent_llm_real import smollm_url  # noqa: F401 - the served model, a fixture
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "tests" / "fixtures" / "ncu" / "h200_transpose_raw.csv"


def diagnose(*args: str, env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PERFSCOUT_LLM_")}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])", "diagnose", *args],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
        env={**clean, "PERFSCOUT_HOME": str(home), "PYTHONPATH": str(ROOT), **env})


def test_an_unreachable_endpoint_leaves_the_diagnosis_as_it_is(tmp_path):
    off = diagnose("--json", "--ncu-csv", str(PROFILE), "--explain", "off", env={}, home=tmp_path)
    assert off.returncode == 0, off.stderr
    url = {"PERFSCOUT_LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1", "PERFSCOUT_LLM_TIMEOUT_S": "5"}
    auto = diagnose("--json", "--ncu-csv", str(PROFILE), env=url, home=tmp_path)
    assert auto.returncode == 0, auto.stderr
    with_llm, without = json.loads(auto.stdout), json.loads(off.stdout)
    assert with_llm.pop("explanations") and "explanations" not in without
    assert with_llm == without  # the engine's diagnosis, untouched
    (e,) = json.loads(auto.stdout)["explanations"]
    assert e["kernel"] == without["kernels"][0]["name"] and "Connection" in e["error"]
    text = diagnose("--format", "markdown", "--ncu-csv", str(PROFILE), env=url, home=tmp_path)
    assert "## LLM explanation (gpt-4o-mini at http://127.0.0.1:" in text.stdout
    assert "No explanation: " in text.stdout and "Connection error" in text.stdout


def test_explain_on_without_an_endpoint_is_a_clear_error(tmp_path):
    r = diagnose("--ncu-csv", str(PROFILE), "--explain", "on", env={}, home=tmp_path)
    assert r.returncode == 2 and "--explain on needs an LLM endpoint: set PERFSCOUT_LLM_BASE_URL" in r.stderr
    r = diagnose("--ncu-csv", str(PROFILE), "--explain", "maybe", env={}, home=tmp_path)
    assert r.returncode == 2 and "--explain must be auto, on or off" in r.stderr


@pytest.mark.llm
@pytest.mark.slow
def test_a_real_model_explains_and_keeps_only_what_the_findings_hold(smollm_url, tmp_path):  # noqa: F811
    env = {"PERFSCOUT_LLM_BASE_URL": smollm_url, "PERFSCOUT_LLM_MODEL": "smollm2",
           "PERFSCOUT_LLM_API_KEY": "local", "PERFSCOUT_LLM_MAX_TOKENS": "300",
           "PERFSCOUT_LLM_TIMEOUT_S": "300"}  # 884 prompt tokens: 160 s on 2 busy cores
    r = diagnose("--json", "--ncu-csv", str(PROFILE), "--all-metrics", env=env, home=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    off = json.loads(diagnose("--json", "--ncu-csv", str(PROFILE), "--all-metrics", "--explain", "off",
                              env={}, home=tmp_path).stdout)
    assert {k: v for k, v in doc.items() if k != "explanations"} == off
    kernel = doc["kernels"][0]
    (e,) = doc["explanations"]
    assert e["model"] == f"smollm2 at {smollm_url}"
    # the tiny model's words vary; whatever it said, only what the findings hold was kept
    if "error" not in e:
        ids = {f["id"] for f in kernel["findings"]}
        evidence = [x for f in kernel["findings"] for x in f["evidence"]]
        known = set(kernel["metrics"]) | {x["metric"] for x in evidence} | {i for x in evidence for i in x["inputs"]}
        assert e["bottleneck_type"] in ids
        for s in e["accepted"]:
            assert s["finding_id"] in ids and s["metrics"] and set(s["metrics"]) <= known
        # reasoning with a metric or a number the findings do not hold is withheld, saying why
        assert bool(e["reasoning"]) != bool(e["reasoning_withheld"]) or not (e["reasoning"] or e["reasoning_withheld"])
        if e["reasoning"]:
            assert all(m in known for m in METRIC.findall(e["reasoning"]))
    print(json.dumps(e, indent=1)[:2000])
