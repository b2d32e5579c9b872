"""perfscout's numcodecs codecs as Zarr v3 array -> bytes codecs (serializers).

Built on the numcodecs wrapper that zarr-python ships (``zarr.codecs.numcodecs``, formerly
``numcodecs.zarr3``): a codec named ``numcodecs.perfscout.sz3`` in ``zarr.json`` resolves,
through the ``zarr.codecs`` entry point, to :class:`SZ3` here, which hands each chunk (an
array, with its shape and dtype) to :class:`perfscout.codecs.numcodecs.SZ3`. Use one as
the array's ``serializer`` (it replaces the ``bytes`` codec)::

    zarr.create_array(store, shape=..., chunks=..., dtype="float32",
                      serializer=SZ3(mode="abs", bound=1e-3), compressors=None)

No ``compressors`` after it: the stream is already entropy-coded.
"""

from __future__ import annotations

import warnings
from typing import Any

from zarr.codecs.numcodecs import _NumcodecsArrayBytesCodec
from zarr.errors import ZarrUserWarning

from perfscout.codecs.numcodecs import CODECS, NUMCODECS_IDS

BY_ID = {c.codec_id: c for c in CODECS}

# zarr warns on every numcodecs codec that it is outside the Zarr v3 spec; said once in the docs.
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification",
                        category=ZarrUserWarning)


class _PerfscoutSerializer(_NumcodecsArrayBytesCodec):
    """Stores the codec's *normalised* config in zarr.json: ``rel`` already resolved to
    ``abs`` (with ``rel_bound`` and ``value_range``), defaults spelled out, so a reader
    sees exactly the bound every chunk was written under."""

    def __init__(self, **codec_config: Any) -> None:
        numcodec_id = self.codec_name.removeprefix("numcodecs.")
        config = {k: v for k, v in codec_config.items() if k != "id"}
        normalised = BY_ID[numcodec_id].from_config(config).get_config()
        super().__init__(**normalised)


class SZ3(_PerfscoutSerializer, codec_name="perfscout.sz3"):
    pass


class SZ2(_PerfscoutSerializer, codec_name="perfscout.sz2"):
    pass


class SZ3H5(_PerfscoutSerializer, codec_name="perfscout.sz3-h5"):
    pass


class ZFP(_PerfscoutSerializer, codec_name="perfscout.zfp"):
    pass


class SZP(_PerfscoutSerializer, codec_name="perfscout.szp"):
    pass


#: perfscout backend id -> Zarr v3 codec class.
BY_BACKEND = {"sz3": SZ3, "sz2": SZ2, "sz3-h5": SZ3H5, "zfp": ZFP, "szp-gpu": SZP}
assert {k: v.codec_name for k, v in BY_BACKEND.items()} == {k: f"numcodecs.{v}" for k, v in NUMCODECS_IDS.items()}


def register() -> None:
    """Register with zarr in this process (the ``zarr.codecs`` entry point does it lazily)."""
    from zarr.registry import register_codec

    for cls in BY_BACKEND.values():
        register_codec(cls.codec_name, cls)


register()
