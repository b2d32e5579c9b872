"""`perfscout serve`: the local run viewer in a browser (perfscout/viewer), on 127.0.0.1 only.

Starlette and uvicorn come with the ``viewer`` extra; without them the command says which
extra to install. The token printed at start is asked once by the browser (the printed
address carries it) and travels with every action.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rich.markup import escape

from perfscout.cli.common import fail, stderr

DEFAULT_PORT = 8765


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        home: Optional[Path] = typer.Option(None, "--home", help="The perfscout home to show (default: "
                                            "$PERFSCOUT_HOME, else the per-user data directory)."),
        port: int = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one)."),
        read_only: bool = typer.Option(False, "--read-only", help="Show runs; refuse every action (answer, "
                                       "resume, fork)."),
    ) -> None:
        """Follow, answer, resume and fork agent runs in a browser; sweeps too. Offline, local only."""
        try:
            import uvicorn

            from perfscout.viewer.app import create_app, startup_line
        except ImportError as exc:
            fail(escape(f"perfscout serve needs Starlette and uvicorn ({exc.name or exc} is missing): "
                        "pip install 'perfscout[viewer]'"))
        import secrets
        import socket

        from perfscout.graph.context import Context

        if home is not None and not home.expanduser().is_dir():
            fail(escape(f"--home {home}: no such directory"))
        ctx = Context(home=str(home.expanduser()) if home is not None else "")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            sock.close()
            fail(escape(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc} (pick another with --port)"))
        port = sock.getsockname()[1]
        token = secrets.token_urlsafe(24)
        app = create_app(ctx, token=token, read_only=read_only, port=port)
        from perfscout.graph.checkpoint import describe

        stderr.print(f"perfscout viewer of {ctx.home_path} (checkpoints: {describe(ctx)})"
                     + (" — read-only" if read_only else ""), highlight=False, markup=False)
        stderr.print(f"open {startup_line(port, token)}", highlight=False, markup=False)
        stderr.print("(the token is new at every start; Ctrl-C stops the viewer)", highlight=False, markup=False)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
