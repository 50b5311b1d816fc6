"""The long-running commands, ``serve``, ``milter`` and ``web``, as functions.

Like the other commands they take paths and options and print nothing. What an operator
should read while one starts (where it listens, where it records, warnings about the
training) is passed to ``say`` one line at a time; ``textnb serve`` and ``textnb
milter`` pass a function that writes to stderr. Each returns when it is told to stop:
``serve`` when ``stop`` is set (the CLI sets it on SIGTERM), ``milter`` on SIGTERM or
SIGINT (libmilter's loop owns the signals), ``web`` when uvicorn stops (SIGTERM, SIGINT). Options a typer wrapper checks (a port's
syntax, an octal mode) arrive parsed; the rest is checked here, before a model loads.
"""

from __future__ import annotations

import getpass
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import TextnbError

__all__ = ["milter", "serve", "start_recording", "web"]

Say = Callable[[str], None]


def _silent(line: str) -> None:
    pass


def _warn_about_training(who: str, resident, say: Say, shared_note: str = "") -> None:
    from ..models.health import training_health

    for line in training_health(resident.spam_filter.n_learned).problems:
        say(f"textnb {who}: warning: {line}{shared_note}")


def start_metrics(spec: str | None, resident, say: Say):
    """The Telemetry and its HTTP port for ``--metrics spec``; (None, None) when off.
    MetricsError (an operator error) when the port cannot open."""
    if spec is None:
        return None, None
    from ..delivery.telemetry import Telemetry, parse_metrics_address, serve_metrics

    telemetry = Telemetry(lambda: resident)
    port = serve_metrics(telemetry, *parse_metrics_address(spec))
    host, number = port.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    # A loopback port has no owner: every local uid can scrape it (docs/security.md).
    say(f"textnb: metrics on http://{shown}:{number}/metrics (readable by every "
        "local user: counts of verdicts and learns, no message content)")
    return telemetry, port


def stop_metrics(port) -> None:
    if port is not None:
        port.shutdown()
        port.server_close()


def start_recording(path: Path | None, days: float, max_mb: int, one_model: bool,
                    who: str = "serve", user_mb: int | None = None, say: Say = _silent):
    """The VerdictRecorder for ``--record PATH``, started; None when off. With one
    model, verdicts are recorded as this OS user's (the page's login of that name), who
    may fill the whole cap; with a model per user, one user's kept messages take at most
    a quarter of it (textnb.review.store.USER_SHARE), or ``user_mb`` MB when given."""
    if path is None:
        return None
    from ..review.recorder import VerdictRecorder

    if not days > 0:
        raise TextnbError(f"--record-days {days} must be > 0 days")
    recorder = VerdictRecorder(path, days, max_mb * 2**20,
                               default_user=getpass.getuser() if one_model else "",
                               max_user_bytes=(user_mb * 2**20 if user_mb is not None
                                               else max_mb * 2**20 if one_model else None)).start()
    say(f"textnb {who}: recording verdicts in {path} ({days:g} days, at most {max_mb} MB)"
        + (f"; {recorder.problem}" if recorder.problem else ""))
    return recorder



@contextmanager
def _watched(resident, metrics: str | None, record: Path | None, record_days: float,
             record_max_mb: int, record_user_mb: int | None, one_model: bool, who: str,
             say: Say) -> Iterator[tuple]:
    """(telemetry, recorder) for ``--metrics`` and ``--record`` (each None when off),
    started around a daemon's run and stopped after it, however it ends."""
    telemetry, metrics_port = start_metrics(metrics, resident, say)  # a port in use fails here
    recorder = None
    try:
        recorder = start_recording(record, record_days, record_max_mb, one_model, who,
                                   record_user_mb, say)
        if telemetry is not None:
            telemetry.recorder = recorder
        yield telemetry, recorder
    finally:
        stop_metrics(metrics_port)
        if recorder is not None:
            recorder.close()

