"""The ncu parser on real Nsight Compute output from an H200 (tests/fixtures/ncu/README.md)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from perfscout.errors import InputError
from perfscout.tools.ncu import NcuOptions, filter_args, import_report, profile_args
from perfscout.tools.ncu_parse import (
    attach_rules,
    duration_digest,
    kernel_duration_s,
    load_details_csv,
    load_raw_csv,
    normalise_unit,
    parse_details_csv,
    parse_number,
    parse_raw_csv,
)
from perfscout.tools.sandbox import Sandbox

FX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
CUPY_RAW = FX / "h200_cupy_kernels_raw.csv"  # direct run: banners + program output first
CUPY_IMPORT_RAW = FX / "h200_cupy_kernels_import_raw.csv"  # from ncu --import of a .ncu-rep
CUPY_DETAILS = FX / "h200_cupy_kernels_details.csv"
TRANSPOSE_RAW = FX / "h200_transpose_raw.csv"  # -k regex:transpose -s 1 -c 2
TRANSPOSE_DETAILS = FX / "h200_transpose_details.csv"


def _csv_cell(path: Path, kernel_id: int, column: str) -> tuple[str, str]:
    """(text, unit) of one cell, read with the csv module as an independent check."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
    rows = list(csv.reader(lines[start:]))
    header, units = rows[0], rows[1]
    row = next(r for r in rows[2:] if r[0] == str(kernel_id))
    i = header.index(column)
    return row[i], units[i]


def test_direct_run_with_banner_and_program_output() -> None:
    rep = load_raw_csv(CUPY_RAW)
    assert len(rep.kernels) == 18
    assert [k.id for k in rep.kernels] == list(range(18))
    assert any(ln.startswith("==PROF== Connected") for ln in rep.banner)
    assert "ok n=16777216" in rep.banner  # the profiled program's own stdout
    assert any("unmodified GPU clocks" in w for w in rep.warnings)
    names = [k.name for k in rep.kernels]
    assert names.count("vec_add_f4") == 3 and names.count("strided_gather") == 2


def test_kernel_identity() -> None:
    rep = load_raw_csv(CUPY_RAW)
    g = next(k for k in rep.kernels if k.name == "strided_gather")
    assert g.grid == (65536, 1, 1) and g.block == (256, 1, 1)
    assert g.device == "NVIDIA H200" and g.device_index == 0
    assert g.compute_capability == "9.0"
    assert g.process.startswith("python3")
    t = load_raw_csv(TRANSPOSE_RAW).kernels
    assert [k.name for k in t] == ["transpose_naive(const float *, float *, int)"] * 2
    assert t[0].grid == (128, 128, 1) and t[0].block == (32, 32, 1)


def test_units_row_and_thousands_separators_are_normalised() -> None:
    k = load_raw_csv(TRANSPOSE_RAW).kernels[0]
    text, unit = _csv_cell(TRANSPOSE_RAW, 0, "gpu__time_duration.sum")
    assert unit == "ns" and "," in text
    m = k.metrics["gpu__time_duration.sum"]
    assert m.unit == "second" and m.raw_unit == "ns" and m.raw == text
    assert m.value == pytest.approx(float(text.replace(",", "")) * 1e-9)
    bw = k.metrics["dram__bytes.sum.per_second"]
    assert bw.unit == "byte/second" and bw.value == pytest.approx(parse_number(bw.raw))
    clk = k.metrics["device__attribute_clock_rate"]  # no unit in the units row
    assert clk.value == 1_980_000 and clk.unit == ""
    assert k.metrics["device__attribute_l2_cache_size"].value == 62_914_560


def test_scaled_units_in_the_real_files() -> None:
    """``ncu --import --csv`` auto-scales units (Gbyte/s, Mbyte, Ghz, us); a direct
    ``--csv`` run of the same program printed base units. Normalised, they agree."""
    imp, direct = load_raw_csv(CUPY_IMPORT_RAW), load_raw_csv(CUPY_RAW)
    factors = {"Gbyte/s": 1e9, "Tbyte/s": 1e12, "Mbyte": 1e6, "Kbyte": 1e3, "Gbyte": 1e9,
               "Ghz": 1e9, "Mhz": 1e6, "us": 1e-6}
    scaled = {col: u for col, u in imp.units.items() if u in factors}
    assert {"Gbyte/s", "Mbyte", "Ghz", "us"} <= set(scaled.values())
    checked = 0
    for col, u in scaled.items():
        for ki, d in zip(imp.kernels, direct.kernels):
            m = ki.metrics.get(col)
            if m is None or not isinstance(m.value, float):
                continue
            assert m.value == pytest.approx(parse_number(m.raw) * factors[u]), col
            assert m.unit == direct.units.get(col, m.unit) or m.unit == normalise_unit(u).unit
            # byte counts of the same kernel on the same data barely move between runs
            if (u in ("Mbyte", "Gbyte") and col == "dram__bytes_read.sum"
                        and ki.name in ("vec_add_f4", "strided_gather")):
                assert m.value == pytest.approx(d.value(col), rel=0.05), (col, ki.name)
                checked += 1
    assert checked > 0


