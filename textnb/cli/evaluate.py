"""textnb evaluate: the field's metrics on held-out mail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    CostOpt,
    EngineOpt,
    EngineStrictOpt,
    HamOpt,
    IndexOpt,
    JobsOpt,
    JsonOpt,
    ModelOpt,
    SchedulerOpt,
    SpamOpt,
    TsvOpt,
    app,
    check_cost_ratio,
    model_to_read,
    operator_errors,
    pick_engine,
    skipping_unreadable,
)


# fmt: off
@app.command("evaluate")
def evaluate_cli(
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    spam: Optional[List[str]] = SpamOpt,
    ham: Optional[List[str]] = HamOpt,
    tsv: Optional[List[str]] = TsvOpt,
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
    engine: str = EngineOpt,
    scheduler: Optional[str] = SchedulerOpt,
    jobs: Optional[int] = JobsOpt,
    strict: bool = EngineStrictOpt,
):
    # fmt: on
    """Measure a model on held-out labelled mail: (1-AUC)%, hm%, sm%, sm% at hm=0.1%, TCR.

    Inputs that cannot be read are skipped and listed on stderr, the figures are those
    of the rest; with --strict the first one stops the run (exit 1).
    """
    from .. import commands

    with operator_errors(), skipping_unreadable(strict):
        check_cost_ratio(cost_ratio)
        result = commands.evaluate(model_to_read(model), index or [], spam or [], ham or [],
                                   tsv or [], cost_ratio, engine=pick_engine(engine, scheduler, jobs))
    learned = result.get("learned", 0)
    if learned:
        typer.echo(f"textnb: warning: {learned:,} of {result['n_messages']:,} messages were "
                   "trained on (the model's ledger holds them): these figures are optimistic; "
                   "evaluate on mail the model has not learned", err=True)
    if as_json:
        typer.echo(json.dumps(result, default=float))
        return
    for line in report_lines(result):
        typer.echo(line)


def report_lines(r: dict) -> list[str]:
    """The evaluation as a person reads it: rates, the confusion matrix, costs per λ."""
    from ._tables import confusion_lines, cost_rows

    rule = f"λ = {r['cost_ratio']:g}, spam iff log-odds > {r['threshold']:.2f}"
    rule += f" ({r['calibration']} calibration)" if r["calibration"] else " (ln λ)"
    lines = [
        f"{r['n_messages']:,} messages: {r['n_spam']:,} spam, {r['n_ham']:,} ham",
        f"(1-AUC)%          {r['one_minus_auc_pct']:.4f}",
        f"hm%               {r['hm_pct']:.2f}   ({r['fp']:,} ham called spam; {rule})",
        f"sm%               {r['sm_pct']:.2f}   ({r['fn']:,} spam called ham)",
        f"lam%              {r['lam_pct']:.3f}",
        f"sm% at hm = 0.1%  {r['sm_pct_at_hm_0.1pct']:.2f}",
        f"hm% at sm = 0.1%  {r['hm_pct_at_sm_0.1pct']:.2f}",
        f"P(spam)           Brier {r['brier']:.5f}, ECE {r['ece']:.5f}",
        "",
        *confusion_lines(r),
        "",
        "cost per λ (cost = λ·FP + FN; TCR = n_spam / cost), each at the model's rule for that λ:",
        *cost_rows(r["cost_ratios"]),
    ]
    return lines


