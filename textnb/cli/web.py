"""textnb web and textnb web-user: the review page (pip install 'textnb[web]') and its logins."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Optional

import typer

from ..errors import TextnbError
from ._util import app, operator_errors

WEB_EXTRA = "pip install 'textnb[web]'"


def _need_the_libraries(*modules: str) -> None:
    """An operator error naming the install line when one of the page's libraries is absent:
    the options are checked first, as on a machine that has them."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise TextnbError(f"the review page needs its libraries, and {module} is "
                              f"missing ({exc}); install them with {WEB_EXTRA}") from None


def _default_users() -> Path:
    return Path.home() / ".local" / "share" / "textnb" / "web-users.json"


# fmt: off
UsersOpt = typer.Option(None, "--users", help="The logins file (argon2 hashes, mode 0600). Default: ~/.local/share/textnb/web-users.json.")


@app.command("web")
def web_cli(
    record: Path = typer.Option(..., "--record", help="The verdict log 'textnb serve --record' writes."),
    users: Optional[Path] = UsersOpt,
    scorer: Optional[str] = typer.Option(None, "--scorer", help="The scorer to teach through: its socket path or HOST:PORT. Default: $TEXTNB_SOCKET or ~/.local/share/textnb/scorer.sock."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; loopback only unless --allow-remote (put a TLS reverse proxy in front: docs/review-page.md)."),
    port: int = typer.Option(8025, "--port", help="Port to listen on."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Permit a non-loopback --host."),
    secure_cookies: bool = typer.Option(False, "--secure-cookies", help="Mark the session cookie Secure (when a TLS proxy serves the page)."),
    trusted_proxy: Optional[str] = typer.Option(None, "--trusted-proxy", help="The address of the reverse proxy in front (e.g. 127.0.0.1): only its X-Forwarded-For names the client, for the login throttle. Without it the header is ignored."),
    time_zone: Optional[str] = typer.Option(None, "--time-zone", help="The time zone the pages show times in and the statistics count hours and days of (e.g. Europe/Berlin, UTC). Default: the host's ($TZ, else /etc/localtime)."),
    release_command: Optional[str] = typer.Option(None, "--release-command", help="The command that releases mail the milter held, given its queue id (e.g. 'sudo -n /usr/local/bin/textnb-release'; docs/review-page.md#releasing-held-mail). Default: held mail is shown, not released."),
    imap: Optional[str] = typer.Option(None, "--imap", help="Also let users log in with their mail password, checked by this IMAP server's LOGIN ([HOST:]PORT, e.g. 143 for the local Dovecot); the users file's names are checked there first. Such logins are never admins."),
):
    # fmt: on
    """Serve the review page: history, review queue with one-click teaching, statistics."""
    from ..delivery.client import default_socket, parse_address

    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not (loopback or allow_remote):
        raise typer.BadParameter(f"{host!r} is not a loopback address; pass --allow-remote "
                                 "(and serve it behind TLS)", param_hint="--host")
    if allow_remote and not secure_cookies:
        raise typer.BadParameter("a page reachable from other hosts sends passwords and "
                                 "session cookies: serve it behind a TLS proxy and pass "
                                 "--secure-cookies too", param_hint="--allow-remote")
    if trusted_proxy is not None:
        try:
            ipaddress.ip_address(trusted_proxy)
        except ValueError:
            raise typer.BadParameter(f"{trusted_proxy!r} is not an IP address",
                                     param_hint="--trusted-proxy") from None
    if not record.exists():
        raise typer.BadParameter(f"{record} does not exist; start 'textnb serve --record "
                                 f"{record}' first", param_hint="--record")
    address = parse_address(scorer) if scorer else default_socket()
    imap_address = None
    if imap is not None:
        imap_address = parse_address(imap if ":" in imap else f"127.0.0.1:{imap}")
        if not isinstance(imap_address, tuple):
            raise typer.BadParameter(f"{imap!r} is not [HOST:]PORT", param_hint="--imap")
    release = None
    if release_command is not None:
        import shlex

        release = shlex.split(release_command)
        if not release:
            raise typer.BadParameter("an empty command", param_hint="--release-command")
    from ..review.zones import local_zone, named_zone

    try:
        zone = named_zone(time_zone) if time_zone else local_zone()
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--time-zone") from None
    with operator_errors():
        _need_the_libraries("uvicorn", "starlette", "jinja2", "argon2")
        from ..commands import web

        web(record, users or _default_users(), address, host, port, zone=zone,
            secure_cookies=secure_cookies, imap=imap_address, trusted_proxy=trusted_proxy,
            release_command=release, say=lambda line: typer.echo(line, err=True))


# fmt: off
@app.command("web-user")
def web_user_cli(
    action: str = typer.Argument(..., help="add, remove or list."),
    name: Optional[str] = typer.Argument(None, help="The login: the user name the scorer records (textnb-client --user; the scorer's OS user for one model)."),
    users: Optional[Path] = UsersOpt,
    admin: bool = typer.Option(False, "--admin", help="With add: this login sees and teaches every user's mail."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="With add: read the password from the first line of stdin instead of asking."),
):
    # fmt: on
    """Add, remove or list the review page's logins (argon2 hashes in a 0600 file)."""
    import sys

    if action not in ("add", "remove", "list"):
        raise typer.BadParameter(f"{action!r}: use add, remove or list", param_hint="ACTION")
    if action != "list" and not name:
        raise typer.BadParameter(f"'{action}' needs a NAME", param_hint="NAME")
    with operator_errors():
        _need_the_libraries("argon2")  # the users file's hashes, even to list or remove
        from ..review.accounts import Accounts

        accounts = Accounts(users or _default_users())
        if action == "list":
            for login, is_admin in accounts.list():
                typer.echo(f"{login}{' (admin)' if is_admin else ''}")
        elif action == "remove":
            accounts.remove(name)
            typer.echo(f"removed {name}", err=True)
        else:
            if password_stdin:
                password = sys.stdin.readline().rstrip("\r\n")
            else:
                password = typer.prompt(f"password for {name}", hide_input=True,
                                        confirmation_prompt=True)
            accounts.add(name, password, admin=admin)
            typer.echo(f"{name} can log in{' (admin)' if admin else ''} ({accounts.path})",
                       err=True)
