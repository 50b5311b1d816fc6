"""Dependent evidence counted as what it is: one header field's tokens, and a word pair
beside its own words, measured on real mail in delivery order and on the public cells.

    python -m bench.dependent_evidence [--cache /tmp/evidence-cache] [--part P ...]
        [--variant NAME=section.key=value,... [--reference NAME]] [--no-bogofilter]
        [--json OUT]
    python -m bench.dependent_evidence --markdown RESULT.json

Parts (``--part``, default windows, online and public):

- ``windows``: trec07p-early (the one real mailbox in the shared corpora), trained on
  its first messages in delivery order and scoring the next ones: first 40% -> next
  20%, first 60% -> next 20%, first 15,084 -> next 7,542;
- ``rolling`` (only when asked): the same mailbox trained on its first 20%, 30%, ...,
  90% and each time scoring the next tenth;
- ``online``: the same mailbox, every message in delivery order scored by the model of
  the messages before it, then learned (TREC's way, as ``bench.online``; an exact
  repeat is scored each time and learned once, as the ledger does);
- ``public``: the corpora README's hash split of SpamAssassin, Enron 1-3, Ling-Spam and
  SMS, and its chronological split of SpamAssassin and Enron (``bench.accuracy``'s
  cells).

Reported per cell and variant: (1-AUC)% and sm% at hm 0.1%, and the 95% interval of the
difference from the reference variant (``--reference``; with this script's own list
``REFERENCE``, with ``--variant`` lists the defaults: a paired stratified bootstrap,
``bench.stats``); on the windows also the cost lambda * FP + FN at lambda = 9 and 999,
the threshold of least cost on the training part's out-of-fold scores (five folds in
delivery order). bogofilter 1.2.5 (default options, ``bench.peers.run_bogofilter``) runs
on the same files, and online in the same order (score with ``-T``, then learn with
``-s``/``-n``); its online run is kept under ``--cache`` (it does not depend on textnb's
settings) and read back by later runs. ``--markdown`` prints the tables
docs/dependent-evidence.md quotes from a result.

Each corpus is tokenised once (textnb's tokenizer, default settings: a variant may change
the model, its features and the selection of clues, never the tokenizer; a model is
fitted once per fit-time setting the variants ask for) and kept as token ids under
``--cache``; every variant then runs on the same counts. trec07p-early's terms allow
aggregate figures only: nothing here prints or writes a message's name or label.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.common import named_variants, write_json
from bench.stats import paired_bootstrap
from bench.token_cache import (DEFAULT_CACHE, TREC, Columns, bogofilter_window, cost_at,
                               figures, matrix, rolling_windows, tokenised, trec_paths,
                               windows)
from textnb.config import load_config
from textnb.decision.costs import uncalibrated
from textnb.evaluation.cross_validation import chronological_folds, fit_rows, fit_rows_in_order
from textnb.modelfile.lifecycle import learns
from textnb.features.csr_arrays import Rows
from textnb.features.vectorize import binarize
from textnb.mail.corpora import (CHRONOLOGICAL, CORPORA, chronological_split, corpora_root,
                                 delivery_order, iter_corpus, split)
from textnb.models.naive_bayes import make_model

SEED = 2003  # the bootstrap's


def interval(y: np.ndarray, reference: np.ndarray, other: np.ndarray) -> dict:
    """95% intervals of other - reference for both metrics (``bench.stats.paired_bootstrap``:
    hams and spams resampled apart, 1,000 times, the same messages for both)."""
    out = paired_bootstrap(y, other, reference, 1000, seed=SEED)
    return {name: [round(v, 4) for v in out[name]["diff_ci95"]] for name in out}


def least_cost_threshold(y: np.ndarray, s: np.ndarray, lam: float) -> float:
    """The threshold t (spam iff score > t) of least lam * fp + fn on (y, s)."""
    order = np.argsort(s)
    ss, yy = s[order], y[order]
    # threshold just below each distinct score, and above all
    fn = np.r_[0, np.cumsum(yy)]            # spams at or below the cut
    fp = np.r_[(~yy).sum(), (~yy).sum() - np.cumsum(~yy)]
    cost = lam * fp + fn
    last = np.r_[ss[1:] != ss[:-1], True]    # cut only between distinct scores
    valid = np.r_[True, last]
    i = int(np.argmin(np.where(valid, cost, np.inf)))
    if i == 0:
        return float(ss[0]) - 1.0
    if i == ss.size:
        return float(ss[-1]) + 1.0
    return float((ss[i - 1] + ss[i]) / 2)


def costs(y_test, s_test, thresholds: dict) -> dict:
    return {f"lambda_{lam:g}": cost_at(y_test, s_test, t, lam) for lam, t in thresholds.items()}


def variant_config(overrides: dict):
    """A variant's config; the tokenizer's settings cannot vary here (every variant is
    scored on the counts of one tokenisation, kept under --cache)."""
    cfg = load_config(None, overrides)
    if cfg.tokenizer != load_config(None, {}).tokenizer:
        sys.exit(f"variant {overrides}: tokenizer settings are fixed in this script (the "
                 "corpora are tokenised once, with the defaults); vary the model, the "
                 "features or the selection of clues")
    return cfg


class Fitted:
    """Models of rows of one term-count matrix, one per fit-time setting a variant asks for
    (event model, Lidstone alpha and the route's, priors, features), each fitted once; the
    selection of clues, which most variants change, is applied at scoring time. ``columns``:
    the matrix's :class:`Columns` (header fields, which model.route_alpha smooths apart;
    the selection a thick fit scores its rows by). A configuration whose training.regime
    is not 'all' learns its rows in order as ``textnb train`` does
    (``fit_rows_in_order``), each message once (``digests``, one per row)."""

    def __init__(self, X, y: np.ndarray, columns: Columns, digests=None):
        self.X, self.y, self.columns = X, y.astype(np.int64), columns
        self.headers, self.digests = columns.headers, digests
        self._models: dict = {}
        self._binary = None

    def model(self, rows: np.ndarray, cfg):
        m, f, t = cfg.model, cfg.features, cfg.training
        key = (hashlib.blake2b(np.ascontiguousarray(rows).tobytes()).hexdigest(), m.event_model,
               m.alpha, m.route_alpha, m.fit_prior, str(m.class_prior), f.features, f.min_df,
               f.max_features)
        if t.regime != "all":  # the selection judges the rows, so it is part of the fit
            key += (t.regime, t.margin, str(cfg.decision), str(m))
        if key not in self._models:
            if t.regime == "all":
                self._models[key] = fit_rows(self.X, self.y, rows, m, f,
                                             route_columns=self.headers)
            else:
                self._models[key] = fit_rows_in_order(
                    self.X, self.y, rows, cfg, self.columns.pairs, self.headers,
                    self.columns.dependence(m), self.digests)[0]
        return self._models[key]

    def features(self, cfg):
        """The matrix as this config's features count it (binary or term counts)."""
        if cfg.features.features != "binary":
            return self.X
        if self._binary is None:
            self._binary = binarize(self.X)
        return self._binary


