"""One configuration gives one record, whichever entry point runs it.

The same datasets (a .npy file, a raw float32 file with its shape, a synthetic field, a real
field of the shared data) and the same (codec, mode, bound) points run through
``perfscout eval --json``, a sweep (``perfscout.sweep.api.sweep``), the agent
(``perfscout.agent.run`` with the deterministic planner) and ``perfscout run --spec`` (the CLI,
given the sweep's own spec as a YAML file); their records must agree field by field on
everything but timings, the dataset's display name included; the agent's are compared both as
it answers (results.json) and as its run directory stores them (results.sqlite, the sweep
engine's store). All read their data through ``perfscout.datasets.open``; before it, the
agent asked a .npy file for a shape and then refused it as a raw file of the wrong size,
while ``eval`` read it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from perfscout import agent
from perfscout.cli import app
from perfscout.graph.context import Context
from perfscout.sweep.api import sweep
from perfscout.tools.results_store import open_results
from tests.conftest import SHARED_DATA

CONFIGS = [("sz3", "abs", 1e-3), ("zfp", "rel", 1e-3)]
#: Every field of a record that must not depend on the entry point (timings, run ids,
#: platform ids and task keys may).
COMPARED = ("dataset", "shape", "dtype", "nbytes", "codec", "mode", "bound", "abs_bound", "ratio", "max_abs_err",
            "psnr", "bound_ok", "status")
REAL_FIELD = "vorticity.512_512"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key in COMPARED:
        value = record.get(key)
        if hasattr(value, "item"):  # a pandas/numpy scalar from the sweep's table
            value = value.item()
        if key == "shape" and isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        out[key] = value
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(7)
    npy = root / "field.npy"
    np.save(npy, np.cumsum(rng.standard_normal((32, 24)), axis=1).astype(np.float32))
    raw = root / "field.raw"
    np.cumsum(rng.standard_normal((12, 16, 10)), axis=2).astype("<f4").tofile(raw)
    return {"npy": npy, "raw": raw}


def _cases(files: dict[str, Path]) -> list[dict[str, Any]]:
    """Each dataset as every entry point names it: eval's options, a sweep entry, an agent entry,
    and the display name every record of it must carry."""
    cases = [
        {"id": "npy", "eval": ["--data", str(files["npy"])], "sweep": {"path": str(files["npy"])},
         "agent": str(files["npy"]), "named": "field.npy"},
        {"id": "raw", "eval": ["--data", str(files["raw"]), "--shape", "12,16,10", "--dtype", "f32"],
         "sweep": {"path": str(files["raw"]), "shape": [12, 16, 10], "dtype": "f32"},
         "agent": {"path": str(files["raw"]), "shape": [12, 16, 10], "dtype": "f32"}, "named": "field.raw"},
        {"id": "synthetic", "eval": ["--synthetic", "grf:24,24"], "sweep": {"synthetic": "grf:24,24"},
         "agent": "synthetic:grf:24,24", "named": "grf:24x24"},
    ]
    if (SHARED_DATA / REAL_FIELD).is_file():
        cases.append({"id": "real", "eval": ["--dataset", REAL_FIELD], "sweep": {"name": REAL_FIELD},
                      "agent": REAL_FIELD, "named": REAL_FIELD})
    return cases


def _spec(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The one spec a sweep and ``perfscout run --spec`` both run: every dataset, each
    (codec, mode, bound) an experiment."""
    grids = [{"name": f"{codec}-{mode}", "codecs": [codec], "modes": [mode], "bounds": [bound]}
             for codec, mode, bound in CONFIGS]
    return {"name": "agree", "repeats": 1, "jobs": 1, "datasets": [c["sweep"] for c in cases], "experiments": grids}


@pytest.fixture(scope="module")
def swept(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple, dict[str, Any]]:
    """One sweep over every dataset and configuration (one run: its task server starts once)."""
    return _sweep_records(_cases(files), tmp_path_factory.mktemp("sweep") / "run")


