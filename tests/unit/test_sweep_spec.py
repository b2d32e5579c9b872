"""Sweep specs: validation with file:line errors, expansion, stable task keys."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from perfscout.errors import InputError
from perfscout.sweep.spec import SpecError, expand, load_spec

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
name: t
repeats: 1
datasets:
  - synthetic: "grf:8,16,16"
codecs: [sz3, zfp]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-3]
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_grid_expands_to_the_cartesian_product(tmp_path: Path) -> None:
    tasks, skipped = expand(load_spec(write(tmp_path, BASE)))
    assert len(tasks) == 1 * 2 * 2 * 2
    assert not skipped
    assert {(t.codec, t.mode, t.bound) for t in tasks} == {
        (c, m, b) for c in ("sz3", "zfp") for m in ("abs", "rel") for b in (1e-2, 1e-3)
    }
    assert all(t.data.shape == [8, 16, 16] and t.data.nbytes == 8 * 16 * 16 * 4 for t in tasks)
    assert len({t.task_key for t in tasks}) == len(tasks)


def test_task_keys_are_stable_and_depend_only_on_config_and_data(tmp_path: Path) -> None:
    a = [t.task_key for t in expand(load_spec(write(tmp_path, BASE)))[0]]
    # Same grid written elsewhere, with another output dir, name and key order: same keys.
    other = tmp_path / "elsewhere"
    other.mkdir()
    reordered = BASE.replace("name: t", "name: renamed\noutput: somewhere/else\ntimeout_s: 7")
    b = [t.task_key for t in expand(load_spec(write(other, reordered)))[0]]
    assert a == b
    # A different seed is different data: every key changes.
    seeded = BASE.replace('- synthetic: "grf:8,16,16"', '- synthetic: "grf:8,16,16"\n    seed: 3')
    c = [t.task_key for t in expand(load_spec(write(tmp_path, seeded, "s2.yaml")))[0]]
    assert not set(a) & set(c)
    # More repeats is a different measurement.
    d = [t.task_key for t in expand(load_spec(write(tmp_path, BASE.replace("repeats: 1", "repeats: 2"), "s3.yaml")))[0]]
    assert not set(a) & set(d)


def test_file_identity_is_its_content_not_its_path(tmp_path: Path) -> None:
    arr = np.linspace(0, 1, 8 * 8, dtype=np.float32)
    for name in ("a.bin", "b.bin"):
        arr.tofile(tmp_path / name)
    spec = "repeats: 1\ncodecs: [sz3]\nbounds: [0.01]\ndatasets:\n  - {path: %s, shape: [8, 8]}\n"
    ka = expand(load_spec(write(tmp_path, spec % "a.bin", "a.yaml")))[0][0]
    kb = expand(load_spec(write(tmp_path, spec % "b.bin", "b.yaml")))[0][0]
    assert ka.task_key == kb.task_key
    assert ka.data.path == str((tmp_path / "a.bin").resolve())  # relative to the spec file
    (arr + 1).tofile(tmp_path / "b.bin")
    kc = expand(load_spec(write(tmp_path, spec % "b.bin", "c.yaml")))[0][0]
    assert kc.task_key != ka.task_key


def test_wrong_file_size_is_a_clear_error(tmp_path: Path) -> None:
    np.zeros(10, dtype=np.float32).tofile(tmp_path / "x.bin")
    spec = "codecs: [sz3]\ndatasets:\n  - {path: x.bin, shape: [4, 4]}\n"
    with pytest.raises(SpecError, match=r"x.bin: expected 64 bytes for shape \(4, 4\) of float32 .* the file has 40 bytes"):
        expand(load_spec(write(tmp_path, spec)))


def test_experiments_inherit_defaults_and_share_tasks(tmp_path: Path) -> None:
    text = BASE + """\
experiments:
  - name: scan
    codecs: [sz3]
    bounds: {rel: [1.0e-1, 1.0e-2, 1.0e-3]}
  - name: compare
    modes: [rel]
