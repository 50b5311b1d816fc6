"""How accuracy grows with the number of learned messages, and what imbalance costs.

    python -m bench.learning_curve [--corpus spamassassin|enron] [--repeats 5] [--json OUT]

Chooses textnb.models.health's minimum per class and its imbalance limit. The corpus is split
by the corpora README's md5 hash (test = 1 in 5); every test message is scored by models
trained on random subsets of the training part:

- balanced: n spam and n ham, n = 25, 50, 100, 200, 400, 800;
- one-sided: 400 of one class and 400/r of the other, r = 1, 4, 10, 20, 40 (which
  class is short alternates: both directions are in the mean).

Reported per row: mean and spread (min-max) over ``--repeats`` draws of (1-AUC)% and
sm% at hm 0.1% (TREC's measures; textnb.evaluation.metrics), and the error rate of the default
threshold (ln λ, λ = the default cost ratio), since that is what a new user's verdicts
use. Messages are tokenised once; the models are counted from the token lists.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from bench.common import measures, tokenised, trained
from textnb.mail.corpora import corpora_root, iter_corpus, split
from textnb.spamfilter import SpamFilter

SIZES = (25, 50, 100, 200, 400, 800)
RATIOS = (1, 4, 10, 20, 40)



def _row(draws: list[dict[str, float]]) -> dict[str, list[float]]:
    return {k: [statistics.mean(d[k] for d in draws), min(d[k] for d in draws),
                max(d[k] for d in draws)] for k in draws[0]}


def run(corpus: str, repeats: int) -> dict:
    start = time.perf_counter()
    train, test = split(iter_corpus(corpus))
    tokenizer = SpamFilter()
    train_t, test_t = tokenised(train, tokenizer), tokenised(test, tokenizer)
    by_class = {c: [p for p in train_t if p[0] == c] for c in ("spam", "ham")}
    print(f"{corpus}: tokenised {len(train_t):,} + {len(test_t):,} in "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    balanced, onesided = {}, {}
    for n in SIZES:
        if n > min(len(v) for v in by_class.values()):
            continue
        draws = []
        for seed in range(repeats):
            rng = random.Random(seed)
            draws.append(measures(trained(rng.sample(by_class["spam"], n)
                                          + rng.sample(by_class["ham"], n)), test_t))
        balanced[n] = _row(draws)
        print(f"  n={n}: {balanced[n]}", file=sys.stderr, flush=True)
    for r in RATIOS:
        draws = []
        for seed in range(repeats):
            rng = random.Random(1000 + seed)
            short = ("spam", "ham")[seed % 2]
            long_ = "ham" if short == "spam" else "spam"
            draws.append(measures(trained(rng.sample(by_class[long_], 400)
                                          + rng.sample(by_class[short], 400 // r)), test_t))
        onesided[r] = _row(draws)
        print(f"  1:{r}: {onesided[r]}", file=sys.stderr, flush=True)
    return {"corpus": corpus, "repeats": repeats, "n_test": len(test_t),
            "balanced_per_class": balanced, "imbalance_400_to_400_over_r": onesided,
            "seconds": round(time.perf_counter() - start, 1)}


def _print(result: dict) -> None:
    print(f"{result['corpus']}, test {result['n_test']:,} messages, mean (min-max) of "
          f"{result['repeats']} draws")
    print("per class   (1-AUC)%                sm% at hm 0.1%          error% at ln λ")
    for n, row in result["balanced_per_class"].items():
        print(f"{n:>9}   " + "   ".join(f"{m:7.3f} ({lo:.3f}-{hi:.3f})"[:22].ljust(22)
                                        for m, lo, hi in row.values()))
    print("400 : 400/r")
    for r, row in result["imbalance_400_to_400_over_r"].items():
        print(f"{'1:' + str(r):>9}   " + "   ".join(f"{m:7.3f} ({lo:.3f}-{hi:.3f})"[:22].ljust(22)
                                                 for m, lo, hi in row.values()))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="spamassassin", choices=("spamassassin", "enron"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("the public corpora are absent: set TEXTNB_CORPORA")
    result = run(args.corpus, args.repeats)
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
