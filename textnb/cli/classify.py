"""textnb classify: a verdict per message."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    CostOpt,
    IndexOpt,
    JsonOpt,
    ModelOpt,
    TsvOpt,
    app,
    check_cost_ratio,
    model_path,
    operator_errors,
)


# fmt: off
@app.command("classify")
def classify_cli(
    sources: Optional[List[str]] = typer.Argument(None, help="Messages: files, directories, mbox, Maildir, or '-' for stdin (the default)."),
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Classify messages: one line each with the label, log-odds, P(spam) and the source."""
    from .. import commands

    with operator_errors():
        check_cost_ratio(cost_ratio)
        counts = {"spam": 0, "ham": 0, "unsure": 0}
        for scored in commands.classify(model_path(model), sources or [], index or [], tsv or [],
                                        cost_ratio):
            d = scored.decision
            counts[d.label] += 1
            if as_json:
                typer.echo(json.dumps({"source": scored.source, "label": d.label,
                                       "log_odds": d.log_odds, "p_spam": d.p_spam,
                                       "threshold": d.threshold}))
            else:
                typer.echo(f"{d.label:<6} {d.log_odds:>10.2f} {d.p_spam:>8.6f}  {scored.source}")
    if not as_json and sys.stderr.isatty():
        typer.echo(", ".join(f"{v} {k}" for k, v in counts.items()), err=True)


