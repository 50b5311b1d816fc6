"""The ``--metrics`` option that ``serve`` and ``milter`` share (textnb.delivery.telemetry)."""

from __future__ import annotations

import typer

# fmt: off
MetricsOpt = typer.Option(None, "--metrics", help="Serve counters, a latency histogram and the model's age in the Prometheus text format at http://[HOST:]PORT/metrics (loopback only). Default: off.")
# fmt: on
