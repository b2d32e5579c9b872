"""Platform snapshot on this machine (no GPU) and on the real H200 fixture; spec table."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from perfscout.errors import InputError
from perfscout.platform_profiles import (
    find_spec,
    list_snapshots,
    load_snapshot,
    load_specs,
    save_snapshot,
    snapshot_dir,
)
from perfscout.state.platform import GpuInfo, PlatformProfile
from perfscout.tools.ncu_parse import load_raw_csv
from perfscout.tools.snapshot import parse_nvidia_smi_csv, take_snapshot

FX = Path(__file__).resolve().parents[1] / "fixtures"
H200_SNAPSHOT = FX / "platform" / "h200_snapshot.json"


@pytest.fixture(scope="module")
def here() -> PlatformProfile:
    return take_snapshot()


def test_snapshot_of_this_machine(here: PlatformProfile) -> None:
    assert re.fullmatch(r"[0-9a-f]{12}", here.platform_id)
    assert here.cpu.logical_cpus == os.cpu_count()
    assert here.cpu.model and here.cpu.vendor
    assert here.memory_total_bytes and here.memory_total_bytes > 2**28
    assert here.kernel and here.python.startswith("3.")
    assert here.packages["pydantic"]
    for probe in ("memory", "numa", "virtualization", "python", "perf", "gpus"):
        assert probe in here.probes, probe
    assert here.numa.nodes, "NUMA comes from numactl or sysfs"


def test_gpu_absence_is_said_not_raised(here: PlatformProfile) -> None:
    if here.gpus:
        assert here.gpu_source in ("nvml", "nvidia-smi")
        return
    gp = here.probes["gpus"]
    assert gp.state in ("missing", "failed")
    assert "NVML" in gp.detail and "nvidia-smi" in gp.detail


def test_perf_probe_matches_reality(here: PlatformProfile) -> None:
    assert here.perf.installed == (shutil.which("perf") is not None)
    if here.perf.installed:
        assert "instructions" in here.perf.detail
        assert here.perf.software_events
    else:
        assert here.probes["perf"].state == "missing"


def test_compilers_recorded_with_versions_or_reasons(here: PlatformProfile) -> None:
    for name in ("gcc", "clang", "nvcc"):
        tv = here.compilers[name]
        assert bool(tv.version) != bool(tv.error), name
        assert (shutil.which(name) is not None) == bool(tv.version), name


def test_platform_id_is_stable_and_salient(here: PlatformProfile) -> None:
    again = take_snapshot(gpus=False)
    assert again.platform_id == take_snapshot(gpus=False).platform_id
    changed = here.model_copy(deep=True)
    changed.gpus.append(GpuInfo(index=9, name="NVIDIA H200", compute_capability="9.0",
                                memory_total_bytes=150754820096))
    assert changed.compute_platform_id() != here.compute_platform_id()
    later = here.model_copy(update={"taken_at": "2030-01-01T00:00:00+00:00", "hostname": "other"})
    assert later.compute_platform_id() == here.compute_platform_id()


def test_probes_without_any_tools_still_give_a_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    p = take_snapshot()
    assert p.probes["lscpu"].state == "missing" and p.cpu.logical_cpus
    assert p.probes["gcc"].state == "missing" and "not on PATH" in p.compilers["gcc"].error
    assert not p.perf.installed and "linux-perf" in p.perf.detail
    assert p.probes["gpus"].state in ("missing", "failed")


def test_no_gpu_switch() -> None:
    p = take_snapshot(gpus=False)
    assert p.probes["gpus"].state == "not_applicable" and not p.gpus


def test_h200_fixture_is_fully_described() -> None:
    p = PlatformProfile.model_validate_json(H200_SNAPSHOT.read_text())
    assert p.platform_id == p.compute_platform_id()
    assert p.gpu_source == "nvml" and len(p.gpus) == 1
    g = p.gpus[0]
    assert (g.name, g.compute_capability, g.multiprocessors) == ("NVIDIA H200", "9.0", 132)
    assert g.memory_total_bytes == 143771 * 2**20
    assert g.pcie_gen_max == 5 and g.pcie_width_max == 16 and g.ecc_enabled and g.mig_enabled is False
    assert p.driver_version.startswith("580.") and p.cuda_driver_version == "13.0"
    assert p.ncu.version and "nvcc" in p.compilers and p.compilers["nvcc"].version
    assert p.virtualization.hypervisor == "Firecracker"
    assert p.numa.source == "numactl"
    assert "amx_tile" in p.cpu.simd


def test_nvidia_smi_fallback_parser_on_real_output() -> None:
    gpus = parse_nvidia_smi_csv((FX / "platform" / "h200_nvidia-smi-query.csv").read_text())
    nvml = PlatformProfile.model_validate_json(H200_SNAPSHOT.read_text()).gpus[0]
    assert len(gpus) == 1
    g = gpus[0]
    for field in ("name", "uuid", "compute_capability", "memory_total_bytes", "max_sm_clock_mhz",
                  "max_mem_clock_mhz", "pcie_gen_max", "pcie_width_max", "ecc_enabled", "mig_enabled",
                  "power_limit_w"):
        assert getattr(g, field) == getattr(nvml, field), field
    assert parse_nvidia_smi_csv("No devices were found\n") == []


def test_save_and_load_snapshot(perfscout_home: Path) -> None:
    p = PlatformProfile.model_validate_json(H200_SNAPSHOT.read_text())
    assert snapshot_dir() == perfscout_home / "platform_profiles"
    path = save_snapshot(p, "my-h200")
    assert path.parent == perfscout_home / "platform_profiles"
    assert yaml.safe_load(path.read_text())["gpus"][0]["name"] == "NVIDIA H200"
    assert load_snapshot("my-h200") == p
    assert load_snapshot(path) == p
    assert "my-h200" in list_snapshots()
    for bad in ("../escape", "a b", "", "specs"):
        with pytest.raises(InputError):
            save_snapshot(p, bad)
    with pytest.raises(InputError, match="no saved snapshot"):
        load_snapshot("never-saved")
    broken = path.with_name("broken.yaml")
    broken.write_text("gpus: [unclosed\n")
    with pytest.raises(InputError, match="not a valid platform profile"):
        load_snapshot(broken)


def test_the_committed_h200_snapshot_loads() -> None:
    p = load_snapshot("h200-lent-firecracker")
    ref = PlatformProfile.model_validate_json(H200_SNAPSHOT.read_text())
    assert p.platform_id == ref.platform_id and p.gpus == ref.gpus


def test_spec_table_has_every_required_device_with_sources() -> None:
    specs = load_specs()
    names = " ".join(s.name for s in specs.values())
    for required in ("H200", "H100", "A100", "L40S", "RTX 4090", "MI250X", "MI300X", "Xeon", "EPYC"):
        assert required in names, required
    for s in specs.values():
        assert s.figures, s.key
        for fname, fig in s.figures.items():
            assert fig.source.strip(), (s.key, fname)
            assert fig.value is not None, (s.key, fname)
        if s.kind == "gpu":
            assert s.get("peak_mem_bw_GBps") and (s.get("sm_count") or s.get("cu_count"))


def test_spec_matching() -> None:
    assert find_spec("NVIDIA H200").key == "nvidia_h200"
    assert find_spec("NVIDIA H100 80GB HBM3").key == "nvidia_h100_sxm"
    assert find_spec("NVIDIA A100-SXM4-80GB").key == "nvidia_a100_sxm_80gb"
    assert find_spec("NVIDIA A100-PCIE-40GB") is None  # different board: no borrowed figures
    assert find_spec("AMD Instinct MI300X").key == "amd_mi300x"
    assert find_spec("Intel(R) Xeon(R) Platinum 8480+").key == "intel_xeon_8480plus"
    assert find_spec("Some Future GPU") is None


def test_h200_measured_figures_agree_with_the_real_profile() -> None:
    spec = find_spec("NVIDIA H200")
    k = load_raw_csv(FX / "ncu" / "h200_transpose_raw.csv").kernels[0]
    assert spec.get("sm_count") == k.value("device__attribute_multiprocessor_count")
    assert spec.get("l2_bytes") == k.value("device__attribute_l2_cache_size")
    assert spec.get("smem_per_block_max_bytes") == k.value("device__attribute_max_shared_memory_per_block_optin")
    assert spec.get("smem_per_sm_bytes") == k.value("device__attribute_max_shared_memory_per_multiprocessor")
    snap = json.loads(H200_SNAPSHOT.read_text())
    assert spec.get("memory_bytes") == snap["gpus"][0]["memory_total_bytes"]


def test_human_readable_snapshot_of_the_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import perfscout.cli.snapshot_cmd as cmd

    buf = io.StringIO()
    monkeypatch.setattr(cmd, "stdout", Console(file=buf, width=300, no_color=True))
    cmd._print(PlatformProfile.model_validate_json(H200_SNAPSHOT.read_text()))
    text = buf.getvalue()
    assert "NVIDIA H200 (CC 9.0, 140 GiB, 132 SMs, PCIe gen5x16" in text
    assert "spec table: nvidia_h200" in text and "driver 580.159.04, CUDA 13.0" in text
    assert "Firecracker" in text and "perf  installed=False" in text


def test_committed_cpu_only_snapshot_says_why_there_is_no_gpu() -> None:
    p = PlatformProfile.model_validate_json((FX / "platform" / "devvm_nogpu_snapshot.json").read_text())
    assert p.gpus == [] and p.gpu_source == ""
    assert p.probes["gpus"].state == "missing" and "NVML" in p.probes["gpus"].detail
    assert p.perf.installed and not p.perf.hardware_counters
    assert "<not supported>" in p.perf.detail
    assert p.platform_id == p.compute_platform_id()