def test_empty_cells_are_absent_not_zero() -> None:
    rep = load_raw_csv(CUPY_RAW)
    k = rep.kernels[0]
    lines = CUPY_RAW.read_text().splitlines()
    rows = list(csv.reader(lines[next(i for i, ln in enumerate(lines) if ln.startswith('"ID",')):]))
    empty = [c for c, cell in zip(rows[0][11:], rows[2][11:]) if cell == ""]
    assert empty, "the fixture has empty (PM sampling / not collected) cells"
    for c in empty:
        assert c not in k.metrics
    assert k.value(*empty) is None
    assert k.value(empty[0], "gpu__time_duration.sum") == kernel_duration_s(k)


def test_text_metrics_stay_text() -> None:
    k = load_raw_csv(CUPY_RAW).kernels[2]
    assert k.metrics["device__attribute_display_name"].value == "NVIDIA H200"
    assert k.value("device__attribute_display_name") is None  # value() wants numbers


def test_direct_and_imported_raw_pages_agree() -> None:
    """A direct run and an ``--import`` of a report of the same program: same kernels, same metrics."""
    a, b = load_raw_csv(CUPY_RAW), load_raw_csv(CUPY_IMPORT_RAW)
    assert [k.name for k in a.kernels] == [k.name for k in b.kernels]
    assert set(a.kernels[2].metrics) == set(b.kernels[2].metrics)
    # device attributes do not depend on the run
    assert a.kernels[2].value("device__attribute_multiprocessor_count") == 132
    assert b.kernels[2].value("device__attribute_multiprocessor_count") == 132


def test_strided_kernel_reads_more_sectors_per_request_than_the_float4_one() -> None:
    """The fixture programs differ the way they were written to (a sanity check of the data)."""
    rep = load_raw_csv(CUPY_RAW)
    vec = next(k for k in rep.kernels if k.name == "vec_add_f4")
    gat = next(k for k in rep.kernels if k.name == "strided_gather")
    name = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"
    assert vec.value(name) == 32.0  # float4 loads use every byte of each 32-byte sector
    assert gat.value(name) == 4.0  # one float of each sector fetched


def test_duration_digest() -> None:
    rep = load_raw_csv(CUPY_RAW)
    d = duration_digest(rep.kernels, top=3)
    assert len(d) == 3
    assert d[0]["total_s"] >= d[1]["total_s"] >= d[2]["total_s"]
    total = sum(kernel_duration_s(k) for k in rep.kernels)
    assert d[0]["share_pct"] == pytest.approx(100 * d[0]["total_s"] / total)
    vec = next(g for g in duration_digest(rep.kernels, top=50) if g["name"] == "vec_add_f4")
    assert vec["launches"] == 3 and vec["ids"] == [2, 4, 13]


def test_details_rules_are_ncu_says_evidence() -> None:
    rules = load_details_csv(CUPY_DETAILS)
    assert {r.type for r in rules} <= {"OPT", "INF", "WRN", "ERROR"}
    assert {"OPT", "INF"} <= {r.type for r in rules}
    l2 = [r for r in rules if r.rule == "MemoryL2Compression"]
    assert l2 and all(r.low_value and r.low_value_reason for r in l2)
    assert not any(r.low_value for r in rules if r.rule != "MemoryL2Compression")
    unco = [r for r in rules if r.rule == "UncoalescedGlobalAccess"]
    assert unco and all(r.kernel_name for r in unco)
    assert any(r.kernel_name == "strided_gather" for r in unco)
    opt = next(r for r in rules if r.type == "OPT" and r.estimated_speedup_pct is not None)
    assert opt.speedup_type in ("local", "global") and opt.message


def test_rules_attach_only_to_matching_launches() -> None:
    rep = load_raw_csv(CUPY_IMPORT_RAW)
    rules = load_details_csv(CUPY_DETAILS)
    assert attach_rules(rep.kernels, rules) == len(rules)
    g = next(k for k in rep.kernels if k.name == "strided_gather")
    assert any(r["rule"] == "UncoalescedGlobalAccess" for r in g.ncu_rules)
    # transpose raw (launches 1-2 of the program) vs details of launch 0: names match, ids 0 match
    t = load_raw_csv(TRANSPOSE_RAW)
    t_rules = load_details_csv(TRANSPOSE_DETAILS)
    foreign = [r.model_copy(update={"kernel_name": "another_kernel"}) for r in t_rules]
    assert attach_rules(t.kernels, foreign) == 0
    assert attach_rules(t.kernels, t_rules) == len(t_rules) > 0


