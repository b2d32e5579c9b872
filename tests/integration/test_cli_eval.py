"""`perfscout eval`, `perfscout decompress` and `perfscout demo` from the outside: real
subprocesses (exit codes, stdout/stderr separation, no tracebacks) and typer's
CliRunner for the many bad-input cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.datasets import synthetic
from perfscout.state.records import RESULT_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from perfscout.cli import main; main(sys.argv[1:])"


def perfscout(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def raw_field(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    x = synthetic("grf", (24, 32, 40), dtype="f32", seed=5).array
    path = tmp_path_factory.mktemp("data") / "grf.f32"
    x.astype("<f4").tofile(path)
    return path, x


runner = CliRunner()


def invoke(*args: str):  # noqa: ANN201 - click's Result
    return runner.invoke(app, list(args))


# -- subprocess: the real entry point ----------------------------------------------------
def test_json_is_one_document_on_stdout(raw_field: tuple[Path, np.ndarray]) -> None:
    path, x = raw_field
    proc = perfscout("eval", "--data", str(path), "--shape", "24,32,40", "--dtype", "f32",
                     "--codec", "sz3", "--mode", "rel", "--bound", "1e-3", "--repeats", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert tuple(record) == RESULT_COLUMNS
    assert record["status"] == "ok" and record["bound_ok"] is True and record["repeats"] == 2
    assert record["nbytes"] == x.nbytes and record["shape"] == "24,32,40" and record["dataset"] == "grf.f32"
    R = float(x.max()) - float(x.min())
    assert record["abs_bound"] == pytest.approx(1e-3 * R) and record["max_abs_err"] <= record["abs_bound"]
    assert "Traceback" not in proc.stderr


def test_human_table_and_bad_input_exit_2(raw_field: tuple[Path, np.ndarray]) -> None:
    path, _ = raw_field
    ok = perfscout("eval", "--data", str(path), "--shape", "24,32,40", "--dtype", "f32",
                   "--codec", "zfp", "--mode", "abs", "--bound", "0.01")
    assert ok.returncode == 0 and "bound_ok" in ok.stdout and "at index" in ok.stdout
    bad = perfscout("eval", "--data", str(path), "--shape", "24,32,41", "--dtype", "f32",
                    "--codec", "sz3", "--mode", "rel", "--bound", "1e-3")
    assert bad.returncode == 2 and bad.stdout == ""
    # rich wraps the message at 80 columns, where depends on the path's length (xdist's is longer)
    assert "expected 125952 bytes" in " ".join(bad.stderr.split()) and "Traceback" not in bad.stderr


def test_nan_input_refused_then_passed_through(tmp_path: Path) -> None:
    x = synthetic("smooth", (16, 16), dtype="f64", seed=2).array.copy()
    x[3, 5] = np.nan
    path = tmp_path / "nan.f64"
    x.tofile(path)
    args = ("eval", "--data", str(path), "--shape", "16,16", "--dtype", "f64", "--codec", "sz2",
            "--mode", "rel", "--bound", "1e-3", "--json")
    refused = perfscout(*args)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "1 non-finite" in refused.stderr and "--nonfinite passthrough" in refused.stderr
    passed = perfscout(*args, "--nonfinite", "passthrough")
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["bound_ok"] is True


def test_save_and_decompress_round_trip_and_corruption(raw_field: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, x = raw_field
    packed, out = tmp_path / "x.pscz", tmp_path / "x.raw"
    proc = perfscout("eval", "--data", str(path), "--shape", "24,32,40", "--dtype", "f32", "--codec", "sz2",
                     "--mode", "abs", "--bound", "1e-2", "--json", "--save-compressed", str(packed))
    assert proc.returncode == 0 and packed.is_file(), proc.stderr
    dec = perfscout("decompress", str(packed), "--out", str(out), "--json")
    assert dec.returncode == 0, dec.stderr
    assert json.loads(dec.stdout)["shape"] == [24, 32, 40]
    y = np.fromfile(out, dtype="<f4").reshape(x.shape)
    assert np.abs(y.astype(np.float64) - x).max() <= 1e-2
    blob = packed.read_bytes()
    for name, broken in (("cut.pscz", blob[: len(blob) // 2]), ("flip.pscz", blob[:-40] + bytes([blob[-40] ^ 0xFF]) + blob[-39:])):
        (tmp_path / name).write_bytes(broken)
        proc = perfscout("decompress", str(tmp_path / name), "--out", str(tmp_path / "never.raw"))
        assert proc.returncode == 2 and "corrupt or truncated" in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "never.raw").exists()


def test_violated_bound_exits_1_with_the_record(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500)).astype(np.float32)
    np.save(tmp_path / "wild.npy", x)
    proc = perfscout("eval", "--data", str(tmp_path / "wild.npy"), "--codec", "zfp", "--mode", "abs",
                     "--bound", "1e-3", "--json")
    assert proc.returncode == 1
    record = json.loads(proc.stdout)
    assert record["status"] == "bound_violated" and record["bound_ok"] is False and "at index" in record["error"]


# slow: the whole demo twice through the real entry point (10-30 s); the fast loop keeps the
# demo through the agent in-process (test_demo_falls_back_to_a_synthetic_field_and_says_so).
@pytest.mark.slow
def test_demo_prints_the_table(perfscout_home: Path) -> None:
    proc = perfscout("demo", "--repeats", "1")  # the agent on the embedded default
    assert proc.returncode == 0, proc.stderr
    for codec in ("sz3", "sz2", "sz3-h5", "zfp"):
        assert codec in proc.stdout
    assert "note: dataset vorticity.512_512" in proc.stdout
    assert "bound_ok" in proc.stdout and "12 evaluations" in proc.stdout
    assert "agent report:" in proc.stdout and list(perfscout_home.glob("runs/*/report.md"))
    as_json = perfscout("demo", "--repeats", "1", "--json")
    rows = json.loads(as_json.stdout)
    assert len(rows) == 12 and all(r["mode"] == "rel" for r in rows)
    assert "note:" in as_json.stderr


# -- CliRunner: every bad input is exit 2 with a message ---------------------------------
@pytest.mark.parametrize(
    "args,message",
    [
        (["--shape", "24,32,41", "--dtype", "f32"], "bytes"),
        (["--shape", "24,32,40", "--dtype", "f16"], "unknown dtype 'f16'"),
        (["--shape", "24,x,40", "--dtype", "f32"], "bad shape"),
        (["--shape", "24,32,0", "--dtype", "f32"], ">= 1"),
        (["--dtype", "f32"], "--data needs --shape"),
        (["--shape", "24,32,40", "--dtype", "f32", "--endian", "middle"], "byte order"),
        (["--shape", "24,32,40", "--dtype", "f32", "--bound", "0"], "finite number > 0"),
        (["--shape", "24,32,40", "--dtype", "f32", "--bound", "-3"], "finite number > 0"),
        (["--shape", "24,32,40", "--dtype", "f32", "--bound", "nan"], "finite number > 0"),
        (["--shape", "24,32,40", "--dtype", "f32", "--bound", "inf"], "finite number > 0"),
        (["--shape", "24,32,40", "--dtype", "f32", "--codec", "lz77"], "unknown codec 'lz77'"),
        (["--shape", "24,32,40", "--dtype", "f32", "--mode", "l2"], "unknown mode 'l2'"),
        (["--shape", "24,32,40", "--dtype", "f32", "--mode", "pw_rel", "--codec", "sz3"], "does not support mode 'pw_rel'"),
        (["--shape", "24,32,40", "--dtype", "f32", "--mode", "fixed_rate", "--bound", "8"], "does not support mode 'fixed_rate'"),
        (["--shape", "24,32,40", "--dtype", "f32", "--device", "cuda"], "runs on cpu, not cuda"),
        (["--shape", "24,32,40", "--dtype", "f32", "--repeats", "0"], "repeats"),
        (["--shape", "24,32,40", "--dtype", "f32", "--nonfinite", "drop"], "nonfinite policy"),
        (["--shape", "24,32,40", "--dtype", "f32", "--option", "level"], "KEY=VALUE"),
        (["--shape", "24,32,40", "--dtype", "f32", "--option", "level=3"], "unknown option"),
        (["--shape", "24,32,40", "--dtype", "f32", "--synthetic", "grf:8,8"], "exactly one of"),
    ],
)
def test_bad_input_exit_2(raw_field: tuple[Path, np.ndarray], args: list[str], message: str) -> None:
    path, _ = raw_field
    base = {"--codec": "sz3", "--mode": "rel", "--bound": "1e-3"}
    for key, value in zip(args[::2], args[1::2]):
        base.pop(key, None)
    full = ["eval", "--data", str(path), *args, *[t for kv in base.items() for t in kv], "--json"]
    result = invoke(*full)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split()), result.stderr
    assert result.stdout == "" and result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--data", "/nonexistent/file.f32", "--shape", "4", "--dtype", "f32"], "not found"),
        ([], "exactly one of"),
        (["--synthetic", "nosuch:8,8"], "nosuch"),
        (["--synthetic", "grf:8,,8"], "shape"),
        (["--dataset", "no.such.dataset"], "no.such.dataset"),
    ],
)
def test_bad_sources_exit_2(args: list[str], message: str) -> None:
    result = invoke("eval", *args, "--codec", "sz3", "--mode", "rel", "--bound", "1e-3")
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())


def test_empty_file_and_zero_d_npy(tmp_path: Path) -> None:
    empty = tmp_path / "empty.f32"
    empty.write_bytes(b"")
    result = invoke("eval", "--data", str(empty), "--shape", "4", "--dtype", "f32", "--codec", "sz3",
                    "--mode", "abs", "--bound", "1")
    assert result.exit_code == 2 and "0 bytes" in " ".join(result.stderr.split())
    np.save(tmp_path / "scalar.npy", np.float32(3.0))
    result = invoke("eval", "--data", str(tmp_path / "scalar.npy"), "--codec", "sz3", "--mode", "abs", "--bound", "1")
    assert result.exit_code == 2 and "0-d" in result.stderr
    np.save(tmp_path / "empty.npy", np.zeros((0, 3), dtype=np.float32))
    result = invoke("eval", "--data", str(tmp_path / "empty.npy"), "--codec", "sz3", "--mode", "abs", "--bound", "1")
    assert result.exit_code == 2 and "empty" in result.stderr


def test_inf_input_refused(tmp_path: Path) -> None:
    x = np.ones((8, 8), dtype=np.float32)
    x[7, 7] = np.inf
    np.save(tmp_path / "inf.npy", x)
    result = invoke("eval", "--data", str(tmp_path / "inf.npy"), "--codec", "zfp", "--mode", "rel", "--bound", "1e-2")
    assert result.exit_code == 2 and "(7, 7)" in result.stderr


def test_decompress_rejects_garbage(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pscz"
    junk.write_bytes(b"this is not a perfscout container at all")
    result = invoke("decompress", str(junk), "--out", str(tmp_path / "o.raw"))
    assert result.exit_code == 2 and "bad magic" in result.stderr
    tiny = tmp_path / "tiny.pscz"
    tiny.write_bytes(b"PSCZ")
    result = invoke("decompress", str(tiny), "--out", str(tmp_path / "o.raw"))
    assert result.exit_code == 2 and "truncated" in result.stderr
    result = invoke("decompress", str(tmp_path / "missing.pscz"), "--out", str(tmp_path / "o.raw"))
    assert result.exit_code == 2 and "not found" in result.stderr


def test_synthetic_and_dataset_sources() -> None:
    result = invoke("eval", "--synthetic", "smooth:16,16,16", "--codec", "sz3-h5", "--mode", "psnr",
                    "--bound", "70", "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["psnr"] >= 70 and record["shape"] == "16,16,16" and record["bound_ok"] is True


def test_codec_option_is_applied() -> None:
    result = invoke("eval", "--synthetic", "grf:32,32", "--codec", "sz3", "--mode", "ratio", "--bound", "5",
                    "--option", "algorithm=lorenzo_reg", "--json")
    assert result.exit_code == 0, result.stderr
    assert abs(json.loads(result.stdout)["ratio"] - 5) <= 0.25


def test_passthrough_survives_the_container(tmp_path: Path) -> None:
    x = synthetic("grf", (20, 30), dtype="f32", seed=9).array.copy()
    x[0, 0], x[5, 7], x[19, 29] = np.nan, np.inf, -np.inf
    np.save(tmp_path / "holes.npy", x)
    packed, out = tmp_path / "holes.pscz", tmp_path / "holes.raw"
    result = invoke("eval", "--data", str(tmp_path / "holes.npy"), "--codec", "sz3", "--mode", "rel",
                    "--bound", "1e-3", "--nonfinite", "passthrough", "--save-compressed", str(packed), "--json")
    assert result.exit_code == 0, result.stderr
    result = invoke("decompress", str(packed), "--out", str(out), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["nonfinite"] == 3
    y = np.fromfile(out, dtype="<f4").reshape(x.shape)
    bad = ~np.isfinite(x)
    assert np.array_equal(y[bad].view(np.uint32), x[bad].view(np.uint32))
    R = float(x[~bad].max()) - float(x[~bad].min())
    assert np.abs(y[~bad].astype(np.float64) - x[~bad]).max() <= 1e-3 * R


def test_messages_with_brackets_survive_rich(tmp_path: Path) -> None:
    # rich reads "[...]" as markup; an error quoting a list must still print in full.
    result = invoke("eval", "--synthetic", "grf:8,8", "--codec", "sz3", "--mode", "abs", "--bound", "1",
                    "--option", "algorithm=[bold]")
    assert result.exit_code == 2 and "'[bold]'" in result.stderr


def test_demo_falls_back_to_a_synthetic_field_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          builtin_codecs_only: None) -> None:
    monkeypatch.setenv("PERFSCOUT_SHARED_DATA", str(tmp_path))  # an empty directory
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    result = invoke("demo", "--repeats", "1")  # through the agent
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "vorticity.512_512 is not available here" in out
    assert "using the synthetic fallback synthetic:grf:512,512" in out
    assert "12 evaluations" in out and "bound_violated" not in out
    direct = invoke("demo", "--repeats", "1", "--direct")
    assert direct.exit_code == 0, direct.stderr
    out = " ".join(direct.stdout.split())
    assert "field: synthetic grf field 512x512 f32, seed 0 (vorticity.512_512 not available" in out


def test_failed_save_keeps_the_measurement(tmp_path: Path) -> None:
    result = invoke("eval", "--synthetic", "grf:16,16", "--codec", "zfp", "--mode", "abs", "--bound", "0.1",
                    "--json", "--save-compressed", str(tmp_path / "no" / "such" / "dir" / "x.pscz"))
    assert result.exit_code == 2 and "cannot write the compressed stream" in result.stderr
    assert json.loads(result.stdout)["status"] == "ok"


# -- issue #12: no tracebacks, strict JSON, forged containers, a full disk ------------------
def _strict_json(text: str) -> dict:
    """json.loads that refuses NaN/Infinity (what a strict parser does)."""
    def refuse(name: str) -> float:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_option_of_the_wrong_type_is_a_clear_error() -> None:
    proc = perfscout("eval", "--synthetic", "grf:16,16", "--codec", "szp-gpu", "--device", "cuda",
                     "--mode", "abs", "--bound", "1e-3", "--option", "block_ndim=abc")
    assert proc.returncode == 2 and "block_ndim must be 1, 2 or 3, got 'abc'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_huge_synthetic_shape_is_refused_before_allocating() -> None:
    proc = perfscout("eval", "--synthetic", "grf:100000,100000,100000", "--codec", "sz3", "--mode", "abs",
                     "--bound", "1e-3")
    assert proc.returncode == 2 and "1e+15 values" in proc.stderr and "use a smaller shape" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


def test_json_is_strict_and_says_why_a_value_is_null(tmp_path: Path) -> None:
    # abs 1e-30 on a float32 field: a lossless reconstruction, so PSNR and SNR are +inf.
    proc = perfscout("eval", "--synthetic", "grf:16,16", "--codec", "sz3", "--mode", "abs", "--bound", "1e-30",
                     "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Infinity" not in proc.stdout and "NaN" not in proc.stdout
    record = _strict_json(proc.stdout)
    assert record["psnr"] is None and record["nonfinite_fields"]["psnr"] == "inf"
    assert record["max_abs_err"] == 0.0


def test_rel_on_an_overflowing_range_never_claims_ok_with_an_infinite_bound(tmp_path: Path) -> None:
    x = np.random.default_rng(0).standard_normal(1000) * 1e308
    x[:2] = (1.7e308, -1.7e308)
    path = tmp_path / "huge.f64"
    np.clip(x, -1.7e308, 1.7e308).astype("<f8").tofile(path)
    for codec in ("sz3", "sz2", "zfp"):
        proc = perfscout("eval", "--data", str(path), "--shape", "1000", "--dtype", "f64", "--codec", codec,
                         "--mode", "rel", "--bound", "1e-3", "--json", "--repeats", "1")
        assert proc.returncode in (0, 1), proc.stderr
        record = _strict_json(proc.stdout)
        assert record["abs_bound"] == pytest.approx(3.4e305, rel=1e-12)  # 1e-3 x (1.7e308 - -1.7e308)
        if record["status"] == "ok":
            assert record["bound_ok"] is True and record["max_abs_err"] <= record["abs_bound"]
        else:
            assert record["bound_ok"] is not True


def _forge_container(packed: Path, **changes: object) -> None:
    import struct
    import zlib

    buf = packed.read_bytes()
    magic, version, head_len = struct.unpack_from("<4sHI", buf)
    start = struct.calcsize("<4sHI")
    header = json.loads(buf[start:start + head_len])
    header.update(changes)
    head = json.dumps(header).encode()
    body = struct.pack("<4sHI", magic, version, len(head)) + head + buf[start + head_len:-4]
    packed.write_bytes(body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))  # CRC recomputed


@pytest.mark.parametrize("codec", ["sz3", "sz2", "sz3-h5", "zfp"])
def test_forged_containers_are_refused_with_exit_2(codec: str, tmp_path: Path) -> None:
    packed = tmp_path / "x.pscz"
    assert invoke("eval", "--synthetic", "grf:24,40", "--codec", codec, "--mode", "abs", "--bound", "1e-3",
                  "--save-compressed", str(packed)).exit_code == 0
    out = tmp_path / "x.raw"
    other = {"sz3": "zfp", "sz2": "sz3-h5", "sz3-h5": "sz2", "zfp": "sz3"}[codec]
    for changes in ({"shape": [48, 40]}, {"shape": [24, 41]}, {"codec_id": other}, {"dtype": "float64"}):
        if codec == "sz3" and "dtype" in changes:
            continue  # pysz streams do not record their element type
        forged = tmp_path / "forged.pscz"
        forged.write_bytes(packed.read_bytes())
        _forge_container(forged, **changes)
        proc = perfscout("decompress", str(forged), "--out", str(out))
        assert proc.returncode == 2, (changes, proc.stderr)
        assert "Traceback" not in proc.stderr and not out.exists()
    assert perfscout("decompress", str(packed), "--out", str(out)).returncode == 0 and out.exists()


def _limit_file_size(limit: int):  # noqa: ANN202 - preexec_fn
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_while_saving_loses_nothing(tmp_path: Path) -> None:
    # RLIMIT_FSIZE stands in for a full disk: writes past 4 KiB fail (SIGXFSZ is ignored).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    packed = tmp_path / "x.pscz"
    args = [sys.executable, "-c", ENTRY, "eval", "--synthetic", "grf:64,64", "--codec", "zfp", "--mode", "abs",
            "--bound", "1e-6", "--json", "--save-compressed", str(packed)]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_file_size(4096))
    assert proc.returncode == 2 and "cannot write the compressed stream" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert _strict_json(proc.stdout)["status"] == "ok"  # the measurement was printed first
    assert list(tmp_path.iterdir()) == []  # neither a truncated file nor a temp file is left
    # decompress into a "full disk": a clear error and no partial output
    assert invoke("eval", "--synthetic", "grf:64,64", "--codec", "zfp", "--mode", "abs", "--bound", "1e-6",
                  "--save-compressed", str(packed)).exit_code == 0
    out = tmp_path / "x.raw"
    proc = subprocess.run([sys.executable, "-c", ENTRY, "decompress", str(packed), "--out", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_file_size(packed.stat().st_size + 1024))
    assert proc.returncode == 2 and "cannot read or write a file" in proc.stderr, proc.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["x.pscz"]
