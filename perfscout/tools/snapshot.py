"""Platform snapshot: gather the evidence about a machine before any advice is given.

Each probe is a small function that fills part of a :class:`PlatformProfile` and
records its outcome in ``profile.probes[name]``; a probe that cannot run says why and
never raises. External programs run only through the :class:`Sandbox`.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import re
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from perfscout.state.platform import (
    GpuInfo,
    NumaInfo,
    NumaNode,
    PerfAvailability,
    PlatformProfile,
    Probe,
    SchedulerInfo,
    ToolVersion,
    Virtualization,
)
from perfscout.errors import ToolRefused
from perfscout.tools.sandbox import Sandbox, SandboxLimits, SandboxResult

#: Packages whose versions matter to results perfscout records.
KEY_PACKAGES = (
    "perfscout", "numpy", "pydantic", "pysz", "hdf5plugin", "zfpy", "h5py", "cupy-cuda13x",
    "cupy-cuda12x", "torch", "nvidia-ml-py", "langgraph", "pandas",
)

#: lscpu flags that name vector / matrix instruction sets worth gating advice on.
SIMD_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "sve", "sve2", "asimd",
)

_PROBE_LIMITS = SandboxLimits(timeout_s=20.0, output_cap_bytes=4 * 2**20)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _failed(res: SandboxResult) -> str:
    tail = _first_line(res.stderr[-500:]) or _first_line(res.stdout[-500:])
    return f"{res.status}: {res.reason}" + (f" ({tail})" if tail else "")


class _Probes:
    def __init__(self, profile: PlatformProfile, sandbox: Sandbox) -> None:
        self.p = profile
        self.sb = sandbox

    def mark(self, name: str, state: str, detail: str = "") -> None:
        self.p.probes[name] = Probe(state=state, detail=detail)  # type: ignore[arg-type]

    def run(self, argv: list[str]) -> SandboxResult | None:
        """Run a probe command; None (and a 'missing' note by the caller) if absent."""
        try:
            self.sb.resolve_executable(argv[0])
        except ToolRefused:
            return None
        return self.sb.run(argv, limits=_PROBE_LIMITS)

    # ---- CPU -----------------------------------------------------------------------
    def cpu(self) -> None:
        res = self.run(["lscpu", "-J"])
        if res is None:
            self.mark("lscpu", "missing", "lscpu not on PATH; CPU facts from /proc/cpuinfo")
            self._cpu_from_proc()
            return
        if not res.ok:
            self.mark("lscpu", "failed", _failed(res))
            self._cpu_from_proc()
            return
        try:
            rows = json.loads(res.stdout)["lscpu"]
        except (ValueError, KeyError) as exc:
            self.mark("lscpu", "failed", f"unparsable lscpu -J output: {exc}")
            self._cpu_from_proc()
            return
        fields: dict[str, str] = {}

        def walk(items: list[dict]) -> None:  # newer lscpu nests rows under "children"
            for it in items:
                fields[str(it.get("field", "")).rstrip(":")] = str(it.get("data") or "")
                walk(it.get("children", []))

        walk(rows)
        c = self.p.cpu
        c.architecture = fields.get("Architecture", "")
        c.vendor = fields.get("Vendor ID", "")
        c.model = fields.get("Model name", "")
        c.sockets = _int(fields.get("Socket(s)"))
        c.cores_per_socket = _int(fields.get("Core(s) per socket"))
        c.threads_per_core = _int(fields.get("Thread(s) per core"))
        c.logical_cpus = _int(fields.get("CPU(s)"))
        c.max_mhz = _float(fields.get("CPU max MHz"))
        for key in ("L1d", "L1i", "L2", "L3"):
            for label in (f"{key} cache", key):
                if fields.get(label):
                    c.caches[key] = fields[label]
                    break
        flags = set(fields.get("Flags", "").split())
        c.simd = [f for f in SIMD_FLAGS if f in flags]
        c.hypervisor_flag = "hypervisor" in flags
        hv = fields.get("Hypervisor vendor", "")
        if hv:
            self.p.virtualization.hypervisor = hv
            self.p.virtualization.evidence.append(f"lscpu: Hypervisor vendor: {hv}")
        self.mark("lscpu", "ok")

    def _cpu_from_proc(self) -> None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError as exc:
            self.mark("cpuinfo", "failed", str(exc))
            return
        c = self.p.cpu
        c.architecture = platform.machine()
        c.logical_cpus = text.count("processor\t:") or os.cpu_count()
        m = re.search(r"model name\s*:\s*(.+)", text)
        c.model = m.group(1).strip() if m else ""
        m = re.search(r"vendor_id\s*:\s*(.+)", text)
        c.vendor = m.group(1).strip() if m else ""
        m = re.search(r"flags\s*:\s*(.+)", text)
        flags = set(m.group(1).split()) if m else set()
        c.simd = [f for f in SIMD_FLAGS if f in flags]
        c.hypervisor_flag = "hypervisor" in flags
        self.mark("cpuinfo", "ok")

    # ---- NUMA, memory, OS ------------------------------------------------------------
    def numa(self) -> None:
        res = self.run(["numactl", "--hardware"])
        if res is not None and res.ok:
            nodes: dict[int, NumaNode] = {}
            for m in re.finditer(r"node (\d+) cpus:(.*)", res.stdout):
                nodes[int(m.group(1))] = NumaNode(id=int(m.group(1)), cpus=_cpus_to_list(m.group(2)))
            for m in re.finditer(r"node (\d+) size: (\d+) MB", res.stdout):
                node = nodes.setdefault(int(m.group(1)), NumaNode(id=int(m.group(1))))
                node.memory_bytes = int(m.group(2)) * 2**20
            self.p.numa = NumaInfo(nodes=sorted(nodes.values(), key=lambda n: n.id), source="numactl")
            self.mark("numa", "ok", "numactl --hardware")
            return
        why = "numactl not on PATH" if res is None else _failed(res)
        base = Path("/sys/devices/system/node")
        nodes_list = []
        for d in sorted(base.glob("node[0-9]*"), key=lambda x: int(x.name[4:])):
            node = NumaNode(id=int(d.name[4:]))
            try:
                node.cpus = (d / "cpulist").read_text().strip()
                m = re.search(r"MemTotal:\s+(\d+) kB", (d / "meminfo").read_text())
                node.memory_bytes = int(m.group(1)) * 1024 if m else None
            except OSError:
                pass
            nodes_list.append(node)
        if nodes_list:
            self.p.numa = NumaInfo(nodes=nodes_list, source="sysfs")
            self.mark("numa", "ok", f"sysfs ({why})")
        else:
            self.mark("numa", "failed", f"{why}; no /sys/devices/system/node entries")

    def memory_os(self) -> None:
        try:
            m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
            self.p.memory_total_bytes = int(m.group(1)) * 1024 if m else None
            self.mark("memory", "ok" if m else "failed", "" if m else "no MemTotal in /proc/meminfo")
        except OSError as exc:
            self.mark("memory", "failed", str(exc))
        self.p.kernel = platform.release()
        try:
            text = Path("/etc/os-release").read_text()
            m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
            self.p.os = m.group(1) if m else platform.platform()
        except OSError:
            self.p.os = platform.platform()

    def virtualization(self) -> None:
        v: Virtualization = self.p.virtualization
        if self.p.cpu.hypervisor_flag:
            v.evidence.append("CPU flag 'hypervisor' set")
            if not v.hypervisor:
                v.hypervisor = "unknown hypervisor"
        for f in ("product_name", "sys_vendor"):
            try:
                val = Path(f"/sys/class/dmi/id/{f}").read_text().strip()
            except OSError:
                continue
            if val:
                v.evidence.append(f"dmi {f}: {val}")
                for known in ("KVM", "QEMU", "VMware", "VirtualBox", "Amazon EC2", "Google", "Microsoft"):
                    if known.lower() in val.lower() and v.hypervisor in ("", "unknown hypervisor"):
                        v.hypervisor = known
        rel = self.p.kernel
        if "-fc-" in rel or "firecracker" in rel.lower():
            v.hypervisor = "Firecracker"
            v.evidence.append(f"kernel release {rel!r} names a Firecracker build")
        if Path("/.dockerenv").exists():
            v.container, _ = "docker", v.evidence.append("/.dockerenv exists")
        elif Path("/run/.containerenv").exists():
            v.container, _ = "podman", v.evidence.append("/run/.containerenv exists")
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            v.container = v.container or "kubernetes"
            v.evidence.append("KUBERNETES_SERVICE_HOST is set")
        try:
            cg = Path("/proc/1/cgroup").read_text()
            for word in ("docker", "kubepods", "containerd", "lxc"):
                if word in cg:
                    v.container = v.container or ("kubernetes" if word == "kubepods" else word)
                    v.evidence.append(f"/proc/1/cgroup mentions {word}")
                    break
        except OSError:
            pass
        if "gvisor" in self.p.kernel.lower() or self.p.kernel == "4.4.0":
            v.container = v.container or "gvisor"
            v.evidence.append("kernel release 4.4.0 is what gVisor reports")
        self.mark("virtualization", "ok", "; ".join(v.evidence) or "no sign of a VM or container")

    # ---- toolchain -----------------------------------------------------------------
    def version_of(self, name: str, args: list[str] | None = None) -> ToolVersion:
        res = self.run([name, *(args or ["--version"])])
        if res is None:
            return ToolVersion(error=f"{name} not on PATH")
        path = res.argv[0] if res.argv else ""
        text = res.stdout + "\n" + res.stderr
        if not res.ok:
            return ToolVersion(path=path, error=_failed(res))
        # nvcc prints its release on the last line; others on the first.
        line = next((ln for ln in text.splitlines() if "release" in ln), "") if name == "nvcc" else ""
        return ToolVersion(path=path, version=(line or _first_line(text)).strip())

    def toolchain(self) -> None:
        for name in ("gcc", "clang", "nvcc"):
            tv = self.version_of(name)
            self.p.compilers[name] = tv
            self.mark(name, "ok" if tv.version else ("missing" if "not on PATH" in tv.error else "failed"),
                      tv.error)
        self.p.mpi = self.version_of("mpirun")
        self.mark("mpi", "ok" if self.p.mpi.version else "missing", self.p.mpi.error)
        self.p.ncu = self.version_of("ncu")
        self.mark("ncu", "ok" if self.p.ncu.version else "missing", self.p.ncu.error)

    def scheduler(self) -> None:
        res = self.run(["sinfo", "--version"])
        if res is None:
            self.mark("scheduler", "missing", "sinfo not on PATH: no Slurm client here")
            return
        s = SchedulerInfo(kind="slurm", version=_first_line(res.stdout), job_id=os.environ.get("SLURM_JOB_ID", ""))
        parts = self.run(["sinfo", "-h", "-o", "%P"])
        if parts is not None and parts.ok:
            s.partitions = [p.strip() for p in parts.stdout.split() if p.strip()]
        self.p.scheduler = s
        self.mark("scheduler", "ok" if res.ok else "failed", "" if res.ok else _failed(res))

    def python(self) -> None:
        self.p.python = platform.python_version()
        self.p.python_executable = sys.executable
        for name in KEY_PACKAGES:
            try:
                self.p.packages[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                self.p.packages[name] = None
        self.mark("python", "ok")

    # ---- perf ----------------------------------------------------------------------
    def perf(self) -> None:
        pa = PerfAvailability()
        try:
            pa.paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
        except (OSError, ValueError):
            pass
        try:
            self.sb.resolve_executable("perf")
        except ToolRefused:
            pa.detail = "perf not on PATH (Debian: apt-get install linux-perf)"
            self.p.perf = pa
            self.mark("perf", "missing", pa.detail)
            return
        pa.installed = True
        res = self.sb.run(["perf", "stat", "-x", ",", "-e", "instructions,task-clock", "true"],
                          limits=_PROBE_LIMITS)
        if res.status not in ("ok", "exit_nonzero"):
            pa.detail = _failed(res)
            self.p.perf = pa
            self.mark("perf", "failed", pa.detail)
            return
        notes = []
        for line in res.stderr.splitlines():
            parts = line.split(",")
            if len(parts) < 3:
                continue
            value, event = parts[0], parts[2]
            if event.startswith("instructions"):
                pa.hardware_counters = not value.startswith("<")
                notes.append(f"instructions: {value}")
            elif event.startswith("task-clock"):
                pa.software_events = not value.startswith("<")
                notes.append(f"task-clock: {'counted' if pa.software_events else value}")
        pa.detail = "; ".join(notes) or _first_line(res.stderr) or "perf printed no counts"
        self.p.perf = pa
        self.mark("perf", "ok" if notes else "failed", pa.detail)

    # ---- GPUs ----------------------------------------------------------------------
    def gpus(self) -> None:
        why_nvml = self._gpus_nvml()
        if why_nvml is None:
            return
        smi = self._gpus_smi()
        if smi is None:
            self.mark("gpus", "ok", f"nvidia-smi (NVML: {why_nvml})")
        else:
            self.mark("gpus", "missing" if "not on PATH" in smi or "no GPU" in smi else "failed",
                      f"no GPU found: NVML: {why_nvml}; nvidia-smi: {smi}")

    def _gpus_nvml(self) -> str | None:
        """Fill GPUs through NVML; None on success, else why not."""
        try:
            import pynvml as nv
        except ImportError as exc:
            return f"nvidia-ml-py not installed ({exc})"
        try:
            nv.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"nvmlInit failed: {exc}"
        try:
            self.p.driver_version = _s(nv.nvmlSystemGetDriverVersion())
            cv = nv.nvmlSystemGetCudaDriverVersion_v2()
            self.p.cuda_driver_version = f"{cv // 1000}.{(cv % 1000) // 10}"
            count = nv.nvmlDeviceGetCount()
            for i in range(count):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                g = GpuInfo(index=i, name=_s(nv.nvmlDeviceGetName(h)))
                g.uuid = _try(lambda: _s(nv.nvmlDeviceGetUUID(h)), "")
                cc = _try(lambda: nv.nvmlDeviceGetCudaComputeCapability(h), None)
                g.compute_capability = f"{cc[0]}.{cc[1]}" if cc else ""
                g.memory_total_bytes = _try(lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total), None)
                g.max_sm_clock_mhz = _try(lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)), None)
                g.max_mem_clock_mhz = _try(lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)), None)
                g.pcie_gen_max = _try(lambda: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)), None)
                g.pcie_width_max = _try(lambda: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)), None)
                g.pcie_gen_current = _try(lambda: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)), None)
                g.pcie_width_current = _try(lambda: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)), None)
                g.ecc_enabled = _try(lambda: bool(nv.nvmlDeviceGetEccMode(h)[0]), None)
                g.mig_enabled = _try(lambda: bool(nv.nvmlDeviceGetMigMode(h)[0]), None)
                g.power_limit_w = _try(lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0, None)
                g.multiprocessors = _try(lambda: _sm_count_cuda(i), None)
                self.p.gpus.append(g)
        except Exception as exc:
            self.p.gpus = []  # a partial list must not pass for the machine's GPUs
            return f"NVML query failed: {exc}"
        finally:
            _try(nv.nvmlShutdown, None)
        if not self.p.gpus:
            return "NVML found no GPU"
        self.p.gpu_source = "nvml"
        self.mark("gpus", "ok", f"NVML: {len(self.p.gpus)} GPU(s)")
        return None

    _SMI_FIELDS = ("index,name,uuid,compute_cap,memory.total,clocks.max.sm,clocks.max.memory,"
                   "pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,"
                   "pcie.link.width.current,ecc.mode.current,mig.mode.current,power.limit,driver_version")

    def _gpus_smi(self) -> str | None:
        res = self.run(["nvidia-smi", f"--query-gpu={self._SMI_FIELDS}", "--format=csv,noheader,nounits"])
        if res is None:
            return "nvidia-smi not on PATH"
        if not res.ok:
            return _failed(res)
        gpus = parse_nvidia_smi_csv(res.stdout)
        if not gpus:
            return "nvidia-smi listed no GPU"
        self.p.gpus = gpus
        self.p.gpu_source = "nvidia-smi"
        drv = [ln.split(",")[-1].strip() for ln in res.stdout.splitlines() if ln.strip()]
        self.p.driver_version = drv[0] if drv else ""
        return None


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=<_SMI_FIELDS> --format=csv,noheader,nounits``."""
    gpus = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 15 or not cols[0].isdigit():
            continue
        mem_mib = _float(cols[4])
        gpus.append(GpuInfo(
            index=int(cols[0]), name=cols[1], uuid=cols[2], compute_capability=cols[3],
            memory_total_bytes=int(mem_mib * 2**20) if mem_mib is not None else None,
            max_sm_clock_mhz=_int(cols[5]), max_mem_clock_mhz=_int(cols[6]),
            pcie_gen_max=_int(cols[7]), pcie_width_max=_int(cols[8]),
            pcie_gen_current=_int(cols[9]), pcie_width_current=_int(cols[10]),
            ecc_enabled={"Enabled": True, "Disabled": False}.get(cols[11]),
            mig_enabled={"Enabled": True, "Disabled": False}.get(cols[12]),
            power_limit_w=_float(cols[13]),
        ))
    return gpus


