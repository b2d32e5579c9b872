"""Compressor backends behind one interface (see :mod:`perfscout.codecs.base`).

``list_codecs()`` says what is installed and why a backend is missing;
``get_codec(id, mode, bound)`` builds one in a native mode.
"""

from perfscout.codecs.base import ALL_MODES, Codec, Compressed, TimedRun
from perfscout.codecs.registry import (
    CodecInfo,
    codec_class,
    codec_ids,
    evaluable_modes,
    from_config,
    get_codec,
    list_codecs,
    register_codec,
)

__all__ = [
    "ALL_MODES",
    "Codec",
    "CodecInfo",
    "Compressed",
    "TimedRun",
    "codec_class",
    "codec_ids",
    "evaluable_modes",
    "from_config",
    "get_codec",
    "list_codecs",
    "register_codec",
]
