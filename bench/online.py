"""Online accuracy in the TREC manner for textnb's three training regimes.

    python bench/online.py [--corpus spamassassin|enron ...] [--regime R ...] [--margin M ...]
        [--json OUT]

Each message, in order, is first classified by the model as it stands, then
offered to ``textnb.retrain.learn_messages`` with its true label, which learns it
or not according to the regime (``all``, ``error``, ``thick`` with margin M; the
same code ``textnb retrain`` runs). Reported per corpus and regime: (1-AUC)% of
the online scores, hm% and sm% of the online decisions at the default threshold
(ln 1 = 0), how many messages the regime learned, and the time taken.

Order. SpamAssassin's files carry no delivery order, so they are put in a seeded
shuffle (``random.Random(SEED)`` over the sorted paths). Enron 1-3 come in the
corpus's own order: enron1, then enron2, then enron3, and within each the
leading number of the file name, which interleaves ham and spam each in date
order (the order Metsis et al. used for their incremental experiments).

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
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textnb import metrics  # noqa: E402
from textnb.corpora import corpora_root, iter_corpus  # noqa: E402
from textnb.ledger import normalise  # noqa: E402
from textnb.pipeline import SpamFilter  # noqa: E402
from textnb.retrain import DEFAULT_MARGIN, learn_messages  # noqa: E402
from textnb.sources import RawMessage  # noqa: E402

SEED = 2003


def ordered(name: str, root: Path) -> list[RawMessage]:
    examples = list(iter_corpus(name, root))
    if name == "spamassassin":
        examples.sort(key=lambda e: e.relpath)
        random.Random(SEED).shuffle(examples)
    elif name == "enron":
        def key(e):
            part, _, filename = e.relpath.split("/")
            return part, int(filename.split(".", 1)[0])
        examples.sort(key=key)
    else:
        raise ValueError(f"no online order defined for {name!r}")
    return [RawMessage(e.relpath, e.raw, e.label) for e in examples]


def run(messages: list[RawMessage], regime: str, margin: float) -> dict:
    spam_filter = SpamFilter()
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
            "hm_pct": round(metrics.hm_pct(y, s, 0.0), 3),
            "sm_pct": round(metrics.sm_pct(y, s, 0.0), 3),
            "learned": learned, "learned_pct": round(100 * learned / len(messages), 1),
            "learned_spam": report.learned["spam"], "learned_ham": report.learned["ham"],
            "repeats_known": report.known, "seconds": round(seconds, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=("spamassassin", "enron"))
    parser.add_argument("--regime", action="append", choices=("all", "error", "thick"),
                        help="regimes to run (default: all three)")
    parser.add_argument("--margin", action="append", type=float,
                        help=f"thick-threshold margin(s) to run (default {DEFAULT_MARGIN})")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    root = corpora_root()
    if root is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    results = []
    tokens = SpamFilter.tokens
    for name in args.corpus or ("spamassassin", "enron"):
        messages = ordered(name, root)
        cache: dict[bytes, list[str]] = {}
        start = time.perf_counter()
        tokeniser = SpamFilter()
        for m in messages:
            norm = normalise(m.raw)
            if norm not in cache:
                cache[norm] = tokens(tokeniser, norm)
        tok_seconds = time.perf_counter() - start
        SpamFilter.tokens = lambda self, raw, cache=cache: list(cache[raw])
        try:
            regimes = args.regime or ["all", "error", "thick"]
            runs = [(r, 0.0) for r in ("all", "error") if r in regimes]
            if "thick" in regimes:
                runs += [("thick", m) for m in (args.margin or [DEFAULT_MARGIN])]
            for regime, margin in runs:
                row = {"corpus": name, "n": len(messages),
                       "n_spam": sum(m.label == "spam" for m in messages),
                       **run(messages, regime, margin)}
                print(json.dumps(row), flush=True)
                results.append(row)
        finally:
            SpamFilter.tokens = tokens
        print(json.dumps({"corpus": name, "tokenise_seconds": round(tok_seconds, 1)}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": SEED, "runs": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
