"""Pictures of a tuned filter: ROC on logit scales, cost against λ, reliability.

matplotlib is an optional extra (``pip install 'textnb[plots]'``), imported only
here and only when a plot is drawn. Figures are built on ``matplotlib.figure.Figure``
directly, never through pyplot: no global state, no display needed.

- ROC as the TREC spam track draws it: spam misclassification against ham
  misclassification, both in % on logit scales, so the region that matters (hm%
  under 1%) is not squashed into a corner. Lower left is better.
- Cost curve: cost relative to no filter (λ·FP + FN over n_spam, i.e. 1/TCR)
  against λ, for the tuned rule, the untuned ln λ rule and the best threshold in
  hindsight; the requested λ are marked. Above 1 the filter costs more than it saves.
- Reliability diagram: the spam rate of each P(spam) bin against the bin's mean
  P(spam), before and after calibration; on the diagonal is calibrated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

from ..decision import calibration as cal
from ..errors import TextnbError

__all__ = ["PlotError", "plot_cost_curve", "plot_reliability", "plot_roc", "roc_curve",
           "tuning_figure"]

# One curve of the cost plot: (label, scores, threshold for a λ).
Rule = tuple[str, np.ndarray, Callable[[float], float]]


class PlotError(TextnbError):
    """A plot cannot be drawn (matplotlib missing, or nothing to draw)."""


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("plots need matplotlib; install it with "
                        "pip install 'textnb[plots]' (or pip install matplotlib)") from None
    return Figure


def roc_curve(y, scores) -> tuple[np.ndarray, np.ndarray]:
    """Ham and spam misclassification fractions at every distinct threshold.

    Returns (hm, sm), each of shape (n_levels + 1,), from "flag nothing" (hm 0, sm 1)
    to "flag everything" (hm 1, sm 0).
    """
    y = np.asarray(y).astype(bool)
    levels, which = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
    spam_at = np.bincount(which, weights=y, minlength=levels.size)[::-1]
    ham_at = np.bincount(which, weights=~y, minlength=levels.size)[::-1]
    hm = np.concatenate([[0.0], np.cumsum(ham_at)]) / max((~y).sum(), 1)
    sm = 1.0 - np.concatenate([[0.0], np.cumsum(spam_at)]) / max(y.sum(), 1)
    return hm, sm


def _rates(y, scores, threshold) -> tuple[float, float]:
    y = np.asarray(y).astype(bool)
    flagged = np.asarray(scores) > threshold
    return float(np.mean(flagged[~y])), float(np.mean(~flagged[y]))


def plot_roc(ax, y, scores, points: Sequence[tuple[str, float, float]] = (), label: str = "ROC"):
    """ROC (sm% against hm%) on logit axes; ``points`` are (label, hm, sm) fractions."""
    y = np.asarray(y).astype(bool)
    hm, sm = roc_curve(y, scores)
    # A logit axis cannot show 0 or 1: draw them half a message inside.
    lo_h, lo_s = 0.5 / max((~y).sum(), 1), 0.5 / max(y.sum(), 1)
    ax.step(np.clip(hm, lo_h, 1 - lo_h), np.clip(sm, lo_s, 1 - lo_s), where="post",
            label=label, color="C0")
    markers = iter("os^Dvx*")
    for name, h, s in points:
        ax.plot(np.clip(h, lo_h, 1 - lo_h), np.clip(s, lo_s, 1 - lo_s), next(markers, "o"),
                label=f"{name} (hm {100 * h:.2f}%, sm {100 * s:.1f}%)", ms=7, mfc="none", mew=1.5)
    ax.set_xscale("logit")  # before the formatters: setting a scale resets them
    ax.set_yscale("logit")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(_percent_formatter())
        axis.set_minor_formatter(_blank_formatter())
    # TREC's plots stop at 50%; an operating point that misses more (a "flag nothing"
    # rule at λ = 999 on little data) widens the view to show it.
    top_s = max([0.5] + [min(s, 1 - lo_s) for _, _, s in points])
    ax.set_xlim(min(lo_h, 1e-4), 0.5)
    ax.set_ylim(min(lo_s, 1e-4), float(expit(logit(top_s) + 0.3)) if top_s > 0.5 else 0.5)
    ax.set_xlabel("ham misclassification % (logit scale)")
    ax.set_ylabel("spam misclassification % (logit scale)")
    ax.set_title("ROC (TREC style)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")


def plot_cost_curve(ax, y, rules: Sequence[Rule], marked: Sequence[float] = (),
                    best_scores=None, lambdas=None):
    """Cost over no filter's (1/TCR) against λ for each rule; ``marked`` λ get points.

    best_scores : if given, also the least cost any threshold on these scores reaches
        at each λ (hindsight; what no rule chosen in advance can beat).
    """
    from .tune import min_cost_threshold

    y = np.asarray(y).astype(bool)
    n_spam = max(int(y.sum()), 1)
    lambdas = np.logspace(-1, 4, 121) if lambdas is None else np.asarray(lambdas, float)

    def cost(scores, t, lam):
        flagged = np.asarray(scores) > t
        return (lam * np.sum(flagged & ~y) + np.sum(~flagged & y)) / n_spam

    if best_scores is not None:
        best = [min_cost_threshold(y, best_scores, lam)[1] / n_spam for lam in lambdas]
        ax.plot(lambdas, best, ":", color="0.4", label="best threshold in hindsight")
    for i, (name, scores, threshold_of) in enumerate(rules):
        curve = [cost(scores, threshold_of(lam), lam) for lam in lambdas]
        ax.plot(lambdas, curve, color=f"C{i}", label=name)
        if marked:
            at = [cost(scores, threshold_of(lam), lam) for lam in marked]
            ax.plot(marked, at, "o", color=f"C{i}", mfc="none", ms=7, mew=1.5)
            if i == 0:
                for lam, c in zip(marked, at):
                    ax.annotate(f"λ={lam:g}: {c * n_spam:g}", (lam, c), fontsize=7,
                                xytext=(4, -10), textcoords="offset points")
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="no filter (TCR = 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("λ = cost of a lost ham / cost of a spam let through")
    ax.set_ylabel("(λ·FP + FN) / n_spam  (= 1 / TCR)")
    ax.set_title("Cost against λ")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def plot_reliability(ax, y, probabilities: dict[str, np.ndarray], n_bins: int = cal.N_BINS):
    """Observed spam rate against mean P(spam) per bin, one line per named P(spam)."""
    ax.plot([0, 1], [0, 1], "--", color="0.5", lw=0.8, label="calibrated")
    for i, (name, p) in enumerate(probabilities.items()):
        bins = cal.reliability(y, p, n_bins)
        full = bins["count"] > 0
        sizes = 10 + 60 * np.sqrt(bins["count"][full] / bins["count"].max())
        brier, ece = cal.brier_score(y, p), cal.expected_calibration_error(y, p, n_bins)
        ax.plot(bins["mean_p"][full], bins["spam_rate"][full], "-", color=f"C{i}",
                label=f"{name}: Brier {brier:.4f}, ECE {ece:.4f}")
        ax.scatter(bins["mean_p"][full], bins["spam_rate"][full], s=sizes, color=f"C{i}",
                   zorder=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"mean P(spam) in bin ({n_bins} bins; dot area ~ messages)")
    ax.set_ylabel("fraction spam")
    ax.set_title("Reliability")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def tuning_figure(path: str | Path, y, log_odds, p_calibrated, calibration: dict,
                  cost_ratios: Sequence[float], title: str = "") -> Path:
    """The three plots side by side, written as a PNG.

    y, log_odds : labels (1 = spam) and the model's log-odds of the messages shown.
    p_calibrated : their calibrated P(spam) (tune: cross-fitted; a test split: the map
        applied to its log-odds).
    calibration : the map whose thresholds are marked on the ROC.
    """
    Figure = _figure_class()
    y = np.asarray(y).astype(bool)
    log_odds = np.asarray(log_odds, dtype=np.float64)
    if y.all() or not y.any():
        raise PlotError("plots need both spam and ham among the messages")
    fig = Figure(figsize=(16, 5.2), dpi=110)
    ax_roc, ax_cost, ax_rel = fig.subplots(1, 3)
    points = []
    for lam in cost_ratios:
        points.append((f"tuned λ={lam:g}",
                       *_rates(y, log_odds, cal.log_odds_threshold(calibration, lam))))
    for lam in cost_ratios:
        points.append((f"ln λ, λ={lam:g}", *_rates(y, log_odds, math.log(lam))))
    plot_roc(ax_roc, y, log_odds, points)
    rules = [("tuned: P(spam) > λ/(1+λ)", np.asarray(p_calibrated), lambda lam: lam / (1 + lam)),
             ("untuned: log-odds > ln λ", log_odds, math.log)]
    plot_cost_curve(ax_cost, y, rules, marked=list(cost_ratios), best_scores=log_odds)
    plot_reliability(ax_rel, y, {"raw expit(log-odds)": expit(log_odds),
                                 f"{calibration['method']}": np.asarray(p_calibrated)})
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def _percent_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{100 * v:g}%")


def _blank_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()
