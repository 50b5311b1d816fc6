"""The ``--metrics`` option that ``serve`` and ``milter`` share (textnb.delivery.telemetry)."""

from __future__ import annotations

import typer

# fmt: off
MetricsOpt = typer.Option(None, "--metrics", help="Serve counters, a latency histogram and the model's age in the Prometheus text format at http://[HOST:]PORT/metrics (loopback only). Default: off.")
# fmt: on


def start_metrics(spec, models):
    """The Telemetry and its HTTP port for ``--metrics spec``; (None, None) when off.

    models (ResidentModel | ModelSet): what serves, read at each scrape. Prints where
    the metrics are; MetricsError (an operator error) when the port cannot open.
    """
    if spec is None:
        return None, None
    from ..delivery.telemetry import Telemetry, parse_metrics_address, serve_metrics

    telemetry = Telemetry(lambda: models)
    port = serve_metrics(telemetry, *parse_metrics_address(spec))
    host, number = port.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    # A loopback port has no owner: every local uid can scrape it (docs/security.md).
    typer.echo(f"textnb: metrics on http://{shown}:{number}/metrics (readable by every "
               "local user: counts of verdicts and learns, no message content)", err=True)
    return telemetry, port


def stop_metrics(port) -> None:
    if port is not None:
        port.shutdown()
        port.server_close()
