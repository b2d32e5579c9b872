"""Classification first: which roof limits each kernel, on real H200 ncu profiles."""

from __future__ import annotations

import pytest

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.classify import classify
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from tests.unit._planted import kernel


def cls_of(name: str, drop: tuple[str, ...] = ()):
    k = kernel(name)
    for d in drop:
        k.metrics.pop(d, None)
    return classify(KernelContext(k))


@pytest.mark.parametrize("name, kind, unit, at_roof", [
    ("pk_ctl_copy_float4", "memory", "dram", True),
    ("pk_ctl_fma_ilp", "compute", "fma", True),
    ("pk_l2_stencil_ldcg", "memory", "l2", True),
    ("pk_l1_stencil", "memory", "l1", False),
    ("pk_latency_chase", "latency", "l2", False),
    ("pk_small_grid", "underfilled", "", False),
    ("pk_tiny_launch", "launch", "", False),
    ("pk_fp64_poly", "compute", "fp64", True),
    ("pk_barrier_sync", "compute", "adu", False),  # 89.9 % SM: 5 % below the 95 % roof
])
def test_classification_of_planted_kernels(name, kind, unit, at_roof):
    c = cls_of(name)
    assert (c.kind, c.unit, c.at_roof) == (kind, unit, at_roof)


def test_headroom_is_distance_to_the_roof():
    c = cls_of("pk_latency_chase")
    assert 0.6 < c.headroom < 0.8  # busiest unit ~29% of its roof
    assert cls_of("pk_ctl_fma_ilp").headroom < 0.02


def test_without_memory_breakdown_the_unit_is_generic_memory():
    # A profile with only the speed-of-light summary (e.g. --section SpeedOfLight).
    drop = N.DRAM_SOL + N.L2_SOL + N.L1_SOL + ("lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed",)
    c = cls_of("pk_ctl_copy_float4", drop)
    assert (c.kind, c.unit) == ("memory", "memory")


def test_l2_roof_needs_sm80_else_falls_back_to_lts_throughput():
    k = kernel("pk_l2_stencil_ldcg")
    k.compute_capability = "7.0"  # pre-Ampere: no two-partition L2 roof
    c = classify(KernelContext(k))
    assert c.kind == "latency"  # lts__throughput 48% of a 90% roof is not a limiter


def test_next_roof_gain_names_the_next_busiest_unit():
    c = cls_of("pk_l1_stencil")
    assert c.next_roof_gain() == pytest.approx(1 - c.fractions["sm"], abs=1e-9)