def serve(model: Path | None, address, *, models: Path | None = None,
          max_bytes: int = 10_000_001, max_clients: int = 8, timeout: float = 10.0,
          reload_interval: float = 1.0, allow_remote: bool = False, socket_mode: int = 0o600,
          user_from_peer: bool = False, allow_any_user_to_teach: bool = False,
          flush_seconds: float = 1.0, max_resident_users: int = 16, max_users: int = 1000,
          metrics: str | None = None, record: Path | None = None, record_days: float = 30.0,
          record_max_mb: int = 200, record_user_mb: int | None = None,
          key_file: Path | None = None, stop: threading.Event | None = None,
          say: Say = _silent) -> None:
    """The resident scorer (``textnb serve``): load the model, bind ``address``, answer
    ``textnb filter --server`` and ``textnb-client`` until ``stop`` is set.

    model (Path | None): the model file; with ``models``, the shared model for users
        without one (None: ``models/_shared/model.tnb``). Without ``models`` it is required.
    address (str | tuple[str, int]): a Unix socket path or (host, port)
        (``textnb.delivery.client.parse_address``).
    key_file (Path | None): the key shared with the clients (``--key-file``): replies
        prove the scorer holds it (textnb.delivery.client.read_key).
    The other options are ``textnb serve``'s (``textnb serve --help``). Refuses, before
    any model loads, a setup that would let any local user teach any user's model
    (``textnb.delivery.server.check_who_may_teach``, docs/security.md).
    """
    from ..delivery.client import KeyFileError, read_key, show_address
    from ..delivery.server import ResidentModel, ScorerServer, check_who_may_teach
    from ..delivery.users import ModelSet

    if not flush_seconds >= 0:
        raise TextnbError(f"--flush-seconds {flush_seconds} must be >= 0 seconds")
    if user_from_peer and models is None:
        raise TextnbError("--user-from-peer goes with --models DIR (a model per user)")
    if models is None and model is None:
        raise TextnbError("serve needs a model file, or --models DIR")
    try:
        key = read_key(key_file) if key_file is not None else None
    except KeyFileError as exc:
        raise TextnbError(str(exc)) from None
    stop = stop if stop is not None else threading.Event()
    # before any model loads: the refusal names the safe recipe at once
    check_who_may_teach(models is not None, address, socket_mode, user_from_peer,
                        allow_any_user_to_teach)
    if models is not None:
        resident = ModelSet(models, model, flush_seconds=flush_seconds,
                            max_resident=max_resident_users, max_users=max_users)
        shown = f"{models}/<user>/model.tnb, shared {resident.shared.path}"
    else:
        resident = ResidentModel(model, flush_seconds=flush_seconds)
        shown = str(model)
    with _watched(resident, metrics, record, record_days, record_max_mb, record_user_mb,
                  models is None, "serve", say) as (telemetry, recorder):
        server = ScorerServer(resident, address, max_bytes=max_bytes, max_clients=max_clients,
                              timeout=timeout, reload_interval=reload_interval,
                              allow_remote=allow_remote, socket_mode=socket_mode,
                              user_from_peer=user_from_peer,
                              allow_any_user_to_teach=allow_any_user_to_teach,
                              telemetry=telemetry, recorder=recorder, key=key).bind()
        _warn_about_training("serve", resident, say,
                             "; users without a model of their own get these verdicts"
                             if models is not None else "")
        say(f"textnb serve: model {shown} on {show_address(server.bound_address)} "
            f"(pid {os.getpid()}); SIGTERM stops")
        server.serve_forever(stop)

def milter(socket_spec: str, model: Path | None, *, models: Path | None = None,
           cost_ratio: float | None = None, spamassassin: bool = False,
           reject_above: float | None = None, quarantine_above: float | None = None,
           on_error: str = "accept", max_bytes: int = 10_000_001, timeout: float = 10.0,
           reload_interval: float = 1.0, allow_remote: bool = False,
           recipient_user: str = "local", metrics: str | None = None,
           record: Path | None = None, record_days: float = 30.0, record_max_mb: int = 200,
           record_user_mb: int | None = None, store: tuple[str, str] | None = None,
           store_users: bool = False, say: Say = _silent) -> int:
    """The milter (``textnb milter``): add X-TextNB-Status and X-TextNB-Score to each
    message the MTA passes, until SIGTERM. RETURNS the messages scored.

    socket_spec (str): where the MTA connects, in Postfix notation (inet:PORT@HOST or
        unix:PATH). model, models: as :func:`serve`'s; with ``models`` the recipient
        names the user (``recipient_user``: 'local' or 'address').
    store ((url, model name) | None): score with a model of a shared store instead, held in
        memory and following its log (``textnb.modelfile.postgres``); with ``store_users``,
        a recipient's own model in the store when they have one
        (``textnb.delivery.shared_users``).
    The policy options are checked (``textnb.delivery.milter_options.MilterPolicy``)
    and the address parsed before pymilter is imported, so a bad one is named as such
    on a machine without pymilter too, and before the model loads.
    """
    from ..delivery.milter_options import MilterPolicy, parse_socket

    if recipient_user not in ("local", "address"):
        raise TextnbError(f"--recipient-user '{recipient_user}' is not local or address")
    if models is None and model is None and store is None:
        raise TextnbError("milter needs a model file, or --models DIR")
    policy = MilterPolicy(spamassassin, reject_above, quarantine_above, on_error,
                          max_bytes, timeout, cost_ratio).check()
    parse_socket(socket_spec, allow_remote)
    try:
        from ..delivery.milter import run_milter
    except ImportError as exc:  # pymilter, or the libmilter it links, is missing
        raise TextnbError(f"the milter needs pymilter ({exc}); install it with "
                          "'apt-get install libmilter-dev' then pip install 'textnb[milter]'"
                          ) from None
    from ..delivery.server import ResidentModel
    from ..delivery.users import ModelSet

    following = None
    if store is not None and store_users:
        from ..delivery.shared_users import SharedModelSet

        following = threading.Event()
        resident = SharedModelSet(*store, None, following, reload_interval or 1.0)
        shown = f"{resident.shared.path}, users' own by recipient"
    elif store is not None:
        from ..modelfile.postgres.shared_model import SharedModel

        resident = SharedModel(*store).warmed()
        following = threading.Event()
        resident.follow(following)
        shown = resident.path
    elif models is not None:
        resident = ModelSet(models, model)
        shown = f"{models}/<user>/model.tnb by recipient, shared {resident.shared.path}"
    else:
        resident = ResidentModel(model)
        shown = str(model)
    _warn_about_training("milter", resident, say)
    with _watched(resident, metrics, record, record_days, record_max_mb, record_user_mb,
                  models is None, "milter", say) as (telemetry, recorder), _set_after(following):
        return run_milter(resident, socket_spec, policy, allow_remote=allow_remote,
                          reload_interval=reload_interval,
                          started=lambda: say(f"textnb milter: model {shown} on {socket_spec} "
                                              f"(pid {os.getpid()}); SIGTERM stops"),
                          recipient_user=(recipient_user if models is not None or store_users
                                          else None),
                          telemetry=telemetry, recorder=recorder)


