"""One module per taxonomy id (DESIGN.md). ``GPU_RULES`` run on ncu profiles in this
order; ``CPU_RULES`` on perf stat profiles. Modules starting with ``_`` are helpers."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

GPU_RULE_IDS = (
    "dram_bandwidth_bound", "l2_bandwidth_bound", "l1_bandwidth_bound", "memory_bound",
    "compute_bound", "latency_bound", "uncoalesced_global_access", "shared_bank_conflicts",
    "warp_divergence", "low_occupancy_registers", "low_occupancy_shared_memory",
    "low_occupancy_block_size", "small_grid", "tail_effect", "local_memory",
    "atomic_contention", "fp64_bound", "barrier_stalls", "launch_overhead",
    "narrow_global_access", "tensor_core_bound", "mma_pipeline_stalls", "mma_epilogue_bound",
    "mma_tile_quantization", "mma_precision",
)
CPU_RULE_IDS = (
    "cpu_counters_unavailable", "cpu_memory_bound", "cpu_frontend_bound", "cpu_backend_bound",
    "cpu_bad_speculation", "cpu_retiring", "cpu_low_ipc", "cpu_cache_misses",
    "cpu_branch_misses", "cpu_context_switches", "cpu_page_faults", "cpu_busy_cores", "cpu_waiting",
    "cpu_memory_growth",
)


def _load(ids: tuple[str, ...]) -> tuple[ModuleType, ...]:
    mods = []
    for rid in ids:
        try:
            mods.append(import_module(f"{__name__}.{rid}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{rid}":
                raise
    return tuple(mods)


GPU_RULES = _load(GPU_RULE_IDS)
CPU_RULES = _load(CPU_RULE_IDS)
