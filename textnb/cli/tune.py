"""textnb tune: the threshold for each cost ratio, calibrated P(spam), by cross-validation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    HamOpt,
    IndexOpt,
    JobsOpt,
    JsonOpt,
    ModelOpt,
    Progress,
    SpamOpt,
    StoreModelOpt,
    StoreOpt,
    StrictOpt,
    TsvOpt,
    app,
    check_cost_ratio,
    check_store,
    model_path,
    operator_errors,
    skipping_unreadable,
    stored_model_name,
)


# fmt: off
@app.command("tune")
def tune_cli(
    model: Optional[Path] = ModelOpt,
    cost_ratio: Optional[List[float]] = typer.Option(None, "--cost-ratio", "-r", help="λ = cost of losing a ham / cost of letting a spam through (repeatable; default 1, 9 and 999). With --write the first becomes the model's default."),
    index: Optional[List[str]] = IndexOpt,
    spam: Optional[List[str]] = SpamOpt,
    ham: Optional[List[str]] = HamOpt,
    tsv: Optional[List[str]] = TsvOpt,
    folds: int = typer.Option(5, "--folds", "-k", min=2, help="Cross-validation folds."),
    chronological: bool = typer.Option(False, "--chronological", help="Folds are contiguous blocks in the order given (mail in delivery order), not stratified random ones."),
    search: bool = typer.Option(False, "--search", help="Also choose alpha, the event model, tf/binary features and the evidence kept by the same cross-validation (up to 300 settings): the least held-out cost among the settings whose out-of-fold (1-AUC)% is within 1.5 times the best (docs/tuning.md#how-search-chooses)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the ROC, cost and reliability plots to this PNG (needs matplotlib: pip install 'textnb[plots]')."),
    write: bool = typer.Option(False, "--write", help="Replace the model with one trained on this mail with the chosen settings, carrying the calibration; classify then decides by P(spam) > λ/(1+λ)."),
    review_cost: Optional[float] = typer.Option(None, "--review-cost", min=0.0, help="Cost of a person's look at one message, in units of a spam let through: also report the three-way rule (unsure where a look costs less than either verdict: docs/tuning.md#a-third-verdict); with --write the model keeps it. Default: the model's (0, two-way)."),
    jobs: Optional[int] = JobsOpt,
    as_json: bool = JsonOpt,
    strict: bool = StrictOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Tune the decision on labelled mail: for each λ the threshold of least cost λ·FP + FN,
    and a P(spam) calibrated out of fold, so that spam iff P(spam) > λ/(1+λ).

    Inputs that cannot be read are skipped and listed on stderr; with --strict the
    first one stops the run (exit 1) and the model stays as it was.

    With --store, the shared model's settings are tuned, and --write replaces that model,
    in one transaction, as it replaces a model file: every host following it scores with
    the new one from the commit on, without a restart.
    """
    from .. import commands

    with operator_errors(), skipping_unreadable(strict):
        for r in cost_ratio or []:
            check_cost_ratio(r)
        shared = check_store(store, model)
        shown = stored_model_name(store, store_model) if shared else model_path(model)
        if write:  # said before the work: the model's present counts are not kept
            typer.echo(f"textnb: tune --write replaces {shown} with a model trained "
                       "on this mail alone, with the tuned settings and calibration", err=True)
        progress = Progress("read")
        try:
            if shared:
                from ..commands.shared_store import tune as store_tune

                result = store_tune(store, store_model, cost_ratio or [], index or [],
                                    spam or [], ham or [], tsv or [], n_folds=folds,
                                    chronological=chronological, search=search,
                                    write=write, progress=progress,
                                    review_cost=review_cost, jobs=jobs)
            else:
                result = commands.tune(model_path(model), cost_ratio or [], index or [],
                                       spam or [], ham or [], tsv or [], n_folds=folds,
                                       chronological=chronological, search=search,
                                       write=write, progress=progress,
                                       review_cost=review_cost, jobs=jobs)
        finally:
            progress.close()
        if plot is not None:
            from ..evaluation.plots import tuning_figure

            tuning_figure(plot, result.y, result.log_odds, result.p_cross_fitted,
                          result.calibration, result.cost_ratios,
                          title=f"textnb tune: {len(result.y):,} messages, "
                                f"{result.n_folds}-fold out-of-fold scores")
    if as_json:
        typer.echo(json.dumps(_as_dict(result, write, plot), default=_json_default))
        return
    for line in _report_lines(result, write, plot, shown, shared):
        typer.echo(line)


