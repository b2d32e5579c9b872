"""The report's figures are readable at the page's width (report.css: 1100 px of content): not
shrunk by the browser, no text below MIN_TEXT_PT, legends beside the plot and never on it,
heatmap panels two to a row. Checked on the laid-out figures themselves (their geometry)."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.text import Text

from perfscout.analysis.report import plots

PAGE_PX = 1100  # report.css: body max-width


def _frame(codecs: list[str]) -> pd.DataFrame:
    rows = []
    for c_i, codec in enumerate(codecs):
        for mode in ("abs", "rel"):
            for b_i, bound in enumerate((1e-4, 1e-3, 1e-2)):
                ratio = 2.0 + c_i + 3 * b_i + (mode == "rel")
                rows.append(dict(task_key=f"{codec}-{mode}-{bound}", dataset="grf:32x64x64", codec=codec,
                                 device="cpu", mode=mode, bound=bound, ratio=ratio, bitrate=32 / ratio,
                                 psnr=60 + 10 * b_i + c_i, max_rel_err=bound / 2, compress_MBps=10.0 + 20 * c_i,
                                 decompress_MBps=40.0 + 50 * c_i + b_i, status="ok", bound_ok=True))
    return plots.records_frame(rows)


def _overlap(a, b) -> bool:  # noqa: ANN001 - matplotlib Bbox
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("codecs", [["sz3", "sz2", "sz3-h5", "zfp"], ["sz3", "zfp", "szp"], ["sz3"]])
def test_figures_fit_the_page_with_legends_beside_and_text_readable(codecs: list[str]) -> None:
    figures = plots.build_figures(_frame(codecs), "grf:32x64x64")
    assert {kind for kind, *_ in figures} == {"rate_distortion", "cr_vs_bound", "throughput", "bubble", "heatmap"}
    for kind, _title, _caption, fig in figures:
        width_px = fig.get_figwidth() * plots.DPI
        assert width_px <= PAGE_PX, f"{kind}: {width_px} px would be shrunk on the page"
        renderer = fig.canvas.get_renderer()
        page = fig.bbox
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert texts
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < plots.MIN_TEXT_PT]
        assert not small, f"{kind}: text below {plots.MIN_TEXT_PT} pt: {small[:5]}"
        visible_axes = [ax for ax in fig.axes if ax.get_visible()]
        for ax in visible_axes:  # nothing drawn outside the figure (cut off in the PNG)
            box = ax.get_tightbbox(renderer)  # what is drawn: labels, ticks, title, legend
            assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1, f"{kind}: cut off at the sides"
            assert box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1, f"{kind}: cut off at the top or bottom"
        for ax in visible_axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(renderer)
            assert not any(_overlap(box, other.get_window_extent(renderer)) for other in visible_axes), \
                f"{kind}: the legend covers the plot"
            assert box.x1 <= page.x1 + 1, f"{kind}: the legend is cut off"
        if kind == "heatmap":
            columns = {round(ax.get_position().x0, 3) for ax in visible_axes}
            assert len(visible_axes) == len(codecs) and len(columns) <= plots.HEATMAP_COLUMNS
