"""The list reader's labels: SpamAssassin relabelled as a reader of its mailing lists would.

    python -m bench.list_reader [--split hash|chronological] [--set SECTION.KEY=VALUE ...] [--variant NAME=k=v,k=v ...]
        [--no-peer] [--json bench/results/list-reader.json]

A real mailbox can lose at the very top of its ham scores: posts delivered by a mailing
list the owner reads whose bodies advertise software or medication, labelled ham by the
owner because they came through the list. The public corpora were labelled the
other way: SpamAssassin's owner filed the spam that reached him through his lists as spam
(102 of fork.xent.com's, 46 of ilug.linux.ie's, ...). So the same messages, relabelled by
such an owner's rule, are a public case of the failure: every message whose
``List-Id`` names a list the owner reads (one that delivered at least ``MIN_LIST_HAMS``
hams in the corpus) is ham; everything else keeps its label. No message is written or
changed, only labels, and the rule is fixed before any filter is run.

``--split hash`` (the default) tests every message once: the five folds of the corpora
README's hash (fold 0 = its test split), each filter trained on the other four, scores
pooled (bench/folds.py). ``--split chronological`` trains on the README's chronological
training part (the past) and scores its test part (the latest fifth of each original
class by Date): trained on the past, scoring the future.
Reported for textnb (defaults and each ``--variant``) and bogofilter 1.2.5 on the same
files: (1-AUC)%, sm% at hm 0.1%, and for the relabelled hams (the list's advertisements)
how many spams score above each.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from bench import peers
from bench.common import named_variants
from bench.folds import chronological_parts, load_folds, peer_folds, textnb_folds
from textnb.config import load_config, parse_override_value
from textnb.evaluation import metrics
from textnb.mail.corpora import corpora_root

# A list "the owner reads" delivered at least this many hams: fixed before any run, so
# that a list that only ever brought spam (a spammer's List-Id) keeps its spam label.
MIN_LIST_HAMS = 20

_LIST_ID = re.compile(rb"^List-Id:[^\n]*?<([^>\s]+)>", re.IGNORECASE | re.MULTILINE)


def list_id(raw: bytes) -> str | None:
    """The id in the message's List-Id header field (RFC 2919), lower-cased, or None."""
    head = raw.split(b"\n\n", 1)[0].replace(b"\r\n", b"\n")
    m = _LIST_ID.search(head)
    return m.group(1).decode("ascii", "replace").lower() if m else None


def relabelled(ids: list[str | None], y: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Labels by the list reader's rule, given each message's list id (``list_id``):
    (new labels, which spams became ham, the lists read)."""
    hams = Counter(i for i, spam in zip(ids, y) if i and not spam)
    read = {i for i, n in hams.items() if n >= MIN_LIST_HAMS}
    moved = np.array([bool(spam and i in read) for i, spam in zip(ids, y)])
    spams = Counter(i for i, m in zip(ids, moved) if m)
    lists = {i: {"hams": hams[i], "spams_relabelled": spams[i]} for i in sorted(read)}
    return y & ~moved, moved, lists


def figures(y: np.ndarray, scores: np.ndarray, moved: np.ndarray, ids: list) -> dict:
    """The field's metrics, and for the relabelled hams how many spams each outscores
    ("above 1,641 of 4,608 spams"), over all and per list."""
    below = np.searchsorted(np.sort(scores[y]), scores[moved], side="left")
    moved_ids = [i for i, m in zip(ids, moved) if m]
    by_list = {i: int(max(b for b, j in zip(below, moved_ids) if j == i)) for i in sorted(set(moved_ids))}
    return {"one_minus_auc_pct": metrics.one_minus_auc_pct(y, scores),
            "sm_pct_at_hm_0.1pct": metrics.sm_at_hm(y, scores, 0.001),
            "sm_pct_at_hm_1pct": metrics.sm_at_hm(y, scores, 0.01),
            "relabelled_spams_below": {"max": int(below.max()), "median": float(np.median(below)),
                                       "over_10": int((below > 10).sum())},
            "relabelled_above_all_other_hams": int((scores[moved] > scores[~y & ~moved].max()).sum()),
            "relabelled_spams_below_max_by_list": by_list}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("hash", "chronological"), default="hash")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=k=v,k=v")
    parser.add_argument("--no-peer", action="store_true", help="textnb only")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in "
              "../shared/corpora", file=sys.stderr)
        return 1
    part, raw, original = (load_folds("spamassassin") if args.split == "hash"
                           else chronological_parts("spamassassin"))
    all_ids = [list_id(r) for r in raw]
    y, moved, lists = relabelled(all_ids, original)
    # Scored rows: every message (hash folds) or the test part (the past is only trained on;
    # the folds helpers also score it from the test part, which is not used).
    rows_scored = np.ones(len(y), bool) if args.split == "hash" else np.asarray(part) == "test"
    ys, ms = y[rows_scored], moved[rows_scored]
    ids = [i for i, scored in zip(all_ids, rows_scored) if scored]
    print(f"SpamAssassin, the list reader's labels: {int(moved.sum())} spams delivered by "
          f"{len(lists)} lists the owner reads are ham ({int(y.sum())} spam, {int((~y).sum())} ham); "
          f"{args.split} split: {int(rows_scored.sum())} scored, {int(ms.sum())} of them relabelled")
    base = {k: parse_override_value(v) for k, _, v in (s.partition("=") for s in args.set)}
    variants = named_variants(args.variant, base)
    rows = {}
    for name, overrides in variants.items():
        scores, _ = textnb_folds(load_config(None, overrides), part, raw, y)
        rows[name] = figures(ys, scores[rows_scored], ms, ids)
    if not args.no_peer:
        with tempfile.TemporaryDirectory(prefix="textnb-list-reader-") as tmp:
            scores, _, _ = peer_folds(peers.run_bogofilter, part, raw, y, Path(tmp), "spamassassin")
        rows["bogofilter"] = figures(ys, scores[rows_scored], ms, ids)
    print(f"{'filter':<24} {'(1-AUC)%':>9} {'sm%@hm0.1%':>10} {'sm%@hm1%':>9} "
          f"{'relabelled: spams below, max / median / >10':>45} {'above all hams':>14}")
    for name, r in rows.items():
        a = r["relabelled_spams_below"]
        print(f"{name:<24} {r['one_minus_auc_pct']:>9.3f} {r['sm_pct_at_hm_0.1pct']:>10.2f} "
              f"{r['sm_pct_at_hm_1pct']:>9.2f} {a['max']:>25} / {a['median']:>6.1f} / "
              f"{a['over_10']:>4} {r['relabelled_above_all_other_hams']:>14}")
    print("relabelled, most spams outscored, by list (hams the list delivered): " + "; ".join(
        f"{i} ({lists[i]['hams']}): " + ", ".join(f"{n} {r['relabelled_spams_below_max_by_list'][i]}"
                                                  for n, r in rows.items())
        for i in next(iter(rows.values()))["relabelled_spams_below_max_by_list"]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"split": args.split, "lists": lists,
                                               "variants": variants,
                                               "figures": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
