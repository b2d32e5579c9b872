"""Diagnosis rules from ``perfscout.rules`` entry points of an installed distribution
(tests/fixtures/plugins/perfscout-plugin-rules, pip-installed into a temporary target), run
on the committed H200 profiles and a real perf stat profile, under the engine's guarantees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose, diagnose_kernel, diagnose_perf
from perfscout.analysis.diagnosis import rule_registry as R
from perfscout.analysis.diagnosis.reads import engine_metric_names, reads_metric
from perfscout.tools.ncu_parse import load_raw_csv
from perfscout.tools.perf_stat import parse_perf_csv
from tests.conftest import install_distribution

ROOT = Path(__file__).resolve().parents[2]
TRANSPOSE = ROOT / "tests/fixtures/ncu/h200_transpose_raw.csv"  # H200, CC 9.0, 2 launches
CUPY = ROOT / "tests/fixtures/ncu/h200_cupy_kernels_raw.csv"
DIST = "perfscout-plugin-rules 0.1.0"
HIT = "lts__t_sector_op_read_hit_rate.pct"


@pytest.fixture(scope="module")
def rules_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_distribution("perfscout-plugin-rules", tmp_path_factory.mktemp("rules"))


@pytest.fixture()
def with_rules(rules_dist: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(rules_dist))
    R.refresh_rules()
    yield
    monkeypatch.undo()
    R.refresh_rules()
    for name in [m for m in sys.modules if m.startswith("perfscout_plugin_rules")]:
        del sys.modules[name]


def _ids(diag: dict) -> list[str]:
    return [f["id"] for f in diag["findings"]]


def test_the_listing_names_what_loaded_and_why_the_others_did_not(with_rules) -> None:
    listing = R.rule_listing()
    assert listing.group == "perfscout.rules"
    assert {p.id for p in listing.loaded} == {"l2_read_misses", "cpu_migrations", "cites_absent_metric",
                                              "cites_undeclared_metric", "raises_in_check"}
    assert {p.distribution for p in listing.loaded} == {DIST}
    failed = {f.id: (f.kind, f.reason) for f in listing.failed}
    assert {k: v[0] for k, v in failed.items()} == {
        "no_reads_declared": "invalid_rule", "wrong_arch_gate": "invalid_rule", "small_grid": "shadows_builtin",
        "absent_module": "import_error", "CamelCase": "invalid_rule"}
    assert "declares no READS" in failed["no_reads_declared"][1]
    assert "ARCH is 'hopper'" in failed["wrong_arch_gate"][1]
    assert "not snake_case" in failed["CamelCase"][1]
    assert "perfscout_plugin_rules_not_installed" in failed["absent_module"][1]
    # the built-in small_grid is still the one that runs; plug-ins come after the built-ins
    gpu = R.gpu_rules()
    assert [getattr(r, "ID", None) for r in gpu[:len(R.GPU_RULES)]] == list(R.GPU_RULE_IDS)
    assert [r.id for r in gpu[len(R.GPU_RULES):]] == ["cites_absent_metric", "cites_undeclared_metric",
                                                      "l2_read_misses", "raises_in_check"]
    assert [r.id for r in R.cpu_rules()[len(R.CPU_RULES):]] == ["cpu_migrations"]
    info = {r.id: r for r in R.list_rules()}
    assert info["l2_read_misses"].source == "plugin" and info["l2_read_misses"].arch == "sm_80+"
    assert info["small_grid"].source == "builtin"


def test_a_plugin_rule_fires_on_a_real_h200_profile_and_ranks_by_its_declared_role(with_rules) -> None:
    kernels = load_raw_csv(TRANSPOSE).kernels
    diag = diagnose_kernel(kernels[0])
    assert diag["primary"]["id"] == "shared_bank_conflicts"  # an advice never takes the primary
    f = next(f for f in diag["findings"] if f["id"] == "l2_read_misses")
    assert f["title"].startswith("L2 read misses: 0.04% of 64 MiB read hit L2")
    assert f["extra"]["role"] == "advice" and f["extra"]["source"] == f"plugin {DIST}"
    assert f["arch"] == "sm_80+" and f["extra"]["class"] == diag["primary"]["extra"]["class"]
    assert [e["metric"] for e in f["evidence"]] == [HIT, "lts__t_sectors_srcunit_tex_op_read.sum"]
    assert diag["metrics"][HIT] == {"value": 0.04, "unit": "%"}  # cited metrics reach the report
    assert _ids(diag)[-1] == "l2_read_misses"  # advice last
    # the three plug-ins whose findings break the guarantees never fire; each problem is said
    assert not {"cites_absent_metric", "cites_undeclared_metric", "raises_in_check"} & set(_ids(diag))
    problems = {p["rule"]: p["reason"] for p in diag["rule_problems"]}
    assert set(problems) == {"cites_absent_metric", "cites_undeclared_metric", "raises_in_check"}
    assert "'lts__t_sector_op_read_hit_rate.max', which the profile does not hold" in problems["cites_absent_metric"]
    assert "'launch__grid_size', which its READS does not declare" in problems["cites_undeclared_metric"]
    assert problems["raises_in_check"] == "check() raised ZeroDivisionError: the rule divided by a zero it did not expect"
    assert json.dumps(diag, allow_nan=False)


def test_the_gates_keep_a_plugin_rule_off_profiles_it_cannot_read(with_rules) -> None:
    k = load_raw_csv(TRANSPOSE).kernels[0]
    for cc in ("7.5", ""):  # older than its sm_80 gate; a chip of unknown compute capability
        assert "l2_read_misses" not in _ids(diagnose_kernel(k.model_copy(update={"compute_capability": cc})))
    without = k.model_copy(update={"metrics": {n: m for n, m in k.metrics.items() if n != HIT}})
    diag = diagnose_kernel(without)  # a declared metric missing: no plug-in reading it runs
    assert "l2_read_misses" not in _ids(diag) and "rule_problems" not in diag
    nan = k.model_copy(update={"metrics": {**k.metrics, HIT: k.metrics[HIT].model_copy(update={"value": float("nan")})}})
    assert "l2_read_misses" not in _ids(diagnose_kernel(nan))
    # a small kernel of the CuPy profile (cupy_fill reads nothing from L2) gets no finding either
    small = next(k for k in load_raw_csv(CUPY).kernels if k.name.startswith("cupy_fill"))
    assert "l2_read_misses" not in _ids(diagnose_kernel(small))


def test_the_parse_filter_keeps_a_plugin_rules_metrics(with_rules) -> None:
    assert reads_metric(HIT) and HIT in engine_metric_names()
    full, filtered = load_raw_csv(CUPY), load_raw_csv(CUPY, keep=reads_metric)
    a, b = diagnose(full.kernels), diagnose(filtered.kernels)
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    assert sum("l2_read_misses" in _ids(k) for k in a["kernels"]) >= 8  # the streaming kernels


def test_without_the_distribution_only_the_builtins_run(rules_dist: Path) -> None:
    R.refresh_rules()
    assert R.rule_listing().loaded == [] and HIT not in engine_metric_names()
    diag = diagnose_kernel(load_raw_csv(TRANSPOSE).kernels[0])
    assert "l2_read_misses" not in _ids(diag) and "rule_problems" not in diag
    R.refresh_rules(entry_points=False)
    assert R.rule_listing().enabled is False and R.gpu_rules() == R.GPU_RULES
    R.refresh_rules()


def test_a_perf_plugin_rule_runs_behind_its_machine_gate(with_rules) -> None:
    profile = parse_perf_csv((ROOT / "tests/fixtures/perf/cpu_loop_x.csv").read_text())
    busy = profile.model_copy(deep=True)
    busy.events["cpu-migrations"].value = 500.0  # 500 migrations in 82.7 ms of task-clock
    program = diagnose_perf(busy, platform={"machine": "x86_64"})["programs"][0]
    f = next(f for f in program["findings"] if f["id"] == "cpu_migrations")
    assert f["title"] == "CPU migrations: 6044 per CPU-second" and f["arch"] == "x86_64/aarch64"
    assert f["evidence"][1]["inputs"] == ["cpu-migrations", "task-clock"]
    assert program["primary"]["id"] != "cpu_counters_unavailable"  # no PMU there: the software events answer
    for platform in ({"machine": "riscv64"}, None):  # another machine, or one not named
        assert "cpu_migrations" not in _ids(diagnose_perf(busy, platform=platform)["programs"][0])
    assert "cpu_migrations" not in _ids(diagnose_perf(profile, platform={"machine": "x86_64"})["programs"][0])


def test_the_cli_lists_rules_and_diagnoses_with_plugins(rules_dist: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(rules_dist), COLUMNS="200")
    run = [sys.executable, "-m", "perfscout"]
    doc = json.loads(subprocess.run([*run, "rules", "--json"], capture_output=True, text=True, env=env, timeout=120,
                                    check=True).stdout)
    assert doc["plugins"]["group"] == "perfscout.rules"
    assert {r["id"] for r in doc["rules"] if r["source"] == "plugin"} >= {"l2_read_misses", "cpu_migrations"}
    assert {f["id"] for f in doc["plugins"]["failed"]} >= {"no_reads_declared", "small_grid"}
    text = subprocess.run([*run, "rules"], capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    assert "plug-in no_reads_declared from perfscout-plugin-rules 0.1.0 not used (invalid_rule)" in text
    proc = subprocess.run([*run, "diagnose", "--ncu-csv", str(TRANSPOSE), "--json"], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    kernel = json.loads(proc.stdout)["kernels"][0]  # the filtered parse kept the plug-in's metrics
    assert "l2_read_misses" in _ids(kernel) and HIT in kernel["cited_metrics"]
    assert {p["rule"] for p in kernel["rule_problems"]} == {"cites_absent_metric", "cites_undeclared_metric",
                                                           "raises_in_check"}
    assert "raises_in_check (plug-in from perfscout-plugin-rules 0.1.0) dropped" in proc.stderr
    text = subprocess.run([*run, "diagnose", "--ncu-csv", str(TRANSPOSE)], capture_output=True, text=True, env=env,
                          timeout=120, check=True).stdout
    assert "`l2_read_misses` [advice] — L2 read misses" in text  # one line among the others
    assert "Plug-in rules whose findings were dropped, and why:" in text
    assert "`raises_in_check` (plug-in from perfscout-plugin-rules 0.1.0): check() raised ZeroDivisionError" in text


def _rule(check, *, role: str = "cause", arch: str = "any") -> R.PluginRule:  # noqa: ANN001
    return R.PluginRule(id="probe", role=role, profile="ncu", reads={"hit": (HIT,)}, arch=arch, check=check,
                        value="probe_module", distribution="probe 1.0")


def _ev(metric: str = HIT, value: float | str | None = 0.04, inputs: list[str] | None = None):  # noqa: ANN202
    from perfscout.state.records import Evidence

    return Evidence(metric=metric, value=value, unit="%", inputs=inputs or [])


@pytest.mark.parametrize(("result", "reason"), [
    ("a finding", "check() returned a str, not a Finding or None"),
    ({"id": "other"}, "its finding's id is 'other', not the rule's id"),
    ({"evidence": []}, "its finding cites no evidence"),
    ({"expected_gain": 1.5}, "expected_gain 1.5 is outside [0, 1)"),
    ({"expected_gain": float("nan")}, "expected_gain nan is outside [0, 1)"),
    ({"confidence": 2.0}, "confidence 2.0 is outside [0, 1]"),
    ({"evidence": [_ev(value=float("inf"))]}, f"evidence '{HIT}' has the non-finite value inf"),
    ({"evidence": [_ev("host:per_launch_us", 5.0)]}, "it cites 'host:per_launch_us', but no host timing was given"),
    ({"evidence": [_ev("derived:x", 1.0)]}, "'derived:x' lists no inputs"),
    ({"evidence": [_ev("derived:x", 1.0, [HIT, "lts__t_sector_op_read_hit_rate.max"])]},
     "it cites 'lts__t_sector_op_read_hit_rate.max', which its READS does not declare"),
])
def test_the_guard_drops_a_plugin_finding_that_breaks_a_guarantee(result, reason) -> None:  # noqa: ANN001
    from perfscout.analysis.diagnosis.kernel_context import KernelContext
    from perfscout.analysis.diagnosis.plugin_guard import run_plugin
    from perfscout.state.records import Finding

    def check(ctx):  # noqa: ANN001, ANN202
        if isinstance(result, str):
            return result
        f = Finding(id="probe", title="t", evidence=[_ev()], expected_gain=0.2)
        return f.model_copy(update=result)  # no validation: what a careless plug-in can hand back

    ctx = KernelContext(load_raw_csv(TRANSPOSE).kernels[0])
    assert run_plugin(_rule(check), ctx) == (None, {"rule": "probe", "distribution": "probe 1.0", "reason": reason})


def test_the_declared_role_ranks_a_plugin_finding_whatever_its_extra_says() -> None:
    from perfscout.analysis.diagnosis.kernel_context import KernelContext
    from perfscout.analysis.diagnosis.plugin_guard import run_plugin
    from perfscout.state.records import Finding

    mine = Finding(id="probe", title="t", evidence=[_ev()], expected_gain=0.9, extra={"role": "cause", "note": 1})
    ctx = KernelContext(load_raw_csv(TRANSPOSE).kernels[0])
    f, problem = run_plugin(_rule(lambda ctx: mine, role="advice", arch="sm_90"), ctx)
    assert problem is None and f.extra["role"] == "advice" and f.extra["note"] == 1 and f.arch == "sm_90+"
    assert mine.extra == {"role": "cause", "note": 1}  # the plug-in's own object is left alone
    assert run_plugin(_rule(lambda ctx: mine, arch="sm_100"), ctx) == (None, None)  # H200 is 9.0
    assert _rule(None, arch="sm_100").min_cc == (10, 0) and _rule(None, arch="sm_90").min_cc == (9, 0)


@pytest.mark.parametrize(("changes", "problem"), [
    ({}, None),
    ({"ARCH": "sm_100"}, None),  # Blackwell: compute capability 10.0
    ({"ARCH": "sm_8"}, "ARCH is 'sm_8'"),
    ({"PROFILE": "perf", "ARCH": ("x86_64",)}, None),
    ({"PROFILE": "perf", "ARCH": ["x86_64"]}, "a perf rule's gate is 'any' or a tuple of machine names"),
    ({"PROFILE": "perf", "ARCH": "sm_80"}, "a perf rule's gate"),
    ({"ROLE": "primary"}, "ROLE is 'primary'"),
    ({"PROFILE": "nsys"}, "PROFILE is 'nsys'"),
    ({"READS": {"hit": HIT}}, "READS['hit'] is"),  # a bare string, not a tuple of names
    ({"READS": {"hit": ()}}, "READS['hit'] is ()"),
    ({"READS": {}}, "declares no READS"),
    ({"ARCH": None}, "declares no ARCH gate"),
    ({"ID": "other"}, "its ID is 'other'"),
    ({"check": None}, "no check(ctx) function"),
])
def test_a_declaration_is_checked_before_a_plugin_rule_is_used(changes, problem) -> None:  # noqa: ANN001
    from types import SimpleNamespace

    decl = SimpleNamespace(**{"ID": "probe", "ROLE": "cause", "PROFILE": "ncu", "READS": {"hit": (HIT,)},
                              "ARCH": "sm_80", "check": lambda ctx: None, **changes})
    got = R._declaration_problem("probe", decl)
    assert (got is None) if problem is None else (problem in (got or "")), got
