"""Statistics the bench scripts share: a paired stratified bootstrap, a percentile."""

from __future__ import annotations

import numpy as np

from textnb.evaluation import metrics


METRICS = {
    "one_minus_auc_pct": metrics.one_minus_auc_pct,
    "sm_pct_at_hm_0.1pct": metrics.sm_at_hm,
}


def paired_bootstrap(y: np.ndarray, a: np.ndarray, b: np.ndarray, n_resamples: int,
                     seed: int = 0) -> dict:
    """Per metric: a's and b's value, the 95% interval of a - b over stratified
    resamples, and the share of resamples where a is lower (better) than b."""
    y = np.asarray(y, dtype=bool)
    spam, ham = np.flatnonzero(y), np.flatnonzero(~y)
    rng = np.random.default_rng(seed)
    diffs = {name: np.empty(n_resamples) for name in METRICS}
    for i in range(n_resamples):
        rows = np.concatenate([rng.choice(spam, spam.size), rng.choice(ham, ham.size)])
        for name, metric in METRICS.items():
            diffs[name][i] = metric(y[rows], a[rows]) - metric(y[rows], b[rows])
    out = {}
    for name, metric in METRICS.items():
        d = diffs[name]
        low, high = np.percentile(d, [2.5, 97.5])
        out[name] = {"textnb": metric(y, a), "bogofilter": metric(y, b),
                     "diff_ci95": [float(low), float(high)],
                     "textnb_better_share": float(np.mean(d < 0)),
                     "tie_share": float(np.mean(d == 0))}
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
