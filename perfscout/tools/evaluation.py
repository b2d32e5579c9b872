"""What one evaluation produced: the record plus the detail behind it.

Its own module so that the evaluation paths (``tools/evaluate.py`` on the host,
``tools/gpu_eval.py`` for device-resident backends) both build it without importing each
other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfscout.codecs.base import Compressed
from perfscout.state.records import CompressionResult
from perfscout.tools import bounds as B


@dataclass
class Evaluation:
    """A record plus the detail behind it."""

    result: CompressionResult
    check: B.BoundCheck | None = None
    compressed: Compressed | None = None
    reconstructed: np.ndarray | None = None  # non-finite values restored
    nonfinite: B.NonfiniteSplit | None = None
    search: B.SearchOutcome | None = None
    compress_timing: Any = None  # analysis.timing.TimingStats (None when the codec timed itself)
    decompress_timing: Any = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: JSON detail beside the record (it has no column for it): ``search``, the psnr/ratio
    #: search's outcome (:meth:`perfscout.tools.bounds.SearchOutcome.summary`).
    extra: dict[str, Any] = field(default_factory=dict)

    def sections(self) -> dict[str, bytes]:
        """Side data stored beside the codec stream (non-finite pass-through)."""
        return self.nonfinite.sections() if self.nonfinite is not None and self.nonfinite.count else {}
