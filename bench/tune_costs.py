"""Tuned thresholds against ln λ and bogofilter, on the corpora README's test split.

    python -m bench.tune_costs [--corpus spamassassin --corpus enron] [--search]
        [--plots DIR] [--json bench/results/tune-costs.json]

For each corpus: tokenise train and test once; 5-fold stratified out-of-fold
log-odds on the *training* split give the calibration map and, for each λ, the
tuned threshold (textnb.evaluation.tune; with --search the settings too). A model trained on
the whole training split then scores the test split, which is touched only here:

- the test cost λ·FP + FN of the tuned rule (P(spam) > λ/(1+λ)), of the untuned
  rule (log-odds > ln λ), and of bogofilter 1.2.5 at its default cutoffs (trained
  on the same training files; its Unsure verdicts are delivered, i.e. count as
  ham: a spam called Unsure is a false negative), for λ = 1, 9, 999;
- Brier score, ECE (10 and 15 bins) and log loss of P(spam) on the test split:
  raw expit(log-odds), the isotonic map (the default) and Platt's sigmoid.

bogofilter is run by bench/peers.py (run_bogofilter); without it or without
bogofilter on PATH its columns are left out, with a note.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]

from bench.common import ledger_digests, split_matrix
from textnb.config import load_config
from textnb.decision import calibration as cal
from textnb.evaluation.cross_validation import (fit_rows, fit_rows_in_order, out_of_fold_log_odds,
                                               score_rows)
from textnb.evaluation.metrics import one_minus_auc_pct
from textnb.evaluation.tune import (
    DEFAULT_COST_RATIOS,
    cross_fitted,
    describe,
    make_folds,
    operating_point,
    search,
)
from textnb.features.vectorize import binarize
from textnb.mail.corpora import corpora_root
from textnb.spamfilter import SpamFilter

DEFAULT_OUT = ROOT / "bench" / "results" / "tune-costs.json"


def bogofilter_test_verdicts(name: str):
    """bogofilter's Spam verdicts on the test split (True = Spam), or a note why not."""
    try:
        from bench import peers
    except ImportError as exc:
        return None, f"bench.peers not importable ({exc}); bogofilter skipped"
    import shutil

    if not shutil.which("bogofilter"):
        return None, "bogofilter not on PATH; skipped"
    with tempfile.TemporaryDirectory(prefix=f"textnb-tune-{name}-") as tmp:
        s = peers.write_split(name, Path(tmp))
        run = peers.run_bogofilter(s)
    return {"spam": run.is_spam_pred, "n_unsure": run.n_unsure, "y": s.y_test,
            "commands": run.commands}, None


def log_loss(y, p) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def quality(y, p) -> dict:
    return {"brier": cal.brier_score(y, p), "ece10": cal.expected_calibration_error(y, p, 10),
            "ece15": cal.expected_calibration_error(y, p, 15), "log_loss": log_loss(y, p)}


def run(name: str, cfg, do_search: bool, plots: Path | None, log=print) -> dict:
    start = time.perf_counter()
    spam_filter = SpamFilter(cfg)
    X, y, n_train, train_part, test_part = split_matrix(name, spam_filter)
    digests = ledger_digests(train_part + test_part)
    pairs, headers = spam_filter.pair_columns(), spam_filter.header_columns()
    dependence = spam_filter.dependence()
    log(f"{name}: tokenised {len(y):,} messages in {time.perf_counter() - start:.0f} s")
    tr, te = np.arange(n_train), np.arange(n_train, len(y))
    y_tr, y_te = y[tr], y[te]
    folds = make_folds(y_tr, 5)
    lambdas = DEFAULT_COST_RATIOS
    search_rows = []
    if do_search:
        start = time.perf_counter()
        search_rows = search(X[tr], y_tr, cfg, folds, lambdas, pair_columns=pairs,
                             header_columns=headers, dependence=dependence)
        cfg = search_rows[0]["config"]
        log(f"  search: {len(search_rows)} settings in {time.perf_counter() - start:.0f} s; "
            f"chose {describe(cfg)}")
    oof = out_of_fold_log_odds(X[tr], y_tr, cfg.model, cfg.features, folds, pairs, headers,
                               dependence, config=cfg)
    maps = {m: cal.fit(oof, y_tr, m) for m in cal.METHODS}
    # The evidence the method was chosen on: training split only, each fold's scores
    # mapped (and thresholded) by a map fitted on the other folds' scores.
    cv_calibration = {"raw": {**quality(y_tr, expit(oof)),
                              "held_out_cost": {f"{lam:g}": operating_point(
                                  y_tr, oof, math.log(lam), lam)["cost"] for lam in lambdas}}}
    for method in cal.METHODS:
        p_cf, flagged = cross_fitted(y_tr, oof, folds, lambdas, method)
        cv_calibration[method] = {**quality(y_tr, p_cf), "held_out_cost": {
            f"{lam:g}": float(lam * np.sum(f & (y_tr == 0)) + np.sum(~f & (y_tr == 1)))
            for lam, f in flagged.items()}}
    if cfg.training.regime == "all":
        model = fit_rows(X, y, tr, cfg.model, cfg.features, route_columns=headers)
    else:  # as train learns the training split, in delivery order, each message once
        model = fit_rows_in_order(X, y, tr, cfg, pairs, headers, dependence, digests)[0]
    Xf = binarize(X) if cfg.features.features == "binary" else X
    test = score_rows(model, Xf[te], cfg.model, pairs, headers, dependence)

    bogo, note = bogofilter_test_verdicts(name)
    if bogo is not None and not np.array_equal(bogo["y"], y_te.astype(bool)):
        raise RuntimeError("bogofilter's test split differs from textnb's")
    rows = []
    for lam in lambdas:
        t = cal.log_odds_threshold(maps["isotonic"], lam)
        row = {"cost_ratio": lam, "tuned_threshold": t,
               "tuned": operating_point(y_te, test, t, lam),
               "untuned": operating_point(y_te, test, math.log(lam), lam),
               "platt": operating_point(y_te, test, cal.log_odds_threshold(maps["platt"], lam), lam),
               "cv_in_sample": operating_point(y_tr, oof, t, lam)}
        if bogo is not None:
            fp = int(np.sum(bogo["spam"] & ~bogo["y"]))
            fn = int(np.sum(~bogo["spam"] & bogo["y"]))
            row["bogofilter"] = {"fp": fp, "fn": fn, "cost": lam * fp + fn,
                                 "n_unsure": bogo["n_unsure"]}
        rows.append(row)
    result = {
        "corpus": name, "n_train": n_train, "n_test": len(te), "n_test_spam": int(y_te.sum()),
        "settings": describe(cfg), "searched": do_search,
        "test_one_minus_auc_pct": one_minus_auc_pct(y_te, test),
        "cv_one_minus_auc_pct": one_minus_auc_pct(y_tr, oof),
        "rows": rows,
        "calibration_cv": cv_calibration,
        "calibration_test": {"raw": quality(y_te, expit(test)),
                             **{m: quality(y_te, cal.predict_proba(c, test))
                                for m, c in maps.items()}},
        "isotonic_knots": len(maps["isotonic"]["x"]),
        "notes": [note] if note else [],
        "search_top": [{"setting": r["setting"], "criterion": r["criterion"],
                        "held_out_cost": {f"{k:g}": v for k, v in r["held_out_cost"].items()},
                        "one_minus_auc_pct": r["one_minus_auc_pct"]} for r in search_rows[:10]],
    }
    if plots is not None:
        from textnb.evaluation.plots import tuning_figure

        path = plots / f"tune-{name}{'-search' if do_search else ''}.png"
        tuning_figure(path, y_te, test, cal.predict_proba(maps["isotonic"], test),
                      maps["isotonic"], lambdas,
                      title=f"{name}: test split ({len(te):,} messages), map and thresholds "
                            f"from 5-fold CV on the training split; {describe(cfg)}")
        result["plot"] = str(path)
    return result