def _report_lines(result, write: bool, plot: Optional[Path], shown, shared: bool
                  ) -> list[str]:
    """shown: the model file's path, or a shared store's model as messages name it."""
    from ..evaluation.tune import RANKING_TOLERANCE, describe
    from ._tables import cost_rows

    n_spam = int(result.y.sum())
    kind = "chronological blocks" if result.chronological else "stratified"
    q0, q1 = result.quality["before"], result.quality["after"]
    lines = [f"{len(result.y):,} messages ({n_spam:,} spam, {len(result.y) - n_spam:,} ham), "
             f"{result.n_folds}-fold cross-validation ({kind})"]
    if result.search_rows:
        lines.append(f"searched {len(result.search_rows)} settings; chosen (first): the least "
                     "held-out cost among those whose (1-AUC)% is within "
                     f"{RANKING_TOLERANCE:g} times the best; then by held-out cost:")
        for row in result.search_rows[:5]:
            costs = ", ".join(f"λ={lam:g}: {c:g}" for lam, c in row["held_out_cost"].items())
            lines.append(f"  {row['setting']:<55} {costs}  (1-AUC)% {row['one_minus_auc_pct']:.3f}")
    lines += [
        f"settings: {describe(result.config)}; out-of-fold (1-AUC)% {result.one_minus_auc_pct:.4f}",
        "",
        "out-of-fold figures at each tuned threshold (spam iff P(spam) > λ/(1+λ)); "
        "'held-out' uses thresholds",
        "tuned on the other folds only, the estimate for new mail; 'ln λ' is the untuned rule:",
        *cost_rows(result.rows, extra=(("held-out", "held_out_cost"), ("ln λ", "untuned_cost"))),
        "",
        *_review_lines(result.rows, result.calibration, result.config.decision.review_cost),
        f"P(spam), out of fold: Brier {q0['brier']:.5f} -> {q1['brier']:.5f}, "
        f"ECE {q0['ece']:.5f} -> {q1['ece']:.5f} ({result.calibration['method']} calibration)",
    ]
    if plot is not None:
        lines.append(f"plots written to {plot}")
    if not write:
        lines.append("nothing written (add --write to store the settings and calibration "
                     "in the model)")
    elif shared:
        lines.append(f"model {shown} replaced: trained on this mail, calibrated; the hosts "
                     "following it score with it now")
    else:
        lines.append(f"model {shown} rewritten: trained on this mail, calibrated")
    return lines


def _review_lines(rows: list[dict], calibration: dict, cost: float) -> list[str]:
    """The three-way rule's figures per λ, when the tuning had a review cost, and a warning
    for a band with no end: a side that no message is ever decided on."""
    from ..decision.calibration import probability_range

    reviewed = [r for r in rows if "review" in r]
    if not reviewed:
        return []
    lowest, highest = probability_range(calibration)
    lines = ["with a person's look at the unsure (review cost per message as given): "
             "spam above 'high', ham at or below 'low';",
             "cost = λ·FP + FN + review cost × unsure, in sample and held out:",
             f"{'λ':>6} {'low':>8} {'high':>8} {'FP':>5} {'FN':>5} {'unsure':>7} "
             f"{'of them spam':>12} {'cost':>9} {'held-out':>9}"]
    for r in reviewed:
        v = r["review"]
        lines.append(f"{r['cost_ratio']:>6g} {v['low']:>8.2f} {v['high']:>8.2f} {v['fp']:>5} "
                     f"{v['fn']:>5} {v['unsure']:>7} {v['unsure_spam']:>12} {v['cost']:>9.4g} "
                     f"{v['held_out_cost']:>9.4g}")
    for r in reviewed:
        lam, v = r["cost_ratio"], r["review"]
        if math.isinf(v["high"]):
            lines.append(
                f"warning: at λ = {lam:g} no message is called spam, every likely spam is "
                f"'unsure': a look ({cost:g}) costs less than a spam verdict up to P(spam) "
                f"{1 - cost / lam:.4f}, and the calibrated P(spam) tops out at {highest:.4f} "
                f"on this mail; tune on more spam, or give a review cost above "
                f"{lam * (1 - highest):.3g}")
        if math.isinf(v["low"]):
            lines.append(
                f"warning: at λ = {lam:g} no message is called ham, every likely ham is "
                f"'unsure': the calibrated P(spam) never falls to the review cost {cost:g} "
                f"(its lowest is {lowest:.4f}); tune on more ham, or give a review cost of "
                f"at least {lowest:.3g}")
    return lines + [""]


def _as_dict(result, write: bool, plot: Optional[Path]) -> dict:
    from ..evaluation.tune import describe

    return {
        "n_messages": len(result.y), "n_spam": int(result.y.sum()),
        "folds": result.n_folds, "chronological": result.chronological,
        "settings": describe(result.config), "config": result.config.to_dict(),
        "one_minus_auc_pct": result.one_minus_auc_pct,
        # JSON has no infinity: a threshold no score can pass ("flag nothing") is null.
        "cost_ratios": [{**r, "threshold": _finite(r["threshold"]),
                         **({"review": {**r["review"], "low": _finite(r["review"]["low"]),
                                        "high": _finite(r["review"]["high"])}}
                            if "review" in r else {})} for r in result.rows],
        "calibration_quality": result.quality,
        "calibration": {"method": result.calibration["method"],
                        "thresholds": result.calibration["tuning"]["thresholds"]},
        "search": [{"setting": r["setting"], "held_out_cost": {f"{k:g}": v for k, v in
                                                               r["held_out_cost"].items()},
                    "criterion": r["criterion"], "ranks_well": r["ranks_well"],
                    "one_minus_auc_pct": r["one_minus_auc_pct"]} for r in result.search_rows],
        "written": write, "plot": str(plot) if plot is not None else None,
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _json_default(value):
    return float(value)
