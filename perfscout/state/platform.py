"""The platform snapshot: what machine a measurement was taken on.

Every probe that could not run records *why* in ``probes`` instead of raising, so a
snapshot always exists and always says what it does not know.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field

ProbeState = Literal["ok", "missing", "failed", "refused", "not_applicable"]


class Probe(BaseModel):
    """Outcome of one probe (``lscpu``, ``nvml``, ``perf``...)."""

    state: ProbeState
    detail: str = ""  # why it failed / what was missing / which source answered


class ToolVersion(BaseModel):
    """An external tool found (or not) on PATH and the first line of its version text."""

    path: str = ""
    version: str = ""
    error: str = ""


class CpuInfo(BaseModel):
    vendor: str = ""
    model: str = ""
    architecture: str = ""
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    logical_cpus: int | None = None
    max_mhz: float | None = None
    caches: dict[str, str] = Field(default_factory=dict)  # "L1d" -> "1 MiB (16 instances)"
    simd: list[str] = Field(default_factory=list)  # the vector/matrix ISA flags present
    hypervisor_flag: bool = False  # the CPUID "hypervisor" bit


class NumaNode(BaseModel):
    id: int
    cpus: str = ""  # cpulist as the kernel prints it, e.g. "0-15,32-47"
    memory_bytes: int | None = None


class NumaInfo(BaseModel):
    nodes: list[NumaNode] = Field(default_factory=list)
    source: str = ""  # "numactl" | "sysfs"


class Virtualization(BaseModel):
    hypervisor: str = ""  # e.g. "KVM", "Firecracker"; empty when bare metal or unknown
    container: str = ""  # e.g. "docker", "podman", "kubernetes", "gvisor"; empty when none seen
    evidence: list[str] = Field(default_factory=list)  # what each conclusion rests on


class SchedulerInfo(BaseModel):
    kind: str = ""  # "slurm" or ""
    version: str = ""
    partitions: list[str] = Field(default_factory=list)
    job_id: str = ""


class PerfAvailability(BaseModel):
    """Can ``perf stat`` count here, and which events it could not count."""

    installed: bool = False
    hardware_counters: bool = False
    software_events: bool = False
    paranoid: int | None = None  # /proc/sys/kernel/perf_event_paranoid
    detail: str = ""  # e.g. "instructions: <not supported>"


class GpuInfo(BaseModel):
    index: int
    name: str
    uuid: str = ""
    compute_capability: str = ""  # "9.0"
    memory_total_bytes: int | None = None
    multiprocessors: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    ecc_enabled: bool | None = None
    mig_enabled: bool | None = None
    power_limit_w: float | None = None


class PlatformProfile(BaseModel):
    """A machine as perfscout found it. ``platform_id`` keys result records to it."""

    platform_id: str = ""
    taken_at: str = ""  # ISO 8601 UTC
    hostname: str = ""
    os: str = ""
    kernel: str = ""
    cpu: CpuInfo = Field(default_factory=CpuInfo)
    numa: NumaInfo = Field(default_factory=NumaInfo)
    memory_total_bytes: int | None = None
    virtualization: Virtualization = Field(default_factory=Virtualization)
    compilers: dict[str, ToolVersion] = Field(default_factory=dict)
    mpi: ToolVersion = Field(default_factory=ToolVersion)
    scheduler: SchedulerInfo = Field(default_factory=SchedulerInfo)
    python: str = ""
    python_executable: str = ""
    packages: dict[str, str | None] = Field(default_factory=dict)  # None: not installed
    perf: PerfAvailability = Field(default_factory=PerfAvailability)
    gpus: list[GpuInfo] = Field(default_factory=list)
    gpu_source: str = ""  # "nvml" | "nvidia-smi" | "" (none found)
    driver_version: str = ""
    cuda_driver_version: str = ""  # the CUDA version the driver supports, e.g. "13.0"
    ncu: ToolVersion = Field(default_factory=ToolVersion)
    probes: dict[str, Probe] = Field(default_factory=dict)

    def salient(self) -> dict[str, object]:
        """The facts that make two machines comparable for performance results.

        Deliberately excludes time, hostname, package versions and clocks read at the
        moment, so re-snapshotting the same machine gives the same ``platform_id``.
        """
        return {
            "cpu": [self.cpu.vendor, self.cpu.model, self.cpu.sockets,
                    self.cpu.cores_per_socket, self.cpu.threads_per_core, self.cpu.logical_cpus],
            "memory_gib": round((self.memory_total_bytes or 0) / 2**30),
            "gpus": [[g.name, g.compute_capability, round((g.memory_total_bytes or 0) / 2**30)]
                     for g in self.gpus],
            "driver": self.driver_version,
        }

    def compute_platform_id(self) -> str:
        """A stable 12-hex-digit hash of :meth:`salient`."""
        blob = json.dumps(self.salient(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)
