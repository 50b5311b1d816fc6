"""Ling-Spam's own ten-fold cross-validation: textnb against bogofilter and scikit-learn.

    python bench/tenfold_parts.py [--config FILE] [--set k=v ...] [--peer NAME ...]
        [--json bench/results/lingspam-folds.json]

Ling-Spam comes in ten parts (``part1`` .. ``part10``), and its authors
(Androutsopoulos et al., 2000) report ten-fold cross-validation over them: train on
nine parts, score the tenth, ten times. Every filter here does exactly that on the
same files. Each message is scored once, by a model that never saw it, so the ten
folds' scores are pooled and the field's metrics computed on all 2,893 messages at
once ((1-AUC)%, hm% and sm% at the filter's own threshold, sm% at hm = 0.1%); the
spread of the per-fold (1-AUC)% is shown beside it.

textnb is tokenised once and refitted per fold (what ``textnb train`` would do on
each fold's nine parts; the counts do not depend on the order). The peers are run
as ``bench/peers.py`` runs them, on one file per message.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import peers  # noqa: E402

from textnb import metrics  # noqa: E402
from textnb.config import load_config, parse_override_value  # noqa: E402
from textnb.corpora import corpora_root, iter_corpus  # noqa: E402
from textnb.evaluate import fit_rows, score_rows  # noqa: E402
from textnb.evidence import pair_columns  # noqa: E402
from textnb.pipeline import SpamFilter  # noqa: E402
from textnb.vectorize import Vocabulary, binarize  # noqa: E402

PARTS = [f"part{i}" for i in range(1, 11)]
PEERS = {
    "bogofilter": peers.run_bogofilter,
    "sklearn MNB": lambda s: peers.run_sklearn(s, bernoulli=False),
    "sklearn BNB": lambda s: peers.run_sklearn(s, bernoulli=True),
}


def load() -> tuple[list[str], list[bytes], np.ndarray]:
    """Every Ling-Spam message: its part, its bytes, whether it is spam."""
    examples = list(iter_corpus("lingspam"))
    part = [e.relpath.split("/", 1)[0] for e in examples]
    return part, [e.raw for e in examples], np.array([e.label == "spam" for e in examples])


def textnb_folds(cfg, part, raw, y) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold log-odds and verdicts of textnb with ``cfg``, fold = Ling-Spam part."""
    spam_filter = SpamFilter(cfg)
    vocabulary = Vocabulary()
    X = vocabulary.transform([spam_filter.tokens(r) for r in raw], grow=True)
    pairs = pair_columns(vocabulary.tokens_)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    part = np.asarray(part)
    scores = np.zeros(len(raw))
    for name in PARTS:
        test = np.flatnonzero(part == name)
        model = fit_rows(X, y.astype(np.int64), np.flatnonzero(part != name), cfg.model,
                         cfg.features)
        scores[test] = score_rows(model, Xf[test], cfg.model, pairs)
    return scores, scores > np.log(cfg.decision.cost_ratio)


def peer_folds(run, part, raw, y, workdir: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """A peer's pooled scores and verdicts over the ten folds, and its Unsure count."""
    part = np.asarray(part)
    scores, verdicts, unsure = np.zeros(len(raw)), np.zeros(len(raw), bool), 0
    for name in PARTS:
        fold_dir = Path(tempfile.mkdtemp(dir=workdir, prefix=name + "-"))
        train, test = np.flatnonzero(part != name), np.flatnonzero(part == name)
        rel = {}
        for i in np.r_[train, test]:
            where = f"test/{i:05d}" if part[i] == name else \
                f"train/{'spam' if y[i] else 'ham'}/{i:05d}"
            peers._write(fold_dir / where, raw[i])
            rel[i] = where
        s = peers.Split(corpus="lingspam", workdir=fold_dir,
                        train_spam=[rel[i] for i in train if y[i]],
                        train_ham=[rel[i] for i in train if not y[i]],
                        test=[rel[i] for i in test], y_test=y[test],
                        train_raw=[raw[i] for i in train], y_train=y[train],
                        test_raw=[raw[i] for i in test])
        r = run(s)
        scores[test], verdicts[test], unsure = r.scores, r.is_spam_pred, unsure + r.n_unsure
    return scores, verdicts, unsure


def figures(name, part, y, scores, verdicts, unsure=0) -> dict:
    part = np.asarray(part)
    counts = metrics.confusion(y, verdicts)
    per_fold = [metrics.one_minus_auc_pct(y[part == p], scores[part == p]) for p in PARTS]
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
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--peer", action="append", choices=sorted(PEERS))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in "
              "../shared/corpora", file=sys.stderr)
        return 1
    overrides = {k: parse_override_value(v) for k, _, v in (s.partition("=") for s in args.set)}
    cfg = load_config(args.config, overrides)
    part, raw, y = load()
    rows = [figures("textnb", part, y, *textnb_folds(cfg, part, raw, y))]
    available, notes = peers._peers()
    wanted = args.peer or list(PEERS)
    with tempfile.TemporaryDirectory(prefix="textnb-lingspam-") as tmp:
        for name in wanted:
            if not any(n == name for n, _ in available):
                notes.append(f"{name}: not run (not installed)")
                continue
            rows.append(figures(name, part, y, *peer_folds(PEERS[name], part, raw, y,
                                                                Path(tmp))))
    print(f"Ling-Spam, ten-fold CV over its parts: {int(y.sum())} spam, {int((~y).sum())} ham; "
          "pooled out-of-fold scores")
    print(f"{'filter':<14} {'(1-AUC)%':>9} {'per fold mean (min-max)':>24} {'hm%':>6} "
          f"{'sm%':>6} {'unsure':>6} {'sm%@hm0.1%':>10}")
    for r in rows:
        f = r["fold_one_minus_auc_pct"]
        print(f"{r['filter']:<14} {r['one_minus_auc_pct']:>9.3f} "
              f"{f['mean']:>9.3f} ({f['min']:.3f}-{f['max']:.3f}){'':>2} {r['hm_pct']:>6.2f} "
              f"{r['sm_pct']:>6.2f} {r['n_unsure']:>6} {r['sm_pct_at_hm_0.1pct']:>10.2f}")
    for note in notes:
        print(f"note: {note}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"overrides": overrides, "rows": rows,
                                               "notes": notes}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