def _sm_count_cuda(index: int) -> int | None:
    """SM count is not in NVML; ask CuPy's runtime when it is importable."""
    try:
        import cupy
    except ImportError:
        return None
    return int(cupy.cuda.runtime.getDeviceProperties(index)["multiProcessorCount"])


def _try(fn: Callable, default):
    try:
        return fn()
    except Exception:  # NVML raises NotSupported on some boards: the field stays empty
        return default


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _int(v: str | None) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def _float(v: str | None) -> float | None:
    try:
        return float(str(v).strip())
    except (TypeError, ValueError):
        return None


def _cpus_to_list(text: str) -> str:
    """numactl prints "0 1 2 3 8"; store the kernel's compact cpulist form "0-3,8"."""
    nums = sorted(int(x) for x in text.split() if x.isdigit())
    out, start, prev = [], None, None
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(out)


def take_snapshot(sandbox: Sandbox | None = None, *, gpus: bool = True) -> PlatformProfile:
    """Probe this machine. Never raises for a failed probe: see ``profile.probes``."""
    profile = PlatformProfile(
        taken_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
    )
    own_dir = None
    if sandbox is None:
        own_dir = tempfile.TemporaryDirectory(prefix="perfscout-snapshot-")
        # perfscout's own fixed probes: confined where bubblewrap works, else run anyway
        # (recorded per result); the scheduler probes need the network.
        sandbox = Sandbox(own_dir.name, allow_unconfined_fallback=True, network=True)
    try:
        pr = _Probes(profile, sandbox)
        steps = [pr.cpu, pr.memory_os, pr.numa, pr.virtualization, pr.toolchain, pr.scheduler,
                 pr.python, pr.perf]
        if gpus:
            steps.append(pr.gpus)
        else:
            pr.mark("gpus", "not_applicable", "GPU probing switched off by the caller")
        for step in steps:
            try:
                step()
            except Exception as exc:  # a probe bug must not lose the rest of the snapshot
                pr.mark(step.__name__, "failed", f"probe raised {type(exc).__name__}: {exc}")
    finally:
        if own_dir is not None:
            own_dir.cleanup()
    profile.platform_id = profile.compute_platform_id()
    return profile