@contextmanager
def _set_after(event: threading.Event | None) -> Iterator[None]:
    """Set ``event`` (a follower's stop) when the block ends, however it ends."""
    try:
        yield
    finally:
        if event is not None:
            event.set()


def web(record: Path, users: Path, scorer_address, host: str = "127.0.0.1", port: int = 8025,
        secure_cookies: bool = False, imap=None, trusted_proxy: str | None = None,
        zone=None, release_command: list[str] | None = None, say: Say = _silent) -> None:
    """The review page (``textnb web``) on http://host:port/ until SIGTERM.

    record (Path): the verdict log ``serve --record`` writes; users (Path): the logins
    file; scorer_address: the scorer the page teaches through (a socket path or (host,
    port)); imap ((host, port) | None): an IMAP server whose LOGIN also admits users;
    trusted_proxy (str | None): the one address whose X-Forwarded-For is believed;
    zone (tzinfo | None): the time zone of the pages' times (None: UTC);
    release_command (list[str] | None): what releases a held message, given its queue id
    (textnb.review.release; None: held mail is not released from the page).
    The record and the users file are checked before the page's libraries are imported,
    so a bad set-up is named as such on a machine without them; then ImportError when
    they are missing (``textnb[web]``).
    """
    if not record.exists():
        raise TextnbError(f"{record} does not exist; start 'textnb serve --record {record}' first")
    check_users_file(users, imap is not None, say)
    import uvicorn

    from ..review.web import make_app

    application = make_app(record, users, scorer_address, secure_cookies=secure_cookies,
                           imap=imap, release_command=release_command,
                           **({"zone": zone} if zone is not None else {}))
    say(f"textnb web: http://{host}:{port}/ (verdicts {record}, teaching through "
        f"{scorer_address}" + (f"; releasing held mail with {' '.join(release_command)}"
                                if release_command else "") + ")")
    uvicorn.run(application, **server_options(host, port, trusted_proxy))


def server_options(host: str, port: int, trusted_proxy: str | None) -> dict:
    """uvicorn's options for the page. uvicorn believes X-Forwarded-For from 127.0.0.1
    by default, so any local client could name itself a new address for every guess
    at a password; the header is read only from the proxy the operator names."""
    options = {"host": host, "port": port, "log_level": "warning", "access_log": False,
               "proxy_headers": trusted_proxy is not None}
    if trusted_proxy is not None:
        options["forwarded_allow_ips"] = trusted_proxy
    return options


def check_users_file(users: Path, imap: bool, say: Say = _silent) -> None:
    """Refuse a users file others may read (its hashes can be guessed offline), and a
    missing one unless IMAP logins are on (every login would fail); TextnbError naming
    the fix."""
    import stat

    try:
        mode = stat.S_IMODE(users.stat().st_mode)
    except FileNotFoundError:
        if not imap:
            raise TextnbError(f"the users file {users} does not exist, so nobody could log "
                              f"in; add a login first: textnb web-user add NAME --users {users}") from None
        say(f"textnb web: warning: no users file {users}: only mail passwords (--imap) log "
            "in, and nobody is an admin")
        return
    if mode & 0o077:
        raise TextnbError(f"the users file {users} is readable by others (mode {mode:04o}): "
                          f"its password hashes can be guessed offline; chmod 600 {users}")
