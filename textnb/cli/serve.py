"""textnb serve: the resident scorer for textnb filter --server and textnb-client."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Optional

import typer

from ._util import ModelOpt, app, model_path, operator_errors


# fmt: off
@app.command("serve")
def serve_cli(
    model: Optional[Path] = ModelOpt,
    socket_path: Optional[Path] = typer.Option(None, "--socket", help="Unix socket to listen on, created mode 0600. Default: $TEXTNB_SOCKET or ~/.local/share/textnb/scorer.sock."),
    tcp: Optional[str] = typer.Option(None, "--tcp", help="Listen on TCP [HOST:]PORT instead (HOST default 127.0.0.1; loopback only unless --allow-remote)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Permit a non-loopback --tcp address. The protocol has no authentication: firewall it."),
    max_bytes: int = typer.Option(10_000_001, "--max-bytes", help="Largest message accepted; larger ones are refused and the client scores in process."),
    max_clients: int = typer.Option(8, "--max-clients", help="Connections served at once; more wait in the listen backlog."),
    timeout: float = typer.Option(10.0, "--timeout", help="Seconds a client has to send its message and read the verdict."),
    reload_interval: float = typer.Option(1.0, "--reload-interval", help="Seconds between checks of the model file for a retrained model (0: never reload)."),
):
    # fmt: on
    """Keep the model loaded and answer 'textnb filter --server' / 'textnb-client' until SIGTERM."""
    from ..client import default_socket, parse_address, show_address
    from ..server import ResidentModel, ScorerServer

    if socket_path is not None and tcp is not None:
        raise typer.BadParameter("give --socket or --tcp, not both", param_hint="--tcp")
    if tcp is not None:
        address = parse_address(tcp if ":" in tcp else f"127.0.0.1:{tcp}")
        if not isinstance(address, tuple):
            raise typer.BadParameter(f"{tcp!r} is not [HOST:]PORT", param_hint="--tcp")
    else:
        address = str(socket_path) if socket_path is not None else default_socket()
    logging.basicConfig(level=logging.INFO, format="textnb serve: %(message)s")
    stop = threading.Event()
    with operator_errors():
        path = model_path(model)
        server = ScorerServer(ResidentModel(path), address, max_bytes=max_bytes,
                              max_clients=max_clients, timeout=timeout,
                              reload_interval=reload_interval, allow_remote=allow_remote).bind()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    typer.echo(f"textnb serve: model {path} on {show_address(server.bound_address)} "
               f"(pid {os.getpid()}); SIGTERM stops", err=True)
    server.serve_forever(stop)
