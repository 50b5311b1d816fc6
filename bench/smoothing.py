"""How strong rare evidence is: Lidstone's alpha, per class, chosen by the data, or shrunk
toward the pooled counts; on the six validation cells and the conflicting-labels test.

    python -m bench.smoothing [--variant NAME ...] [--json docs/results/smoothing.json]

A token never seen in ham weighs log((n_spam + α) / α) plus the classes' normalisers, so
alpha decides how much a rare or one-sided token counts against one seen often on both
sides: an advertisement's words (seen in spam only) against a mailing list's header
tokens (seen in both, far more in ham). The multinomial model's term probability
(``textnb.models.naive_bayes.MultinomialNB``) is replaced, for the length of a run, by:

- **Lidstone, α = a** for both classes: the same as ``--set model.alpha=a``;
- **per class** (α_ham, α_spam): each class's counts smoothed with its own pseudo-count;
- **chosen by the evidence**: each class's α (or one for both) maximising the
  Dirichlet-multinomial marginal likelihood of its counts, type-II maximum likelihood
  (D. J. C. MacKay and L. C. B. Peto, "A hierarchical Dirichlet language model",
  Natural Language Engineering 1(3), 1995), refitted with every model;
- **toward the pooled counts**: θ_cj = (N_cj + α + μ p_j) / (N_c + α n + μ), p_j the two
  classes' pooled Lidstone estimate and μ = r (N_spam + N_ham), a Dirichlet prior whose
  mean is the background distribution (C. Zhai and J. Lafferty, "A study of smoothing
  methods for language models applied to information retrieval", ACM TOIS 22(2), 2004):
  it bounds the weight of a token seen often in one class only, whatever its count.

For each: the six validation cells (``bench.select_defaults``: hash cross-validation and
chronological validation on the training parts; (1-AUC)% and sm% at hm 0.1% and their
geometric means) and the conflicting-labels test on both of its splits
(``bench.conflicting_labels``: the worst relabelled advertisement's share of spams
outscored, and the whole future's figures). Measured, not built: the results are in
docs/conflicting-evidence.md#smoothing-how-strong-rare-evidence-is.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

from bench import conflicting_labels, select_defaults
from bench.common import require_corpora, write_json
from textnb.models import naive_bayes

VARIANTS = {
    "Lidstone 0.1 (default)": None,
    "Lidstone 0.03": ("per class", 0.03, 0.03),
    "Lidstone 0.15": ("per class", 0.15, 0.15),
    "Lidstone 0.2": ("per class", 0.2, 0.2),
    "Lidstone 0.3": ("per class", 0.3, 0.3),
    "Lidstone 1": ("per class", 1.0, 1.0),
    "Lidstone 3": ("per class", 3.0, 3.0),
    "per class, ham 0.3 / spam 0.1": ("per class", 0.3, 0.1),
    "per class, ham 1 / spam 0.1": ("per class", 1.0, 0.1),
    "per class, ham 0.1 / spam 0.03": ("per class", 0.1, 0.03),
    "chosen by the evidence, per class": ("evidence", "per class"),
    "chosen by the evidence, one for both": ("evidence", "shared"),
    "toward the pooled counts, r = 0.001": ("background", 0.001),
    "toward the pooled counts, r = 0.01": ("background", 0.01),
}


def log_evidence(counts: np.ndarray, alpha: float) -> float:
    """log P(counts | symmetric Dirichlet(alpha)) of one class's term counts, up to the
    multinomial coefficient (which does not depend on alpha)."""
    n, total = counts.size, float(counts.sum())
    seen = counts[counts > 0]
    return float(gammaln(n * alpha) - gammaln(total + n * alpha)
                 + np.sum(gammaln(seen + alpha)) - seen.size * gammaln(alpha))


def evidence_alphas(counts: np.ndarray, shared: bool) -> np.ndarray:
    """Each row's (class's) alpha maximising its evidence, or one maximising their sum."""
    def best(objective):
        return float(np.exp(minimize_scalar(objective, bounds=(-8.0, 3.0),
                                            method="bounded").x))
    if shared:
        a = best(lambda la: -sum(log_evidence(row, np.exp(la)) for row in counts))
        return np.array([a, a])
    return np.array([best(lambda la, row=row: -log_evidence(row, np.exp(la)))
                     for row in counts])


class Smoothing:
    """Replaces the multinomial model's term probabilities while active (``with``)."""

    def __init__(self, spec):
        self.spec = spec
        self.chosen: list[list[float]] = []  # the evidence's alphas, one pair per model

    def alphas(self, model) -> np.ndarray:
        kind = self.spec[0]
        if kind == "per class":
            return np.array(self.spec[1:3])  # rows: ham (class 0), spam (class 1)
        if kind == "evidence":
            cached = getattr(model, "_bench_alphas", None)
            if cached is None or cached[0] != model._n_kept:
                counts = model._fc[:, model._mask]
                cached = (model._n_kept, evidence_alphas(counts, self.spec[1] == "shared"))
                model._bench_alphas = cached
                self.chosen.append(cached[1].round(4).tolist())
            return cached[1]
        return np.array([model.alpha, model.alpha])

    def column_log_probs(self, model, cols):
        counts = naive_bayes._columns_of(model._fc, cols)
        kept = model._kept_count.reshape(-1, 1)
        if self.spec[0] == "background":
            a, total = model.alpha, float(model._kept_count.sum())
            mu = self.spec[1] * total
            pooled = (counts.sum(axis=0) + a) / (total + a * model._n_kept)
            flp = np.log(counts + a + mu * pooled) - np.log(kept + a * model._n_kept + mu)
        else:
            a = self.alphas(model).reshape(-1, 1)
            flp = np.log(counts + a) - np.log(kept + a * model._n_kept)
        flp[:, ~model._mask[cols]] = 0.0
        return (flp,)

    def __enter__(self):
        self.saved = naive_bayes.MultinomialNB._column_log_probs
        if self.spec is not None:
            smoothing = self
            naive_bayes.MultinomialNB._column_log_probs = (
                lambda model, cols: smoothing.column_log_probs(model, cols))
        return self

    def __exit__(self, *exc):
        naive_bayes.MultinomialNB._column_log_probs = self.saved


