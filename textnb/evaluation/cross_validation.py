"""Cross-validation: out-of-fold log-odds from one document-term matrix.

Tokenising is the expensive step, so messages are tokenised once into a term
count matrix over *all* their tokens; each fold then fits a model on its
training rows and masks the columns its training rows never saw. That is
exactly the model a filter trained on those rows alone would be (a test in
tests/test_evaluate.py checks it), at a fraction of the cost.

A configuration whose ``training.regime`` learns selectively (``thick``, the default:
textnb.modelfile.lifecycle) is fitted row by row in the order given
(:func:`fit_rows_in_order`): each row is scored by the model of the rows learned before
it and learned only if the regime says so, as ``textnb train`` learns the same mail
(tests/test_cv_regime.py checks the two agree).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from ..config import FeatureConfig, FilterConfig, ModelConfig
from ..decision.costs import uncalibrated
from ..features.csr_arrays import Rows
from ..features.vectorize import binarize, feature_mask
from ..models.naive_bayes import make_model
from ..models.scores_ahead import ScoresAhead


def stratified_folds(y: np.ndarray, n_folds: int = 5, seed: int = 0) -> list[np.ndarray]:
    """Test indices of each fold; every fold gets its share of each class."""
    y = np.asarray(y)
    if n_folds < 2:
        raise ValueError(f"n_folds={n_folds}; cross-validation needs at least 2 folds")
    rng = np.random.RandomState(seed)
    folds: list[list[int]] = [[] for _ in range(n_folds)]
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        if len(members) < n_folds:
            raise ValueError(f"only {len(members)} messages of class {label} for {n_folds} "
                             "folds; use fewer folds or more data")
        rng.shuffle(members)
        for i, chunk in enumerate(np.array_split(members, n_folds)):
            folds[i].extend(chunk.tolist())
    return [np.sort(np.array(f, dtype=np.int64)) for f in folds]


def chronological_folds(n_docs: int, n_folds: int = 5) -> list[np.ndarray]:
    """Contiguous blocks in delivery order (for data whose order matters)."""
    return [np.asarray(block) for block in np.array_split(np.arange(n_docs), n_folds)]


def fit_rows(X: sp.csr_matrix, y: np.ndarray, rows: np.ndarray, model_cfg: ModelConfig,
             feature_cfg: FeatureConfig, sample_weight: np.ndarray | None = None,
             route_columns: np.ndarray | None = None):
    """A model trained on ``rows`` of a term-count matrix, pruned as a filter would be
    (``sample_weight``: one weight per row of ``rows``, the counts' weighted sums).

    route_columns: which columns of X come from header fields other than Subject
        (:func:`textnb.models.evidence.header_columns`); required when ``model.route_alpha``
        gives them a pseudo-count of their own, since the scores would otherwise be
        another configuration's."""
    Xf = binarize(X) if feature_cfg.features == "binary" else X
    model = make_model(model_cfg.event_model, alpha=model_cfg.alpha,
                       route_alpha=model_cfg.route_alpha, fit_prior=model_cfg.fit_prior,
                       class_prior=model_cfg.class_prior)
    model.fit(Xf[rows], y[rows], sample_weight=sample_weight)
    if model.per_column_alpha:
        if route_columns is None:
            raise ValueError(f"model.route_alpha={model_cfg.route_alpha} smooths the route's "
                             "columns apart: pass route_columns "
                             "(textnb.models.evidence.header_columns(tokens))")
        model.set_route_columns(np.asarray(route_columns, bool)[:X.shape[1]], 0)
    doc_freq = np.bincount(X[rows].indices, minlength=X.shape[1]).astype(np.float64)
    # Columns absent from these rows would not exist in a filter trained on them.
    mask = feature_mask(doc_freq, max(feature_cfg.min_df, 1), feature_cfg.max_features)
    model.set_feature_mask(mask)
    return model


def fit_rows_in_order(X: sp.csr_matrix, y: np.ndarray, rows: np.ndarray, config: FilterConfig,
                      pair_columns: np.ndarray | None = None,
                      header_columns: np.ndarray | None = None, dependence=None,
                      digests: Sequence | None = None):
    """The model ``textnb train`` makes of ``rows`` of a term-count matrix, given in that
    order, with ``config.training``'s regime: each row is scored by the model of the rows
    learned before it (:func:`score_rows`, with the configured evidence) and learned when
    ``textnb.modelfile.lifecycle.learns`` says so (every row while a class has none).

    digests: one ledger digest per row of X (``hashlib.sha256(normalise(raw))``), so that
        a message given twice is learned once, and one given again under the other label
        is moved, as the ledger does; None: rows are distinct.
    RETURNS (model, learned): the fitted model and the rows it learned, in order (a moved
        message under its first row).
    """
    from ..modelfile.lifecycle import learns

    X = sp.csr_matrix(X)
    y = np.asarray(y, dtype=np.int64)
    m, f, training = config.model, config.features, config.training
    if f.max_features:
        raise ValueError(f"features.max_features={f.max_features}: a thick fit ranks the "
                         "vocabulary anew at every row; use training.regime = 'all' with it")
    Xf = binarize(X) if f.features == "binary" else X
    width = X.shape[1]
    model = make_model(m.event_model, alpha=m.alpha, route_alpha=m.route_alpha,
                       fit_prior=m.fit_prior, class_prior=m.class_prior)
    with np.errstate(divide="ignore", invalid="ignore"):  # a class prior of no messages
        model.fit(Xf[:0], np.zeros(0, np.int64))
    if model.per_column_alpha:
        if header_columns is None:
            raise ValueError(f"model.route_alpha={m.route_alpha} smooths the route's columns "
                             "apart: pass header_columns "
                             "(textnb.models.evidence.header_columns(tokens))")
        model.set_route_columns(np.asarray(header_columns, bool)[:width], 0)
    model.set_feature_mask(np.zeros(width, bool))
    costs = uncalibrated(config.decision)  # a new model's decision: what train judges by
    min_df = max(f.min_df, 1)
    doc_freq = np.zeros(width, np.int64)
    classes = np.zeros(2, np.int64)
    held: dict = {}  # digest -> (label learned under, its row)
    learned = []
    indptr, indices, data = Xf.indptr, Xf.indices, Xf.data

    def add(i: int, label: int, weight: float) -> None:
        cols = indices[indptr[i]:indptr[i + 1]]
        counts = np.zeros((2, cols.size))
        counts[label] = data[indptr[i]:indptr[i + 1]]
        with np.errstate(divide="ignore", invalid="ignore"):  # a class prior of no messages
            model.add_counts(weight * np.eye(2)[label], weight * counts, cols,
                             n_features=width)
        classes[label] += int(weight)

    order = np.asarray(rows, dtype=np.int64)

    def score_span(start: int, stop: int) -> list[float | None]:
        block = order[start:stop]
        if not classes.all():
            return [None] * block.size
        spans = [slice(indptr[i], indptr[i + 1]) for i in block]
        cols = np.concatenate([indices[span] for span in spans])
        values = np.concatenate([data[span] for span in spans])
        known = doc_freq[cols] >= min_df
        row_of = np.repeat(np.arange(block.size), [span.stop - span.start for span in spans])
        row_ptr = np.zeros(block.size + 1, np.int64)
        np.cumsum(np.bincount(row_of[known], minlength=block.size), out=row_ptr[1:])
        X_block = Rows(values[known].astype(np.float64), cols[known], row_ptr,
                       (block.size, width))
        return score_rows(model, X_block, m, pair_columns, header_columns,
                          dependence).tolist()

    ahead = ScoresAhead(score_span)  # scored a block at a time, the same numbers
    for position, i in enumerate(order):
        label = int(y[i])
        if digests is not None and digests[i] in held:
            before, j = held[digests[i]]
            if before != label:  # relabelled: moved, in every regime (as the ledger does)
                add(j, before, -1.0)
                add(j, label, 1.0)
                held[digests[i]] = (label, j)
            ahead.done(position, changed=before != label)
            continue  # known under its label: the ledger skips it
        score = ahead.at(position)
        if not learns("spam" if label else "ham", score, costs, training.regime,
                      training.margin):
            ahead.done(position, changed=False)
            continue
        cols = indices[indptr[i]:indptr[i + 1]]
        add(i, label, 1.0)
        doc_freq[cols] += 1
        model.set_feature_mask(doc_freq[cols] >= min_df, cols)
        ahead.done(position, changed=True)
        learned.append(i)
        if digests is not None:
            held[digests[i]] = (label, i)
    return model, np.array(learned, dtype=np.int64)


def score_rows(model, X, model_cfg: ModelConfig, pair_columns: np.ndarray | None = None,
               header_columns: np.ndarray | None = None, dependence=None) -> np.ndarray:
    """Log-odds of rows of X (features as the model was fit on) with the configured
    evidence selection: what a filter with ``model_cfg`` would score.

    pair_columns, header_columns: which columns of X are word pairs and which come from
        header fields (:func:`textnb.models.evidence.pair_columns`, ``header_columns``); None
        for pairs when the tokens hold none. header_columns is required when the
        selection keeps places for header clues: without it the scores would silently
        be another configuration's.
    dependence (Dependence | None): the columns' dependence
        (:mod:`textnb.models.dependence`), required when the configuration drops
        dependent clues.
    """
    header_setting = (("header_discriminators", model_cfg.header_discriminators)
                      if model_cfg.header_discriminators else
                      ("header_places", model_cfg.header_places))
    if (header_columns is None and header_setting[1] and model_cfg.max_discriminators
            and model_cfg.evidence == "each-side"):
        raise ValueError(f"model.{header_setting[0]}={header_setting[1]} keeps places for "
                         "header clues: pass header_columns "
                         "(textnb.models.evidence.header_columns(tokens))")
    if dependence is None and model_cfg.max_discriminators and (
            model_cfg.clues_per_header_field or model_cfg.tile_word_pairs):
        raise ValueError("model.clues_per_header_field / model.tile_word_pairs drop clues that "
                         "repeat another's evidence: pass dependence "
                         "(textnb.models.dependence.make_dependence(tokens, columns, ...))")
    return model.selected_log_odds(X, model_cfg.max_discriminators, pair_columns,
                                   model_cfg.max_pair_discriminators,
                                   model_cfg.evidence == "each-side", model_cfg.min_strength,
                                   model_cfg.combine, header=header_columns,
                                   header_places=model_cfg.header_places,
                                   header_clues=model_cfg.header_discriminators,
                                   dependence=dependence)


def training_rows(X: sp.csr_matrix, y: np.ndarray, folds: Sequence[np.ndarray],
                  config: FilterConfig, pair_columns: np.ndarray | None = None,
                  header_columns: np.ndarray | None = None,
                  dependence=None) -> list[np.ndarray]:
    """Per fold, the rows of the other folds a model with ``config`` learns: all of them
    in the regime ``all``, else those :func:`fit_rows_in_order` selects, in row order."""
    all_rows = np.arange(X.shape[0])
    out = []
    for test in folds:
        train = np.setdiff1d(all_rows, test, assume_unique=True)
        if config.training.regime != "all":
            train = fit_rows_in_order(X, y, train, config, pair_columns, header_columns,
                                      dependence)[1]
        out.append(train)
    return out


def out_of_fold_log_odds(X: sp.csr_matrix, y: np.ndarray, model_cfg: ModelConfig,
                         feature_cfg: FeatureConfig, folds: Sequence[np.ndarray],
                         pair_columns: np.ndarray | None = None,
                         header_columns: np.ndarray | None = None,
                         dependence=None, config: FilterConfig | None = None) -> np.ndarray:
    """Log-odds of every document from the model trained on the other folds.

    pair_columns, header_columns, dependence: as :func:`score_rows`'s (header_columns
        are also the route's columns for ``model.route_alpha``, :func:`fit_rows`).
    config (FilterConfig | None): the whole configuration, whose ``training.regime`` says
        which of the other folds' rows each model learns (:func:`fit_rows_in_order`);
        None: every one (then model_cfg and feature_cfg are the configuration's).
    """
    X = sp.csr_matrix(X)
    y = np.asarray(y, dtype=np.int64)
    if config is not None:
        model_cfg, feature_cfg = config.model, config.features
    scores = np.full(X.shape[0], np.nan)
    all_rows = np.arange(X.shape[0])
    Xf = binarize(X) if feature_cfg.features == "binary" else X
    for test in folds:
        train = np.setdiff1d(all_rows, test, assume_unique=True)
        if config is not None and config.training.regime != "all":
            model = fit_rows_in_order(X, y, train, config, pair_columns, header_columns,
                                      dependence)[0]
        else:
            model = fit_rows(X, y, train, model_cfg, feature_cfg, route_columns=header_columns)
        scores[test] = score_rows(model, Xf[test], model_cfg, pair_columns, header_columns,
                                  dependence)
    return scores