"""
    tasks, _ = expand(load_spec(write(tmp_path, text)))
    # scan: sz3 rel x3; compare: (sz3, zfp) rel x (1e-2, 1e-3) -> sz3 rel 1e-2/1e-3 shared.
    assert len(tasks) == 3 + 2
    shared = [t for t in tasks if t.experiments == ["scan", "compare"]]
    assert {(t.codec, t.bound) for t in shared} == {("sz3", 1e-2), ("sz3", 1e-3)}


def test_unsupported_grid_points_are_listed_not_run(tmp_path: Path) -> None:
    text = "codecs: [sz3, sz2]\ndatasets: [{synthetic: 'grf:8,8'}]\nbounds: {pw_rel: [0.01], abs: [0.01]}\n"
    tasks, skipped = expand(load_spec(write(tmp_path, text)))
    assert {(t.codec, t.mode) for t in tasks} == {("sz3", "abs"), ("sz2", "abs"), ("sz2", "pw_rel")}
    assert [(s.codec, s.mode) for s in skipped] == [("sz3", "pw_rel")]
    assert "no 'pw_rel' mode" in skipped[0].reason


def _error_lines(exc: pytest.ExceptionInfo, path: Path) -> list[int]:
    return [int(m) for m in re.findall(re.escape(str(path)) + r":(\d+)", str(exc.value))]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (BASE.replace("repeats: 1", "repeats: 0"), 2, "greater than or equal to 1"),
        (BASE.replace('- synthetic: "grf:8,16,16"', '- synthetic: "grf:8,16,16"\n    dtype: f16'), 5, "dtype must be one of"),
        (BASE.replace("modes: [abs, rel]", "modes:\n  - abs\n  - relative"), 8, "unknown mode 'relative'"),
        (BASE.replace("bounds: [1.0e-2, 1.0e-3]", "bounds:\n  - 1.0e-2\n  - -3"), 9, "bounds must be finite and > 0"),
        (BASE.replace("codecs: [sz3, zfp]", "codecs:\n  - sz3\n  - zpf"), 7, "unknown codec 'zpf'"),
        (BASE + "timeout: 5\n", 8, "Extra inputs are not permitted"),
        (BASE.replace('- synthetic: "grf:8,16,16"', "- path: x.bin"), 4, "needs its 'shape'"),
        (BASE.replace("codecs: [sz3, zfp]", "codecs: [sz3, zfp\nmodes: ["), 6, "YAML syntax error"),
        (BASE.replace("bounds: [1.0e-2, 1.0e-3]", "bounds:\n  rel: [0.1]\n  abs:\n    - 0.1\n    - .nan"), 11, "bounds must be finite"),
    ],
)
def test_errors_name_the_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert words in str(exc.value)
    assert line in _error_lines(exc, path), str(exc.value)
    assert isinstance(exc.value, InputError)


def test_a_spec_needs_datasets_and_codecs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no datasets given"):
        load_spec(write(tmp_path, "codecs: [sz3]\n"))
    with pytest.raises(SpecError, match="a sweep spec is a YAML mapping"):
        load_spec(write(tmp_path, "- just\n- a list\n", "l.yaml"))
    with pytest.raises(SpecError, match="sweep spec not found"):
        load_spec(tmp_path / "missing.yaml")


def test_plugins_register_codecs_and_bad_plugins_are_clear(tmp_path: Path) -> None:
    text = BASE.replace("codecs: [sz3, zfp]", "plugins: [tests.fakes.crashing_codec]\ncodecs: [fake-crash]")
    tasks, _ = expand(load_spec(write(tmp_path, text), allow_plugins=True))
    assert {t.codec for t in tasks} == {"fake-crash"}
    assert tasks[0].plugins == ["tests.fakes.crashing_codec"]
    bad = BASE.replace("codecs: [sz3, zfp]", "plugins: [no_such_plugin_module]\ncodecs: [sz3]")
    with pytest.raises(SpecError, match="plug-in 'no_such_plugin_module' could not be imported"):
        load_spec(write(tmp_path, bad, "bad.yaml"), allow_plugins=True)


def test_dict_and_text_specs_load_like_files() -> None:
    spec = load_spec({"datasets": [{"synthetic": "smooth:8,8"}], "codecs": ["zfp"], "bounds": [0.1]})
    assert len(expand(spec)[0]) == 1
    assert load_spec(BASE).name == "t"


def test_a_rebased_mapping_means_what_its_file_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from perfscout.sweep.spec import rebase_file_refs

    folder = tmp_path / "specs"
    folder.mkdir()
    np.arange(64, dtype=np.float32).tofile(folder / "field.f32")
    text = """\
name: rb
datasets: [{path: field.f32, shape: [8, 8]}]
codecs: [sz3]
bounds: [1.0e-2]
output: out
experiments:
  - name: e
    datasets: [{path: field.f32, shape: [8, 8]}, {synthetic: "grf:8,8"}]