def run_window(corpus: dict, a: int, b: int, variants: dict, bogofilter: bool,
               log) -> dict:
    y = corpus["labels"][:b].astype(bool)
    X, tokens = matrix(corpus, np.arange(b))
    columns = Columns(tokens)
    fitted = Fitted(X, y, columns, corpus["digests"][:b])
    train = np.arange(a)
    folds = chronological_folds(a, 5)
    out = {"n_train": a, "n_test": b - a, "n_test_spam": int(y[a:].sum()), "variants": {}}
    scores = {}
    for name, overrides in variants.items():
        cfg = variant_config(overrides)
        Xf = fitted.features(cfg)
        s = columns.score(fitted.model(train, cfg), Xf[a:], cfg)
        oof = np.empty(a)
        for f in folds:
            oof[f] = columns.score(fitted.model(np.setdiff1d(train, f), cfg), Xf[f], cfg)
        thresholds = {lam: least_cost_threshold(y[:a], oof, lam) for lam in LAMBDAS}
        scores[name] = s
        row = {**figures(y[a:], s), "costs": costs(y[a:], s, thresholds)}
        if name != reference(variants):
            row["vs_reference_95pct"] = interval(y[a:], scores[reference(variants)], s)
        out["variants"][name] = row
        log(f"  {name}: {row['one_minus_auc_pct']} / {row['sm_pct_at_hm_0.1pct']}")
    if bogofilter:
        out["bogofilter"] = bogofilter_window(corpus, a, b)
        log(f"  bogofilter: {out['bogofilter']}")
    return out