@pytest.fixture(scope="module")
def run_spec(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``perfscout run --spec FILE --json`` on the sweep's spec written as YAML: the grid runs
    as the agent's evaluations; its answer's records and its store's rows."""
    folder = tmp_path_factory.mktemp("runspec")
    spec = folder / "agree.yaml"
    spec.write_text(yaml.safe_dump(_spec(_cases(files)), sort_keys=False))
    res = CliRunner().invoke(app, ["run", "--spec", str(spec), "--planner", "deterministic", "--json"],
                             env={"PERFSCOUT_HOME": str(folder / "home")})
    assert res.exit_code == 0, res.output
    run_dir = Path(json.loads(res.stdout)["run_dir"])
    answered = json.loads((run_dir / "results.json").read_text())["records"]
    return {"answered": answered, "stored": open_results(run_dir).to_dict("records")}


def _by_config(records: list[dict[str, Any]], named: str) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        if r["dataset"] == named:
            out.setdefault((r["codec"], r["mode"], float(r["bound"])), []).append(r)
    return out


def _eval_records(case: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    out = {}
    for codec, mode, bound in CONFIGS:
        res = CliRunner().invoke(app, ["eval", *case["eval"], "--codec", codec, "--mode", mode, "--bound",
                                       str(bound), "--repeats", "1", "--json"])
        assert res.exit_code == 0, f"eval {case['id']} {codec} {mode}: {res.output}"
        out[(codec, mode, bound)] = json.loads(res.stdout)
    return out


def _sweep_records(cases: list[dict[str, Any]], out: Path) -> dict[tuple, dict[str, Any]]:
    df = sweep(_spec(cases), out=out, progress=False)
    return {(r["dataset"], r["codec"], r["mode"], float(r["bound"])): r for r in df.to_dict("records")}


def _agent_records(case: dict[str, Any], home: Path) -> dict[tuple, dict[str, Any]]:
    out = {}
    for codec, mode, bound in CONFIGS:
        spec = {"goal": f"{codec} on {case['id']}", "datasets": [case["agent"]], "codecs": [codec], "mode": mode,
                "bounds": [bound], "repeats": 1}
        ctx = Context(home=str(home), planner="deterministic", noise_threshold=1e9)
        run = agent.run(spec, thread_id=f"agree-{case['id']}-{codec}-{mode}", context=ctx)
        assert run.status == "done", f"agent {case['id']} {codec} {mode}: {run.status} {run.question or run.refusal}"
        records = json.loads((Path(run.run_dir) / "results.json").read_text())["records"]
        assert len(records) == 1, records
        out[(codec, mode, bound)] = records[0]
    return out


@pytest.mark.parametrize("case_id", ["npy", "raw", "synthetic", "real"])
def test_eval_sweep_and_agent_give_the_same_records(case_id: str, files: dict[str, Path], swept: dict,
                                                   run_spec: dict, perfscout_home: Path) -> None:
    case = next((c for c in _cases(files) if c["id"] == case_id), None)
    if case is None:
        pytest.skip(f"real field {REAL_FIELD} not found under {SHARED_DATA} (set PERFSCOUT_SHARED_DATA)")
    evals, agents = _eval_records(case), _agent_records(case, perfscout_home)
    answered, stored = _by_config(run_spec["answered"], case["named"]), _by_config(run_spec["stored"], case["named"])
    differences = []
    for config in CONFIGS:
        # the answer gives each task's final attempt; the store each configuration it measured
        assert len(answered.get(config, [])) == 1 and stored.get(config), (config, answered, stored)
        by_entry = {"eval": [evals[config]], "sweep": [swept[(case["named"], *config)]], "run": [agents[config]],
                    "run --spec": answered[config], "run --spec store": stored[config]}
        for entry, recs in by_entry.items():
            for rec in recs:
                assert rec["status"] == "ok" and rec["bound_ok"] is True, (config, entry, rec)
        reference = _plain(by_entry["eval"][0])
        assert reference["dataset"] == case["named"]  # every door names the data alike
        assert None not in reference.values(), reference  # a missing column would compare equal
        for entry, recs in by_entry.items():
            for rec in recs:
                other = _plain(rec)
                differences += [f"{config}: {key}: eval {reference[key]!r} != {entry} {other[key]!r}"
                                for key in COMPARED if not _same(reference[key], other[key])]
    assert not differences, "\n".join(differences)


def test_the_agent_reads_a_npy_file_without_asking_for_a_shape(files: dict[str, Path]) -> None:
    from perfscout.graph.tools import resolve_data

    # the files are outside the test's working directory: named in the request, written absolute
    named = [str(files["npy"]), str(files["raw"])]
    field, missing = resolve_data(str(files["npy"]), None, None, named_paths=named)
    assert missing is None and field.shape == (32, 24) and field.dtype_tag == "f32"
    # a shape given by mistake is not a reason to size it as raw values
    field, missing = resolve_data(str(files["npy"]), "64,64", "f32", named_paths=named)
    assert missing is None and field.shape == (32, 24)
    # a raw file without its shape still asks, with its size on disk
    _, missing = resolve_data(str(files["raw"]), None, None, named_paths=named)
    assert missing is not None and set(missing["needs"]) == {"shape", "dtype"}
    assert f"{12 * 16 * 10 * 4} bytes" in missing["needs"]["shape"]


def test_the_agent_resolves_a_unique_prefix_and_asks_for_an_unknown_name() -> None:
    from perfscout.graph.tools import resolve_data

    _, missing = resolve_data("no-such-field", None, None)
    assert missing is not None and "dataset" in missing["needs"] and "vorticity.512_512" in missing["needs"]["dataset"]
    if (SHARED_DATA / REAL_FIELD).is_file():
        field, missing = resolve_data("vorticity.512", None, None)  # the one name it begins
        assert missing is None and field.name == REAL_FIELD
