"""Nsight Compute metric names the rules read, each with its alternatives.

A tuple lists the names one quantity goes by across ncu versions and chips, preferred
first; the first one present in a profile is used and cited exactly as printed. Names
are the raw-page (``--page raw``) metric names of ``--set full``.
"""

from __future__ import annotations

# --- speed of light (percent of the unit's peak over the kernel's elapsed cycles)
SM_SOL = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
MEM_SOL = ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",)
DRAM_SOL = (
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
L2_SOL = ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)
L1_SOL = (
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
)
ISSUE_ACTIVE = ("smsp__issue_active.avg.pct_of_peak_sustained_active",)

# --- time and launch
DURATION = ("gpu__time_duration.sum", "gpu__time_duration.avg")
WAVES = ("launch__waves_per_multiprocessor",)
GRID_SIZE = ("launch__grid_size",)
BLOCK_SIZE = ("launch__block_size",)
SM_COUNT = ("launch__sm_count", "device__attribute_multiprocessor_count")
REGISTERS = ("launch__registers_per_thread",)
SMEM_PER_BLOCK = ("launch__shared_mem_per_block", "launch__shared_mem_per_block_allocated")
DYN_SMEM = ("launch__shared_mem_per_block_dynamic",)
ELAPSED_CYCLES = ("gpc__cycles_elapsed.max", "sm__cycles_elapsed.avg")

# --- occupancy
OCC_ACHIEVED = ("sm__warps_active.avg.pct_of_peak_sustained_active",)
OCC_THEORETICAL = ("sm__maximum_warps_per_active_cycle_pct",)
OCC_LIMIT = {
    "registers": ("launch__occupancy_limit_registers",),
    "shared_mem": ("launch__occupancy_limit_shared_mem",),
    "blocks": ("launch__occupancy_limit_blocks",),
    "warps": ("launch__occupancy_limit_warps",),
    "barriers": ("launch__occupancy_limit_barriers",),
}

# --- warp state (cycles a warp spends in each state per issued instruction)
STALL_TOTAL = ("smsp__average_warp_latency_per_inst_issued.ratio",)


def stall(reason: str) -> tuple[str, ...]:
    """Per-issue stall cycles of one reason (ncu 2023+ name first, older name second)."""
    return (
        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
        f"smsp__average_warp_latency_issue_stalled_{reason}.ratio",
    )


STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc",
    "no_instruction", "not_selected", "selected", "short_scoreboard", "sleeping",
    "tex_throttle", "wait", "gmma",
)

# --- SM pipes (percent of peak over active cycles)
PIPE = {
    "fma": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"),
    "alu": ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"),
    "fp64": ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
             "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"),
    "xu": ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",),
    "lsu": ("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",),
    "adu": ("sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active",),
    "tensor": ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",),
}

# --- tensor cores (Volta+; GMMA = Hopper warpgroup MMA, wgmma)
TENSOR_PIPE = (
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
)
#: Tensor instructions issued per kind (% of the issue peak): HMMA (mma.sync fp16/bf16/tf32/
#: fp8), GMMA (wgmma, sm_90), IMMA (integer), DMMA (fp64).
TENSOR_OP_INST = {
    op: (f"sm__inst_executed_pipe_tensor_op_{op}.avg.pct_of_peak_sustained_active",)
    for op in ("hmma", "gmma", "imma", "dmma")
}
#: wgmma instructions that read an operand from shared memory (sm_90).
GMMA_SHARED_INST = ("smsp__sass_inst_executed_op_shared_gmma.sum",)
#: Prefix of the per-precision tensor operation counters (``..._src_bf16_dst_fp32.sum``).
TENSOR_OPS_PREFIX = "sm__ops_path_tensor_src_"

# --- TMA (sm_90 bulk tensor copies)
TMA_LD_INST = ("smsp__inst_executed_op_tma_ld.sum", "smsp__sass_inst_executed_op_tma_ld.sum")
TMA_LD_BYTES = ("l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",)
TMA_ST_BYTES = ("l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",)

# --- scheduler state
WARPS_ELIGIBLE = ("smsp__warps_eligible.avg.per_cycle_active",)
WARPS_ACTIVE = ("smsp__warps_active.avg.per_cycle_active",)

# --- divergence
THREADS_PER_INST = ("smsp__thread_inst_executed_per_inst_executed.ratio",)

# --- global memory access pattern
GLOBAL_LD_REQUESTS = ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",)
GLOBAL_LD_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",)
GLOBAL_ST_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",)
GLOBAL_LD_BYTES_PER_SECTOR = ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",)
GLOBAL_SECTORS_EXCESSIVE = ("derived__memory_l2_theoretical_sectors_global_excessive",)
GLOBAL_SECTORS_IDEAL = ("memory_l2_theoretical_sectors_global_ideal",)
GLOBAL_LD_INST = ("smsp__sass_inst_executed_op_global_ld.sum",)
GLOBAL_ST_INST = ("smsp__sass_inst_executed_op_global_st.sum",)

# --- shared memory
SHARED_WAVEFRONTS_EXCESSIVE = ("derived__memory_l1_wavefronts_shared_excessive",)
SHARED_WAVEFRONTS_IDEAL = ("memory_l1_wavefronts_shared_ideal",)
SHARED_WAVEFRONTS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",)
SHARED_BANK_CONFLICTS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",)

# --- local memory
LOCAL_LD_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",)
LOCAL_ST_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",)

# --- atomics and reductions issued to global memory
GLOBAL_RED_REQUESTS = ("l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",)
GLOBAL_RED_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum",)
GLOBAL_ATOM_REQUESTS = ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",)
GLOBAL_ATOM_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",)

# --- bytes actually moved (for verify steps)
DRAM_BYTES = ("dram__bytes.sum", "dram__bytes_read.sum")
DRAM_READ_BYTES = ("dram__bytes_read.sum",)
DRAM_WRITE_BYTES = ("dram__bytes_write.sum",)
INST_EXECUTED = ("smsp__inst_executed.sum",)
