"""Shared loaders for the planted-suite fixtures (real ncu output from the H200)."""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "benchmarks" / "planted"
PROFILES = PLANTED / "profiles"
if str(PLANTED) not in sys.path:
    sys.path.insert(0, str(PLANTED))

import suite  # noqa: E402

from perfscout.tools.ncu_parse import load_raw_csv  # noqa: E402


@lru_cache(maxsize=1)
def planted_kernels():
    return {k.name: k for k in load_raw_csv(PROFILES / "planted_raw.csv").kernels}


@lru_cache(maxsize=1)
def timings() -> dict:
    return json.loads((PROFILES / "timings.json").read_text())


def kernel(name: str):
    return planted_kernels()[name].model_copy(deep=True)
