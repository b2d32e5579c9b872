"""The real GPU compressors beside szp-gpu: cuSZp (the SZ team's GPU compressor, through its
C API) and NVIDIA nvCOMP's lossless codecs (through its Python wheel).

Both work on device-resident CuPy arrays (:class:`~perfscout.codecs.gpu_peers.device.DeviceCodec`);
:mod:`perfscout.tools.gpu_eval` times and verifies them on the GPU. Importing this package
imports neither library: each backend says in ``availability()`` exactly what is missing.
"""
