"""szp: perfscout's SZ-family GPU codec.

``format`` is the versioned stream format and its NumPy reference encoder/decoder (the
specification, described in FORMAT.md); ``gpu`` drives the CUDA kernels in
``szp_kernels.cu`` through CuPy and writes byte-identical streams; ``autoshape`` chooses
the block shape (``block_ndim="auto"``) from a sample of the field. The codec class that
the registry knows is :class:`perfscout.codecs.szp.codec.SZPGpuCodec`.
"""
