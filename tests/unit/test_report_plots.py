"""The one plotting module (perfscout.analysis.report.plots) that the sweep and the agent
reports share: records in, deterministic PNG files and Figure blocks out."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from perfscout.analysis.report import plots
from perfscout.analysis.report.blocks import Figure, Heading, Paragraph
from perfscout.state.records import CompressionResult


def _records() -> list[dict]:
    out = []
    for i, (codec, bound, ratio) in enumerate([("sz3", 1e-2, 4.0), ("sz3", 1e-3, 2.5), ("zfp", 1e-2, 3.0),
                                               ("zfp", 1e-3, 2.0)]):
        out.append(CompressionResult(task_key=f"k{i}", dataset="d<1>", shape="8", dtype="f32", nbytes=32, codec=codec,
                                     device="cpu", mode="abs", bound=bound, ratio=ratio, bitrate=32 / ratio,
                                     psnr=60.0 + i, max_rel_err=bound / 10, compress_MBps=10.0 + i,
                                     decompress_MBps=20.0 + i, bound_ok=True).model_dump(mode="json"))
    # a record that failed: no ratio, every number None (an object column in a frame)
    out.append({**out[0], "task_key": "k9", "dataset": "empty", "ratio": None, "psnr": None, "bitrate": None,
                "compress_MBps": None, "decompress_MBps": None, "status": "codec_crashed"})
    return out


def test_records_become_figure_blocks_with_the_same_bytes_every_time(tmp_path: Path) -> None:
    backend = matplotlib.get_backend()
    df = plots.records_frame(_records())
    assert df["ratio"].dtype.kind == "f" and df["psnr"].dtype.kind == "f"
    first = plots.figure_blocks(df, tmp_path / "a")
    second = plots.figure_blocks(df, tmp_path / "b")
    assert [type(b) for b in first] == [Heading, *[Figure] * 5, Heading, Paragraph]
    assert [b.text for b in first if isinstance(b, Heading)] == ["d<1>", "empty"]
    figures = [b for b in first if isinstance(b, Figure)]
    assert all(f.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    assert [f.path.read_bytes() for f in figures] == [b.path.read_bytes() for b in second if isinstance(b, Figure)]
    assert all(f.alt.startswith("d<1>: ") and f.caption for f in figures)
    assert matplotlib.get_backend() == backend  # pyplot's backend untouched


def test_a_figure_that_cannot_be_drawn_costs_only_its_dataset(tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):  # noqa: ANN002, ANN003
        raise RuntimeError("no <canvas>")

    monkeypatch.setattr(plots, "dataset_figures", broken)
    blocks = plots.figure_blocks(plots.records_frame(_records()), tmp_path)
    assert [type(b) for b in blocks] == [Heading, Paragraph, Heading, Paragraph]
    assert blocks[1].text == "Plots not drawn: RuntimeError: no <canvas>"
