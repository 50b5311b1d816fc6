"""textnb explain: why a message got its score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import (
    CostOpt,
    JsonOpt,
    ModelOpt,
    app,
    check_cost_ratio,
    model_to_read,
    operator_errors,
)

# Ask the model for every token the score is made of (max_discriminators of them, or all
# when that is 0), so the shares below add up; only --top of them are shown.
_ALL = 1_000_000


def breakdown(e, k: int) -> dict:
    """Where an Explanation's log-odds come from: prior, shown tokens, the other used ones.

    The prior's share is |prior| / (|prior| + |absence| + Σ|token contributions|): how
    much of the evidence, in log-odds, the training mix alone supplied.
    """
    used = e.clues
    shown = used[:k]
    weight = abs(e.prior_log_odds) + abs(e.absence_log_odds) + sum(abs(c[1]) for c in used)
    return {
        # each side's total: strong evidence both ways (a list's advertisement) shows as
        # two large sides whose difference is the score (docs/conflicting-evidence.md)
        "spam_side": sum(c[1] for c in used if c[1] > 0),
        "ham_side": sum(c[1] for c in used if c[1] < 0),
        "shown": shown,
        "shown_log_odds": sum(c[1] for c in shown),
        "others": len(used) - len(shown),
        "others_log_odds": sum(c[1] for c in used[k:]),
        "prior_share": abs(e.prior_log_odds) / weight if weight else 0.0,
    }


def _verdict_line(e) -> str:
    d = e.decision
    if d.label == "unsure":
        why = (f"log-odds {d.log_odds:+.2f} is in the review band around the threshold "
               f"{d.threshold:+.2f}, where the model leaves the verdict to a person "
               "(textnb info shows the band)")
    else:
        side = "above" if d.log_odds > d.threshold else "at or below"
        why = f"log-odds {d.log_odds:+.2f} is {side} the threshold {d.threshold:+.2f}"
    return f"{e.source}: {d.label.upper()}: {why}; P(spam) {d.p_spam:.4f}"


# fmt: off
@app.command("explain")
def explain_cli(
    source: str = typer.Argument(..., help="A message file, mbox, directory or '-'."),
    model: Optional[Path] = ModelOpt,
    top: int = typer.Option(15, "--top", "-k", min=0, help="How many tokens to show."),
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Explain a verdict: the threshold, the prior's share, each side's total and the tokens that moved the score most."""
    from .. import commands

    with operator_errors():
        check_cost_ratio(cost_ratio)
        for e in commands.explain(model_to_read(model), source, _ALL, cost_ratio):
            d, parts = e.decision, breakdown(e, top)
            if as_json:
                typer.echo(json.dumps({
                    "source": e.source, **d.as_json(),
                    "prior_log_odds": e.prior_log_odds, "prior_share": parts["prior_share"],
                    "absence_log_odds": e.absence_log_odds, "tokens_used": e.tokens_used,
                    "combining_log_odds": e.combining_log_odds,
                    "other_tokens_log_odds": parts["others_log_odds"],
                    "spam_clues_log_odds": parts["spam_side"],
                    "ham_clues_log_odds": parts["ham_side"],
                    "unknown_tokens": e.unknown_tokens,
                    "clues": [{"token": t, "log_odds": c, "count": n, "llr": c / n if n else c,
                               "spam_count": s, "ham_count": h}
                              for t, c, n, s, h in parts["shown"]]}))
                continue
            absent = (f", absent tokens {e.absence_log_odds:+.2f}" if e.absence_log_odds else "")
            if e.combining_log_odds:
                absent += (f", chi-square combining {e.combining_log_odds:+.2f} (evidence on "
                           "both sides pulls the score toward the middle)")
            typer.echo(_verdict_line(e))
            typer.echo(f"  prior log-odds {e.prior_log_odds:+.2f} ({parts['prior_share']:.0%} "
                       f"of the evidence){absent}; spam clues {parts['spam_side']:+.2f}, ham clues "
                       f"{parts['ham_side']:+.2f}; the {len(parts['shown'])} tokens below "
                       f"{parts['shown_log_odds']:+.2f}, {parts['others']} more "
                       f"{parts['others_log_odds']:+.2f}; {e.unknown_tokens} tokens never "
                       "seen in training")
            typer.echo(f"  {'log-odds':>9} = {'count':>5} x {'LLR':>7}  {'in spam':>7}  "
                       f"{'in ham':>7}  token")
            for token, contrib, count, s, h in parts["shown"]:
                llr = contrib / count if count else contrib
                typer.echo(f"  {contrib:>+9.3f} = {count:>5.0f} x {llr:>+7.3f}  {s:>7.0f}  "
                           f"{h:>7.0f}  {token}")
