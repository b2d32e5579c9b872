"""`perfscout tune` on small real benchmark programs with a known optimum, every run through
the sandbox; findings narrowing the space; experiment cards; the agent's tool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.tools import tune as T
from perfscout.tools.regress import load_run

ROOT = Path(__file__).resolve().parents[2]
PERF_FIXTURES = ROOT / "tests" / "fixtures" / "perf"
#: The benchmark programs run with this interpreter: the sandbox always allows it (a
#: pyenv shim on PATH would need the real $HOME, which the confinement hides).
PY = sys.executable


@pytest.fixture(autouse=True)
def _sandbox_can_run(tmp_path: Path) -> None:
    from perfscout.tools.sandbox import Sandbox

    res = Sandbox(tmp_path / "probe").run([PY, "-c", "print(1)"])
    if res.status == "refused":
        pytest.skip(f"the sandbox cannot run programs here: {res.reason}")

#: Sleeps 10 ms x (1 + 3 (threads - 4)^2) and prints the time it measured: the best value of
#: OMP_NUM_THREADS is 4 (10 ms); 3 and 5 take 40 ms, 2 and 6 130 ms, 1 280 ms (gaps wide
#: enough that a loaded machine's sleep overshoot cannot reorder them).
SLEEPER = """\
import os, sys, time
t = int(os.environ.get("OMP_NUM_THREADS", "1"))
t0 = time.perf_counter()
time.sleep(0.01 * (1 + 3 * (t - 4) ** 2))
print(f"threads {t}")
print(f"elapsed: {time.perf_counter() - t0:.6f} s")
"""

#: A figure computed from the program's flags, printed as JSON after a log line: the
#: throughput peaks at --block 32 and grows with --unroll (choices 1, 2, 4).
BLOCKER = """\
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
block, unroll = int(args["--block"]), int(args["--unroll"])
print("log: starting")
print(json.dumps({"result": {"gbps": 100.0 / (1 + abs(block - 32) / 16) * (1 + 0.1 * unroll)}}))
"""


def _program(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sleeper_spec(prog: Path, **over) -> T.TuneSpec:
    doc = {"name": "threads", "command": [PY, str(prog)],
           "figure": {"regex": r"elapsed: (?P<value>\S+) s", "unit": "s", "name": "elapsed_s"},
           "space": {"OMP_NUM_THREADS": {"type": "int", "low": 1, "high": 6, "env": True}},
           "baseline": {"OMP_NUM_THREADS": 1}, "trials": 6, "repeats": 3, "confirm_repeats": 6,
           "narrow": {"cpu_context_switches": {"OMP_NUM_THREADS": {"high": 2}},
                      "cpu_page_faults": {"OMP_NUM_THREADS": {"high": 1}}}}
    doc.update(over)
    return T.parse_tune_spec(doc)


def test_tuning_finds_the_known_best_thread_count(tmp_path: Path) -> None:
    prog = _program(tmp_path, "sleeper.py", SLEEPER)
    out = T.run_tune(_sleeper_spec(prog), tmp_path / "run", cwd=tmp_path)
    assert out.best_params == {"OMP_NUM_THREADS": 4}
    assert len(out.trials) == 6  # the grid sampler measured each value once
    assert out.verdict == "improved", out.sentence
    assert out.measured_gain > 0.7 and out.measured_ci[0] > 0.5  # 280 ms -> 10 ms
    conf = out.confirmation
    assert conf is not None and conf.verdict == "improved" and conf.tasks[0].metrics[1].n_baseline == 6
    # cards: one per trial, plus the confirmed best
    cards = json.loads((tmp_path / "run" / "cards.json").read_text())
    assert len(cards) == 7 and {c["stage"] for c in cards} == {"search", "confirmed"}
    best = next(c for c in cards if c["stage"] == "confirmed")
    assert best["proposal"] == {"OMP_NUM_THREADS": 4} and best["verdict"] == "improved"
    assert best["prediction_met"] is True and best["measured_ci"][0] <= best["measured_gain"] <= best["measured_ci"][1]
    for key in ("problem", "evidence", "proposal", "predicted_gain", "measured_gain", "measured_ci",
                "verdict", "what_not_to_do"):
        assert key in best
    # the runs were real: raw outputs of every repeat, samples the regression runner reads
    assert "threads 4" in (tmp_path / "run" / "raw" / "confirm-best" / "000.stdout").read_text()
    assert load_run(tmp_path / "run" / "confirm-best").tasks[0].measured["elapsed_s"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Experiment cards" in report and "### Card best (confirmed)" in report
    assert "**what not to do**" in report and "Regression check" in report
    assert "<html" in (tmp_path / "run" / "report.html").read_text()
    section = T.cards_markdown(cards)  # what the agent's report embeds from the tool artifact
    assert section.startswith("### Card trial-000 (search)") and "**measured gain**" in section


def _diagnosis(fixture: str) -> dict:
    """What `perfscout diagnose --perf-csv` says about a real perf stat capture."""
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "perfscout") if (ROOT / ".venv" / "bin" / "perfscout").exists()
                           else "perfscout", "diagnose", "--perf-csv", str(PERF_FIXTURES / fixture), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_finding_narrows_the_space_and_its_prediction_is_checked(tmp_path: Path) -> None:
    """The context-switch finding of a real perf capture caps the threads at 2: the tuner then
    finds 2 (not the global best 4), and the card tests the finding's expected gain."""
    refs = T.findings_from_diagnosis(_diagnosis("sleep_r3_x.csv"))
    assert "cpu_context_switches" in {f.id for f in refs}
    prog = _program(tmp_path, "sleeper.py", SLEEPER)
    out = T.run_tune(_sleeper_spec(prog), tmp_path / "run", findings=refs, cwd=tmp_path)
    assert out.space == {"OMP_NUM_THREADS": "[1, 2]"}
    assert any("cpu_context_switches: OMP_NUM_THREADS narrowed from [1, 6] to [1, 2]" in n for n in out.narrowing)
    assert {tuple(sorted(t.params.values())) for t in out.trials} == {(1,), (2,)}
    assert out.best_params == {"OMP_NUM_THREADS": 2}
    best = next(c for c in out.cards if c.stage == "confirmed")
    finding = next(f for f in refs if f.id == "cpu_context_switches")
    assert best.predicted_gain == pytest.approx(finding.expected_gain)
    assert best.prediction_source == "the narrowing finding's expected gain"
    assert any(f["id"] == "cpu_context_switches" and f["evidence"] for f in best.evidence["findings"])
    assert best.prediction_met is True  # 280 ms -> 130 ms beats the predicted few per cent


