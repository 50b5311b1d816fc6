"""Conflicting labels: one mailing list's advertisements filed as spam in the past and as
ham from now on, the way a real mailbox's owner changed their mind.

    python -m bench.conflicting_labels [--list fork.xent.com ...] [--variant NAME=k=v,k=v ...]
        [--no-peer] [--online | --train-regime thick [--margin M]]
        [--json docs/results/conflicting-labels.json]

Built from SpamAssassin's messages with the list reader's rule (bench/list_reader.py):
every list the owner reads (one that delivered at least ``MIN_LIST_HAMS`` hams) has its
advertisements relabelled ham, always -- except one list, L, whose advertisements keep
their spam label in the past (the chronological split's training part) and are ham in
the future (its test part). So the past teaches that L's advertisements are spam while
every other list's structure (List-*, Mailman fields, the list hosts' Received lines)
is ham, and the future asks for L's advertisements as ham: labels that contradict each
other, which no filter can learn. What matters is what a filter says of them. The report
gives, for the future's relabelled hams of L, the share of the future's spams each one
outscores (the worst, and how many outscore more than 1%), and the field's metrics over
the whole future, for textnb (defaults and each ``--variant``) and bogofilter 1.2.5 on
the same files. ``--split chronological-validation`` builds the same inside the training
part (its latest fifth is the future), for choosing settings without the test part.

``--online`` asks how fast each filter follows the owner's change of mind: both learn
the past, then take the future one message at a time in date order, each scored by
the model as it stands and then learned under the owner's label (TREC's protocol;
textnb through the ledger as ``textnb retrain`` learns, bogofilter with ``-s``/``-n``).
Reported, besides the figures above over the online scores: each relabelled
advertisement's share of the future's spams outscored, in the order they came.

``--train-regime thick`` learns the past one message at a time in date order through
the ledger with the thick threshold (``textnb retrain --regime thick``: a message
already called right by ``--margin`` is not learned, so a campaign's later copies
mostly are not), then scores the future; ``all`` the same with every message learned.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from bench import peers
from bench.common import named_variants, write_json
from bench.folds import peer_folds
from bench.list_reader import MIN_LIST_HAMS, list_id
from bench.tenfold_parts import textnb_folds
from textnb.config import load_config
from textnb.evaluation import metrics
from textnb.mail.corpora import chronological_split, corpora_root, iter_corpus
from textnb.mail.sources import RawMessage
from textnb.modelfile.retrain import learn_messages
from textnb.spamfilter import SpamFilter

LISTS = ("fork.xent.com", "ilug.linux.ie", "social.linux.ie")


def parts(split: str):
    """Past and future of SpamAssassin: (part per message, bytes, original spam labels)."""
    past, future = chronological_split("spamassassin", iter_corpus("spamassassin"))
    if split == "chronological-validation":
        past, future = chronological_split("spamassassin", past)
    examples = past + future
    return (np.array(["past"] * len(past) + ["test"] * len(future)),
            [e.raw for e in examples], np.array([e.label == "spam" for e in examples]))


def conflicting(ids: list, part: np.ndarray, original: np.ndarray, changed: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """(labels, which future messages are the changed list's relabelled advertisements)."""
    hams = Counter(i for i, spam in zip(ids, original) if i and not spam)
    read = {i for i, n in hams.items() if n >= MIN_LIST_HAMS}
    ads = np.array([bool(spam and i in read) for i, spam in zip(ids, original)])
    of_changed = ads & np.array([i == changed for i in ids])
    moved = of_changed & (part == "test")
    return original & ~(ads & ~of_changed) & ~moved, moved


def figures(y: np.ndarray, scores: np.ndarray, moved: np.ndarray) -> dict:
    spam = np.sort(scores[y])
    below = np.searchsorted(spam, scores[moved], side="left") / spam.size
    return {"relabelled": int(moved.sum()),
            "worst_spams_outscored_pct": round(100 * float(below.max()), 2),
            "median_spams_outscored_pct": round(100 * float(np.median(below)), 2),
            "over_1pct": int((below > 0.01).sum()),
            "one_minus_auc_pct": metrics.one_minus_auc_pct(y, scores),
            "sm_pct_at_hm_0.1pct": metrics.sm_at_hm(y, scores, 0.001)}


def labelled(raw, y, rows: np.ndarray) -> list[RawMessage]:
    return [RawMessage(str(i), raw[i], "spam" if y[i] else "ham") for i in rows]


def online_textnb(cfg, raw, y, past: np.ndarray, future: np.ndarray) -> np.ndarray:
    """The future's scores, each by the model that learned the past and the future before it."""
    spam_filter = SpamFilter(cfg)
    learn_messages(spam_filter, labelled(raw, y, past))
    scores: list[float] = []
    learn_messages(spam_filter, labelled(raw, y, future),
                   on_score=lambda m, s: scores.append(0.0 if s is None else s))
    return np.array(scores)


def online_bogofilter(raw, y, past: np.ndarray, future: np.ndarray) -> np.ndarray:
    """bogofilter the same way: the past registered, then each future message scored
    (``-T``) and registered under its label."""
    with tempfile.TemporaryDirectory(prefix="textnb-conflicting-online-") as tmp:
        folder = Path(tmp)
        for label, flag in ((True, "-s"), (False, "-n")):
            files = []
            for i in past[y[past] == label]:
                (folder / f"{i}.eml").write_bytes(raw[i])
                files.append(f"{i}.eml")
            subprocess.run(["bogofilter", "-C", "-d", "db", flag, "-B", *files], cwd=folder,
                           check=True, capture_output=True)
        scores = []
        for i in future:
            out = subprocess.run(["bogofilter", "-C", "-d", "db", "-T"], input=raw[i], cwd=folder,
                                 capture_output=True, check=False)
            fields = out.stdout.split()
            scores.append(float(fields[1]) if len(fields) >= 2 else 0.5)
            subprocess.run(["bogofilter", "-C", "-d", "db", "-s" if y[i] else "-n"], input=raw[i],
                           cwd=folder, check=True, capture_output=True)
    return np.array(scores)


def trained_by_regime(cfg, raw, y, past: np.ndarray, future: np.ndarray, regime: str,
                      margin: float) -> np.ndarray:
    """The future's scores by a model that learned the past in order with ``regime``."""
    spam_filter = SpamFilter(cfg)
    learn_messages(spam_filter, labelled(raw, y, past), regime=regime, margin=margin)
    return spam_filter.log_odds([raw[i] for i in future])


def in_order(y: np.ndarray, scores: np.ndarray, moved: np.ndarray) -> list[float]:
    """Each relabelled ham's share of spams outscored (%), in the order they came."""
    spam = np.sort(scores[y])
    return [round(100 * float(np.searchsorted(spam, s, side="left") / spam.size), 2)
            for s in scores[moved]]


def list_rows(args, variants: dict, part, raw, y, moved) -> dict:
    """filter name -> figures for one relabelled list, in the mode the options ask for."""
    future = part == "test"
    past_rows, future_rows = np.flatnonzero(~future), np.flatnonzero(future)
    yf, mf = y[future], moved[future]
    if args.online:
        runs = {name: online_textnb(load_config(None, overrides), raw, y, past_rows, future_rows)
                for name, overrides in variants.items()}
        if not args.no_peer:
            runs["bogofilter"] = online_bogofilter(raw, y, past_rows, future_rows)
        return {name: {**figures(yf, scores, mf), "in_order_pct": in_order(yf, scores, mf)}
                for name, scores in runs.items()}
    if args.train_regime:
        return {f"{name}, past learned {args.train_regime}": figures(yf, trained_by_regime(
                    load_config(None, overrides), raw, y, past_rows, future_rows,
                    args.train_regime, args.margin), mf)
                for name, overrides in variants.items()}
    rows = {}
    for name, overrides in variants.items():
        scores, _ = textnb_folds(load_config(None, overrides), part, raw, y)
        rows[name] = figures(yf, scores[future], mf)
    if not args.no_peer:
        with tempfile.TemporaryDirectory(prefix="textnb-conflicting-") as tmp:
            scores, _, _ = peer_folds(peers.run_bogofilter, part, raw, y, Path(tmp),
                                      "spamassassin")
        rows["bogofilter"] = figures(yf, scores[future], mf)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("chronological", "chronological-validation"),
                        default="chronological")
    parser.add_argument("--list", action="append", dest="lists")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=k=v,k=v")
    parser.add_argument("--no-peer", action="store_true", help="textnb only")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--online", action="store_true",
                      help="score the future one message at a time, learning each after")
    mode.add_argument("--train-regime", choices=("all", "thick"),
                      help="learn the past in order through the ledger with this regime")
    parser.add_argument("--margin", type=float, default=30.0, help="the thick regime's margin")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in "
              "../shared/corpora", file=sys.stderr)
        return 1
    part, raw, original = parts(args.split)
    ids = [list_id(r) for r in raw]
    variants = named_variants(args.variant)
    future = part == "test"
    results = {}
    for changed in args.lists or LISTS:
        y, moved = conflicting(ids, part, original, changed)
        if not moved.any():
            print(f"{changed}: no advertisement of it in the future; skipped")
            continue
        rows = list_rows(args, variants, part, raw, y, moved)
        results[changed] = rows
        print(f"{changed}: {int(moved.sum())} of its advertisements relabelled ham in the future "
              f"({int((y & future).sum())} spams, {int((~y & future).sum())} hams there)")
        for name, r in rows.items():
            print(f"  {name:<22} worst outscores {r['worst_spams_outscored_pct']:>6.2f}% of spams, "
                  f"median {r['median_spams_outscored_pct']:>6.2f}%, {r['over_1pct']:>3} over 1%; "
                  f"(1-AUC)% {r['one_minus_auc_pct']:.3f}, sm%@hm0.1% {r['sm_pct_at_hm_0.1pct']:.2f}",
                  flush=True)
            if "in_order_pct" in r:
                print(f"  {'':<22} in order: {r['in_order_pct']}")
    write_json(args.json, {"split": args.split, "online": args.online,
                           "train_regime": args.train_regime, "margin": args.margin,
                           "variants": variants, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