"""
    from_file = load_spec(write(folder, text))
    monkeypatch.chdir(tmp_path)  # elsewhere: a plain mapping would look for ./field.f32 here
    doc = yaml.safe_load(text)
    with pytest.raises(SpecError, match="dataset file not found"):
        expand(load_spec(doc))
    rebased = rebase_file_refs(doc, folder)
    assert doc["datasets"] == [{"path": "field.f32", "shape": [8, 8]}]  # the input is not changed
    assert rebased["output"] == str(folder / "out")
    assert rebased["experiments"][0]["datasets"][1] == {"synthetic": "grf:8,8"}
    keys = [t.task_key for t in expand(load_spec(rebased))[0]]
    assert keys == [t.task_key for t in expand(from_file)[0]] and len(keys) == 2
    assert rebase_file_refs({"datasets": [{"path": "/abs/x.f32"}, "name"]}, folder)["datasets"] == [
        {"path": "/abs/x.f32"}, "name"]


def test_example_specs_are_valid() -> None:
    quick, _ = expand(load_spec(ROOT / "examples" / "sweep_quick.yaml"))
    assert 20 <= len(quick) <= 60
    full = load_spec(ROOT / "examples" / "sweep_full.yaml")
    names = [e.name for e in full.experiments or []]
    assert {"bound_scan", "codec_comparison", "architecture_cpu", "architecture_gpu", "stress"} <= set(names)


def test_notebook_is_valid_and_runs_the_quick_spec() -> None:
    import json

    nb = json.loads((ROOT / "notebooks" / "quick_sweep.ipynb").read_text())
    assert nb["nbformat"] == 4 and nb["cells"]
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for i, src in enumerate(code):
        compile(src, f"cell {i}", "exec")  # every code cell is valid Python
    text = "\n".join(code)
    assert "sweep_quick.yaml" in text and "sweep(SPEC" in text and "report(RUN_DIR)" in text
    assert all(c["cell_type"] != "code" or c["outputs"] == [] for c in nb["cells"])  # stored without outputs


def test_one_schema_for_sweep_and_agent_specs(tmp_path: Path) -> None:
    """The agent's spellings mean the same in a sweep: string datasets, singular aliases,
    codec groups, ``gpu``; the agent's own keys are refused by a sweep, naming the line."""
    from perfscout.codecs.registry import list_codecs

    np.save(tmp_path / "f.npy", np.zeros((4, 4), np.float32))
    text = "dataset: f.npy\ncodecs: cpu\nmode: rel\nbound: 1.0e-2\nrepeats: 1\n"
    tasks, _ = expand(load_spec(write(tmp_path, text)))
    cpu = [i.id for i in list_codecs() if i.available and i.device == "cpu"]
    assert sorted({t.codec for t in tasks}) == sorted(cpu) and {(t.mode, t.bound) for t in tasks} == {("rel", 1e-2)}
    assert {t.data.label for t in tasks} == {"f.npy"} and tasks[0].data.path == str((tmp_path / "f.npy").resolve())
    spec = load_spec({"datasets": ["synthetic:grf:8,8:f64:seed=3", "vorticity.512_512"], "codecs": ["sz3"],
                      "devices": "gpu"})
    assert spec.devices == ["cuda"]
    assert spec.datasets[0].synthetic == "grf:8,8" and spec.datasets[0].seed == 3 and spec.datasets[0].dtype == "f64"
    assert spec.datasets[1].name == "vorticity.512_512"
    path = write(tmp_path, "goal: why\ncodecs: [sz3]\ndatasets: [{path: x.raw}]\n", "agent.yaml")
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert f"{path}:1: goal: read by `perfscout run --spec`" in str(exc.value)
    with pytest.raises(SpecError, match=rf"{path}:3: datasets.0: a dataset given by 'path' needs its 'shape'"):
        load_spec(write(tmp_path, "codecs: [sz3]\ndatasets:\n  - {path: x.raw}\n", "agent.yaml"))
    path = write(tmp_path, "goal: why\ncodecs: [sz3]\ndatasets: [{path: x.raw}]\n", "agent.yaml")
    agent = load_spec(path, for_agent=True)  # the agent asks for a raw file's shape when it runs
    assert agent.goal == "why" and agent.datasets[0].path == "x.raw" and agent.datasets[0].shape is None
    with pytest.raises(SpecError, match=r"agent.yaml:2: unknown codec 'zpf'"):
        load_spec(write(tmp_path, "goal: why\ncodecs: [zpf]\ndataset: f.npy\n", "agent.yaml"), for_agent=True)
