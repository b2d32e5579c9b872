"""A codec that crashes the process or hangs, like a native backend at an extreme bound.

Importing this module registers ``fake-crash`` with the codec registry (tests and sweep
specs name it as a plug-in: ``plugins: [tests.fakes.crashing_codec]``). It is never
registered by perfscout itself.

Options: ``behaviour`` = ``abort`` (os.abort(): SIGABRT, as a failed C++ assertion),
``segfault`` (reads address 0 through ctypes: SIGSEGV), ``hang`` (sleeps forever),
``hog`` (asks for 4 GiB: a memory limit must stop it), ``sloppy`` (runs, but its
reconstruction breaks the bound at one element: a violated bound) or ``none``; ``crash_below`` = the misbehaviour only happens for bounds below it (default:
always). When it does not misbehave it is a plain uniform quantizer, so its records are
real, verified results.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

import numpy as np

from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import register_codec
from perfscout.errors import CodecError

BEHAVIOURS = ("abort", "segfault", "hang", "hog", "sloppy", "none")


class CrashingCodec(Codec):
    codec_id = "fake-crash"
    family = "fake"
    device = "cpu"
    native_modes = ("abs",)

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        self.behaviour = self.options.get("behaviour", "abort")
        if self.behaviour not in BEHAVIOURS:
            raise CodecError(f"fake-crash: behaviour must be one of {BEHAVIOURS}")
        self.crash_below = float(self.options.get("crash_below", float("inf")))

    @classmethod
    def version(cls) -> str:
        return "fake 1"

    def _misbehave(self) -> None:
        if self.bound >= self.crash_below or self.behaviour in ("none", "sloppy"):
            return
        if self.behaviour == "abort":
            os.abort()
        if self.behaviour == "segfault":
            ctypes.string_at(0)  # SIGSEGV in native code
        if self.behaviour == "hog":
            hog = np.ones(2**32, dtype=np.uint8)  # 4 GiB, touched
            self.options["_hog"] = hog
        if self.behaviour == "hang":
            while True:
                time.sleep(3600)

    def compress(self, array: np.ndarray) -> Compressed:
        self._misbehave()
        # Step 1.8*bound: the float32 cast of q*step stays inside the bound.
        q = np.rint(array.astype(np.float64) / self._step).astype(np.int64)
        return Compressed(data=q.tobytes(), shape=array.shape, dtype=array.dtype.name, codec_id=self.codec_id,
                          mode=self.mode, bound=self.bound, abs_bound=self.bound)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        q = np.frombuffer(compressed.data, dtype=np.int64).reshape(compressed.shape)
        out = (q * self._step).astype(compressed.dtype)
        if self.behaviour == "sloppy" and self.bound < self.crash_below:
            out.reshape(-1)[0] += out.dtype.type(3 * self.bound)
        return out

    @property
    def _step(self) -> float:
        return 1.8 * self.bound


register_codec(CrashingCodec.codec_id, f"{__name__}:CrashingCodec")