# -- trec07p-early: online -----------------------------------------------------------------
def online_scores(X, y: np.ndarray, digests: np.ndarray, columns: Columns, cfg,
                  regime: str = "all") -> np.ndarray:
    """Each message scored by the model of the messages before it, then learned (an exact
    repeat once) if ``regime`` takes it (``retrain``'s: every message unless a variant
    names training.regime; the margin is the config's); 0 until both classes were learned
    (bench.online's convention)."""
    Xb = binarize(X) if cfg.features.features == "binary" else X
    n, width = Xb.shape
    model = make_model(cfg.model.event_model, alpha=cfg.model.alpha,
                       route_alpha=cfg.model.route_alpha, fit_prior=cfg.model.fit_prior,
                       class_prior=cfg.model.class_prior)
    with np.errstate(divide="ignore", invalid="ignore"):  # a class prior of no messages
        model.fit(Xb[:0], np.zeros(0, np.int64))
    model.set_feature_mask(np.zeros(width, bool))
    model.set_route_columns(columns.headers[:width], 0)
    seen = np.zeros(width, bool)
    costs = uncalibrated(cfg.decision)
    learned: set = set()
    classes = np.zeros(2, np.int64)
    scores = np.zeros(n)
    indptr, indices = Xb.indptr, Xb.indices
    for i in range(n):
        cols = indices[indptr[i]:indptr[i + 1]]
        if classes.all():
            known = cols[seen[cols]]
            row = Rows(np.ones(known.size), known, np.array([0, known.size]), (1, width))
            scores[i] = columns.score(model, row, cfg)[0]
        if digests[i] in learned:
            continue
        if not learns("spam" if y[i] else "ham", scores[i] if classes.all() else None, costs,
                      regime, cfg.training.margin):
            continue
        learned.add(digests[i])
        model.partial_fit(Xb[i], y[i:i + 1].astype(np.int64))
        new = cols[~seen[cols]]
        if new.size:
            seen[new] = True
            model.set_feature_mask(np.ones(new.size, bool), new)
        classes[int(y[i])] += 1
    return scores


def bogofilter_online(corpus: dict) -> dict:
    """bogofilter in the same order: each message scored (``-T``), then learned under its
    label (``-s`` / ``-n``), as bench.online runs it."""
    paths = trec_paths(corpus)
    y = corpus["labels"].astype(bool)
    scores = []
    with tempfile.TemporaryDirectory(prefix="textnb-dependent-") as db:
        for path, spam in zip(paths, y):
            raw = Path(path).read_bytes()
            out = subprocess.run(["bogofilter", "-C", "-d", db, "-T"], input=raw,
                                 capture_output=True, check=False)
            fields = out.stdout.split()
            scores.append(float(fields[1]) if len(fields) >= 2 else 0.5)
            subprocess.run(["bogofilter", "-C", "-d", db, "-s" if spam else "-n"], input=raw,
                           check=True, capture_output=True)
    return figures(y, np.array(scores))


def run_online(corpus: dict, variants: dict, bogofilter: bool, cache: Path, log) -> dict:
    y = corpus["labels"].astype(bool)
    X, tokens = matrix(corpus, np.arange(y.size))
    columns = Columns(tokens)
    out = {"n": int(y.size), "n_spam": int(y.sum()), "variants": {}}
    scores = {}
    for name, overrides in variants.items():
        s = online_scores(X, y, corpus["digests"], columns, variant_config(overrides),
                          overrides.get("training.regime", "all"))
        scores[name] = s
        row = figures(y, s)
        if name != reference(variants):
            row["vs_reference_95pct"] = interval(y, scores[reference(variants)], s)
        out["variants"][name] = row
        log(f"  online {name}: {row}")
    if bogofilter:
        saved = cache / "bogofilter-online.json"  # the peer's run does not change
        if not saved.exists():
            saved.write_text(json.dumps(bogofilter_online(corpus)))
        out["bogofilter"] = json.loads(saved.read_text())
        log(f"  online bogofilter: {out['bogofilter']}")
    return out


