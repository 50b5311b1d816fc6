"""textnb milter: verdict headers added by the MTA (Postfix, Sendmail) while the mail is in SMTP."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer

from ._metrics import MetricsOpt
from ._record import RecordDaysOpt, RecordMaxMbOpt, RecordOpt, RecordUserMbOpt
from ._util import (
    CostOpt,
    ModelOpt,
    StoreModelOpt,
    StoreOpt,
    app,
    check_cost_ratio,
    check_store,
    model_path,
    operator_errors,
)


# fmt: off
@app.command("milter")
def milter_cli(
    socket_spec: str = typer.Option(..., "--socket", help="Where the MTA connects, in Postfix notation: inet:PORT@HOST (loopback unless --allow-remote) or unix:PATH (created mode 0660)."),
    model: Optional[Path] = ModelOpt,
    cost_ratio: Optional[float] = CostOpt,
    spamassassin: bool = typer.Option(False, "--spamassassin", help="Also add SpamAssassin's X-Spam-Flag: YES (spam only) and X-Spam-Status, as 'textnb filter --spamassassin'."),
    reject_above: Optional[float] = typer.Option(None, "--reject-above", help="Reject (550 5.7.1) spam with P(spam) above this, e.g. 0.999. Default: never."),
    quarantine_above: Optional[float] = typer.Option(None, "--quarantine-above", help="Quarantine (Postfix: hold queue) spam with P(spam) above this. Default: never."),
    on_error: str = typer.Option("accept", "--on-error", help="On an internal error or timeout: accept (the message unchanged) or tempfail (4xx: the sender retries)."),
    max_bytes: int = typer.Option(10_000_001, "--max-bytes", help="Larger messages are accepted unscored and unchanged."),
    timeout: float = typer.Option(10.0, "--timeout", help="Seconds a message may wait for its verdict; then --on-error applies. Also the wait for sessions on SIGTERM."),
    reload_interval: float = typer.Option(1.0, "--reload-interval", help="Seconds between checks of the model file for a retrained model (0: never reload)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Permit a non-loopback inet: address. The milter protocol has no authentication: firewall it."),
    models: Optional[Path] = typer.Option(None, "--models", help="A model per user, as 'textnb serve --models DIR': the recipient names the user; several users' recipients, or a user without a model, get DIR/_shared/model.tnb (or --model)."),
    recipient_user: str = typer.Option("local", "--recipient-user", help="With --models, the user a recipient names: local (alice+tag@example.org -> alice) or address (alice@example.org)."),
    metrics: Optional[str] = MetricsOpt,
    record: Optional[Path] = RecordOpt,
    record_days: float = RecordDaysOpt,
    record_max_mb: int = RecordMaxMbOpt,
    record_user_mb: Optional[int] = RecordUserMbOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
    store_users: bool = typer.Option(False, "--store-users", help="With --store: score a recipient with their own model in the store (user:<name>, made by serve --store-users) when they have one, else with --store-model's."),
):
    # fmt: on
    """Run as a milter: add X-TextNB-Status and X-TextNB-Score to each message, until SIGTERM.

    Any fault accepts the message unchanged (or tempfails it, with --on-error tempfail).
    """
    check_cost_ratio(cost_ratio)
    if on_error not in ("accept", "tempfail"):
        raise typer.BadParameter(f"'{on_error}' is not accept or tempfail", param_hint="--on-error")
    for option, p in (("--reject-above", reject_above), ("--quarantine-above", quarantine_above)):
        if p is not None and not 0 < p < 1:
            raise typer.BadParameter(f"{p} must be a probability between 0 and 1 (e.g. 0.999)",
                                     param_hint=option)
    if recipient_user not in ("local", "address"):
        raise typer.BadParameter(f"'{recipient_user}' is not local or address",
                                 param_hint="--recipient-user")
    if not record_days > 0:
        raise typer.BadParameter(f"{record_days} must be > 0 days", param_hint="--record-days")
    from ..commands import milter

    logging.basicConfig(level=logging.INFO, format="textnb milter: %(message)s")
    shared = (store, store_model) if check_store(store, model) else None
    if store_users and shared is None:
        raise typer.BadParameter("--store-users goes with --store URL", param_hint="--store-users")
    if shared is not None and (models is not None or record is not None or metrics is not None):
        raise typer.BadParameter("with --store, the milter scores with one model of the store; "
                                 "--models, --record and --metrics go with model files",
                                 param_hint="--store")
    with operator_errors():
        milter(socket_spec, model if models is not None or shared else model_path(model),
               models=models, store=shared, store_users=store_users,
               cost_ratio=cost_ratio, spamassassin=spamassassin, reject_above=reject_above,
               quarantine_above=quarantine_above, on_error=on_error, max_bytes=max_bytes,
               timeout=timeout, reload_interval=reload_interval, allow_remote=allow_remote,
               recipient_user=recipient_user, metrics=metrics, record=record,
               record_days=record_days, record_max_mb=record_max_mb,
               record_user_mb=record_user_mb, say=lambda line: typer.echo(line, err=True))
