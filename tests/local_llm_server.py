"""Serve a GGUF model with llama.cpp's own OpenAI-compatible HTTP server on 127.0.0.1.

    python -m tests.local_llm_server --model M.gguf --port P [--alias NAME] [--threads N]

The server is the C++ ``llama-server`` of llama.cpp, embedded in the ``xllamacpp`` wheel
(prebuilt on PyPI: nothing is compiled at install time). It listens on loopback only and
runs until this process is sent SIGTERM or SIGINT. The first line on stdout is
``serving http://127.0.0.1:P`` once the model is loaded.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.local_llm_server")
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--alias", default="local", help="the model name the API answers to")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    args = ap.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = args.port
    params.n_ctx = args.n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.model_alias = {args.alias}
    params.ui = False  # no web page to serve: the API alone
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # loads the model, then serves from its own threads
    print(f"serving {server.listening_address}", flush=True)
    stop.wait()
    del server  # the destructor stops the HTTP loop before the process exits
    return 0


if __name__ == "__main__":
    sys.exit(main())
