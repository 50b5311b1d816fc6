"""Tuning the cost ratio: out-of-fold scores -> calibration -> the threshold for each λ.

    labelled mail -> tokenise once (term-count matrix) -> k-fold out-of-fold log-odds
    [-> --search: the settings whose held-out cost is least]
    -> calibration map fitted on the out-of-fold log-odds (textnb.decision.calibration)
    -> for each λ: spam iff P(spam) > λ/(1+λ), i.e. log-odds > the map's crossing point
    -> table per λ, Brier and ECE before and after, and (--write) the filter re-trained
       on all the mail with the chosen settings and the map.

Why a threshold at all, when decision/costs.py has the Bayes rule log-odds > ln λ? Because
naive Bayes log-odds are not log-probabilities of anything: out of fold on
SpamAssassin's training split the highest ham reaches +24 with the default each-side
evidence (+59 with one ranking of 20 clues). ln 999 = 6.9 then flags hams; the tuned
threshold for λ = 999 sits at +24 (docs/tuning.md and docs/accuracy.md have the
test-split numbers).

Every function here takes arrays or messages and returns data; nothing prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, product

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ..config import FilterConfig
from ..decision import calibration as cal
from ..errors import EmptyTrainingSetError
from ..features.vectorize import binarize
from ..labels import LABEL_CODES
from ..models.dependence import independent_entries, restricted
from ..models import evidence
from ..models.evidence import RankedEvidence
from ..models.naive_bayes import EVENT_MODELS
from ..spamfilter import BATCH_SIZE, SpamFilter
from . import metrics
from .cross_validation import (chronological_folds, fit_rows, out_of_fold_log_odds,
                               stratified_folds, training_rows)

# Each message with its tokens, in order: ``tokenise``'s way to have them made elsewhere.
Tokenised = Callable[[SpamFilter, Iterable], Iterable[tuple[object, list[str]]]]

__all__ = [
    "DEFAULT_COST_RATIOS",
    "SEARCH_GRID",
    "RANKING_TOLERANCE",
    "SEARCH_RULES",
    "TuneResult",
    "cross_fitted",
    "cross_fitted_review",
    "fold_maps",
    "make_folds",
    "min_cost_threshold",
    "operating_point",
    "ordered",
    "review_point",
    "search",
    "tokenise",
    "tune",
    "tune_matrix",
]

# Androutsopoulos et al. (2000): a lost ham costs as much as 1, 9 or 999 spams let
# through (flag and keep / flag and bounce / delete unseen).
DEFAULT_COST_RATIOS = metrics.ANDROUTSOPOULOS_LAMBDAS

# What `--search` tries: 4 alphas x 3 event models, and for each 5 evidence sizes x 3
# pair caps (the caps only when the tokenizer makes word pairs) x 2 evidence modes
# (the k strongest, or k/2 on each side) = 300 distinct settings, 108 without pairs. The
# 3 event models are each registered event model (textnb.models.naive_bayes.EVENT_MODELS) with
# binary and tf features, except that one reading presence only (Bernoulli) is the same
# model with either, so it is tried with binary features only. k and the cap only change
# which of a message's contributions are summed, so each fold fits 12 models, not 156
# (`search`; what the search costs:
# docs/design/counting-and-scoring.md#tunings-search-one-fit-per-fold).
SEARCH_GRID = {
    "alpha": (0.03, 0.1, 0.3, 1.0),
    "max_discriminators": (0, 10, 15, 20, 30),
    "max_pair_discriminators": (2, 4, 8),
    "evidence": ("strongest", "each-side"),
    "model": tuple((name, features) for name, cls in EVENT_MODELS.items()
                   for features in (("binary",) if cls.counts_presence else ("binary", "tf"))),
}


@dataclass
class TuneResult:
    """What `tune` found. Arrays are per training message, in input order.

    config : the settings tuned (the model's, or the ones `--search` chose).
    y : 0/1 labels (1 = spam); log_odds : out-of-fold log-odds;
    p_cross_fitted : calibrated P(spam), each fold mapped by a calibration fitted on
        the other folds' scores (honest "after" figures).
    calibration : the map fitted on all out-of-fold scores (what `--write` stores).
    rows : one dict per λ (`operating_point` on the out-of-fold scores at the tuned
        threshold, plus ``untuned_cost`` at ln λ and ``held_out_cost``).
    quality : Brier score and ECE ``before`` (expit of the log-odds) and ``after``.
    search_rows : with `--search`, one dict per setting tried, best first.
    """

    config: FilterConfig
    cost_ratios: tuple[float, ...]
    n_folds: int
    chronological: bool
    y: np.ndarray
    log_odds: np.ndarray
    p_cross_fitted: np.ndarray
    calibration: dict
    rows: list[dict]
    quality: dict
    one_minus_auc_pct: float
    search_rows: list[dict] = field(default_factory=list)


# -- data -------------------------------------------------------------------------
def tokenise(spam_filter: SpamFilter, messages: Iterable,
             progress: Callable[[int], None] | None = None,
             tokenised: Tokenised | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """Term counts of labelled messages over ``spam_filter.vocabulary`` (which grows).

    Streams in batches: the messages are never all in memory, only the sparse matrix.
    tokenised (callable | None): ``tokenised(spam_filter, messages)`` yields each message
        with its tokens, in order (``textnb.engines.LocalEngine.tokenised``: on every
        core); None: here, one message after another.
    Returns X of shape (n_docs, len(vocabulary)) with raw term frequencies, and y (1 = spam).
    """
    blocks, labels = [], []
    if tokenised is None:
        pairs = ((m, spam_filter.tokens(m.raw)) for m in messages)
    else:
        pairs = iter(tokenised(spam_filter, messages))
    while batch := list(islice(pairs, BATCH_SIZE)):
        for m, _ in batch:
            if m.label not in LABEL_CODES:
                raise EmptyTrainingSetError(
                    f"message {m.source!r} has no label ({m.label!r}); tune needs labelled "
                    "mail (--index FILE, or --spam SRC and --ham SRC)")
        labels.extend(LABEL_CODES[m.label] for m, _ in batch)
        blocks.append(spam_filter.vocabulary.transform((tokens for _, tokens in batch),
                                                       grow=True))
        if progress:
            progress(len(batch))
    n = len(spam_filter.vocabulary)
    # Earlier batches saw a smaller vocabulary: widen them (their columns are unchanged).
    X = sp.vstack([sp.csr_matrix((b.data, b.indices, b.indptr), shape=(b.shape[0], n))
                   for b in blocks], format="csr") if blocks else sp.csr_matrix((0, n))
    y = np.array(labels, dtype=np.int64)
    n_spam = int(y.sum())
    if n_spam == 0 or n_spam == len(y):
        missing = "spam" if n_spam == 0 else "ham"
        raise EmptyTrainingSetError(
            f"no {missing} messages among the {len(y)} given; tuning needs examples of both")
    return X, y


def make_folds(y: np.ndarray, n_folds: int = 5, chronological: bool = False,
               seed: int = 0) -> list[np.ndarray]:
    """Stratified folds, or contiguous blocks in the given (delivery) order."""
    if chronological:
        folds = chronological_folds(len(y), n_folds)
        for i, f in enumerate(folds):
            rest = np.setdiff1d(np.arange(len(y)), f)
            if len(np.unique(y[rest])) < 2:
                raise ValueError(f"chronological fold {i + 1} of {n_folds} leaves only one "
                                 "class to train on; use fewer folds or stratified folds")
        return folds
    return stratified_folds(y, n_folds, seed=seed)


# -- costs ------------------------------------------------------------------------
def operating_point(y, scores, threshold: float, cost_ratio: float) -> dict:
    """The field's figures for one rule, spam iff score > threshold, at one λ.

    Returns a dict with ``cost_ratio, threshold, tp, fp, tn, fn, hm_pct, sm_pct,
    cost`` (λ·FP + FN), ``wacc`` (weighted accuracy, a fraction) and ``tcr``
    (n_spam / cost; above 1 the filter beats no filter).
    """
    y = np.asarray(y).astype(bool)
    counts = metrics.confusion(y, np.asarray(scores) > threshold)
    n_ham, n_spam = int((~y).sum()), int(y.sum())
    return {
        "cost_ratio": float(cost_ratio),
        "threshold": float(threshold),
        **counts,
        "hm_pct": 100.0 * counts["fp"] / n_ham if n_ham else 0.0,
        "sm_pct": 100.0 * counts["fn"] / n_spam if n_spam else 0.0,
        "cost": cost_ratio * counts["fp"] + counts["fn"],
        "wacc": metrics.weighted_accuracy(lam=cost_ratio, **counts),
        "tcr": metrics.tcr(n_spam, counts["fp"], counts["fn"], cost_ratio),
    }


def min_cost_threshold(y, scores, cost_ratio: float) -> tuple[float, float]:
    """The threshold of least empirical cost λ·FP + FN on these scores, and that cost.

    Every distinct score is a candidate cut; the threshold returned is the midpoint
    between the lowest score flagged and the next one down (-inf: flag everything,
    +inf: flag nothing). Independent of any calibration: tests hold the calibrated
    rule to it.
    """
    y = np.asarray(y).astype(bool)
    levels, which = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
    spam_at = np.bincount(which, weights=y, minlength=levels.size)[::-1]
    ham_at = np.bincount(which, weights=~y, minlength=levels.size)[::-1]
    # Flag the top i+1 levels (i = -1: none), from the highest score down.
    fp = np.concatenate([[0.0], np.cumsum(ham_at)])
    fn = y.sum() - np.concatenate([[0.0], np.cumsum(spam_at)])
    cost = cost_ratio * fp + fn
    i = int(np.argmin(cost))
    down = levels[::-1]
    if i == 0:
        return math.inf, float(cost[0])
    if i == levels.size:
        return -math.inf, float(cost[i])
    return float((down[i - 1] + down[i]) / 2), float(cost[i])


def fold_maps(y, scores, folds: Sequence[np.ndarray], method: str = "isotonic"
              ) -> list[tuple[np.ndarray, dict]]:
    """(the fold's rows, a calibration map fitted on the other folds' scores) per fold."""
    y = np.asarray(y)
    scores = np.asarray(scores, dtype=np.float64)
    out = []
    for test in folds:
        rest = np.setdiff1d(np.arange(len(y)), test, assume_unique=True)
        out.append((test, cal.fit(scores[rest], y[rest], method)))
    return out


def cross_fitted(y, scores, folds: Sequence[np.ndarray], cost_ratios: Sequence[float],
                 method: str = "isotonic", maps: list | None = None
                 ) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Calibrate and decide each fold with a map fitted on the other folds' scores.

    What a tuned filter would do on mail it was not tuned on: the honest estimate of
    calibration quality and cost (the map fitted on all the scores is judged on the
    scores it was fitted to otherwise). Returns P(spam) per message and, per λ, the
    decisions (True = spam). ``maps``: ``fold_maps`` of these folds, if already fitted.
    """
    y = np.asarray(y)
    scores = np.asarray(scores, dtype=np.float64)
    p = np.full(len(y), np.nan)
    flagged = {lam: np.zeros(len(y), dtype=bool) for lam in cost_ratios}
    for test, fold_map in maps if maps is not None else fold_maps(y, scores, folds, method):
        p[test] = cal.predict_proba(fold_map, scores[test])
        for lam in cost_ratios:
            flagged[lam][test] = scores[test] > cal.log_odds_threshold(fold_map, lam)
    return p, flagged


def review_point(y, scores, between: tuple[float, float] | None, cost_ratio: float,
                 review_cost: float) -> dict:
    """The figures of a three-way rule at one λ: spam above ``between[1]``, ham at or
    below ``between[0]``, 'unsure' (a person's look, ``review_cost`` each) in between.

    Returns ``low, high, fp, fn, unsure`` (counts; a spam or ham called unsure is
    neither an FP nor an FN: the look files it right) and ``cost`` =
    λ·FP + FN + review_cost·unsure.
    """
    if between is None:
        raise ValueError("review_point needs a review region (calibration.review_thresholds)")
    y = np.asarray(y).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    low, high = between
    spam, ham = scores > high, scores <= low
    unsure = ~(spam | ham)
    fp, fn, n_unsure = int(np.sum(spam & ~y)), int(np.sum(ham & y)), int(unsure.sum())
    return {"low": float(low), "high": float(high), "fp": fp, "fn": fn, "unsure": n_unsure,
            "unsure_spam": int(np.sum(unsure & y)),
            "cost": cost_ratio * fp + fn + review_cost * n_unsure}


def cross_fitted_review(y, scores, maps: list, cost_ratios: Sequence[float],
                        review_cost: float) -> dict[float, float]:
    """Per λ, the three-way cost of each fold decided by a map fitted on the other folds
    (``fold_maps``; as ``cross_fitted`` for the two-way rule): the honest cost for new
    mail. A fold whose map leaves no review region is decided two-way."""
    y = np.asarray(y).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    total = {lam: 0.0 for lam in cost_ratios}
    for test, fold_map in maps:
        for lam in cost_ratios:
            between = cal.review_thresholds(fold_map, lam, review_cost)
            if between is None:
                t = cal.log_odds_threshold(fold_map, lam)
                between = (t, t)  # no unsure: review_point is then the two-way rule
            total[lam] += review_point(y[test], scores[test], between, lam, review_cost)["cost"]
    return total


def _held_out_costs(y, flagged: dict[float, np.ndarray]) -> dict[float, float]:
    y = np.asarray(y).astype(bool)
    return {lam: float(lam * np.sum(f & ~y) + np.sum(~f & y)) for lam, f in flagged.items()}


def _quality(y, p) -> dict:
    return {"brier": cal.brier_score(y, p), "ece": cal.expected_calibration_error(y, p)}


# -- search -----------------------------------------------------------------------
def _settings(base: FilterConfig, grid: dict) -> list[FilterConfig]:
    """The grid's settings, each distinct selection once: a pair cap does nothing without
    word pairs, with all tokens (k = 0) or when it is k or more."""
    caps = grid.get("max_pair_discriminators", (base.model.max_pair_discriminators,))
    if not base.tokenizer.bigrams:
        caps = (base.model.max_pair_discriminators,)
    modes = grid.get("evidence", (base.model.evidence,))
    out, seen = [], set()
    for (event_model, features), alpha, k, cap, mode in product(
            grid["model"], grid["alpha"], grid["max_discriminators"], caps, modes):
        effective = (event_model, features, alpha, k,
                     min(cap, k) if k and len(caps) > 1 else 0, mode if k else "")
        if effective in seen:
            continue
        seen.add(effective)
        out.append(replace(base, model=replace(base.model, event_model=event_model, alpha=alpha,
                                               max_discriminators=k,
                                               max_pair_discriminators=cap, evidence=mode),
                           features=replace(base.features, features=features)))
    return out


def describe(config: FilterConfig) -> str:
    """'multinomial NB, binary features, alpha 0.1, 20 discriminators (at most 4 pairs)'."""
    m, f = config.model, config.features
    k = f"{m.max_discriminators} discriminators" if m.max_discriminators else "all tokens"
    if m.max_discriminators and m.evidence == "each-side":
        k += ", half each side"
    if config.tokenizer.bigrams and m.max_discriminators and \
            m.max_pair_discriminators < m.max_discriminators:
        k += f" (at most {m.max_pair_discriminators} pairs)"
    return f"{m.event_model} NB, {f.features} features, alpha {m.alpha:g}, {k}"


def _search_scores(X, y, settings: list[FilterConfig], folds: Sequence[np.ndarray],
                   pair_columns: np.ndarray | None, header_columns: np.ndarray | None = None,
                   dependence=None, fold_rows: Sequence[np.ndarray] | None = None
                   ) -> list[np.ndarray]:
    """Out-of-fold log-odds of every setting (what `out_of_fold_log_odds` gives each).

    fold_rows: per fold, the training rows every setting learns (``training_rows`` of the
    base configuration); None: all the other folds' rows.

    Settings that share the model (event model, features, alpha) share its fits: per
    fold the model is fitted once, its contributions ranked once
    (:class:`textnb.models.evidence.RankedEvidence`), and each k and cap is a sum over that.
    dependence: the base configuration's (:mod:`textnb.models.dependence`), the same for
    every setting.
    """
    y = np.asarray(y, dtype=np.int64)
    X = sp.csr_matrix(X)
    all_rows = np.arange(X.shape[0])
    scores = [np.full(X.shape[0], np.nan) for _ in settings]
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(settings):
        groups.setdefault((c.model.event_model, c.features.features, c.model.alpha,
                           c.model.route_alpha, c.model.fit_prior, c.model.class_prior, c.features.min_df,
                           c.features.max_features), []).append(i)
    for members in groups.values():
        first = settings[members[0]]
        Xf = binarize(X) if first.features.features == "binary" else X
        for f, test in enumerate(folds):
            train = (np.setdiff1d(all_rows, test, assume_unique=True) if fold_rows is None
                     else fold_rows[f])
            model = fit_rows(X, y, train, first.model, first.features,
                             route_columns=header_columns)
            C, baseline = model.log_odds_contributions(Xf[test])
            ranked = RankedEvidence(C, pair_columns, header_columns)
            # With k places, clues that repeat a stronger one's evidence are dropped
            # before the ranking (textnb.models.dependence); k = 0 keeps every token.
            independent = ranked
            if dependence is not None and dependence.active:
                independent = RankedEvidence(restricted(C, independent_entries(C, dependence))[0],
                                             pair_columns, header_columns)
            for i in members:
                m = settings[i].model
                chosen = independent if m.max_discriminators else ranked
                scores[i][test] = baseline + chosen.sums(m.max_discriminators,
                                                         m.max_pair_discriminators,
                                                         m.evidence == "each-side",
                                                         m.min_strength, m.combine,
                                                         m.header_places,
                                                         m.header_discriminators)
    return scores


SEARCH_RULES = ("ranking-guard", "least-cost")
# The ranking guard of ``search``: a setting is a candidate when its out-of-fold
# (1-AUC)% is at most this many times the least. Learning every message, 1.5 held on
# every delivery-order window of the real mailbox and SpamAssassin's two splits, against
# 1.25 and 2, where the least cost failed at λ = 999; with thick fits the tolerances and
# the least cost are closer (docs/tuning.md#how-search-chooses has both and the command).
RANKING_TOLERANCE = 1.5


def search(X, y, base: FilterConfig, folds: Sequence[np.ndarray],
           cost_ratios: Sequence[float], grid: dict | None = None, method: str = "isotonic",
           progress: Callable[[int], None] | None = None,
           pair_columns: np.ndarray | None = None,
           header_columns: np.ndarray | None = None, dependence=None,
           rule: str = "ranking-guard") -> list[dict]:
    """Every setting of the grid and ``base`` (the model's own), judged by its held-out
    cost; the chosen one first.


    The criterion is the mean over λ of ln(1 + held-out cost): a 10% saving counts
    the same at λ = 1 as at λ = 999 (a plain sum would be the λ = 999 cost alone).
    Held-out means the threshold of each fold came from the other folds
    (`cross_fitted`), so a setting whose out-of-fold hams reach surprising scores
    pays for them.

    rule (str): 'least-cost' chooses the least criterion (ties: the lower (1-AUC)%).
        'ranking-guard' (the default) chooses the least criterion among the settings that
        rank the mail nearly as well as the best: out-of-fold (1-AUC)% at most
        ``RANKING_TOLERANCE`` times the least. At a strict λ the held-out cost rests on
        the few hams near the threshold, none of them flagged in any fold, so the least
        cost is the fewest spams let through by a setting whose hams happened to stay
        below it; a setting that ranks the whole mail worse has more hams near the top,
        and on the next messages it flags them (docs/tuning.md#how-search-chooses).
    RETURNS (list[dict]): per setting ``config``, ``setting``, ``held_out_cost`` per λ,
        ``criterion``, ``one_minus_auc_pct``, ``ranks_well`` (within the guard).
    """
    if rule not in SEARCH_RULES:
        raise ValueError(f"unknown search rule {rule!r}; use one of {', '.join(SEARCH_RULES)}")
    settings = _settings(base, grid or SEARCH_GRID)
    if base not in settings:
        settings.insert(0, base)
    # A thick fit scores its rows one by one (seconds per fold); one per setting would
    # take the search from seconds to hours. So every setting learns the rows the base
    # configuration's thick pass selects; the chosen one is fitted on its own selection
    # afterwards (``tune_matrix``), and that is what the calibration and --write rest on.
    fold_rows = (training_rows(X, y, folds, base, pair_columns, header_columns, dependence)
                 if base.training.regime != "all" else None)
    rows = []
    for config, scores in zip(settings, _search_scores(X, y, settings, folds, pair_columns,
                                                       header_columns, dependence,
                                                       fold_rows)):
        _, flagged = cross_fitted(y, scores, folds, cost_ratios, method)
        costs = _held_out_costs(y, flagged)
        rows.append({
            "config": config,
            "setting": describe(config),
            "held_out_cost": costs,
            "criterion": float(np.mean([math.log1p(c) for c in costs.values()])),
            "one_minus_auc_pct": metrics.one_minus_auc_pct(y, scores),
        })
        if progress:
            progress(1)
    return ordered(rows, rule)


def ordered(rows: list[dict], rule: str = "ranking-guard",
            tolerance: float = RANKING_TOLERANCE) -> list[dict]:
    """``search``'s rows (each with ``criterion`` and ``one_minus_auc_pct``) marked
    ``ranks_well`` (within ``tolerance`` times the least (1-AUC)%) and ordered: the one
    ``rule`` chooses first, the rest by criterion."""
    best_ranking = min(r["one_minus_auc_pct"] for r in rows)
    for row in rows:
        row["ranks_well"] = bool(row["one_minus_auc_pct"] <= tolerance * best_ranking)
    by_cost = sorted(rows, key=lambda r: (r["criterion"], r["one_minus_auc_pct"]))
    if rule == "least-cost":
        return by_cost
    chosen = next(r for r in by_cost if r["ranks_well"])
    return [chosen] + [r for r in by_cost if r is not chosen]


# -- the whole step -----------------------------------------------------------------
def tune(config: FilterConfig, messages: Iterable, cost_ratios: Sequence[float] = DEFAULT_COST_RATIOS,
         n_folds: int = 5, chronological: bool = False, do_search: bool = False,
         method: str = "isotonic", grid: dict | None = None,
         progress: Callable[[int], None] | None = None, review_cost: float = 0.0,
         search_rule: str = "ranking-guard", tokenised: Tokenised | None = None
         ) -> TuneResult:
    """Tune a filter's decision on labelled mail (see the module docstring).

    config : the settings to start from (the model's own).
    messages : labelled RawMessages; tokenised once.
    The map belongs to a model trained on *this* mail with ``result.config``: it was
    fitted to such models' scores. `textnb tune --write` trains that model.
    review_cost : with a value above 0, each row also gives the three-way rule's figures
    (``row["review"]``: ``review_point`` in sample, and its ``held_out_cost``).
    tokenised : where the tokens are made (``tokenise``); None: in this process.
    """
    spam_filter = SpamFilter(config)
    X, y = tokenise(spam_filter, messages, progress, tokenised)
    header_columns = spam_filter.header_columns()
    if header_columns is None and config.model.route_alpha is not None:
        # model.route_alpha smooths the route's columns apart, whatever the selection
        # keeps places for (which ignores the flags when it keeps none).
        header_columns = evidence.header_columns(spam_filter.vocabulary.tokens_)
    return tune_matrix(X, y, config, cost_ratios, make_folds(y, n_folds, chronological),
                       chronological=chronological, do_search=do_search, method=method,
                       grid=grid, pair_columns=spam_filter.pair_columns(),
                       header_columns=header_columns, review_cost=review_cost,
                       dependence=spam_filter.dependence(), search_rule=search_rule)


def tune_matrix(X, y, config: FilterConfig, cost_ratios: Sequence[float],
                folds: Sequence[np.ndarray], chronological: bool = False,
                do_search: bool = False, method: str = "isotonic",
                grid: dict | None = None, pair_columns: np.ndarray | None = None,
                header_columns: np.ndarray | None = None, review_cost: float = 0.0,
                dependence=None, search_rule: str = "ranking-guard") -> TuneResult:
    """`tune` on messages already counted (X raw term counts, y 1 = spam; pair_columns,
    header_columns: which columns are word pairs and which come from header fields, see
    :mod:`textnb.models.evidence`; dependence: which clues repeat another's evidence,
    :mod:`textnb.models.dependence`)."""
    cost_ratios = tuple(float(r) for r in cost_ratios)
    if not cost_ratios or min(cost_ratios) <= 0:
        raise ValueError(f"cost ratios {cost_ratios} must be positive (e.g. 1, 9, 999)")
    if not (review_cost >= 0 and math.isfinite(review_cost)):
        raise ValueError(f"review cost {review_cost} must be >= 0 (the cost of a look at one "
                         "message, in units of a spam let through; 0: two-way)")
    y = np.asarray(y, dtype=np.int64)
    search_rows = []
    if do_search:
        search_rows = search(X, y, config, folds, cost_ratios, grid, method,
                             pair_columns=pair_columns, header_columns=header_columns,
                             dependence=dependence, rule=search_rule)
        config = search_rows[0]["config"]
    scores = out_of_fold_log_odds(X, y, config.model, config.features, folds, pair_columns,
                                  header_columns, dependence, config=config)
    calibration = cal.fit(scores, y, method)
    maps = fold_maps(y, scores, folds, method)
    p_cf, flagged = cross_fitted(y, scores, folds, cost_ratios, maps=maps)
    held_out = _held_out_costs(y, flagged)
    held_out_review = (cross_fitted_review(y, scores, maps, cost_ratios, review_cost)
                       if review_cost > 0 else {})
    rows = []
    for lam in cost_ratios:
        row = operating_point(y, scores, cal.log_odds_threshold(calibration, lam), lam)
        row["untuned_cost"] = operating_point(y, scores, math.log(lam), lam)["cost"]
        row["held_out_cost"] = held_out[lam]
        between = cal.review_thresholds(calibration, lam, review_cost) if review_cost > 0 else None
        if between is not None:
            row["review"] = {**review_point(y, scores, between, lam, review_cost),
                             "held_out_cost": held_out_review[lam]}
        rows.append(row)
    calibration["tuning"] = {
        "folds": len(folds),
        "chronological": chronological,
        "searched": do_search,
        "cost_ratios": list(cost_ratios),
        # Informational: the map gives the threshold for any λ (log_odds_threshold).
        "thresholds": {f"{r['cost_ratio']:g}": _finite(r["threshold"]) for r in rows},
    }
    return TuneResult(
        config=config, cost_ratios=cost_ratios, n_folds=len(folds), chronological=chronological,
        y=y, log_odds=scores, p_cross_fitted=p_cf, calibration=calibration, rows=rows,
        quality={"before": _quality(y, expit(scores)), "after": _quality(y, p_cf)},
        one_minus_auc_pct=metrics.one_minus_auc_pct(y, scores), search_rows=search_rows)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
