"""textnb explain: why a message got its score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import CostOpt, JsonOpt, ModelOpt, app, model_path, operator_errors


# fmt: off
@app.command("explain")
def explain_cli(
    source: str = typer.Argument(..., help="A message file, mbox, directory or '-'."),
    model: Optional[Path] = ModelOpt,
    top: int = typer.Option(15, "--top", "-k", help="How many tokens to show."),
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Explain a decision: the tokens that moved the log-odds most, with their counts."""
    from .. import commands

    with operator_errors():
        for e in commands.explain(model_path(model), source, top, cost_ratio):
            d = e.decision
            if as_json:
                typer.echo(json.dumps({
                    "source": e.source, "label": d.label, "log_odds": d.log_odds,
                    "p_spam": d.p_spam, "threshold": d.threshold, "prior_log_odds": e.prior_log_odds,
                    "unknown_tokens": e.unknown_tokens,
                    "clues": [{"token": t, "log_odds": c, "count": n, "spam_count": s, "ham_count": h}
                              for t, c, n, s, h in e.clues]}))
                continue
            typer.echo(f"{e.source}: {d.label} (log-odds {d.log_odds:.2f}, threshold "
                       f"{d.threshold:.2f}, P(spam) {d.p_spam:.4f})")
            typer.echo(f"  prior log-odds {e.prior_log_odds:+.2f}; {e.unknown_tokens} tokens never seen in training")
            typer.echo(f"  {'contribution':>12}  {'count':>5}  {'in spam':>8}  {'in ham':>8}  token")
            for token, contrib, count, s, h in e.clues:
                typer.echo(f"  {contrib:>+12.3f}  {count:>5.0f}  {s:>8.0f}  {h:>8.0f}  {token}")


