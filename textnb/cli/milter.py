"""textnb milter: verdict headers added by the MTA (Postfix, Sendmail) while the mail is in SMTP."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Optional

import typer

from ._metrics import MetricsOpt, start_metrics, stop_metrics
from ._record import RecordDaysOpt, RecordMaxMbOpt, RecordOpt, RecordUserMbOpt, start_recording
from ._util import CostOpt, ModelOpt, app, check_cost_ratio, model_path, operator_errors


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
    logging.basicConfig(level=logging.INFO, format="textnb milter: %(message)s")
    with operator_errors():
        from ..delivery.milter_options import MilterPolicy, parse_socket

        # Options first, then pymilter: a bad address is named as such on a machine
        # without pymilter too, and fails before the model loads.
        policy = MilterPolicy(spamassassin, reject_above, quarantine_above, on_error,
                              max_bytes, timeout, cost_ratio).check()
        parse_socket(socket_spec, allow_remote)
        try:
            from ..delivery.milter import run_milter
        except ImportError as exc:  # pymilter, or the libmilter it links, is missing
            raise _missing_library(exc) from None
        from ..delivery.server import ResidentModel
        from ..delivery.users import ModelSet
        from ..models.health import training_health

        if models is not None:
            resident = ModelSet(models, model)
            path = f"{models}/<user>/model.tnb by recipient, shared {resident.shared.path}"
        else:
            path = model_path(model)
            resident = ResidentModel(path)
        for line in training_health(resident.spam_filter.n_learned).problems:
            typer.echo(f"textnb milter: warning: {line}", err=True)
        telemetry, metrics_port = start_metrics(metrics, resident)
        recorder = start_recording(record, record_days, record_max_mb, models is None,
                                   "milter", user_mb=record_user_mb)
        if telemetry is not None:
            telemetry.recorder = recorder

        def banner():
            typer.echo(f"textnb milter: model {path} on {socket_spec} (pid {os.getpid()}); "
                       "SIGTERM stops", err=True)

        try:
            run_milter(resident, socket_spec, policy, allow_remote=allow_remote,
                       reload_interval=reload_interval, started=banner,
                       recipient_user=recipient_user if models is not None else None,
                       telemetry=telemetry, recorder=recorder)
        finally:
            stop_metrics(metrics_port)
            if recorder is not None:
                recorder.close()


def _missing_library(exc: ImportError):
    from ..errors import TextnbError

    return TextnbError(f"the milter needs pymilter ({exc}); install it with "
                       "'apt-get install libmilter-dev' then pip install 'textnb[milter]'")