def test_rule_message_spanning_lines() -> None:
    """A quoted field with line breaks stays one field (and its lines are not banner)."""
    lines = TRANSPOSE_DETAILS.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ',"OPT","' in ln)
    lines[i] = lines[i].replace(',"OPT","', ',"OPT","First line.\n==PROF== not a banner\n', 1)
    rules = parse_details_csv("\n".join(lines))
    msg = next(r.message for r in rules if r.message.startswith("First line."))
    assert "==PROF== not a banner" in msg
    assert len(rules) == len(load_details_csv(TRANSPOSE_DETAILS))


def test_transpose_details_flag_bank_conflicts_or_shared_memory() -> None:
    rules = load_details_csv(TRANSPOSE_DETAILS)
    text = " ".join(r.message for r in rules).lower()
    assert "bank" in text or "shared" in text


@pytest.mark.parametrize("text,needle", [
    ("", "no ncu CSV header"),
    ("==PROF== Connected to process 1\n==PROF== Disconnected\n", "no ncu CSV header"),
    ('"ID","Process ID","Kernel Name"\n"","",""\n', "no kernel rows"),
    ('"ID","Process ID","Stream"\n"0","1","7"\n', "no 'Kernel Name'"),
    ("==PROF== Connected to process 7 (/usr/bin/python3)\n==PROF== Disconnected from process 7\n"
     "==WARNING== No kernels were profiled.\n", "ncu profiled no kernels"),
])
def test_bad_input_gives_clear_errors(text: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        parse_raw_csv(text)


def test_details_parser_refuses_a_raw_page() -> None:
    with pytest.raises(InputError, match="not a details page"):
        parse_details_csv(CUPY_RAW.read_text())


def test_truncated_file_keeps_complete_rows() -> None:
    text = TRANSPOSE_RAW.read_text()
    cut = text[: len(text) - 2000]  # the last launch's row loses its tail
    rep = parse_raw_csv(cut)
    assert len(rep.kernels) >= 1
    assert rep.kernels[0].value("gpu__time_duration.sum") is not None


def test_two_outputs_appended_to_one_file() -> None:
    """Two ncu runs logged into one file: the second header and units row are not launches."""
    text = TRANSPOSE_RAW.read_text() + "\n" + TRANSPOSE_RAW.read_text()
    rep = parse_raw_csv(text)
    assert [k.id for k in rep.kernels] == [0, 1, 0, 1]
    assert all(k.name.startswith("transpose_naive") for k in rep.kernels)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_raw_csv(tmp_path / "nope.csv")


@pytest.mark.parametrize("unit,norm,scale", [
    ("ns", "second", 1e-9), ("us", "second", 1e-6), ("msecond", "second", 1e-3),
    ("byte", "byte", 1.0), ("Kbyte", "byte", 1e3), ("Gbyte/s", "byte/second", 1e9),
    ("Tbyte/s", "byte/second", 1e12), ("byte/s", "byte/second", 1.0),
    ("sector/ns", "sector/second", 1e9), ("Ghz", "hz", 1e9), ("%", "%", 1.0),
    ("inst/cycle", "inst/cycle", 1.0), ("Kbyte/block", "byte/block", 1e3), ("", "", 1.0),
    ("Kinst", "inst", 1e3), ("Msector", "sector", 1e6), ("Gcycle", "cycle", 1e9),
    ("Kbyte/cycle", "byte/cycle", 1e3), ("%/Kbyte", "%/byte", 1e-3), ("register/thread", "register/thread", 1.0),
])
def test_normalise_unit(unit: str, norm: str, scale: float) -> None:
    r = normalise_unit(unit)
    assert r.unit == norm and r.scale == pytest.approx(scale)


def test_ncu_arguments() -> None:
    opts = NcuOptions(kernel_regex="vec_add|gather", launch_skip=1, launch_count=2)
    args = profile_args(opts)
    assert args[:5] == ["ncu", "--set", "full", "--clock-control", "none"]
    assert filter_args(opts) == ["-k", "regex:vec_add|gather", "-s", "1", "-c", "2"]


def test_import_without_ncu_says_how_to_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "x.ncu-rep"
    rep.write_bytes(b"not really a report")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(InputError, match="--page raw"):
        import_report(Sandbox(tmp_path / "run"), rep)


def test_parsed_metrics_behave_like_ordinary_models() -> None:
    k = load_raw_csv(TRANSPOSE_RAW).kernels[0]
    m = k.metrics["gpu__time_duration.sum"]
    assert m.model_fields_set == {"name", "value", "unit", "raw", "raw_unit"}
    copy = m.model_copy(update={"value": 1.0})
    assert copy.value == 1.0 and m.value != 1.0
    assert type(m).model_validate(m.model_dump()) == m


def test_parsed_profiles_serialise() -> None:
    k = load_raw_csv(TRANSPOSE_RAW).kernels[0]
    doc = k.model_dump(mode="json")
    assert doc["metrics"]["gpu__time_duration.sum"]["unit"] == "second"
    again = type(k).model_validate(doc)
    assert again.value("gpu__time_duration.sum") == k.value("gpu__time_duration.sum")
    assert io.StringIO(k.model_dump_json()).read().startswith("{")
