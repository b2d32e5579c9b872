"""`perfscout profile`, `diagnose` and `snapshot` end to end, as real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfscout.tools.bwrap import probe_bwrap
from perfscout.tools.profile import looks_like_cuda_program

ROOT = Path(__file__).resolve().parents[2]
FX = ROOT / "tests" / "fixtures"
_BWRAP = probe_bwrap()
#: profiling runs the program in the bubblewrap sandbox, which refuses where bwrap cannot run
needs_bwrap = pytest.mark.skipif(not _BWRAP.usable, reason=f"bubblewrap cannot run here: {_BWRAP.reason}")


def perfscout(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFSCOUT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    # ~0.15 s of hashing: well past cpu_busy_cores' 50 ms floor (200,000 rounds took 40-65 ms, and a
    # run under 50 ms named no CPU finding at all: the test failed one time in three)
    (d / "busy.py").write_text(textwrap.dedent("""
        import hashlib
        h = hashlib.sha256()
        for _ in range(600000):
            h.update(b"perfscout")
        print(h.hexdigest()[:8])
        """))
    return d


@needs_bwrap
def test_profile_cpu_program_json(workdir: Path, perfscout_home: Path) -> None:
    r = perfscout("profile", "--json", "--", sys.executable, "busy.py", cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is exactly one JSON document
    assert doc["tool"] == "perf" and doc["status"] == "ok"
    assert doc["command"] == [sys.executable, "busy.py"]
    run_dir = Path(doc["run_dir"])
    assert run_dir.parent == perfscout_home / "runs"
    assert json.loads((run_dir / "profile.json").read_text()) == doc
    for f in ("command.json", "platform.json", "program.stdout"):
        assert (run_dir / f).exists(), f
    assert len((run_dir / "program.stdout").read_text().strip()) == 8
    assert doc["platform_id"] == json.loads((run_dir / "platform.json").read_text())["platform_id"]
    conf = doc["confinement"]
    assert conf["mode"] == "bwrap" and conf["network"] is False and conf["pid_namespace"] is True
    assert conf["writable"][0] == str(run_dir.resolve()) and conf["warning"] == ""
    assert doc["warnings"] == []
    perf = doc["perf"]
    assert perf["rusage"]["user_s"] > 0
    if shutil.which("perf"):
        # "task-clock:u" inside the sandbox where perf may count user space only
        assert next(v for k, v in perf["events"].items() if k.split(":")[0] == "task-clock")["value"] > 0
        assert any((run_dir / n).exists() for n in ("perf_stat.jsonl", "perf_stat.csv"))
    if not perf["hardware_counters"]:  # this machine: no PMU
        ids = [f["id"] for f in doc["findings"]]
        assert ids[0] in ("cpu_busy_cores", "cpu_waiting") and ids[-1] == "cpu_counters_unavailable"
        ev = doc["findings"][-1]["evidence"]
        # Only events the profile holds: hardware ones marked unavailable, software ones counted.
        assert ev and all(perf["unavailable"].get(e["metric"]) == e["value"]
                          or perf["events"][e["metric"]]["value"] == e["value"] for e in ev)


@pytest.mark.skipif(shutil.which("perf") is None,
                    reason="perf is not installed (Debian: apt-get install linux-perf)")
@needs_bwrap
def test_profile_and_diagnose_of_its_saved_output_agree(workdir: Path, perfscout_home: Path) -> None:
    r = perfscout("profile", "--json", "--", sys.executable, "busy.py", cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)
    if prof["perf"]["hardware_counters"]:
        pytest.skip("this host has a PMU; the test is about cpu_counters_unavailable")
    run_dir = Path(prof["run_dir"])
    (raw,) = [run_dir / n for n in ("perf_stat.jsonl", "perf_stat.csv") if (run_dir / n).exists()]
    r = perfscout("diagnose", "--json", "--perf-csv", str(raw), cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    diag = json.loads(r.stdout)["programs"][0]["primary"]
    found = prof["findings"][-1]
    assert found["id"] == "cpu_counters_unavailable"
    # the software reading leads both (which one rests on the load: busy on a core, or waiting for one)
    assert {prof["findings"][0]["id"], diag["id"]} <= {"cpu_busy_cores", "cpu_waiting"}
    saved = json.loads(r.stdout)["programs"][0]["findings"]
    found_saved = next(f for f in saved if f["id"] == "cpu_counters_unavailable")
    assert found["title"] == found_saved["title"]
    diag = found_saved
    cited = [(e["metric"], e["value"]) for e in found["evidence"]]
    assert cited == [(e["metric"], e["value"]) for e in diag["evidence"]]
    assert {"cycles", "instructions", "task-clock"} <= {m.split(":")[0] for m, _ in cited}


@needs_bwrap
def test_profile_refuses_paths_outside_cwd_with_a_hint(workdir: Path, perfscout_home: Path,
                                                       tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("print('hi')\n")
    r = perfscout("profile", "--json", "--", sys.executable, str(outside), cwd=workdir, home=perfscout_home)
    assert r.returncode == 2  # a sandbox refusal is bad input (README)
    doc = json.loads(r.stdout)
    assert doc["status"] == "refused" and "--input" in doc["exit"]["hint"]
    assert doc["findings"] == []
    assert "refused" in r.stderr and "Traceback" not in r.stderr
    r = perfscout("profile", "--json", "--input", str(outside), "--", sys.executable, str(outside),
                  cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stdout
    assert json.loads(r.stdout)["status"] == "ok"


def test_profile_unknown_program_is_a_clear_error(workdir: Path, perfscout_home: Path) -> None:
    r = perfscout("profile", "--", "no-such-program-xyz", cwd=workdir, home=perfscout_home)
    assert r.returncode == 2
    assert "no-such-program-xyz" in r.stderr and "Traceback" not in r.stderr


def test_profile_with_ncu_requested_where_there_is_none(workdir: Path, perfscout_home: Path) -> None:
    if shutil.which("ncu"):
        pytest.skip("ncu is installed here; this test is about its absence")
    r = perfscout("profile", "--json", "--tool", "ncu", "--", sys.executable, "busy.py",
                  cwd=workdir, home=perfscout_home)
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and doc["tool"] == "ncu"
    assert doc["status"] == "refused" and "ncu" in doc["exit"]["reason"]
    assert "no report" in doc["ncu_error"]


def test_cuda_program_detection(workdir: Path) -> None:
    cupy_prog = FX / "ncu" / "programs" / "cupy_kernels.py"
    yes, why = looks_like_cuda_program([sys.executable, str(cupy_prog)])
    assert yes and "cupy" in why
    no, why = looks_like_cuda_program([sys.executable, str(workdir / "busy.py")])
    assert not no and "no CUDA" in why
    true = shutil.which("true")
    assert looks_like_cuda_program([true])[0] is False
    # whole module names: jaxtyping is a typing library, not JAX
    (workdir / "typed.py").write_text("import jaxtyping\nimport numpy\n")
    assert looks_like_cuda_program([sys.executable, str(workdir / "typed.py")])[0] is False


def test_diagnose_ncu_csv_json_shape(tmp_path: Path, perfscout_home: Path) -> None:
    r = perfscout("diagnose", "--json", "--all-metrics", "--ncu-csv", str(FX / "ncu" / "h200_cupy_kernels_import_raw.csv"),
                  "--ncu-details", str(FX / "ncu" / "h200_cupy_kernels_details.csv"),
                  cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["kernels"]) == 18 and doc["metrics_scope"] == "all"
    k = next(k for k in doc["kernels"] if k["name"] == "strided_gather")
    # The diagnosis engine names the planted stride as the primary bottleneck, citing
    # only metrics present in the profile.
    assert k["primary"]["id"] == "uncoalesced_global_access"
    assert set(k["cited_metrics"]) <= set(k["metrics"])
    assert k["metrics"]["gpu__time_duration.sum"]["unit"] == "second"
    assert k["metrics"]["device__attribute_multiprocessor_count"]["value"] == 132
    assert any(r["rule"] == "UncoalescedGlobalAccess" for r in k["ncu_says"])
    dev = doc["platform"]["devices"][0]
    assert dev["name"] == "NVIDIA H200" and dev["spec"] == "nvidia_h200"
    assert dev["spec_figures"]["peak_mem_bw_GBps"]["source"]
    assert doc["digest"][0]["name"] == "strided_gather"


def test_diagnose_json_carries_only_cited_metrics_unless_asked(tmp_path: Path, perfscout_home: Path) -> None:
    csv_path = str(FX / "ncu" / "h200_cupy_kernels_import_raw.csv")
    r = perfscout("diagnose", "--json", "--ncu-csv", csv_path, cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1  # compact: one line
    doc = json.loads(r.stdout)
    assert doc["metrics_scope"] == "cited"
    full = json.loads(perfscout("diagnose", "--json", "--all-metrics", "--ncu-csv", csv_path,
                                cwd=tmp_path, home=perfscout_home).stdout)
    assert len(r.stdout) * 5 < len(json.dumps(full))
    for k, kf in zip(doc["kernels"], full["kernels"], strict=True):
        assert k["metrics"] == k["cited_metrics"]
        assert k["primary"] == kf["primary"] and k["findings"] == kf["findings"]
        assert set(k["metrics"]) <= set(kf["metrics"]) and len(kf["metrics"]) > 100
        for name, m in k["metrics"].items():
            assert kf["metrics"][name] == m
    assert any(k["metrics"] for k in doc["kernels"])  # findings do cite something
    indented = perfscout("diagnose", "--json", "--indent", "2", "--ncu-csv", csv_path, cwd=tmp_path,
                         home=perfscout_home).stdout
    assert json.loads(indented) == doc and indented.count("\n") > 100


def test_diagnose_perf_csv(tmp_path: Path, perfscout_home: Path) -> None:
    r = perfscout("diagnose", "--json", "--perf-csv", str(FX / "perf" / "cpu_loop_x.csv"),
                  cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kernels"] == [] and doc["perf"]["events"]["page-faults"]["value"] == 824
    assert doc["programs"][0]["primary"]["id"] == "cpu_waiting"  # half a core on the busy VM it was recorded on
    assert doc["programs"][0]["findings"][-1]["id"] == "cpu_counters_unavailable"


@pytest.mark.parametrize("args,needle", [
    (["--ncu-csv", "/nonexistent/file.csv"], "cannot read"),
    (["--ncu-csv", str(FX / "perf" / "cpu_loop_x.csv")], "no ncu CSV header"),
    ([], "at least one profile"),
    (["--ncu-rep", str(FX / "ncu" / "h200_cupy_kernels_raw.csv")], "ncu"),
])
def test_diagnose_bad_input_is_a_clear_error(tmp_path: Path, perfscout_home: Path, args, needle) -> None:
    r = perfscout("diagnose", "--json", *args, cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert needle in r.stderr.replace("\n", " ")


def test_snapshot_json_and_save(tmp_path: Path, perfscout_home: Path) -> None:
    r = perfscout("snapshot", "--json", "--no-gpu", "--save", "ci-box", cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["platform_id"]) == 12 and doc["cpu"]["logical_cpus"] == os.cpu_count()
    saved = perfscout_home / "platform_profiles" / "ci-box.yaml"
    assert saved.exists() and "saved" in r.stderr
    r = perfscout("snapshot", cwd=tmp_path, home=perfscout_home)
    assert r.returncode == 0 and "platform" in r.stdout and "CPU" in r.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@needs_bwrap
def test_profile_a_compiled_program_by_relative_path(workdir: Path, perfscout_home: Path) -> None:
    (workdir / "loop.c").write_text(textwrap.dedent("""
        #include <stdio.h>
        int main(void) {
            volatile double s = 0;
            for (long i = 0; i < 20000000; ++i) s += (double)i * 0.5;
            printf("%.0f\\n", s);
            return 0;
        }
        """))
    subprocess.run(["gcc", "-O1", "-o", "loop", "loop.c"], cwd=workdir, check=True, timeout=120)
    r = perfscout("profile", "--json", "--", "./loop", cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tool"] == "perf" and doc["status"] == "ok"
    assert doc["exit"]["argv"][-1] == str(workdir / "loop")  # made absolute, not resolved further
    out = (Path(doc["run_dir"]) / "program.stdout").read_text().strip()
    assert out == "99999995000000"  # 0.5 * sum(range(2e7)), exact in double


@needs_bwrap
def test_profile_started_from_the_root_directory_confines_to_the_run_dir(
        perfscout_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server running in / must not turn "the current directory" into every path."""
    from perfscout.tools.profile import profile_command

    monkeypatch.chdir("/")
    out = profile_command([sys.executable, "-c", "print(6 * 7)"], tool="perf", timeout_s=60)
    assert out.status == "ok"
    assert (Path(out.run_dir) / "program.stdout").read_text().strip() == "42"
    out = profile_command([sys.executable, "/etc/hostname"], tool="perf", timeout_s=60)
    assert out.status == "refused" and "outside the run directory" in out.exit["reason"]


