"""perfscout: an evidence-first performance scout.

A LangGraph agent (``perfscout.graph``) drives whitelisted tools
(``perfscout.tools``): error-bounded lossy compressors (``perfscout.codecs``),
a platform snapshot, Nsight Compute and ``perf stat`` wrappers, and a
diagnosis engine (``perfscout.analysis``). Every figure it reports was measured.
"""

__version__ = "0.1.0"


def __getattr__(name: str):  # noqa: ANN202 - module-level lazy attribute hook (PEP 562)
    # Lazy: `import perfscout` stays light, since every sweep task's child process imports it.
    if name in ("sweep", "report"):
        from perfscout import api_sweep

        return getattr(api_sweep, name)
    raise AttributeError(f"module 'perfscout' has no attribute {name!r}")
