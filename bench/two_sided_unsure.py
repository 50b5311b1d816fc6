"""An unsure verdict for strong evidence both ways, chosen by the cost tuning out of fold.

    python -m bench.two_sided_unsure [--json docs/results/two-sided-unsure.json]

The rule: spam iff the log-odds S - H exceed the tuned threshold t *and* the ham side H
is below h; a message above t with H >= h is 'unsure' (delivered, marked: as bogofilter
files its 0.5 messages), so at the cost ratio it counts as a spam let through when it is
spam and costs nothing when it is ham. h is chosen as ``textnb tune`` would choose it: on
the training part's out-of-fold sides (S, H), among none and the 90, 95, 98, 99 and
99.5th percentiles of the training spams' H, by the held-out cost of five inner folds
(each fold decided by a calibration and threshold fitted on the other four, on the
messages below h); then t is refitted with the chosen h on all of them. The test part
is scored once with each rule.

Two cases at λ = 9 and 999: SpamAssassin's hash split (the README's), and the
conflicting-labels test (bench/conflicting_labels.py: the past holds other lists'
relabelled advertisements, hams with strong evidence both ways, for the tuning to
learn from; the future asks for list L's). docs/conflicting-evidence.md#an-unsure-verdict-for-two-sided-evidence
gives the results.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.common import require_corpora, write_json
from bench.conflict_limits import Matrix, chronological_matrix
from bench.conflicting_labels import LISTS, conflicting
from textnb.config import load_config
from textnb.decision import calibration
from textnb.evaluation.cross_validation import stratified_folds
from textnb.mail.corpora import iter_corpus, split

PERCENTILES = (None, 90.0, 95.0, 98.0, 99.0, 99.5)
COST_RATIOS = (9.0, 999.0)


def threshold(S, H, y, cost_ratio: float, h: float) -> float:
    """The tuned threshold for the messages the two-way rule decides (H below h)."""
    below = H < h
    return calibration.log_odds_threshold(calibration.fit(S[below] - H[below], y[below]),
                                          cost_ratio)


def decide(S, H, t: float, h: float) -> tuple[np.ndarray, np.ndarray]:
    above = S - H > t
    return above & (H < h), above & (H >= h)  # spam, unsure


def cost(y, spam, cost_ratio: float) -> float:
    return float(cost_ratio * np.sum(spam & ~y) + np.sum(~spam & y))


def choose(S, H, y, cost_ratio: float) -> tuple[float, dict]:
    """h by the held-out cost of five inner folds (ties: the first, none)."""
    cut = {p: np.inf if p is None else float(np.percentile(H[y], p)) for p in PERCENTILES}
    held_out = dict.fromkeys(PERCENTILES, 0.0)
    for fold in stratified_folds(y, 5):
        rest = np.setdiff1d(np.arange(len(y)), fold)
        for p, h in cut.items():
            t = threshold(S[rest], H[rest], y[rest], cost_ratio, h)
            held_out[p] += cost(y[fold], decide(S[fold], H[fold], t, h)[0], cost_ratio)
    best = min(PERCENTILES, key=lambda p: held_out[p])
    return cut[best], {("none" if p is None else f"{p:g}th"): c for p, c in held_out.items()}


def scored(train, test, cost_ratio: float) -> dict:
    """Both rules tuned on ``train`` (S, H, y out of fold) and scored on ``test``."""
    h, held_out = choose(*train, cost_ratio)
    out = {"held_out_cost_by_h": held_out, "chosen_h": None if np.isinf(h) else round(h, 2)}
    S, H, y = test
    for name, cut in (("two-way", np.inf), ("with the unsure verdict", h)):
        t = threshold(*train, cost_ratio, cut)
        spam, unsure = decide(S, H, t, cut)
        out[name] = {"threshold": round(t, 2), "fp": int(np.sum(spam & ~y)),
                     "fn": int(np.sum(~spam & y)), "unsure_hams": int(np.sum(unsure & ~y)),
                     "unsure_spams": int(np.sum(unsure & y)), "cost": cost(y, spam, cost_ratio)}
    return out


def out_of_fold_sides(matrix: Matrix, y, rows) -> tuple[np.ndarray, np.ndarray]:
    S, H = np.zeros(len(y)), np.zeros(len(y))
    for fold in stratified_folds(y[rows], 5):
        held = rows[fold]
        S[held], H[held] = matrix.sides(matrix.fit(y, np.setdiff1d(rows, held)), held)
    return S[rows], H[rows]


def case(matrix: Matrix, y, train_rows, test_rows) -> dict:
    train = (*out_of_fold_sides(matrix, y, train_rows), y[train_rows])
    test = (*matrix.sides(matrix.fit(y, train_rows), test_rows), y[test_rows])
    return {f"{lam:g}": scored(train, test, lam) for lam in COST_RATIOS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    require_corpora()
    cfg = load_config(None)
    results = {}
    train, test = split(iter_corpus("spamassassin"))
    y = np.array([e.label == "spam" for e in train + test])
    results["SpamAssassin hash split"] = case(
        Matrix(cfg, [e.raw for e in train + test]), y, np.arange(len(train)),
        np.arange(len(train), len(y)))
    part, ids, original, matrix = chronological_matrix(cfg)
    for changed in LISTS:
        y, moved = conflicting(ids, part, original, changed)
        future = np.flatnonzero(part == "test")
        if moved[future].any():
            results[f"conflicting labels, {changed}"] = case(
                matrix, y, np.flatnonzero(part == "past"), future)
    for name, by_ratio in results.items():
        for lam, r in by_ratio.items():
            a, b = r["two-way"], r["with the unsure verdict"]
            print(f"{name:<36} λ = {lam:>3}: h {r['chosen_h']}; two-way {a['fp']} FP / "
                  f"{a['fn']} FN (cost {a['cost']:g}); with unsure {b['fp']} FP / {b['fn']} FN, "
                  f"{b['unsure_hams']} hams and {b['unsure_spams']} spams unsure "
                  f"(cost {b['cost']:g})", flush=True)
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