def test_a_card_whose_gain_missed_the_prediction_says_so(tmp_path: Path) -> None:
    """The page-fault finding (8 % expected) narrows the threads to 1, the baseline: nothing
    gains, so every card says its prediction was missed, and nothing is proposed."""
    refs = T.findings_from_diagnosis(_diagnosis("default_events_x.csv"))
    page = next(f for f in refs if f.id == "cpu_page_faults")
    prog = _program(tmp_path, "sleeper.py", SLEEPER)
    out = T.run_tune(_sleeper_spec(prog, repeats=5), tmp_path / "run", findings=[page], cwd=tmp_path)
    assert out.best_params == {"OMP_NUM_THREADS": 1} and out.verdict == "unchanged"
    assert "nothing to change" in out.sentence
    assert out.cards and all(c.prediction_met is False for c in out.cards)
    assert all(c.prediction_note.startswith("MISSED") for c in out.cards)
    assert "MISSED" in (tmp_path / "run" / "report.md").read_text()


def test_flags_json_figure_and_categorical_parameters(tmp_path: Path) -> None:
    prog = _program(tmp_path, "blocker.py", BLOCKER)
    spec = T.parse_tune_spec({
        "command": [PY, str(prog), "--block", "{block}", "--unroll", "{unroll}"],
        "figure": {"json": "result.gbps", "better": "higher", "unit": "GB/s"},
        "space": {"block": {"type": "categorical", "choices": [8, 16, 32, 64, 128]},
                  "unroll": {"type": "int", "low": 1, "high": 4, "step": 1}},
        "baseline": {"block": 8, "unroll": 1}, "trials": 20, "repeats": 1, "confirm_repeats": 5})
    out = T.run_tune(spec, tmp_path / "run", cwd=tmp_path)
    assert out.best_params == {"block": 32, "unroll": 4}
    assert out.verdict == "improved" and out.measured_gain > 1.0  # the figure is exact: CI has no width
    assert T.configure(spec, out.best_params)[0][-4:] == ["--block", "32", "--unroll", "4"]