# -- the public cells ----------------------------------------------------------------------
def run_public(name: str, chronological: bool, cache: Path, variants: dict, log) -> dict:
    corpus = tokenised(name, cache)
    position = {k: i for i, k in enumerate(corpus["keys"])}
    examples = list(iter_corpus(name))
    train, test = (chronological_split(name, examples) if chronological else split(examples))
    if name in CHRONOLOGICAL:  # dated: the order a thick fit learns them in
        train = delivery_order(name, train)  # (else the corpus's own order)
    rows = np.array([position[e.relpath] for e in train + test])
    n_train = len(train)
    y = corpus["labels"][rows].astype(bool)
    X, tokens = matrix(corpus, rows)
    columns = Columns(tokens)
    fitted = Fitted(X, y, columns, corpus["digests"][rows] if "digests" in corpus else None)
    out = {"corpus": name, "split": "chronological" if chronological else "hash",
           "n_train": n_train, "n_test": len(test), "variants": {}}
    scores = {}
    for vname, overrides in variants.items():
        cfg = variant_config(overrides)
        s = columns.score(fitted.model(np.arange(n_train), cfg),
                          fitted.features(cfg)[n_train:], cfg)
        scores[vname] = s
        row = figures(y[n_train:], s)
        if vname != reference(variants):
            row["vs_reference_95pct"] = interval(y[n_train:], scores[reference(variants)], s)
        out["variants"][vname] = row
        log(f"  {name} {out['split']} {vname}: {row}")
    return out


LAMBDAS = (9.0, 999.0)


def reference(variants: dict) -> str:
    """The variant the others are compared with: the first (``main`` puts it there)."""
    return next(iter(variants))

# The study of docs/dependent-evidence.md. Its variants are measured with one budget of
# places for the route and the text (model.header_discriminators = 0) and one pseudo-count
# for both (model.route_alpha = alpha's 0.1), as the study was made; every one names each
# setting it depends on, so its row means the same whatever the defaults become, and
# "textnb" is the defaults of the day (the route and the text apart, each with its own
# pseudo-count: docs/route-and-text.md). The reference (what the bootstrap compares with) is
# every token of a header field counting, and a word pair beside its own words.
REFERENCE = "every-field-token"
_ONE_BUDGET = "model.header_discriminators=0,model.route_alpha=0.1"
VARIANTS = [
    f"{REFERENCE}=model.clues_per_header_field=0,model.tile_word_pairs=false,{_ONE_BUDGET}",
    f"field-1=model.clues_per_header_field=1,model.tile_word_pairs=false,{_ONE_BUDGET}",
    f"field-2=model.clues_per_header_field=2,model.tile_word_pairs=false,{_ONE_BUDGET}",
    f"field-3=model.clues_per_header_field=3,model.tile_word_pairs=false,{_ONE_BUDGET}",
    f"tiling=model.clues_per_header_field=0,model.tile_word_pairs=true,{_ONE_BUDGET}",
    "tiling-no-pair-cap=model.clues_per_header_field=0,model.tile_word_pairs=true,"
    f"model.max_pair_discriminators=16,{_ONE_BUDGET}",
    f"field-1+tiling=model.clues_per_header_field=1,model.tile_word_pairs=true,{_ONE_BUDGET}",
    f"field-2+tiling=model.clues_per_header_field=2,model.tile_word_pairs=true,{_ONE_BUDGET}",
]


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--tokenise-only", action="append", default=[], metavar="CORPUS")
    parser.add_argument("--part", action="append",
                        choices=("windows", "rolling", "online", "public"))
    parser.add_argument("--variant", action="append", metavar="NAME=section.key=value,...",
                        help="variants against the defaults (default: this script's list)")
    parser.add_argument("--reference", metavar="NAME",
                        help="the variant the others are compared with (default: "
                             f"{REFERENCE} with this script's list, else textnb, the defaults)")
    parser.add_argument("--no-bogofilter", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--markdown", type=Path, metavar="JSON",
                        help="print the docs' tables from a result of this script, and stop")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    if corpora_root() is None:
        sys.exit("no corpora found: set TEXTNB_CORPORA or put them at ../shared/corpora")
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    for name in args.tokenise_only:
        corpus = tokenised(name, args.cache)
        log(f"{name}: {len(corpus['keys'])} messages, {len(corpus['tokens'])} tokens")
    if args.tokenise_only:
        return
    variants = named_variants(args.variant or VARIANTS)
    first = args.reference or (REFERENCE if REFERENCE in variants else "textnb")
    if first not in variants:
        sys.exit(f"--reference {first}: no variant of that name (variants: {', '.join(variants)})")
    variants = {first: variants.pop(first), **variants}  # scored first: the others' reference
    bogofilter = not args.no_bogofilter and shutil.which("bogofilter") is not None
    parts = args.part or ["windows", "online", "public"]
    result = {"variants": variants, "reference": first,
              "bogofilter": bogofilter_version() if bogofilter else None}
    if "windows" in parts or "online" in parts or "rolling" in parts:
        corpus = tokenised(TREC, args.cache)
    if "windows" in parts:
        result["windows"] = {}
        for label, a, b in windows(len(corpus["keys"])):
            log(f"{TREC} {label}")
            result["windows"][label] = run_window(corpus, a, b, variants, bogofilter, log)
    if "rolling" in parts:
        result["rolling"] = {}
        for label, a, b in rolling_windows(len(corpus["keys"])):
            log(f"{TREC} {label}")
            result["rolling"][label] = run_window(corpus, a, b, variants, bogofilter, log)
    if "online" in parts:
        result["online"] = run_online(corpus, variants, bogofilter, args.cache, log)
    if "public" in parts:
        result["public"] = [run_public(name, chron, args.cache, variants, log)
                            for chron, names in ((False, CORPORA), (True, CHRONOLOGICAL))
                            for name in names]
    write_json(args.json, result)


