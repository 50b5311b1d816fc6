"""textnb filter: one message through, verdict headers added, for delivery agents."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ._util import CostOpt, ModelOpt, app, model_path


# fmt: off
@app.command("filter")
def filter_cli(
    model: Optional[Path] = ModelOpt,
    server: Optional[str] = typer.Option(None, "--server", help="Ask a running 'textnb serve' at this Unix socket path or HOST:PORT; score in process if it is down."),
    cost_ratio: Optional[float] = CostOpt,
    spamassassin: bool = typer.Option(False, "--spamassassin", help="Also write SpamAssassin's X-Spam-Flag: YES (spam only) and X-Spam-Status: Yes|No, so existing rules keep working."),
    always_exit_0: bool = typer.Option(False, "--always-exit-0", help="Exit 0 whatever the verdict (for agents that treat non-zero as failure); failing to write the message still exits 3."),
    timeout: float = typer.Option(10.0, "--timeout", help="With --server: seconds to wait for the scorer before scoring in process."),
    learn: bool = typer.Option(False, "--learn", help="Then train the model on the message under its verdict, as bogofilter -u (spam and ham only, through the ledger; slow: loads and rewrites the model)."),
):
    # fmt: on
    """Filter one message from stdin to stdout, adding X-TextNB-Status and X-TextNB-Score.

    Exit status: 0 spam, 1 ham, 2 unsure, 3 error (the message still goes out, unchanged).
    """
    from ..client import client_scorer, parse_address, run_filter
    from ..filter import in_process_scorer, learn_verdict

    path = model_path(model)
    notes: list[str] = []
    if cost_ratio is not None and not 0 < cost_ratio < float("inf"):
        # Not a usage error (exit 2 means "unsure" here, and would drop the message).
        def score(raw):
            raise ValueError(f"--cost-ratio {cost_ratio} must be > 0 and finite")
    elif server:
        score = client_scorer(parse_address(server), path, cost_ratio, timeout, notes=notes)
    else:
        score = in_process_scorer(path, cost_ratio)
    learner = (lambda raw, verdict: learn_verdict(path, raw, verdict)) if learn else None
    code = run_filter(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, score, spamassassin,
                      always_exit_0, notes, learner)
    raise typer.Exit(code)
