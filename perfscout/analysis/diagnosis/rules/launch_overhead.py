"""launch_overhead: the kernel is so short that launching it costs more than running it.

ncu measures one launch in isolation; it cannot see the gaps between launches. With host
timing across many back-to-back launches (``host_timing``: wall time per launch), the
finding is confirmed and sized; without it, it is a warning that says what to measure.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis import names as N
from perfscout.analysis.diagnosis.classify import LAUNCH_SCALE_S
from perfscout.analysis.diagnosis.kernel_context import KernelContext
from perfscout.analysis.diagnosis.rules._base import make
from perfscout.state.records import Finding

ID = "launch_overhead"
ROLE = "cause"
READS = {"duration": N.DURATION, "grid": N.GRID_SIZE}
# Threshold: classify.LAUNCH_SCALE_S (10 us: about twice the per-launch host cost).

HOST_CMD = ("time N back-to-back launches on the host (perf_counter around the loop, one "
            "synchronize at the end) and divide by N; compare with gpu__time_duration")


def check(ctx: KernelContext) -> Finding | None:
    d = ctx.seconds(N.DURATION)
    if d is None or d >= LAUNCH_SCALE_S:
        return None
    ev = [ctx.ev(N.DURATION, f"< {LAUNCH_SCALE_S * 1e6:.0f} us")]
    host = ctx.host_timing or {}
    per_launch_us = host.get("host_per_launch_us")
    rec = ("Launch less often with more work per launch: batch the small problems into one grid "
           "(a loop or an extra grid dimension over them), fuse consecutive small kernels, or capture "
           "the launch sequence in a CUDA graph (cudaGraphLaunch / torch.cuda.CUDAGraph) to cut the "
           "per-launch host cost.")
    if isinstance(per_launch_us, (int, float)) and per_launch_us > 0:
        gpu_us = d * 1e6
        ev.append(ctx.host("per_launch_wall", per_launch_us, "us",
                           f"> gpu time per launch ({gpu_us:.1f} us): the GPU idles between launches"))
        if per_launch_us <= gpu_us:
            return None  # launches keep up with the GPU: not launch-bound
        gain = 1.0 - gpu_us / per_launch_us
        title = (f"Launch overhead: {per_launch_us:.1f} us per launch on the host vs {gpu_us:.1f} us "
                 f"on the GPU ({gain:.0%} of the time the GPU waits)")
        conf = 0.9
        verify = (f"host wall time per unit of work should fall by about {gain:.0%} or more; "
                  f"measure: {HOST_CMD}")
    else:
        gain = None
        title = (f"Kernel runs {d * 1e6:.1f} us, under the ~{LAUNCH_SCALE_S * 1e6:.0f} us a launch costs: "
                 "likely launch-bound (ncu alone cannot tell; needs host timing across launches)")
        conf = 0.5
        verify = f"ncu alone cannot confirm this: {HOST_CMD}; if host time per launch exceeds the GPU time, it is launch-bound"
    return make(
        ctx, ID, "cause", title, confidence=conf, evidence=ev, recommendation=rec, verify=verify,
        not_when=("the launches are already overlapped with other GPU work (other streams keep the GPU "
                  "busy), or the kernel runs once"),
        expected_gain=gain,
        verify_plan={"host_time_change": -round(gain, 3) if gain is not None else None,
                     "metrics": {}, "needs": "host timing across launches"},
    )
