"""Online accuracy in the TREC manner for textnb's three training regimes.

    python -m bench.online [--corpus spamassassin|enron|trec07p-early ...] [--regime R ...]
        [--margin M ...] [--json OUT]

Each message, in order, is first classified by the model as it stands, then
offered to ``textnb.modelfile.retrain.learn_messages`` with its true label, which learns it
or not according to the regime (``all``, ``error``, ``thick`` with margin M; the
same code ``textnb retrain`` runs). Reported per corpus and regime: (1-AUC)% of
the online scores, hm% and sm% of the online decisions at the default threshold
(ln 1 = 0), how many messages the regime learned, and the time taken.

Order: delivery order (``textnb.mail.corpora.delivery_order``). SpamAssassin by its
``Date:`` headers (undated ones first); Enron 1-3 in the corpus's own order: enron1,
then enron2, then enron3, and within each the leading number of the file name, which
interleaves ham and spam each in date order (the order Metsis et al. used for their
incremental experiments); trec07p-early, a real mailbox, in its index's order, which is
delivery order (its only order allowed; aggregate figures only). ``--shuffle`` gives the
seeded shuffle of earlier runs (``random.Random(SEED)`` over the sorted paths) instead,
for the public corpora.

``--bogofilter`` runs the peer the same way, in the same order: each message is
scored (``bogofilter -T``), then learned under its true label (``-s`` or ``-n``):
bogofilter learning every message. ``--set section.key=value`` changes textnb's settings.

Until the model has seen both classes it cannot score; those first messages get
log-odds 0 (the TREC convention of an uninformed filter) and are learned by
every regime. Messages repeated in the corpus (Enron has 486 exact repeats) are
classified each time but learned once: the ledger knows them.

Tokens are computed once per message and reused by the regimes' runs (the
tokenizer is deterministic); the times reported are of the update loop, without
tokenising.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import TokenCache, cache_tokens
from textnb.config import load_config, parse_override_value
from textnb.evaluation import metrics
from textnb.mail.corpora import corpora_root, delivery_order, iter_corpus
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile.retrain import DEFAULT_MARGIN, learn_messages
from textnb.spamfilter import SpamFilter

SEED = 2003


MAILBOX = "trec07p-early"


def ordered(name: str, root: Path, shuffle: bool = False) -> list[RawMessage]:
    if name == MAILBOX:
        if shuffle:
            raise ValueError(f"{MAILBOX} is read in delivery order only (its README)")
        return list(iter_index(str(root / MAILBOX / "full" / "index")))
    if name not in ("spamassassin", "enron"):
        raise ValueError(f"no online order defined for {name!r}")
    examples = list(iter_corpus(name, root))
    if shuffle:
        examples.sort(key=lambda e: e.relpath)
        random.Random(SEED).shuffle(examples)
    else:
        examples = delivery_order(name, examples)
    return [RawMessage(e.relpath, e.raw, e.label) for e in examples]


def run_bogofilter(messages: list[RawMessage]) -> dict:
    """bogofilter in the same order: score each message, then learn it (-s / -n)."""
    scores = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as db:
        for m in messages:
            out = subprocess.run(["bogofilter", "-C", "-d", db, "-T"], input=m.raw,
                                 capture_output=True, check=False)
            fields = out.stdout.split()
            # Before its first message of each class bogofilter scores 0.5 ("unsure").
            scores.append(float(fields[1]) if len(fields) >= 2 else 0.5)
            flag = "-s" if m.label == "spam" else "-n"
            subprocess.run(["bogofilter", "-C", "-d", db, flag], input=m.raw, check=True,
                           capture_output=True)
    seconds = time.perf_counter() - start
    y = np.array([m.label == "spam" for m in messages])
    s = np.array(scores)
    return {"regime": "bogofilter, learning every message",
            "one_minus_auc_pct": round(metrics.one_minus_auc_pct(y, s), 4),
            "sm_pct_at_hm_0.1pct": round(metrics.sm_at_hm(y, s), 3),
            # bogofilter's own verdict: spam at spamicity >= 0.99 (its spam_cutoff).
            "hm_pct": round(metrics.hm_pct(y, s, 0.99 - 1e-12), 3),
            "sm_pct": round(metrics.sm_pct(y, s, 0.99 - 1e-12), 3),
            "learned": len(messages), "seconds": round(seconds, 1)}


def run(messages: list[RawMessage], regime: str, margin: float, config=None) -> dict:
    spam_filter = SpamFilter(config)
    scores: list[float] = []
    start = time.perf_counter()
    report = learn_messages(spam_filter, messages, regime=regime, margin=margin,
                            on_score=lambda m, s: scores.append(0.0 if s is None else s))
    seconds = time.perf_counter() - start
    y = np.array([m.label == "spam" for m in messages])
    s = np.array(scores)
    learned = sum(report.learned.values())
    return {"regime": regime, "margin": margin if regime == "thick" else None,
            "one_minus_auc_pct": round(metrics.one_minus_auc_pct(y, s), 4),
            "sm_pct_at_hm_0.1pct": round(metrics.sm_at_hm(y, s), 3),
            "hm_pct": round(metrics.hm_pct(y, s, 0.0), 3),
            "sm_pct": round(metrics.sm_pct(y, s, 0.0), 3),
            "learned": learned, "learned_pct": round(100 * learned / len(messages), 1),
            "learned_spam": report.learned["spam"], "learned_ham": report.learned["ham"],
            "repeats_known": report.known, "seconds": round(seconds, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=("spamassassin", "enron", MAILBOX))
    parser.add_argument("--regime", action="append", choices=("all", "error", "thick"),
                        help="regimes to run (default: all three)")
    parser.add_argument("--margin", action="append", type=float,
                        help=f"thick-threshold margin(s) to run (default {DEFAULT_MARGIN})")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--shuffle", action="store_true",
                        help="a seeded shuffle instead of delivery order")
    parser.add_argument("--bogofilter", action="store_true",
                        help="also run bogofilter, learning every message, in the same order")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = parse_override_value(value)
    config = load_config(None, overrides)
    root = corpora_root()
    if root is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    results = []
    for name in args.corpus or ("spamassassin", "enron"):
        messages = ordered(name, root, args.shuffle)
        if args.bogofilter:
            row = {"corpus": name, "n": len(messages), **run_bogofilter(messages)}
            print(json.dumps(row), flush=True)
            results.append(row)
        start = time.perf_counter()
        tokens: dict[bytes, list[str]] = {}
        cache_tokens(tokens, messages, SpamFilter(config))
        tok_seconds = time.perf_counter() - start
        with TokenCache(tokens):
            regimes = args.regime or ["all", "error", "thick"]
            runs = [(r, 0.0) for r in ("all", "error") if r in regimes]
            if "thick" in regimes:
                runs += [("thick", m) for m in (args.margin or [DEFAULT_MARGIN])]
            for regime, margin in runs:
                row = {"corpus": name, "n": len(messages),
                       "n_spam": sum(m.label == "spam" for m in messages),
                       **run(messages, regime, margin, config)}
                print(json.dumps(row), flush=True)
                results.append(row)
        print(json.dumps({"corpus": name, "tokenise_seconds": round(tok_seconds, 1)}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"overrides": overrides, "shuffle": args.shuffle,
                                               "seed": SEED, "runs": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
