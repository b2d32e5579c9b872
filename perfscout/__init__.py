"""perfscout: an evidence-first performance scout.

A LangGraph agent (``perfscout.graph``) drives whitelisted tools
(``perfscout.tools``): error-bounded lossy compressors (``perfscout.codecs``),
a platform snapshot, Nsight Compute and ``perf stat`` wrappers, and a
diagnosis engine (``perfscout.analysis``). Every figure it reports was measured.
"""

__version__ = "0.1.0"
