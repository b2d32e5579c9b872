"""narrow_global_access: sub-word accesses, one small element per thread per instruction.

Not covered by Nsight Compute's rules (the accesses are perfectly coalesced: every byte
of each sector is used). A warp that loads one byte per lane moves 32 bytes per load
instruction; the load/store unit's request rate, not the memory, then caps the bytes/s.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make, time_plan, verify_text
from perfscout.state.records import Finding

ID = "narrow_global_access"
ROLE = "cause"
READS = {"ld_sectors": N.GLOBAL_LD_SECTORS, "ld_requests": N.GLOBAL_LD_REQUESTS,
         "bytes_per_sector": N.GLOBAL_LD_BYTES_PER_SECTOR}

#: A warp of 4-byte loads fills 4 sectors (128 B) per request; <= 2 sectors per request
#: means < 4 bytes per lane (1- or 2-byte elements) ...
SECTORS_PER_REQUEST_MAX = 2.0
#: ... provided the sectors are well used (>= half their bytes): a warp-uniform broadcast
#: load also touches one sector but uses 4 of its 32 bytes, and is not narrow.
BYTES_USED_PER_SECTOR_MIN = 16.0
#: 16-byte vector loads (uint4/float4) are the widest a thread can issue: 512 B per request.
WIDEST_REQUEST_BYTES = 512.0


def check(ctx: KernelContext) -> Finding | None:
    if not ctx.has(N.GLOBAL_LD_SECTORS, N.GLOBAL_LD_REQUESTS, N.GLOBAL_LD_BYTES_PER_SECTOR):
        return None
    cls = ctx.cls
    if cls is not None and cls.kind == "compute":
        return None
    sec, req, used = ctx.val(N.GLOBAL_LD_SECTORS), ctx.val(N.GLOBAL_LD_REQUESTS), ctx.val(N.GLOBAL_LD_BYTES_PER_SECTOR)
    if not req or sec is None or used is None:
        return None
    spr = sec / req
    if spr > SECTORS_PER_REQUEST_MAX or used < BYTES_USED_PER_SECTOR_MIN:
        return None
    req_bytes = spr * used
    headroom = cls.headroom if cls is not None else 1.0
    gain = min(1.0 - req_bytes / WIDEST_REQUEST_BYTES, headroom)
    inputs = [ctx.name_of(N.GLOBAL_LD_SECTORS), ctx.name_of(N.GLOBAL_LD_REQUESTS),
              ctx.name_of(N.GLOBAL_LD_BYTES_PER_SECTOR)]
    ev = [ctx.derived("bytes_per_load_request", req_bytes, inputs, "byte",
                      f"<= {SECTORS_PER_REQUEST_MAX * 32:.0f} (under 4 bytes per lane)"),
          ctx.ev(N.GLOBAL_LD_REQUESTS), ctx.ev(N.GLOBAL_LD_BYTES_PER_SECTOR, f">= {BYTES_USED_PER_SECTOR_MIN:.0f}")]
    ev.extend(cls.evidence[:1] if cls else [])
    return make(
        ctx, ID, "cause",
        f"Narrow global accesses: {req_bytes:.0f} bytes per warp load request (under 4 bytes per lane)",
        confidence=0.8, evidence=ev,
        recommendation=("Have each thread load 16 bytes at once: reinterpret the byte/short array as "
                        "uint4 (or char4/short8 via a vector type), process the 16 elements in "
                        "registers, and store as uint4; handle the unaligned tail separately."),
        verify=verify_text(ctx, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum should fall ~16x and "
                                "gpu__dram_throughput rise", gain),
        not_when="the array is not 16-byte aligned and cannot be made so, or each thread needs a single element",
        expected_gain=gain,
        verify_plan=time_plan(ctx, gain, {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "decrease"}),
    )