# ---- the OS sandbox around profiled programs ------------------------------------------------

@needs_bwrap
def test_semicolons_in_python_code_are_profiled(workdir: Path, perfscout_home: Path) -> None:
    """Issue 12: ``;`` inside one ``python3 -c`` element is code, not shell."""
    r = perfscout("profile", "--json", "--", sys.executable, "-c", "import sys; print(6 * 7); sys.exit(0)",
                  cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "ok"
    assert (Path(doc["run_dir"]) / "program.stdout").read_text().strip() == "42"


def _fake_bwrap(tmp_path: Path, message: str) -> Path:
    """A stand-in that fails the way bwrap does where namespaces are not allowed."""
    fake = tmp_path / "fake-bwrap"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.0-fake'; exit 0; fi\n"
                    f"echo '{message}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("why", ["missing", "no_namespaces"])
def test_without_the_sandbox_profile_refuses_unless_unconfined(workdir: Path, perfscout_home: Path,
                                                               tmp_path: Path, monkeypatch, why: str) -> None:
    if why == "missing":
        monkeypatch.setenv("PERFSCOUT_BWRAP", str(tmp_path / "no-bwrap-here"))
        needle = "apt-get install bubblewrap"
    else:
        fake = _fake_bwrap(tmp_path, "bwrap: No permissions to creating new namespace")
        monkeypatch.setenv("PERFSCOUT_BWRAP", str(fake))
        needle = "No permissions to creating new namespace"
    (workdir / "touch.py").write_text("open('ran', 'w').write('x')\n")
    r = perfscout("profile", "--json", "--", sys.executable, "touch.py", cwd=workdir, home=perfscout_home)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and needle in r.stderr.replace("\n", " ")
    assert "--unconfined" in r.stderr.replace("\n", " ")
    doc = json.loads(r.stdout)
    assert doc["status"] == "refused" and needle in doc["exit"]["reason"]
    assert not (workdir / "ran").exists()  # nothing ran
    # Asked for explicitly, it runs, and every record says so loudly.
    r = perfscout("profile", "--json", "--unconfined", "--", sys.executable, "touch.py",
                  cwd=workdir, home=perfscout_home)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "ok" and (workdir / "ran").exists()
    assert doc["confinement"]["mode"] == "unconfined"
    assert doc["confinement"]["warning"].startswith("UNCONFINED")
    assert doc["warnings"] == [doc["confinement"]["warning"]]
    assert "UNCONFINED" in r.stderr
    stored = json.loads((Path(doc["run_dir"]) / "profile.json").read_text())
    assert stored["confinement"]["mode"] == "unconfined"
