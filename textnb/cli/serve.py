"""textnb serve: the resident scorer for textnb filter --server and textnb-client."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Optional

import typer

from ._metrics import MetricsOpt
from ._record import RecordDaysOpt, RecordMaxMbOpt, RecordOpt, RecordUserMbOpt
from ._util import ModelOpt, StoreModelOpt, StoreOpt, app, check_store, model_path, operator_errors


# fmt: off
@app.command("serve")
def serve_cli(
    model: Optional[Path] = ModelOpt,
    socket_path: Optional[Path] = typer.Option(None, "--socket", help="Unix socket to listen on, created mode 0600. Default: $TEXTNB_SOCKET or ~/.local/share/textnb/scorer.sock."),
    tcp: Optional[str] = typer.Option(None, "--tcp", help="Listen on TCP [HOST:]PORT instead (HOST default 127.0.0.1; loopback only unless --allow-remote)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Permit a non-loopback --tcp address. The scorer does not authenticate its clients (--key-file proves the scorer to them, not them to it): firewall it."),
    max_bytes: int = typer.Option(10_000_001, "--max-bytes", help="Largest message accepted; larger ones are refused and the client scores in process."),
    max_clients: int = typer.Option(8, "--max-clients", help="Complete requests answered at once (worker threads); connections still sending hold none."),
    timeout: float = typer.Option(10.0, "--timeout", help="Seconds a client has from connecting to the last byte of its request, however slowly it sends."),
    reload_interval: float = typer.Option(1.0, "--reload-interval", help="Seconds between checks of the model file for a retrained model (0: never reload)."),
    models: Optional[Path] = typer.Option(None, "--models", help="Serve a model per user: DIR/<user>/model.tnb, and DIR/_shared/model.tnb (or --model) for users without one; clients pass --user."),
    max_resident_users: int = typer.Option(16, "--max-resident-users", min=1, help="With --models: users' models kept loaded at once; past it the least recently used is written and dropped, and loaded again on its next request (each costs about the shared model's memory: docs/learning.md#bounds)."),
    max_users: int = typer.Option(1000, "--max-users", min=0, help="With --models: users' models that first learns may create in DIR; past it a learn for a new user is refused (users who have a model keep learning)."),
    flush_seconds: float = typer.Option(1.0, "--flush-seconds", help="Longest time a learned update (textnb-client --learn) waits in the journal before the model file is rewritten."),
    socket_mode: str = typer.Option("0600", "--socket-mode", help="Octal mode of the Unix socket; 0666 lets other users' clients connect (with --user-from-peer)."),
    user_from_peer: bool = typer.Option(False, "--user-from-peer", help="With --models: the user is the connecting process's login name (SO_PEERCRED); a client naming another user is refused."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="A secret shared with the clients (a file of 32 or more bytes, mode 0600: openssl rand -hex 32): each reply proves this scorer holds it, so clients over TCP believe no other program on the port (docs/security.md)."),
    allow_any_user_to_teach: bool = typer.Option(False, "--allow-any-user-to-teach", help="Serve --models, and learn, over TCP or a socket mode with o+w, where any local user can connect and name any user. Default: refused (docs/security.md)."),
    metrics: Optional[str] = MetricsOpt,
    record: Optional[Path] = RecordOpt,
    record_days: float = RecordDaysOpt,
    record_max_mb: int = RecordMaxMbOpt,
    record_user_mb: Optional[int] = RecordUserMbOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
    store_users: bool = typer.Option(False, "--store-users", help="With --store: a model per user in the store (user:<name>), chosen by the client's --user; others get --store-model's. A user's first learn makes theirs as a copy of it."),
    outbox: Optional[Path] = typer.Option(None, "--outbox", help="With --store: the file where learns wait, fsync'd, while the database is away (one per scorer). Default: outbox-<store model> beside the default model file."),
):
    # fmt: on
    """Keep the model loaded and answer 'textnb filter --server' / 'textnb-client' until SIGTERM."""
    from ..commands import serve
    from ..delivery.client import default_socket, parse_address

    if socket_path is not None and tcp is not None:
        raise typer.BadParameter("give --socket or --tcp, not both", param_hint="--tcp")
    if tcp is not None:
        address = parse_address(tcp if ":" in tcp else f"127.0.0.1:{tcp}")
        if not isinstance(address, tuple):
            raise typer.BadParameter(f"{tcp!r} is not [HOST:]PORT", param_hint="--tcp")
    else:
        address = str(socket_path) if socket_path is not None else default_socket()
    try:
        mode = int(socket_mode, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise typer.BadParameter(f"{socket_mode!r} is not an octal mode such as 0600",
                                 param_hint="--socket-mode")
    if not flush_seconds >= 0:
        raise typer.BadParameter(f"{flush_seconds} must be >= 0 seconds", param_hint="--flush-seconds")
    if user_from_peer and models is None:
        raise typer.BadParameter("--user-from-peer goes with --models DIR (a model per user)",
                                 param_hint="--user-from-peer")
    if not record_days > 0:
        raise typer.BadParameter(f"{record_days} must be > 0 days", param_hint="--record-days")
    logging.basicConfig(level=logging.INFO, format="textnb serve: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if store_users and store is None:
        raise typer.BadParameter("--store-users goes with --store URL", param_hint="--store-users")
    if check_store(store, model):
        if models is not None:
            raise typer.BadParameter("with --store, serve one model of the store (give each "
                                     "user's its own --store-model and scorer, or "
                                     "--store-users); --models goes with model files",
                                     param_hint="--store")
        from ..commands.shared_store import serve as store_serve

        if outbox is None:
            outbox = model_path(None).parent / f"outbox-{store_model}"
        with operator_errors():
            outbox.parent.mkdir(parents=True, exist_ok=True)
            store_serve(store, store_model, address, outbox=outbox, max_bytes=max_bytes,
                               max_clients=max_clients, timeout=timeout,
                               poll=reload_interval or 1.0, allow_remote=allow_remote,
                               socket_mode=mode, key_file=key_file, stop=stop,
                               allow_any_user_to_teach=allow_any_user_to_teach,
                               record=record, record_days=record_days,
                               record_max_mb=record_max_mb, per_user=store_users,
                               max_resident_users=max_resident_users, max_users=max_users,
                               metrics=metrics,
                               say=lambda line: typer.echo(line, err=True))
        return
    with operator_errors():
        serve(model if models is not None else model_path(model), address, models=models,
              max_bytes=max_bytes, max_clients=max_clients, timeout=timeout,
              reload_interval=reload_interval, allow_remote=allow_remote, socket_mode=mode,
              user_from_peer=user_from_peer, allow_any_user_to_teach=allow_any_user_to_teach,
              flush_seconds=flush_seconds, max_resident_users=max_resident_users,
              max_users=max_users, metrics=metrics, record=record, record_days=record_days,
              record_max_mb=record_max_mb, record_user_mb=record_user_mb,
              key_file=key_file, stop=stop,
              say=lambda line: typer.echo(line, err=True))