def test_bad_specs_are_clear_errors(tmp_path: Path) -> None:
    from perfscout.errors import InputError

    base = {"command": ["python3", "x.py", "--n", "{n}"], "space": {"n": {"type": "int", "low": 1, "high": 4}},
            "baseline": {"n": 1}}
    T.parse_tune_spec(base)
    cases = [
        ({"space": {"m": {"type": "int", "low": 1, "high": 4}}}, "neither an environment variable"),
        ({"baseline": {}}, "baseline needs a value"),
        ({"space": {"n": {"type": "int", "low": 5, "high": 4}}}, "low 5.0 must be <= high"),
        ({"space": {"n": {"type": "categorical"}}}, "non-empty `choices`"),
        ({"sampler": "annealing"}, "sampler"),
        ({"narrow": {"x": {"zz": {"high": 1}}}}, "not a parameter"),
        ({"figure": {"regex": "("}}, "does not compile"),
    ]
    for change, msg in cases:
        with pytest.raises(InputError, match=msg):
            T.parse_tune_spec({**base, **change})
    spec = T.parse_tune_spec({**base, "narrow": {"f": {"n": {"low": 9}}}})
    with pytest.raises(InputError, match="narrows n to nothing"):
        T.narrowed_space(spec, [T.FindingRef(id="f")])


def test_a_baseline_that_does_not_run_is_refused(tmp_path: Path) -> None:
    from perfscout.errors import InputError

    prog = _program(tmp_path, "fails.py", "import sys; sys.exit(3)\n")
    spec = T.parse_tune_spec({"command": [PY, str(prog)], "trials": 2, "repeats": 1,
                              "space": {"OMP_NUM_THREADS": {"type": "int", "low": 1, "high": 2, "env": True}}})
    with pytest.raises(InputError, match="does not run cleanly"):
        T.run_tune(spec, tmp_path / "run", cwd=tmp_path)


def test_the_agent_tool_tunes_in_the_agent_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.graph.regress_tools import tune_command

    monkeypatch.chdir(tmp_path)
    _program(tmp_path, "sleeper.py", SLEEPER)
    summary, art = tune_command.func(
        command=[PY, "sleeper.py"], figure_regex=r"elapsed: (\S+) s", trials=3, repeats=3,
        space={"OMP_NUM_THREADS": {"type": "int", "low": 3, "high": 5, "env": True}},
        baseline={"OMP_NUM_THREADS": 3}, out="agent_tune")
    assert art["kind"] == "result", art["error"]
    assert art["data"]["best_params"] == {"OMP_NUM_THREADS": 4} and "improved" in summary
    assert (tmp_path / "agent_tune" / "cards.json").is_file()
    summary, art = tune_command.func(command=[PY, "sleeper.py"], out="/etc/perfscout-tune",
                                     space={"OMP_NUM_THREADS": {"type": "int", "low": 1, "high": 2, "env": True}})
    assert art["kind"] == "error" and "outside" in art["error"]


