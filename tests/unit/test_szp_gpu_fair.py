"""benchmarks/gpu_fair.py's summary on the CPU: which cuSZp row is "best" and "fastest", the
fair decompress (zeroed once) against the per-call-memset figure, and the Markdown line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gpu_fair as GF  # noqa: E402

NB = 2**30


def _row(codec: str, **kw) -> dict:
    r = {"codec": codec, "field": "f", "rel": 1e-3, "n_beyond": 0, **kw}
    GF._gbps(r, NB, 4000.0)
    return r


def _rows() -> list[dict]:
    return [
        _row("szp-gpu", block_ndim="auto", szp_mode="abs", chosen_block_ndim=2, ratio=9.5, compress_e2e_s=0.5e-3,
             decompress_e2e_s=0.8e-3),
        _row("szp-gpu", block_ndim="auto", szp_mode="rel", chosen_block_ndim=2, ratio=10.0, compress_e2e_s=1e-3,
             decompress_e2e_s=0.8e-3, compress_kernel_s=0.7e-3, decompress_kernel_s=0.6e-3),
        _row("szp-gpu", block_ndim=2, szp_mode="rel", chosen_block_ndim=2, ratio=10.0, compress_e2e_s=0.9e-3, decompress_e2e_s=0.8e-3),
        _row("szp-gpu", block_ndim=1, szp_mode="rel", chosen_block_ndim=1, ratio=11.0, compress_e2e_s=0.9e-3, decompress_e2e_s=0.8e-3),
        _row("cuszp", encoding="fixed", dim=1, ratio=3.0, compress_e2e_s=1.0e-3, decompress_e2e_s=0.9e-3,
             decompress_memset_e2e_s=1.2e-3, compress_kernel_s=0.8e-3, decompress_kernel_s=0.5e-3),
        _row("cuszp", encoding="outlier", dim=2, ratio=9.0, compress_e2e_s=2.0e-3, decompress_e2e_s=1.6e-3,
             decompress_memset_e2e_s=1.9e-3, compress_kernel_s=1.5e-3, decompress_kernel_s=1.2e-3, n_beyond=5),
        _row("cuszp", encoding="plain", dim=2, ratio=8.0, compress_e2e_s=1.25e-3, decompress_e2e_s=1.1e-3,
             decompress_memset_e2e_s=1.4e-3),
        {"codec": "cuszp", "field": "f", "rel": 1e-3, "config": "('plain', 3)", "error": "InputError: no"},
    ]


def test_best_and_fastest_cuszp_rows_are_picked_over_every_mode():
    s = GF.pair_summary(_rows())
    assert s["szp_auto"]["block_ndim"] == "auto" and s["szp_auto"]["szp_mode"] == "rel"  # what a REL request runs
    assert s["szp_given"]["block_ndim"] == 2 and s["szp_auto_abs"]["ratio"] == 9.5
    assert (s["cuszp_best_cr"]["encoding"], s["cuszp_best_cr"]["dim"]) == ("outlier", 2)
    assert s["cuszp_best_cr_within_bound"]["encoding"] == "plain"  # the outlier row went beyond its bound
    assert s["cuszp_fastest_compress_e2e_GBps"]["encoding"] == "fixed"
    assert s["cuszp_fastest_decompress_e2e_GBps"]["encoding"] == "fixed"
    assert s["cr_over_cuszp_best"] == pytest.approx(10 / 9)
    assert s["compress_auto_e2e_over_cuszp_fastest"] == pytest.approx(1.0)
    assert s["compress_given_e2e_over_cuszp_fastest"] == pytest.approx(1.0 / 0.9)
    assert s["decompress_e2e_over_cuszp_fastest"] == pytest.approx(0.9 / 0.8)
    assert s["decompress_kernel_over_cuszp_fastest"] == pytest.approx(0.5 / 0.6)


def test_gbps_and_copy_fractions_count_uncompressed_bytes_and_skip_the_memset_alone():
    r = _row("cuszp", encoding="plain", dim=1, ratio=2.0, decompress_e2e_s=0.5e-3, zero_output_s=0.25e-3)
    assert r["decompress_e2e_GBps"] == pytest.approx(NB / 0.5e-3 / 1e9)
    assert r["decompress_e2e_x_copy"] == pytest.approx(r["decompress_e2e_GBps"] / 4000.0)
    assert "zero_output_GBps" not in r


def test_summary_line_names_the_modes_and_says_incomplete_pairs():
    doc = {"fields": {"f": {"copy_GBps": 4000.0}, "g": {"copy_GBps": 4000.0}}, "rows": _rows() + [
        {"codec": "szp-gpu", "field": "g", "rel": 1e-2, "block_ndim": "auto", "error": "RuntimeError: x"}]}
    text = GF.summary(doc)
    lines = text.splitlines()
    assert len(lines) == 4
    assert "| f | 1e-03 | 2-D | 10.00 (9.00, outlier 2-D) | 1.111 | 8.00 (plain 2-D) |" in lines[2]
    assert "(1074, fixed 1-D)" in lines[2]  # cuSZp's fastest compress, with its mode
    assert "5 / 1 of 3" not in lines[2] and lines[2].endswith("| 0 / 1 of 3 |")
    assert lines[3].startswith("| g | 1e-02 | incomplete:") and "RuntimeError: x" in lines[3]
