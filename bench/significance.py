"""How sure are the accuracy table's wins and losses? A paired bootstrap, textnb
against bogofilter, on the same test messages.

    python bench/significance.py [--corpus enron ...] [--resamples 2000]
        [--json bench/results/significance.json]

For each corpus: textnb (the defaults, trained on the training split exactly as
bench/accuracy.py does) and bogofilter (bench/peers.py: trained on the same files)
score the test split once. Then the test split is resampled with replacement
``--resamples`` times, hams and spams separately so every resample keeps the
split's class sizes (the stratified bootstrap of ROC statistics), and both
filters' (1-AUC)% and sm% at hm 0.1% are computed on each resample, for the
same messages. Reported per metric: both filters' value on the test split, the
95% percentile interval of the difference textnb - bogofilter (negative = textnb
better), and the share of resamples in which textnb is better.

What it is for: sm% at hm 0.1% on a test split of 600-2,400 hams is set by the
one to three highest-scoring hams, so one message can swing it by tens of points;
this says whether a difference in the table is more than that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from accuracy import test_scores  # noqa: E402
from peers import run_bogofilter, write_split  # noqa: E402

from textnb import metrics  # noqa: E402
from textnb.config import load_config  # noqa: E402
from textnb.corpora import corpora_root  # noqa: E402
from textnb.pipeline import SpamFilter  # noqa: E402

CORPORA = ("spamassassin", "enron", "lingspam", "sms")
METRICS = {
    "one_minus_auc_pct": metrics.one_minus_auc_pct,
    "sm_pct_at_hm_0.1pct": metrics.sm_at_hm,
}


def textnb_test_scores(split, cfg) -> np.ndarray:
    """textnb's log-odds of the test messages, trained on the training messages
    (bench/accuracy.py's computation)."""
    spam_filter = SpamFilter(cfg)
    tokens = [spam_filter.tokens(raw) for raw in split.train_raw + split.test_raw]
    y = np.concatenate([split.y_train, split.y_test]).astype(np.int64)
    return test_scores(tokens, y, len(split.train_raw), cfg)[0]


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "significance.json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cfg = load_config(None, {})
    results = []
    for corpus in args.corpus or CORPORA:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"textnb-significance-{corpus}-") as tmp:
            split = write_split(corpus, Path(tmp))
            ours = textnb_test_scores(split, cfg)
            bogo = run_bogofilter(split).scores
        r = paired_bootstrap(split.y_test, ours, bogo, args.resamples)
        results.append({"corpus": corpus, "n_test_ham": int((~split.y_test).sum()),
                        "n_test_spam": int(split.y_test.sum()), "metrics": r})
        for name, m in r.items():
            print(f"{corpus:<13} {name:<20} textnb {m['textnb']:8.3f}  bogofilter "
                  f"{m['bogofilter']:8.3f}  diff 95% [{m['diff_ci95'][0]:+.3f}, "
                  f"{m['diff_ci95'][1]:+.3f}]  textnb better in {100 * m['textnb_better_share']:.1f}%"
                  f" (ties {100 * m['tie_share']:.1f}%)", flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"resamples": args.resamples, "config": "defaults",
                                     "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