def test_tune_cli_json_and_findings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from perfscout.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    _program(tmp_path, "blocker.py", BLOCKER)
    (tmp_path / "diag.json").write_text(json.dumps(_diagnosis("sleep_r3_x.csv")))
    (tmp_path / "tune.yaml").write_text(f"""
command: [{json.dumps(PY)}, blocker.py, --block, "{{block}}", --unroll, "1"]
figure: {{json: result.gbps, better: higher}}
space:
  block: {{type: categorical, choices: [8, 16, 32, 64]}}
baseline: {{block: 8}}
narrow:
  cpu_context_switches: {{block: {{choices: [8, 16]}}}}
trials: 4
repeats: 1
confirm_repeats: 5
""")
    res = CliRunner().invoke(app, ["tune", "tune.yaml", "--findings", "diag.json", "--out", "t", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["best_params"] == {"block": 16}  # the finding kept 32 out of reach
    assert doc["verdict"] == "improved" and doc["space"] == {"block": "{8, 16}"}
    assert doc["confirmation"]["verdict"] == "improved"
    assert (tmp_path / "t" / "report.html").is_file()


def test_the_program_itself_can_be_a_categorical_parameter(tmp_path: Path) -> None:
    """Two 'builds' of one benchmark, chosen by a placeholder in the program's path."""
    for build, block in (("build-a", 8), ("build-b", 32)):
        (tmp_path / build).mkdir()
        exe = tmp_path / build / "app"
        exe.write_text(f"#!{PY}\n" + BLOCKER.replace('int(args["--block"])', str(block)))
        exe.chmod(0o755)
    spec = T.parse_tune_spec({
        "command": [str(tmp_path / "{build}" / "app"), "--block", "0", "--unroll", "1"],
        "figure": {"json": "result.gbps", "better": "higher"},
        "space": {"build": {"type": "categorical", "choices": ["build-a", "build-b"]}},
        "baseline": {"build": "build-a"}, "trials": 2, "repeats": 1, "confirm_repeats": 5})
    out = T.run_tune(spec, tmp_path / "run", cwd=tmp_path)
    assert out.best_params == {"build": "build-b"} and out.verdict == "improved"
    bad = T.parse_tune_spec({"command": ["{n}/app"], "space": {"n": {"type": "int", "low": 1, "high": 2}},
                             "baseline": {"n": 1}})
    from perfscout.errors import InputError

    with pytest.raises(InputError, match="not categorical"):
        T.run_tune(bad, tmp_path / "run2", cwd=tmp_path)


@pytest.mark.slow
def test_tuning_a_real_codec_option_through_perfscout_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/tune_sz3_algorithm.yaml as shipped: every trial a verified `perfscout eval` in
    the sandbox; the best predictor is the one evaluate() itself gives the highest ratio."""
    from perfscout.datasets import synthetic
    from perfscout.tools.evaluate import evaluate

    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    spec = T.load_tune_spec(ROOT / "examples" / "tune_sz3_algorithm.yaml")
    # the console script beside this interpreter (PATH need not hold the venv)
    spec = spec.model_copy(update={"command": [str(Path(PY).parent / "perfscout"), *spec.command[1:]]})
    field = synthetic("grf", (32, 64, 64))
    ratios = {a: evaluate(field, "sz3", "rel", 1e-3, repeats=1, options={"algorithm": a}).ratio
              for a in spec.space["algorithm"].choices}
    out = T.run_tune(spec, tmp_path / "run", cwd=tmp_path)
    assert out.best_params == {"algorithm": max(ratios, key=ratios.get)}
    by_trial = {t.params["algorithm"]: t.value for t in out.trials}
    assert by_trial == pytest.approx(ratios)  # the tuner read exactly what eval measured
    assert out.verdict == "improved" and out.measured_gain == pytest.approx(
        ratios[out.best_params["algorithm"]] / ratios["lorenzo_reg"] - 1)
