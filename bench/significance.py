"""How sure are the accuracy table's wins and losses? A paired bootstrap, textnb
against bogofilter, on the same test messages.

    python -m bench.significance [--corpus enron ...] [--resamples 2000]
        [--split hash|chronological] [--against SECTION.KEY=VALUE ...]
        [--json bench/results/significance.json]

``--against`` compares the defaults with textnb under other settings (e.g.
``--against model.header_places=0``) instead of bogofilter.

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

from bench.common import test_scores
from bench.peers import run_bogofilter, write_split
from bench.stats import paired_bootstrap
from textnb.config import load_config, parse_override_value
from textnb.evaluation import metrics
from textnb.mail.corpora import CHRONOLOGICAL, corpora_root
from textnb.spamfilter import SpamFilter

CORPORA = ("spamassassin", "enron", "lingspam", "sms")

def textnb_test_scores(split, cfg) -> np.ndarray:
    """textnb's log-odds of the test messages, trained on the training messages
    (``bench.common.test_scores``, as bench/accuracy.py computes them)."""
    spam_filter = SpamFilter(cfg)
    tokens = [spam_filter.tokens(raw) for raw in split.train_raw + split.test_raw]
    y = np.concatenate([split.y_train, split.y_test]).astype(np.int64)
    return test_scores(tokens, y, len(split.train_raw), cfg)[0]



def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "significance.json")
    parser.add_argument("--split", choices=("hash", "chronological"), default="hash")
    parser.add_argument("--against", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="compare with textnb under these settings instead of bogofilter "
                             "(its columns are then headed 'bogofilter' in the JSON: the other)")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    cfg = load_config(None, {})
    other = load_config(None, {k: parse_override_value(v) for k, _, v in
                               (s.partition("=") for s in args.against)}) if args.against else None
    results = []
    corpora = args.corpus or (CORPORA if args.split == "hash" else CHRONOLOGICAL)
    for corpus in corpora:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"textnb-significance-{corpus}-") as tmp:
            split = write_split(corpus, Path(tmp), chronological=args.split == "chronological")
            ours = textnb_test_scores(split, cfg)
            bogo = (textnb_test_scores(split, other) if other is not None
                    else run_bogofilter(split).scores)
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
                                     "split": args.split,
                                     "against": args.against or "bogofilter",
                                     "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