def format_rows(r: dict) -> str:
    lines = [f"{r['corpus']} ({r['settings']}): test {r['n_test']:,} messages, "
             f"{r['n_test_spam']:,} spam; (1-AUC)% {r['test_one_minus_auc_pct']:.3f}",
             f"{'λ':>5} {'tuned t':>8} {'tuned FP/FN':>12} {'cost':>6} | {'ln λ FP/FN':>11} "
             f"{'cost':>6} | {'bogofilter FP/FN':>16} {'cost':>6} | {'Platt t':>8} {'cost':>6}"]
    for row in r["rows"]:
        tu, un, pl = row["tuned"], row["untuned"], row["platt"]
        bo = row.get("bogofilter")
        bcells = f"{bo['fp']:>7}/{bo['fn']:<8} {bo['cost']:>6g}" if bo else f"{'-':>16} {'-':>6}"
        lines.append(f"{row['cost_ratio']:>5g} {row['tuned_threshold']:>8.2f} "
                     f"{tu['fp']:>5}/{tu['fn']:<6} {tu['cost']:>6g} | {un['fp']:>4}/{un['fn']:<6} "
                     f"{un['cost']:>6g} | {bcells} | {pl['threshold']:>8.2f} {pl['cost']:>6g}")
    lines.append("P(spam), 5-fold CV on the training split (cross-fitted maps; the held-out "
                 "cost per λ; raw = ln λ):")
    for method, q in r["calibration_cv"].items():
        costs = "  ".join(f"λ={k}: {v:g}" for k, v in q["held_out_cost"].items())
        lines.append(f"  {method:<9} Brier {q['brier']:.5f}  ECE(10) {q['ece10']:.5f}  "
                     f"ECE(15) {q['ece15']:.5f}  log loss {q['log_loss']:.4f}  cost {costs}")
    lines.append("P(spam) on the test split:")
    for method, q in r["calibration_test"].items():
        lines.append(f"  {method:<9} Brier {q['brier']:.5f}  ECE(10) {q['ece10']:.5f}  "
                     f"ECE(15) {q['ece15']:.5f}  log loss {q['log_loss']:.4f}")
    return "\n".join(lines + [f"  note: {n}" for n in r["notes"]])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=("spamassassin", "enron", "lingspam", "sms"))
    parser.add_argument("--config", help="TOML config (default: the built-in defaults)")
    parser.add_argument("--search", action="store_true", help="choose the settings by CV too")
    parser.add_argument("--plots", type=Path, help="folder for the test-split figures")
    parser.add_argument("--json", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora", file=sys.stderr)
        return 1
    cfg = load_config(args.config)
    results = []
    for name in args.corpus or ("spamassassin", "enron"):
        r = run(name, cfg, args.search, args.plots, log=lambda m: print(m, file=sys.stderr, flush=True))
        results.append(r)
        print(format_rows(r), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"search": args.search, "results": results}, indent=2,
                                    default=float) + "\n")
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