def run_json(main, argv) -> dict:
    """A bench script's JSON output, its printing silenced."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        with contextlib.redirect_stdout(io.StringIO()):
            if main([*argv, "--json", str(out)]) != 0:
                raise RuntimeError(f"{main.__module__} {argv} failed")
        return json.loads(out.read_text())


def conflicted(rows: dict) -> dict:
    return {name: {k: rows[name]["textnb"][k] for k in
                   ("worst_spams_outscored_pct", "median_spams_outscored_pct",
                    "one_minus_auc_pct", "sm_pct_at_hm_0.1pct")}
            for name in rows}


def measure(spec) -> dict:
    with Smoothing(spec) as smoothing:
        cells = run_json(select_defaults.main, ["--variant", ""])[0]
        test = run_json(conflicting_labels.main, ["--no-peer"])["results"]
        validation = run_json(conflicting_labels.main,
                              ["--no-peer", "--split", "chronological-validation"])["results"]
    out = {"validation_cells": cells, "conflicting_test": conflicted(test),
           "conflicting_validation": conflicted(validation)}
    if smoothing.chosen:
        chosen = np.array(smoothing.chosen)
        out["alphas_chosen_ham_spam_range"] = [chosen.min(axis=0).tolist(),
                                               chosen.max(axis=0).tolist()]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=list(VARIANTS))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    results = {}
    for name in args.variant or VARIANTS:
        r = results[name] = measure(VARIANTS[name])
        cells, test = r["validation_cells"], r["conflicting_test"]
        lists = "  ".join(f"{k}: {v['worst_spams_outscored_pct']:.1f}% / "
                          f"{v['one_minus_auc_pct']:.3f}" for k, v in test.items())
        print(f"{name:<40} gmean {cells['gmean_one_minus_auc_pct']:.4f} / "
              f"{cells['gmean_sm_pct_at_hm_0.1pct']:.2f} | conflicting: {lists}", flush=True)
    write_json(args.json, {"variants": {k: VARIANTS[k] for k in results}, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
