"""Cross-validation over a whole corpus: textnb against bogofilter and scikit-learn.

    python -m bench.tenfold_parts [--corpus lingspam] [--config FILE] [--set k=v ...]
        [--peer NAME ...] [--json bench/results/lingspam-folds.json]

Ling-Spam (the default) comes in ten parts (``part1`` .. ``part10``), and its
authors (Androutsopoulos et al., 2000) report ten-fold cross-validation over them:
train on nine parts, score the tenth, ten times. Any other corpus is cut into five
folds by the corpora README's hash, ``int(md5(relpath), 16) % 5``, so fold 0 is the
README's test split and the other four are the rest of the corpus in turn: every
message is tested once, five times as many as the test split alone holds (Enron:
12,045 hams, so hm 0.1% is set by the 13th-highest ham, not the 3rd).

Every filter does exactly that on the same files. Each message is scored once, by
a model that never saw it, so the folds' scores are pooled and the field's metrics
computed on all messages at once ((1-AUC)%, hm% and sm% at the filter's own
threshold, sm% at hm = 0.1%); the spread of the per-fold (1-AUC)% is shown beside it.
textnb's defaults were chosen by CV on the README's training split, which is folds
1-4 here: its figures on folds 1-4 are not fresh data the way fold 0's are.

textnb is tokenised once and refitted per fold (what ``textnb train`` would do on
the other folds; the counts do not depend on the order). The peers are run
as ``bench/peers.py`` runs them, on one file per message.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.common import dependence_of
from bench import peers
from bench.folds import load_folds, peer_folds
from bench.stats import paired_bootstrap
from textnb.config import load_config, parse_override_value
from textnb.evaluation import metrics
from textnb.evaluation.cross_validation import fit_rows, score_rows
from textnb.features.vectorize import Vocabulary, binarize
from textnb.mail.corpora import CORPORA, corpora_root
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter

PEERS = {
    "bogofilter": peers.run_bogofilter,
    "sklearn MNB": lambda s: peers.run_sklearn(s, bernoulli=False),
    "sklearn BNB": lambda s: peers.run_sklearn(s, bernoulli=True),
}



def textnb_folds(cfg, part, raw, y) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold log-odds and verdicts of textnb with ``cfg``, fold = Ling-Spam part."""
    spam_filter = SpamFilter(cfg)
    vocabulary = Vocabulary()
    X = vocabulary.transform([spam_filter.tokens(r) for r in raw], grow=True)
    pairs, headers = pair_columns(vocabulary.tokens_), header_columns(vocabulary.tokens_)
    dependence = dependence_of(vocabulary, cfg)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    part = np.asarray(part)
    scores = np.zeros(len(raw))
    for name in sorted(set(part)):
        test = np.flatnonzero(part == name)
        model = fit_rows(X, y.astype(np.int64), np.flatnonzero(part != name), cfg.model,
                         cfg.features)
        scores[test] = score_rows(model, Xf[test], cfg.model, pairs, headers, dependence)
    return scores, scores > np.log(cfg.decision.cost_ratio)



def figures(name, part, y, scores, verdicts, unsure=0) -> dict:
    part = np.asarray(part)
    counts = metrics.confusion(y, verdicts)
    per_fold = [metrics.one_minus_auc_pct(y[part == p], scores[part == p])
                for p in sorted(set(part))]
    return {"filter": name, **counts, "n_unsure": unsure,
            "one_minus_auc_pct": metrics.one_minus_auc_pct(y, scores),
            "fold_one_minus_auc_pct": {"mean": float(np.mean(per_fold)),
                                       "min": float(np.min(per_fold)),
                                       "max": float(np.max(per_fold))},
            "hm_pct": 100.0 * counts["fp"] / int((~y).sum()),
            "sm_pct": 100.0 * counts["fn"] / int(y.sum()),
            "sm_pct_at_hm_0.1pct": metrics.sm_at_hm(y, scores, 0.001)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="lingspam", choices=CORPORA)
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--peer", action="append", choices=sorted(PEERS))
    parser.add_argument("--bootstrap", type=int, default=0, metavar="N",
                        help="also N paired stratified bootstrap resamples of the pooled "
                             "scores, textnb against each peer (bench/significance.py)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in "
              "../shared/corpora", file=sys.stderr)
        return 1
    overrides = {k: parse_override_value(v) for k, _, v in (s.partition("=") for s in args.set)}
    cfg = load_config(args.config, overrides)
    part, raw, y = load_folds(args.corpus)
    ours = textnb_folds(cfg, part, raw, y)
    rows = [figures("textnb", part, y, *ours)]
    pooled = {}
    available, notes = peers.available_peers()
    wanted = args.peer or list(PEERS)
    with tempfile.TemporaryDirectory(prefix=f"textnb-folds-{args.corpus}-") as tmp:
        for name in wanted:
            if not any(n == name for n, _ in available):
                notes.append(f"{name}: not run (not installed)")
                continue
            theirs = peer_folds(PEERS[name], part, raw, y, Path(tmp), args.corpus)
            rows.append(figures(name, part, y, *theirs))
            pooled[name] = theirs[0]
    how = "ten-fold CV over its parts" if args.corpus == "lingspam" else \
        "five-fold CV over the README's hash folds (fold 0 = its test split)"
    print(f"{args.corpus}, {how}: {int(y.sum())} spam, {int((~y).sum())} ham; "
          "pooled out-of-fold scores")
    print(f"{'filter':<14} {'(1-AUC)%':>9} {'per fold mean (min-max)':>24} {'hm%':>6} "
          f"{'sm%':>6} {'unsure':>6} {'sm%@hm0.1%':>10}")
    for r in rows:
        f = r["fold_one_minus_auc_pct"]
        print(f"{r['filter']:<14} {r['one_minus_auc_pct']:>9.3f} "
              f"{f['mean']:>9.3f} ({f['min']:.3f}-{f['max']:.3f}){'':>2} {r['hm_pct']:>6.2f} "
              f"{r['sm_pct']:>6.2f} {r['n_unsure']:>6} {r['sm_pct_at_hm_0.1pct']:>10.2f}")
    for name, scores in pooled.items() if args.bootstrap else ():
        r = paired_bootstrap(y, ours[0], scores, args.bootstrap)
        rows[0].setdefault("bootstrap", {})[name] = r
        for metric, m in r.items():
            print(f"textnb - {name}, {metric}: 95% interval [{m['diff_ci95'][0]:+.3f}, "
                  f"{m['diff_ci95'][1]:+.3f}], textnb better in "
                  f"{100 * m['textnb_better_share']:.1f}% of {args.bootstrap} resamples")
    for note in notes:
        print(f"note: {note}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"overrides": overrides, "rows": rows,
                                               "notes": notes}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
