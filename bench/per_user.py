"""Per-user models: the user's own counts, a shared model's, or both, on each user's future mail.

    python -m bench.per_user [--sizes 25,100,400,0] [--json OUT]

Enron-Spam's enron1, enron2 and enron3 are three people's mailboxes (farmer, kaminski,
kitchen; each with its own spam), so they are three "users". Each user's mail is split
chronologically as the corpora README says (per class, by the date in the file name,
the latest fifth is the test part). For user u and n messages per class (the n latest
of u's training part, the mail a user has most recently filed; 0 = all of it):

- shared: a model of the other two users' training parts (what ``textnb serve
  --models`` scores a user with through ``_shared``); it does not depend on n;
- user: u's n + n only;
- added: one model of the shared messages and u's n + n (counts added);
- blend: the mean of the user's and the shared model's log-odds.

Reported per user and n: (1-AUC)%, sm% at hm 0.1% and the error % of the default
threshold on u's test part, and the mean over the three users. Messages are
tokenised once (bench.common's helpers, as in bench/learning_curve.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import measures, tokenised, trained
from textnb.evaluation import metrics
from textnb.mail.corpora import corpora_root, iter_corpus
from textnb.spamfilter import SpamFilter

USERS = ("enron1", "enron2", "enron3")


def chronological(examples) -> tuple[dict, dict]:
    """Per user: (train, test) lists of examples, split per class by the date in the name."""
    parts: dict[str, dict[str, list]] = {u: {"spam": [], "ham": []} for u in USERS}
    for e in examples:
        user, label = e.relpath.split("/")[:2]
        parts[user][label].append(e)
    train, test = {}, {}
    for user, classes in parts.items():
        train[user], test[user] = [], []
        for items in classes.values():
            items.sort(key=lambda e: (e.relpath.rsplit("/", 1)[1].split(".")[1],
                                      e.relpath))
            cut = int(len(items) * 0.8)
            train[user] += items[:cut]
            test[user] += items[cut:]
    return train, test


def _latest(pairs, n):
    """The n latest (label, tokens) of each class (pairs are in date order per class)."""
    if n == 0:
        return pairs
    return [p for c in ("spam", "ham") for p in [q for q in pairs if q[0] == c][-n:]]


def blend_measures(a: SpamFilter, b: SpamFilter, test) -> dict[str, float]:
    y = np.array([label == "spam" for label, _ in test])
    tokens = [t for _, t in test]
    scores = 0.5 * (a.log_odds_tokens(tokens) + b.log_odds_tokens(tokens))
    called = np.array([str(x) == "spam" for x in a.cost_model().labels(scores)])
    return {"1-auc%": metrics.one_minus_auc_pct(y, scores),
            "sm%@hm0.1%": metrics.sm_at_hm(y, scores, 0.001),
            "error%": 100.0 * float(np.mean(called != y))}


def run(sizes: list[int]) -> dict:
    start = time.perf_counter()
    train, test = chronological(iter_corpus("enron"))
    tokenizer = SpamFilter()
    train_t = {u: tokenised(train[u], tokenizer) for u in USERS}
    test_t = {u: tokenised(test[u], tokenizer) for u in USERS}
    print(f"tokenised in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    rows: dict[str, dict] = {}
    for u in USERS:
        shared_pairs = [p for v in USERS if v != u for p in train_t[v]]
        shared = trained(shared_pairs)
        rows[u] = {"shared": measures(shared, test_t[u])}
        for n in sizes:
            own = _latest(train_t[u], n)
            user = trained(own)
            rows[u][n] = {"user": measures(user, test_t[u]),
                          "added": measures(trained(shared_pairs + own), test_t[u]),
                          "blend": blend_measures(user, shared, test_t[u])}
        print(f"{u}: {rows[u]}", file=sys.stderr, flush=True)
    mean = {"shared": {k: statistics.mean(rows[u]["shared"][k] for u in USERS)
                       for k in rows[USERS[0]]["shared"]}}
    for n in sizes:
        mean[n] = {way: {k: statistics.mean(rows[u][n][way][k] for u in USERS)
                         for k in rows[USERS[0]][n][way]}
                   for way in ("user", "added", "blend")}
    return {"users": rows, "mean": mean, "sizes": sizes,
            "n_test": {u: len(test_t[u]) for u in USERS},
            "seconds": round(time.perf_counter() - start, 1)}


def _print(result: dict) -> None:
    print("mean over enron1-3, each user's chronological test part: "
          "(1-AUC)% / sm% at hm 0.1% / error% at ln λ")
    mean = result["mean"]

    def fmt(m):
        return f"{m['1-auc%']:7.3f} {m['sm%@hm0.1%']:7.2f} {m['error%']:6.2f}"

    print(f"{'shared only':>22}  " + fmt(mean["shared"]))
    for n in result["sizes"]:
        for way in ("user", "added", "blend"):
            label = f"{way}, n={'all' if n == 0 else n}"
            print(f"{label:>22}  " + fmt(mean[n][way]))
    for u, row in result["users"].items():
        print(f"{u} (test {result['n_test'][u]}): shared " + fmt(row["shared"]))
        for n in result["sizes"]:
            print(f"    n={'all' if n == 0 else n}: user " + fmt(row[n]["user"])
                  + "  added " + fmt(row[n]["added"]) + "  blend " + fmt(row[n]["blend"]))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="25,100,200,400,0",
                        help="messages per class of the user's own (0: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if corpora_root() is None:
        sys.exit("the public corpora are absent: set TEXTNB_CORPORA")
    result = run([int(s) for s in args.sizes.split(",")])
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
