"""The labeled planted-kernel suite: which bottleneck each kernel carries, how it is launched.

Plain data, importable without a GPU (the accuracy benchmark and the tests read the labels);
``run_suite.py`` turns each :class:`Case` into real launches with CuPy. Sizes are chosen for
an H200 (132 SMs, 60 MB L2, 4.8 TB/s HBM3e): streaming buffers are larger than L2, the
L2-bound stencil's input fits in it, and every launch runs 0.05-1 ms so a full ncu replay
(~40 passes) of the whole suite stays within a couple of minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Every planted kernel's name starts with this, so `ncu -k regex:^pk_` sees only them.
PREFIX = "pk_"


@dataclass(frozen=True)
class Case:
    """One planted kernel (or negative control) and its fixed variant."""

    name: str  # kernel function name in kernels.cu (without the `_fixed` suffix)
    expected: str  # the taxonomy id the engine must rank first
    planted: str  # what was planted, in words
    fix: str  # what the fixed variant changes
    control: bool = False  # negative control: already at a roof, nothing to fix
    #: Ids that may also appear without being a false alarm (a control's roof finding).
    allowed: tuple[str, ...] = ()
    fixed_name: str | None = None  # defaults to name + "_fixed"; None-equivalent for controls
    extra: dict = field(default_factory=dict)

    @property
    def fixed(self) -> str | None:
        if self.control:
            return None
        return self.fixed_name or f"{self.name}_fixed"


CASES: tuple[Case, ...] = (
    Case("pk_ctl_copy_float4", "dram_bandwidth_bound", "none: 16-byte streaming copy",
         "nothing to fix", control=True, allowed=("dram_bandwidth_bound",)),
    Case("pk_ctl_fma_ilp", "compute_bound", "none: FP32 FMA chains with 8-way ILP",
         "nothing to fix", control=True, allowed=("compute_bound",)),
    Case("pk_dram_fp64_scale", "dram_bandwidth_bound",
         "float64 storage where float32 suffices (twice the bytes)", "float32 storage"),
    Case("pk_l2_stencil_ldcg", "l2_bandwidth_bound",
         "radius-16 stencil with L1-bypassing loads: 33 L2 reads per element",
         "tile + halo staged in shared memory"),
    Case("pk_l1_stencil", "l1_bandwidth_bound",
         "radius-16 stencil with scalar cached loads: 33 L1 requests per output",
         "register blocking: 8 outputs per thread from a float4-loaded window"),
    Case("pk_compute_libm", "compute_bound",
         "accurate expf/logf in a loop (long instruction sequences)", "__expf/__logf intrinsics"),
    Case("pk_latency_chase", "latency_bound",
         "one dependent warp-uniform pointer chase per warp (L2-resident list)",
         "4 independent sub-chains per warp"),
    Case("pk_uncoalesced_transpose", "uncoalesced_global_access",
         "naive transpose: lanes read addresses a row apart", "padded shared-memory tile transpose"),
    Case("pk_smem_conflict", "shared_bank_conflicts",
         "column reads of a 32x32 shared tile (32-way bank conflict)", "rows padded to 33 words"),
    Case("pk_divergent_branch", "warp_divergence",
         "odd/even lanes take different long paths", "path chosen per warp"),
    Case("pk_occ_registers", "low_occupancy_registers",
         "96 live accumulators: 110 registers/thread, 2 blocks/SM",
         "same FMAs folded into 8 accumulators (25 registers)"),
    Case("pk_occ_smem", "low_occupancy_shared_memory",
         "100 KiB dynamic shared memory per block: 2 blocks/SM", "4 KiB dynamic shared memory"),
    Case("pk_occ_block", "low_occupancy_block_size",
         "32-thread blocks: the 32-blocks/SM limit caps residency at 32 warps", "256-thread blocks"),
    Case("pk_small_grid", "small_grid", "8 blocks on 132 SMs", "528 blocks (4 per SM)"),
    Case("pk_tail_wave", "tail_effect",
         "290 long 1024-thread blocks = 1.1 waves (last wave nearly empty)",
         "8x more blocks with 1/8 of the iterations each"),
    Case("pk_local_array", "local_memory",
         "per-thread array indexed at run time (local memory)",
         "the array in shared memory, [k][thread] layout"),
    Case("pk_atomic_hot", "atomic_contention",
         "every thread atomically adds into one address", "warp shuffle reduction, one atomic per warp"),
    Case("pk_fp64_poly", "fp64_bound", "float64 FMA chains", "float32 FMA chains"),
    Case("pk_barrier_sync", "barrier_stalls",
         "two __syncthreads per tiny step in 1024-thread blocks", "warp shuffles, no barrier"),
    Case("pk_tiny_launch", "launch_overhead",
         "a 256-element update launched 2000 times", "one batched launch"),
    Case("pk_narrow_u8", "narrow_global_access",
         "one byte per thread per load/store", "16 bytes per thread (uint4)"),
)

#: The taxonomy ids the suite plants, for the coverage check in the tests.
PLANTED_IDS = frozenset(c.expected for c in CASES if not c.control)


def case(name: str) -> Case:
    """The case whose planted or fixed kernel is ``name``."""
    for c in CASES:
        if name in (c.name, c.fixed):
            return c
    raise KeyError(name)