def markdown(result: dict) -> str:
    """The tables docs/dependent-evidence.md quotes, from a result of this script."""
    def cell(row):
        return f"{row['one_minus_auc_pct']:.4f} / {row['sm_pct_at_hm_0.1pct']:.2f}"

    def interval(row):
        ci = row.get("vs_reference_95pct")
        if ci is None:
            return "(reference)"
        a, s = ci["one_minus_auc_pct"], ci["sm_pct_at_hm_0.1pct"]
        return f"[{a[0]:+.4f}, {a[1]:+.4f}] / [{s[0]:+.2f}, {s[1]:+.2f}]"

    lines = []
    trec = [(label, w) for label, w in result.get("windows", {}).items()]
    if "online" in result:
        trec.append(("online, all in delivery order", result["online"]))
    if trec:
        lines += ["| variant | " + " | ".join(label for label, _ in trec) + " |",
                  "|---|" + "---|" * len(trec)]
        for name in result["variants"]:
            lines.append(f"| {name} | " + " | ".join(cell(w["variants"][name]) for _, w in trec)
                         + " |")
        if all("bogofilter" in w for _, w in trec):
            lines.append("| bogofilter | " + " | ".join(cell(w["bogofilter"]) for _, w in trec)
                         + " |")
        lines += ["", "| variant | " + " | ".join(label for label, _ in trec) + " |",
                  "|---|" + "---|" * len(trec)]
        for name in result["variants"]:
            lines.append(f"| {name} | " + " | ".join(interval(w["variants"][name])
                                                      for _, w in trec) + " |")
        windows = result.get("windows", {})
        if windows:
            lines += ["", "| variant | " + " | ".join(f"{label}: lambda 9 / 999" for label in windows)
                      + " |", "|---|" + "---|" * len(windows)]
            for name in result["variants"]:
                lines.append(f"| {name} | " + " | ".join(
                    "{:g} / {:g}".format(*(w["variants"][name]["costs"][f"lambda_{lam:g}"]["cost"]
                                       for lam in LAMBDAS)) for w in windows.values()) + " |")
    rolling = result.get("rolling", {})
    if rolling:
        names = list(result["variants"]) + (["bogofilter"] if all(
            "bogofilter" in w for w in rolling.values()) else [])
        lines += ["", "| window | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for label, w in rolling.items():
            lines.append(f"| {label} | " + " | ".join(
                cell(w["bogofilter"] if name == "bogofilter" else w["variants"][name])
                for name in names) + " |")
    for part in result.get("public", []):
        lines += ["", f"{part['corpus']}, {part['split']} split ({part['n_train']:,} / "
                  f"{part['n_test']:,}):", "",
                  "| variant | (1-AUC)% / sm% at hm 0.1% | 95% interval of the difference |",
                  "|---|---|---|"]
        for name, row in part["variants"].items():
            lines.append(f"| {name} | {cell(row)} | {interval(row)} |")
    return "\n".join(lines)


def bogofilter_version() -> str:
    out = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True, check=False)
    return (out.stdout + out.stderr).strip().splitlines()[0]


if __name__ == "__main__":
    main()
