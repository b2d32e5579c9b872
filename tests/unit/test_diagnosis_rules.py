"""Every taxonomy id has one rule module; each fires on its planted kernel and not on controls."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.arch import arch_for, async_copy_advice
from perfscout.analysis.diagnosis.classify import classify
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.state.profiles import Metric
from perfscout.analysis.diagnosis.rules import CPU_RULE_IDS, CPU_RULES, GPU_RULE_IDS, GPU_RULES
from tests.unit._planted import kernel, suite

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT.parent / "shared" / "DESIGN.md"
GPU_TAXONOMY = (
    "dram_bandwidth_bound l2_bandwidth_bound l1_bandwidth_bound memory_bound compute_bound "
    "latency_bound uncoalesced_global_access shared_bank_conflicts warp_divergence "
    "low_occupancy_registers low_occupancy_shared_memory low_occupancy_block_size small_grid "
    "tail_effect local_memory atomic_contention fp64_bound barrier_stalls launch_overhead").split()
CPU_TAXONOMY = (
    "cpu_counters_unavailable cpu_memory_bound cpu_frontend_bound cpu_backend_bound "
    "cpu_bad_speculation cpu_retiring cpu_low_ipc cpu_cache_misses cpu_branch_misses "
    "cpu_context_switches cpu_page_faults cpu_busy_cores cpu_waiting cpu_memory_growth").split()


def test_one_module_per_taxonomy_id():
    assert [m.ID for m in GPU_RULES] == list(GPU_RULE_IDS)
    assert [m.ID for m in CPU_RULES] == list(CPU_RULE_IDS)
    assert set(GPU_TAXONOMY) <= set(GPU_RULE_IDS)
    assert set(CPU_TAXONOMY) == set(CPU_RULE_IDS)


@pytest.mark.parametrize("mod", GPU_RULES + CPU_RULES, ids=lambda m: m.ID)
def test_rule_declares_reads_role_and_explained_thresholds(mod):
    assert mod.ROLE in ("roof", "cause", "lever", "advice")
    assert isinstance(mod.READS, dict) and mod.READS
    src = inspect.getsource(mod)
    # Every named threshold constant carries a comment saying why (the line above it).
    for m in re.finditer(r"^([A-Z][A-Z0-9_]+) = [0-9.]", src, re.M):
        before = src[: m.start()].rstrip().splitlines()[-1]
        assert before.lstrip().startswith("#"), f"{mod.ID}: {m.group(1)} has no comment"


@pytest.mark.parametrize("case", [c for c in suite.CASES if not c.control], ids=lambda c: c.name)
def test_rule_fires_on_its_planted_kernel(case):
    mod = next(m for m in GPU_RULES if m.ID == case.expected)
    ctx = KernelContext(kernel(case.name))
    ctx.cls = classify(ctx)
    f = mod.check(ctx)
    assert f is not None and f.id == case.expected
    assert f.recommendation and f.verify and f.not_when
    assert f.evidence


@pytest.mark.parametrize("name", ["pk_ctl_copy_float4", "pk_ctl_fma_ilp"])
def test_controls_raise_only_their_roof(name):
    case = suite.case(name)
    (k,) = diagnose([kernel(name)])["kernels"]
    assert [f["id"] for f in k["findings"]] == list(case.allowed)
    p = k["primary"]
    assert p["extra"]["at_roof"] is True
    assert p["title"].endswith("reduce work or bytes") or p["title"].endswith("reduce work")
    assert p["extra"]["what_not_to_do"], "an at-roof kernel gets an explicit what-not-to-do list"


def test_fp64_gate_uses_the_chip_ratio():
    k = kernel("pk_fp64_poly")
    (d,) = diagnose([k])["kernels"]
    assert d["primary"]["id"] == "fp64_bound" and "1/2" in d["primary"]["title"]
    k.device = "Unknown Accelerator"
    (d,) = diagnose([k])["kernels"]
    assert "unknown" in d["primary"]["title"] and d["primary"]["confidence"] < 0.6
    (d,) = diagnose([k], platform={"fp64_to_fp32": 1 / 64})["kernels"]
    assert d["primary"]["expected_gain"] > 0.9


def test_async_copy_advice_is_gated_by_compute_capability():
    assert "TMA" in async_copy_advice(arch_for("NVIDIA H200", "9.0"))
    assert "cp.async" in async_copy_advice(arch_for("NVIDIA A100", "8.0"))
    adv = async_copy_advice(arch_for("Tesla V100", "7.0"))
    assert "TMA" not in adv and "cp.async" not in adv


def test_launch_overhead_without_host_timing_says_ncu_cannot_tell():
    (d,) = diagnose([kernel("pk_tiny_launch")])["kernels"]
    p = d["primary"]
    assert p["id"] == "launch_overhead" and p["expected_gain"] is None
    assert "ncu alone cannot tell" in p["title"] and "host" in p["verify"]


def test_launch_overhead_with_host_timing_is_sized_and_cites_host_evidence():
    host = {"pk_tiny_launch": {"host_per_launch_us": 5.77}}
    (d,) = diagnose([kernel("pk_tiny_launch")], host_timing=host)["kernels"]
    p = d["primary"]
    assert p["id"] == "launch_overhead" and 0.5 < p["expected_gain"] < 0.8
    assert any(e["metric"] == "host:per_launch_wall" for e in p["evidence"])
    # Host launches faster than the GPU runs: not launch-bound.
    (d,) = diagnose([kernel("pk_tiny_launch")], host_timing={"pk_tiny_launch": {"host_per_launch_us": 1.0}})["kernels"]
    assert all(f["id"] != "launch_overhead" for f in d["findings"])


def test_atomic_rule_needs_contention_not_just_atomics():
    k = kernel("pk_atomic_hot")
    # The same atomics in one cycle would be millions per cycle: not serialised.
    k.metrics["gpc__cycles_elapsed.max"] = Metric(name="gpc__cycles_elapsed.max", value=1.0, unit="cycle")
    (d,) = diagnose([k])["kernels"]
    assert all(f["id"] != "atomic_contention" for f in d["findings"])


def test_narrow_rule_ignores_warp_uniform_broadcast_loads():
    (d,) = diagnose([kernel("pk_latency_chase")])["kernels"]  # 1 sector/request, 4 B used
    assert all(f["id"] != "narrow_global_access" for f in d["findings"])
