"""A sweep on a real single-node Slurm cluster through dask-jobqueue's SLURMCluster.

The fixture starts munged, slurmctld and slurmd on this machine (``.ci/slurm-local.sh``,
as root; Debian's ``slurm-wlm`` and ``munge``), with everything in a temporary directory,
and stops them at the end. The sweep's workers are real batch jobs (``sbatch``); the table
must equal the local executor's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("dask_jobqueue", reason="pip install 'perfscout[dask]'")

from perfscout.api_sweep import sweep  # noqa: E402
from perfscout.tools.results_store import ResultStore  # noqa: E402
from tests.servers import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / ".ci" / "slurm-local.sh"
VOLATILE = ["run_id", "started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s"]

SPEC = """\
name: onslurm
repeats: 1
datasets:
  - synthetic: "grf:16,32,32"
codecs: [sz3, zfp]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-4]
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.skip("a local Slurm cluster needs root (slurmd runs jobs as their user)")
    if not (shutil.which("sbatch") and Path("/usr/sbin/slurmctld").exists() and Path("/usr/sbin/munged").exists()):
        pytest.skip("Slurm is not installed (apt-get install slurm-wlm munge; .ci/system-deps.sh does it)")
    base = tmp_path_factory.mktemp("slurm")
    res = subprocess.run([str(HELPER), "start", str(base), str(free_port()), str(free_port())],
                         capture_output=True, text=True, timeout=120)
    if res.returncode == 3:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stderr
    conf = res.stdout.strip().splitlines()[-1]
    try:
        yield base, dict(os.environ, SLURM_CONF=conf, PYTHONPATH=str(ROOT))
    finally:
        subprocess.run([str(HELPER), "stop", str(base)], capture_output=True, timeout=60)


# slow: starts a real local Slurm cluster (slurmctld, slurmd, munged) and runs 8 batch jobs (10-20 s)
@pytest.mark.slow
def test_sweep_on_slurm_equals_the_local_executor(tmp_path: Path, slurm) -> None:
    base, env = slurm
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    reference = sweep(spec, out=tmp_path / "ref", progress=False, jobs=2)
    config = tmp_path / "cluster.yaml"
    config.write_text(f"cores: 1\nmemory: 1GiB\nwalltime: '00:10:00'\njobs: 2\nscheduler_host: 127.0.0.1\n"
                      f"log_directory: {base / 'joblogs'}\n")
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                          "--out", str(tmp_path / "run"), "--cluster", "slurm", "--cluster-config", str(config),
                          "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --mem=1G" in res.stderr and "#SBATCH -t 00:10:00" in res.stderr  # the job script, shown
    doc = json.loads(res.stdout)
    assert doc["ran"] == 8 and doc["statuses"] == {"ok": 8}
    with ResultStore(tmp_path / "run" / "results.sqlite") as store:
        df, att = store.results(), store.attempts()
    assert df["task_key"].is_unique and len(df) == len(reference)
    pd.testing.assert_frame_equal(df.drop(columns=VOLATILE).sort_values("task_key").reset_index(drop=True),
                                  reference.drop(columns=VOLATILE).sort_values("task_key").reset_index(drop=True))
    jobs = {json.loads(d)["batch_job"] for d in att["detail"]}
    assert "" not in jobs and len(att) == 8  # every task ran inside a Slurm batch job
    # the driver cancelled its jobs on the way out
    queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30)
    assert queued.returncode == 0 and queued.stdout.strip() == "", queued.stdout


def test_gpu_jobs_get_one_pinned_worker_per_gpu_in_the_job_script() -> None:
    """The job script for a GPU cluster (no GPU here, so it is inspected, not run)."""
    from perfscout.sweep.dask_executor import ClusterConfig, jobqueue_cluster

    cfg = ClusterConfig(cores=8, memory="64GiB", walltime="02:00:00", account="proj42", queue="gpu",
                        gpus_per_job=2, scheduler_host="127.0.0.1")
    for kind, directive in (("slurm", "#SBATCH --gres=gpu:2"), ("pbs", "#PBS -l ngpus=2")):
        with jobqueue_cluster(kind, cfg, retries=2) as cluster:
            script = cluster.job_script()
        assert directive in script, script
        assert "-m perfscout.sweep.gpu_workers" in script and "--gpus 2" in script
        assert "proj42" in script and "02:00:00" in script
