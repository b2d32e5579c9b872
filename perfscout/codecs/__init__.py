"""Compressor backends behind one interface (see :mod:`perfscout.codecs.base`).

``list_codecs()`` says what is installed and why a backend is missing;
``get_codec(id, mode, bound)`` builds one in a native mode. Installed distributions add
codecs through ``perfscout.codecs`` entry points (``plugin_listing()`` says which loaded
and why the others did not; ``refresh()`` scans again).
"""

from perfscout.codecs.base import ALL_MODES, Codec, Compressed, TimedRun
from perfscout.codecs.registry import (
    CodecInfo,
    PluginListing,
    codec_class,
    codec_ids,
    evaluable_modes,
    from_config,
    get_codec,
    list_codecs,
    plugin_listing,
    refresh,
    register_codec,
    registered_codecs,
    unregister_codec,
)

__all__ = [
    "ALL_MODES",
    "Codec",
    "CodecInfo",
    "Compressed",
    "PluginListing",
    "TimedRun",
    "codec_class",
    "codec_ids",
    "evaluable_modes",
    "from_config",
    "get_codec",
    "list_codecs",
    "plugin_listing",
    "refresh",
    "register_codec",
    "registered_codecs",
    "unregister_codec",
]
