"""`perfscout snapshot [--json] [--save NAME]`: describe this machine (evidence first)."""

from __future__ import annotations

import typer

from perfscout.cli.common import emit_json, stderr, stdout
from perfscout.platform_profiles import find_spec, save_snapshot
from perfscout.state.platform import PlatformProfile
from perfscout.tools.snapshot import take_snapshot


def register(app: typer.Typer) -> None:
    @app.command("snapshot")
    def snapshot(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
        save: str = typer.Option(None, "--save", metavar="NAME",
                                 help="Also save as <home>/platform_profiles/NAME.yaml (home: "
                                      "$PERFSCOUT_HOME, else the per-user data directory)."),
        no_gpu: bool = typer.Option(False, "--no-gpu", help="Skip GPU probing (NVML / nvidia-smi)."),
    ) -> None:
        """Snapshot CPU, memory, NUMA, GPUs, compilers, MPI, scheduler, perf counters."""
        profile = take_snapshot(gpus=not no_gpu)
        saved = save_snapshot(profile, save) if save is not None else None  # --save "" is refused by name
        if json_out:
            emit_json(profile.model_dump(mode="json"))
        else:
            _print(profile)
        if saved is not None:
            stderr.print(f"saved {saved}")


def _print(p: PlatformProfile) -> None:
    c = p.cpu
    stdout.print(f"[bold]platform {p.platform_id}[/]  {p.hostname}  {p.os}  kernel {p.kernel}")
    stdout.print(f"CPU   {c.vendor} {c.model}: {c.sockets} socket(s) x {c.cores_per_socket} cores x "
                 f"{c.threads_per_core} threads = {c.logical_cpus} CPUs; SIMD {' '.join(c.simd) or '-'}")
    if c.caches:
        stdout.print("      caches " + ", ".join(f"{k} {v}" for k, v in c.caches.items()))
    mem = f"{p.memory_total_bytes / 2**30:.1f} GiB" if p.memory_total_bytes else "unknown"
    stdout.print(f"Mem   {mem}; NUMA nodes {len(p.numa.nodes)} ({p.numa.source or 'unknown'})")
    v = p.virtualization
    stdout.print(f"Virt  hypervisor {v.hypervisor or 'none seen'}; container {v.container or 'none seen'}")
    if p.gpus:
        for g in p.gpus:
            spec = find_spec(g.name)
            mem = f"{g.memory_total_bytes / 2**30:.0f} GiB" if g.memory_total_bytes else "?"
            stdout.print(f"GPU{g.index}  {g.name} (CC {g.compute_capability}, {mem}, "
                         f"{g.multiprocessors or '?'} SMs, PCIe gen{g.pcie_gen_max}x{g.pcie_width_max}, "
                         f"ECC {g.ecc_enabled}, MIG {g.mig_enabled}) via {p.gpu_source}"
                         + (f"; spec table: {spec.key}" if spec else ""))
        stdout.print(f"      driver {p.driver_version}, CUDA {p.cuda_driver_version}")
    else:
        stdout.print(f"GPU   none: {p.probes['gpus'].detail if 'gpus' in p.probes else 'not probed'}")
    perf = p.perf
    stdout.print(f"perf  installed={perf.installed} hardware counters={perf.hardware_counters} ({perf.detail})")
    tools = {**{k: v for k, v in p.compilers.items()}, "mpirun": p.mpi, "ncu": p.ncu}
    for name, tv in tools.items():
        stdout.print(f"      {name:6s} {tv.version or '- (' + tv.error + ')'}")
    failed = {k: pr for k, pr in p.probes.items() if pr.state not in ("ok", "not_applicable")}
    for k, pr in failed.items():
        stdout.print(f"[dim]probe {k}: {pr.state}: {pr.detail}[/]")
