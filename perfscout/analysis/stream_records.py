"""What the streaming metric passes learn, shared by the general passes
(:mod:`perfscout.analysis.streaming`) and the fused fast path
(:mod:`perfscout.analysis.stream_fast`), so the record is assembled by one piece of code."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Scan:
    """What pass 1 learns (in the inputs' units)."""

    shape: tuple[int, ...]
    n_total: int
    n_valid: int = 0
    nonfinite_x: int = 0
    any_invalid: bool = False  # some element is not finite in x or y
    mismatch_flat: int | None = None  # first non-finite original not reproduced exactly
    x_min: float = math.inf
    x_max: float = -math.inf
    y_min: float = math.inf
    y_max: float = -math.inf
    peak: float = 0.0  # max(|x|, |y|) over the valid elements
    exp2: int = 0  # the rescale exponent (see metrics' notes)


@dataclass
class _Sums:
    """Pass 2 (scaled units unless said otherwise)."""

    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_e: float = 0.0
    sum_e2: float = 0.0
    max_abs: float = 0.0
    max_flat: int = 0
    e_min: float = math.inf
    e_max: float = -math.inf
    zero_e: int = 0
    max_pw: float = 0.0  # unscaled (ratios of the raw values)
    any_nonzero_x: bool = False
    zero_changed: int = 0


@dataclass
class _Spread:
    """Pass 3."""

    sxx: float = 0.0
    syy: float = 0.0
    sxy: float = 0.0
    see: float = 0.0  # sum (e - mean e)^2 over the valid elements
    ac_den: float = 0.0  # sum (a - mean a)^2, a = e over all elements (0 where invalid)
    ac_num: float = 0.0  # sum (a_i - m)(a_{i+1} - m)
    fine: Any = None  # fine histogram counts (xp array) or None when peak == 0
    fine_j: int = 0
    fine_top: float = 0.0
    _prev: float | None = field(default=None, repr=False)
