"""Scoring ahead in a thick pass: what a scoring call costs, and the block policy.

    python -m bench.scoring_ahead [--corpus spamassassin] [--rounds 3] [--json OUT]

A thick pass (``training.regime = "thick"``, ``train``'s default) scores every message
with the model of the ones before it and learns one in several; ``ScoresAhead``
(textnb/models/scores_ahead.py) scores the messages ahead a block at a time and
rescores after every change. This measures, on the corpus's hash training split in
delivery order with the default settings, tokens made beforehand (scoring and learning
only, the part that runs in one process):

1. what scoring costs a message in blocks of 1, 4, 16 and 64 (a model trained thick on
   the training split scoring the test split's token lists): the cost of the call
   apart from its rows, in rows, is ``CALL_ROWS``;
2. the thick pass (``fit_rows_in_order``, the code train's pass shares) under the
   policy as built and with its cost ratio ``CALL_ROWS`` set to 1, 2.5, 10 and 20, one
   message a call (the pass before ``ScoresAhead``) and always ``MAX_BLOCK``: seconds,
   the median over ``--rounds`` rounds run in a rotating order, and the scoring calls.
   Every policy learns the same rows (checked).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from bench.common import (dependence_of, ledger_digests, require_corpora, split_in_order,
                          write_json)
from textnb.config import FilterConfig
from textnb.evaluation.cross_validation import fit_rows_in_order
from textnb.features.vectorize import Vocabulary
from textnb.mail.sources import RawMessage
from textnb.models import scores_ahead
from textnb.models.evidence import header_columns, pair_columns
from textnb.modelfile.retrain import fit
from textnb.spamfilter import SpamFilter

POLICIES = {"as built (CALL_ROWS 5)": None, "CALL_ROWS 1": 1.0, "CALL_ROWS 2.5": 2.5,
            "CALL_ROWS 10": 10.0, "CALL_ROWS 20": 20.0, "one message a call": "one",
            "always MAX_BLOCK": "max"}


def _policy(value):
    """Set ``scores_ahead``'s policy; returns the function that restores it."""
    saved = (scores_ahead.CALL_ROWS, scores_ahead.block_size)
    scores_ahead._best_block.cache_clear()
    if value == "one":
        scores_ahead.block_size = lambda rate: 1
    elif value == "max":
        scores_ahead.block_size = lambda rate: scores_ahead.MAX_BLOCK
    elif value is not None:
        scores_ahead.CALL_ROWS = value

    def restore():
        scores_ahead.CALL_ROWS, scores_ahead.block_size = saved
        scores_ahead._best_block.cache_clear()
    return restore


def run(name: str, rounds: int) -> dict:
    cfg = FilterConfig()
    train, test = split_in_order(name, in_delivery_order=True)
    spam_filter = SpamFilter(cfg)
    tokens = [spam_filter.tokens(e.raw) for e in train + test]
    vocab = Vocabulary()
    X = vocab.transform(tokens, grow=True)
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    pairs, headers = pair_columns(vocab.tokens_), header_columns(vocab.tokens_)
    dependence = dependence_of(vocab, cfg)
    digests = ledger_digests(train + test)
    rows = np.arange(len(train))

    # 1. a message's scoring cost by block size, on a filter trained thick
    trained = SpamFilter(cfg)
    fit(trained, [RawMessage(e.relpath, e.raw, e.label) for e in train])
    test_tokens = [trained.tokens(e.raw) for e in test]
    trained.log_odds_tokens(test_tokens[:8])  # the lazily built indexes
    per_message = {}
    for block in (1, 4, 16, 64):
        start = time.perf_counter()
        for i in range(0, len(test_tokens), block):
            trained.log_odds_tokens(test_tokens[i:i + block])
        per_message[block] = 1e6 * (time.perf_counter() - start) / len(test_tokens)
    row_us = (64 * per_message[64] - per_message[1]) / 63
    call_rows = (per_message[1] - row_us) / row_us

    # 2. the thick pass under each policy, rounds in a rotating order
    names = list(POLICIES)
    seconds = {n: [] for n in names}
    calls, learned = {}, {}
    for r in range(rounds):
        for name_ in names[r % len(names):] + names[:r % len(names)]:
            restore = _policy(POLICIES[name_])
            counted = [0]
            at = scores_ahead.ScoresAhead.at

            def counting(self, position, at=at):
                if not 0 <= position - self._start < len(self._scores):
                    counted[0] += 1
                return at(self, position)
            scores_ahead.ScoresAhead.at = counting
            try:
                start = time.perf_counter()
                _, rows_learned = fit_rows_in_order(X, y, rows, cfg, pairs, headers,
                                                    dependence, digests)
                seconds[name_].append(time.perf_counter() - start)
            finally:
                scores_ahead.ScoresAhead.at = at
                restore()
            calls[name_] = counted[0]
            learned[name_] = rows_learned.tolist()
    same = all(v == learned[names[0]] for v in learned.values())
    return {
        "corpus": name, "n_train": len(train), "n_test": len(test),
        "learned": len(learned[names[0]]), "every_policy_learns_the_same_rows": same,
        "scoring_us_per_message_by_block": per_message,
        "row_us": row_us, "call_in_rows": call_rows,
        "pass": {n: {"seconds_median": statistics.median(seconds[n]), "seconds": seconds[n],
                     "scoring_calls": calls[n]} for n in names},
        "load_average": os.getloadavg(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    require_corpora()
    result = run(args.corpus, args.rounds)
    print(f"{result['corpus']}: {result['n_train']:,} training messages, "
          f"{result['learned']:,} learned thick; the same rows under every policy: "
          f"{result['every_policy_learns_the_same_rows']}")
    print("scoring, us a message, by block: " + ", ".join(
        f"{b}: {us:.0f}" for b, us in result["scoring_us_per_message_by_block"].items())
        + f"; a call costs {result['call_in_rows']:.1f} rows")
    for name_, row in result["pass"].items():
        print(f"  {name_:<24} {row['seconds_median']:6.2f} s  {row['scoring_calls']:6,} calls")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
