"""SpamFilter: mail parser + tokenizer + vocabulary + naive Bayes + costs.

Training streams: messages are parsed, tokenised and counted in batches, so a
mailbox of any size is never held in memory; only the counts grow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING

import numpy as np

from .config import FilterConfig
from .decision.costs import CostModel, Decision, expit, uncalibrated
from .errors import EmptyTrainingSetError, NotFittedError
from .features.buffers import with_room
from .features.lazy_scipy import lazy_module
from .features.vectorize import Vocabulary, feature_mask
from .labels import LABEL_CODES, LABELS, require_both_classes
from .mail.parse import MailLimits, parse_message
from .models import evidence
from .models.dependence import Dependence, make_dependence
from .models.ledger import Ledger, normalise, tokens_hash
from .models.naive_bayes import make_model
from .text.namespaces import is_header_token
from .text.tokenize import EmailTokenizer

if TYPE_CHECKING:
    from .engines.parallel_tokenize import TokenWorkers
    from .mail.sources import RawMessage

# Imported when first used (scoring): ``textnb train`` and ``retrain`` count without them.
sp = lazy_module("scipy.sparse")

# Messages tokenised before their counts are added in one sparse product: large
# enough to amortise the product, small enough that memory stays flat.
BATCH_SIZE = 512
# Messages parsed together before they are tokenised together (``tokens_many``): the
# parser's work and the tokenizer's caches then each stay in the processor's caches for
# a while instead of evicting each other at every message; a group of 64 gains as much
# as one of 512 (docs/design/parsing-speed.md#parsed-then-tokenised-a-few-at-a-time),
# and each parsed message's text is kept until its group is tokenised, so the smaller
# group bounds that memory.
PARSE_AHEAD = 64
# The last two batches' worth of an input is learned in this many smaller batches of
# about equal bytes, so that worker processes finish together: a batch's cost follows
# its bytes, and with whole batches one worker sat idle for the other's last one
# (docs/design/counting-and-scoring.md#the-pool-and-its-batches).
TAIL_BATCHES = 8
# ... but not into batches smaller than this: a small input stays one batch, in one
# process (the workers start at a second batch).
MIN_TAIL_BATCH = 64


def learning_batches(messages: Iterable[RawMessage]) -> Iterator[list[RawMessage]]:
    """``messages`` in batches of ``BATCH_SIZE``, the last ``2 * BATCH_SIZE`` or fewer cut
    into up to ``TAIL_BATCHES`` batches of about equal bytes (``_cut_by_bytes``).

    Every path that learns through the ledger batches this way
    (``textnb.modelfile.lifecycle``, the local engine whatever its ``jobs``), so they
    plan the same batches."""
    iterator = iter(messages)
    ahead = list(islice(iterator, 2 * BATCH_SIZE))
    while len(ahead) == 2 * BATCH_SIZE:
        more = list(islice(iterator, BATCH_SIZE))
        if not more:
            break
        yield ahead[:BATCH_SIZE]
        ahead = ahead[BATCH_SIZE:] + more
    yield from _cut_by_bytes(ahead, min(TAIL_BATCHES, len(ahead) // MIN_TAIL_BATCH))


def _cut_by_bytes(messages: list[RawMessage], pieces: int) -> Iterator[list[RawMessage]]:
    """``messages`` in ``pieces`` consecutive non-empty batches of about equal bytes
    (one batch when ``pieces`` < 2; none when there are no messages)."""
    if not messages:
        return
    if pieces < 2:
        yield messages
        return
    ends = np.cumsum([len(m.raw) for m in messages])
    cuts = np.searchsorted(ends, ends[-1] * np.arange(1, pieces) / pieces, side="right")
    # At least one message a batch (a message larger than a share of the bytes would
    # otherwise leave an empty one).
    cuts = np.clip(cuts, np.arange(1, pieces), len(messages) - np.arange(pieces - 1, 0, -1))
    start = 0
    for cut in [*cuts.tolist(), len(messages)]:
        if cut > start:
            yield messages[start:cut]
            start = cut


@dataclass
class ScoredMessage:
    source: str
    decision: Decision


@dataclass
class Explanation:
    source: str
    decision: Decision
    prior_log_odds: float
    # Bernoulli only: the log-odds of every kept token being absent (present tokens' clues
    # then carry their presence-minus-absence weight); 0 for the multinomial model.
    absence_log_odds: float
    # (token, contribution to the log-odds, count in message, spam count, ham count), by |contribution|
    clues: list[tuple[str, float, float, float, float]] = field(default_factory=list)
    unknown_tokens: int = 0
    tokens_used: int = 0  # how many tokens the score is made of (max_discriminators)
    # model.combine = "chi-square": what the combining adds to the clues' sum
    # (textnb.models.combining.chi_square_correction); 0 for the plain sum.
    combining_log_odds: float = 0.0


class SpamFilter:
    """A trainable, cost-aware spam filter.

    config (FilterConfig): tokenizer, feature, model and decision settings.
    """

    # Worker processes that share the parsing and tokenising (``with self.parallel(jobs)``).
    # A class-level default, which reset() leaves alone: fit keeps a running pool.
    _workers: TokenWorkers | None = None

    def __init__(self, config: FilterConfig | None = None):
        self.config = (config or FilterConfig()).validate()
        self._tokenizer: EmailTokenizer | None = None
        self.mail_limits: MailLimits = self.config.mail  # the [mail] section's bounds
        self.reset()

    def reset(self) -> "SpamFilter":
        """Forget everything learned (counts, ledger, tuning); keep the configuration
        and the tokenizer."""
        self.vocabulary = Vocabulary()
        self.doc_freq_ = np.zeros(0)
        m = self.config.model
        self.model = make_model(m.event_model, alpha=m.alpha, route_alpha=m.route_alpha,
                                fit_prior=m.fit_prior, class_prior=m.class_prior)
        from .models.numeric import make_numeric_model

        # Numeric message features beside the tokens (textnb.models.numeric); None when off.
        self.numeric = make_numeric_model(m.numeric_model)
        self.threshold: float | None = None  # learned by `tune`; None means ln(cost ratio)
        # A map from log-odds to a calibrated P(spam), fitted out of fold by `tune`
        # (JSON-able; None: the model's own posterior, expit(log-odds)).
        self.calibration: dict | None = None
        self.n_learned = dict.fromkeys(LABELS, 0)
        # Which messages the counts hold (textnb.modelfile.lifecycle keeps it, and
        # SpamFilter.fit and learn; learn_tokens and add_counts, which get no mail, do not).
        self.ledger = Ledger()
        return self

    # -- state in, state out ---------------------------------------------------------
    @classmethod
    def from_counts(cls, config: FilterConfig, tokens: Sequence[str], class_count,
                    feature_count, doc_freq, *, n_learned: dict[str, int] | None = None,
                    ledger: Ledger | None = None, threshold: float | None = None,
                    calibration: dict | None = None, numeric=None,
                    adopt: bool = False) -> "SpamFilter":
        """A trained filter from its counts (model files, text dumps, merges).

        tokens (Sequence[str] | Vocabulary): the vocabulary, in column order (the order
            decides how scores are summed, so keep the saved order to score bit for bit
            alike); a Vocabulary is taken as it is, not copied (a loader's own).
        class_count, feature_count, doc_freq (ndarray): shapes (2,), (2, n_tokens), (n_tokens,);
            label codes 0 ham, 1 spam.
        adopt (bool): take feature_count and doc_freq as they are when they are float64
            (a loader's own arrays, which nothing else holds), not copies: a copy of a
            large model's counts is tens of MB for nothing
            (docs/design/startup.md#the-load-beside-spacys-import).
        RETURNS (SpamFilter); ValueError when the shapes disagree (a repeated token:
        when the vocabulary's index is built, ``Vocabulary.check``).
        """
        spam_filter = cls(config)
        spam_filter.vocabulary = tokens if isinstance(tokens, Vocabulary) else Vocabulary(tokens)
        n = len(spam_filter.vocabulary)
        class_count = np.asarray(class_count, dtype=np.float64)
        # C order, as training builds it: sums over F-ordered rows round differently.
        feature_count = np.ascontiguousarray(feature_count, dtype=np.float64)
        doc_freq = (np.asarray if adopt else np.array)(doc_freq, dtype=np.float64)
        if class_count.shape != (2,) or feature_count.shape != (2, n) or doc_freq.shape != (n,):
            raise ValueError(f"counts of shapes {class_count.shape}, {feature_count.shape} and "
                             f"{doc_freq.shape} do not fit a vocabulary of {n} tokens")
        spam_filter.model.set_counts(class_count, feature_count, copy=not adopt)
        spam_filter.doc_freq_ = doc_freq
        spam_filter._update_mask()
        spam_filter.n_learned = {**dict.fromkeys(LABELS, 0), **(n_learned or {})}
        spam_filter.ledger = ledger if ledger is not None else Ledger()
        spam_filter.threshold, spam_filter.calibration = threshold, calibration
        if numeric is not None:
            spam_filter.numeric = numeric
        return spam_filter

    def counts(self) -> dict:
        """The counts :meth:`from_counts` takes: ``tokens`` (list, column order),
        ``class_count`` (2,), ``feature_count`` (2, n_tokens), ``doc_freq`` (n_tokens,)
        (label codes 0 ham, 1 spam; the model's own arrays: copy before changing them)."""
        if not hasattr(self.model, "class_count_"):
            raise NotFittedError("the filter is not trained; it has no counts")
        return {"tokens": self.vocabulary.tokens_, "class_count": self.model.class_count_,
                "feature_count": self.model.feature_count_, "doc_freq": self.doc_freq_}

    # -- text to tokens to matrix -----------------------------------------------
    @property
    def tokenizer(self) -> EmailTokenizer:
        if self._tokenizer is None:
            self._tokenizer = EmailTokenizer(self.config.tokenizer)
        return self._tokenizer

    def tokens(self, raw: bytes) -> list[str]:
        """The namespaced tokens of one raw message."""
        return self.tokenizer(parse_message(raw, self.mail_limits))

    def tokens_many(self, raws: Sequence[bytes]) -> list[list[str]]:
        """The token lists of several raw messages, in order: ``tokens`` of each (parsed
        and tokenised ``PARSE_AHEAD`` at a time), shared with worker processes inside
        ``with self.parallel(jobs)``."""
        if self._workers is not None:
            return self._workers.token_lists(raws, self.tokens)
        out: list[list[str]] = []
        for start in range(0, len(raws), PARSE_AHEAD):
            parsed = [parse_message(raw, self.mail_limits)
                      for raw in raws[start:start + PARSE_AHEAD]]
            out.extend(map(self.tokenizer, parsed))
        return out

    @contextmanager
    def parallel(self, jobs: int) -> Iterator["SpamFilter"]:
        """Inside the block, parse and tokenise batches in ``jobs`` processes (this one and
        ``jobs - 1`` workers); the results are those of
        one process (textnb.engines.parallel_tokenize)."""
        if jobs <= 1 or self._workers is not None:
            yield self
            return
        from .engines.parallel_tokenize import TokenWorkers

        with TokenWorkers(lambda: self.tokenizer, self.mail_limits, jobs) as workers:
            self._workers = workers
            try:
                yield self
            finally:
                del self._workers

    def _matrix(self, token_lists, grow: bool):
        return self.vocabulary.transform(token_lists, grow=grow, binary=self._binary_features)

    @property
    def _binary_features(self) -> bool:
        return self.config.features.features == "binary"

    @property
    def counts_presence(self) -> bool:
        """Whether a message counts a token once (binary features, or an event model that
        reads presence only, as Bernoulli counts documents), not once per occurrence."""
        return self._binary_features or self.model.counts_presence

    # -- training ----------------------------------------------------------------
    def fit(self, messages: Iterable[RawMessage], progress: Callable[[int], None] | None = None
            ) -> "SpamFilter":
        """Train from scratch on labelled messages."""
        self.reset()
        self.learn(messages, progress=progress)
        require_both_classes(self.n_learned)
        return self

    def learn(self, messages: Iterable[RawMessage], progress: Callable[[int], None] | None = None,
              weight: float = 1.0) -> int:
        """Add labelled messages to the counts (weight -1 removes them). Returns how many.

        The ledger keeps up: each message is entered under its label, by the digest of
        its normalised bytes, which are what is tokenised (as ``textnb train`` learns),
        so a model this makes can be retrained and forgotten exactly
        (``textnb.modelfile.lifecycle``); removing a message removes its entry. A
        message given twice is counted twice and entered once: the second copy is one
        of the ledger's ``untracked`` messages (``Ledger.summary``), which no forget
        removes. ``textnb train`` learns it once instead.
        """
        total = 0
        iterator = iter(messages)
        while batch := list(islice(iterator, BATCH_SIZE)):
            y = np.array([_label_code(m) for m in batch])
            norms = [normalise(m.raw) for m in batch]
            token_lists = self.tokens_many(norms)
            X = self._matrix(token_lists, grow=True)
            self._add_counts(X, y, weight)
            self._keep_ledger(norms, token_lists, y, X, weight)
            if self.numeric is not None:
                self._learn_numeric([m.raw for m in batch], y, weight)
            total += len(batch)
            if progress:
                progress(len(batch))
        self._update_mask()
        return total

    def _keep_ledger(self, norms: list[bytes], token_lists: list[list[str]], y: np.ndarray,
                     X, weight: float) -> None:
        """Enter (weight > 0) or remove (< 0) a learned batch's messages in the ledger."""
        ledger = self.ledger
        if weight > 0:
            ledger.cover(X.shape[1])
        for i, (norm, tokens) in enumerate(zip(norms, token_lists)):
            digest = hashlib.sha256(norm).digest()
            label = LABELS[int(y[i])]
            if weight < 0:
                if ledger.label(digest) == label:
                    ledger.remove(digest)
            elif digest not in ledger:
                serial = ledger.record(digest, label, tokens_hash(tokens))
                ledger.saw(X.indices[X.indptr[i]:X.indptr[i + 1]], serial)

    def learn_tokens(self, token_lists: list[list[str]], labels: Iterable[str],
                     weight: float = 1.0) -> Rows:
        """Add already tokenised documents (used by cross-validation and tests).

        RETURNS (Rows): the documents' rows, each one's distinct columns in order (what a
            ledger records of a learned message, ``Lifecycle``)."""
        y = np.array([LABEL_CODES[label] for label in labels])
        # Bare CSR arrays, as scoring uses (_add_counts says why).
        rows = self.vocabulary.rows(token_lists, grow=True, binary=self._binary_features)
        columns = self._add_counts(rows, y, weight)
        self._update_mask(columns)
        return rows

    def add_counts(self, tokens: Sequence[str], class_count, feature_count, doc_freq,
                   weight: float = 1.0, token_hashes: np.ndarray | None = None) -> None:
        """Add counts made elsewhere (``textnb.engines.dask``: on other machines), as if the
        messages they came from were learned here; weight -1 removes them.

        tokens (Sequence[str]): the counts' columns, distinct; unseen ones become new columns in
            this order (order of first sight keeps the vocabulary as ``learn`` builds it).
        class_count, feature_count, doc_freq (ndarray): shapes (2,), (2, n_tokens), (n_tokens,).
        token_hashes (ndarray | None): the tokens' ``TokenStore.hashes``, if known
            (``Vocabulary.add``).
        """
        columns = self.vocabulary.add(tokens, token_hashes)  # distinct tokens: distinct columns
        n = len(self.vocabulary)
        self._grow_doc_freq(n)
        self.doc_freq_[columns] += weight * np.asarray(doc_freq, dtype=np.float64)
        class_count = weight * np.asarray(class_count, dtype=np.float64)
        # Into the given columns only: O(the counts' tokens), not O(the vocabulary), per call.
        self.model.add_counts(class_count, weight * np.asarray(feature_count, dtype=np.float64),
                              columns=columns, n_features=n)
        for code, label in enumerate(LABELS):
            self.n_learned[label] += int(class_count[code])
        self._update_mask(columns)  # the new columns are among them

    @property
    def doc_freq_(self) -> np.ndarray:
        """ndarray of shape (n_features,): the learned documents (of any class) holding
        each token; a view of a buffer with room to grow (``_grow_doc_freq``)."""
        return self._doc_freq[:self._n_doc_freq]

    @doc_freq_.setter
    def doc_freq_(self, value) -> None:
        self._doc_freq = np.asarray(value, dtype=np.float64)
        self._n_doc_freq = self._doc_freq.shape[0]

    def _grow_doc_freq(self, n: int) -> None:
        """Room for ``n`` columns, the new ones 0 (``textnb.features.buffers``)."""
        self._doc_freq = with_room(self._doc_freq, self._n_doc_freq, n)
        self._n_doc_freq = max(n, self._n_doc_freq)

    def _add_counts(self, X, y, weight: float) -> np.ndarray:
        """Count X (a CSR matrix or bare CSR arrays, ``Rows``); returns the columns whose
        document frequency may have changed."""
        n, before = X.shape[1], self.doc_freq_.shape[0]
        self._grow_doc_freq(n)
        # Only the columns these documents hold: learning one message costs O(its tokens).
        columns, inverse, df = np.unique(X.indices, return_inverse=True, return_counts=True)
        self.doc_freq_[columns] += weight * df
        # Per class, the counts of those columns, added where they go (the model's
        # add_counts): no SciPy, so learning one message at a time (the thick regime, a
        # scorer's LEARN) never imports it. Counts are whole numbers: the sums are exact
        # in any order.
        y = np.asarray(y, dtype=np.int64)
        k = self.model.n_classes
        row_of = np.repeat(np.arange(len(y)), np.diff(X.indptr))
        data = np.asarray(X.data, dtype=np.float64)
        if self.model.counts_presence:  # Bernoulli reads presence, whatever the features
            data = (data > 0).astype(np.float64)
        counts = np.bincount(y[row_of] * columns.size + inverse.ravel(), weights=data,
                             minlength=k * columns.size).reshape(k, columns.size)
        class_count = np.bincount(y, minlength=k).astype(np.float64)
        self.model.add_counts(weight * class_count, weight * counts, columns=columns,
                              n_features=n)
        for code, label in enumerate(LABELS):
            self.n_learned[label] += int(weight * np.sum(y == code))
        return np.union1d(columns, np.arange(before, n))

    def _learn_numeric(self, raws: Sequence[bytes], y, weight: float) -> None:
        from .models.numeric import feature_matrix

        Z = feature_matrix(raws, self.mail_limits)
        self.numeric.partial_fit(Z, y, np.full(len(y), weight, dtype=np.float64))

    def numeric_log_odds(self, raws: Sequence[bytes]) -> np.ndarray:
        """The numeric features' log-likelihood ratio per message (zeros when off)."""
        if self.numeric is None:
            return np.zeros(len(raws))
        from .models.numeric import feature_matrix

        return self.numeric.log_odds(feature_matrix(raws, self.mail_limits))

    def _update_mask(self, columns: np.ndarray | None = None) -> None:
        # Always at least df >= 1: a token whose messages were all forgotten must leave
        # the model exactly as if it had never been seen (it would still count in the
        # multinomial's vocabulary size otherwise).
        if not hasattr(self.model, "feature_mask_"):  # nothing learned yet
            return
        self._mark_route()
        f = self.config.features
        if columns is not None and not f.max_features:
            # Without a max_features ranking a column's fate rests on its own df, so
            # only the columns just counted can change (O(tokens), not O(vocabulary)).
            self.model.set_feature_mask(self.doc_freq_[columns] >= max(f.min_df, 1), columns)
            return
        mask = feature_mask(self.doc_freq_, max(f.min_df, 1), f.max_features)
        self.model.set_feature_mask(mask)

    def _mark_route(self) -> None:
        """Tell the model which of its new columns are the route's (model.route_alpha).

        Columns only ever follow the vocabulary's, so the model's unmarked ones are the
        newest, and each token is classified once; a loaded model's all at once, on the
        vocabulary's bytes (``evidence.header_columns``). Without a route_alpha of its
        own the flags are never read, and nothing is classified."""
        model = self.model
        if not model.per_column_alpha:
            return
        start, n = model.route_columns_known, model.feature_mask_.size
        if start < n:
            model.set_route_columns(
                evidence.header_columns(self.vocabulary.tokens_, start)[:n - start], start)

    # -- scoring -----------------------------------------------------------------
    def log_odds_tokens(self, token_lists: Iterable[list[str]]) -> np.ndarray:
        # Bare CSR arrays (textnb.features.csr_arrays):
        # the default scoring path never imports SciPy.
        return self.log_odds_matrix(self.vocabulary.rows(token_lists,
                                                         binary=self._binary_features))

    def log_odds_matrix(self, X) -> np.ndarray:
        """Spam log-odds of a document-term matrix, with the configured evidence selection."""
        m = self.config.model
        return self.model.selected_log_odds(X, m.max_discriminators, self.pair_columns(),
                                            m.max_pair_discriminators,
                                            m.evidence == "each-side", m.min_strength,
                                            m.combine, header=self.header_columns(X),
                                            header_places=m.header_places,
                                            header_clues=m.header_discriminators,
                                            dependence=self.dependence(X))

    def dependence(self, X=None) -> Dependence | None:
        """Which clues repeat another's evidence (:mod:`textnb.models.dependence`: one
        header field's tokens, a word pair and its own words), for the settings
        ``model.clues_per_header_field`` and ``model.tile_word_pairs``; None when both are
        off.

        X (matrix | None): the columns to make sure of; None: every column. As
        :meth:`header_columns`, a column is classified when scoring first meets it (a
        model may hold millions of tokens, one message a few hundred); the others read
        as no field's and no pair.
        """
        m = self.config.model
        if not m.clues_per_header_field and not m.tile_word_pairs:
            return None
        vocabulary, known, made = getattr(self, "_dependence", (None, None, None))
        n = len(self.vocabulary)
        if vocabulary is not self.vocabulary:  # a new or loaded model: start again
            known, made = np.zeros(0, bool), Dependence(
                np.zeros(0, np.int64) if m.clues_per_header_field else None,
                m.clues_per_header_field,
                np.zeros((0, 2), np.int64) if m.tile_word_pairs else None)
        if known.size < n:  # a vocabulary only grows: new columns not yet classified
            # Room for as many again, so a pass that adds columns at every message (a
            # thick one) copies the arrays a few times, not once a message.
            room = max(n, 2 * known.size) - known.size
            known = np.concatenate([known, np.zeros(room, bool)])
            made = made.extended(Dependence.unclassified(room, made))
        columns = np.arange(n) if X is None else np.asarray(X.indices)
        new = columns[~known[columns]]
        if new.size:
            new = np.unique(new)
            tokens = self.vocabulary.tokens_
            take = getattr(tokens, "take", None)  # a TokenStore decodes many at once
            words = take(new) if take is not None else [tokens[int(c)] for c in new]
            part = make_dependence(list(words), self.vocabulary.columns,
                                   m.clues_per_header_field, m.tile_word_pairs)
            if made.field is not None:
                made.field[new] = part.field
            if made.pair_words is not None:
                made.pair_words[new] = part.pair_words
            known[new] = True
        self._dependence = (self.vocabulary, known, made)
        return made.first(n)

    def header_columns(self, X=None) -> np.ndarray | None:
        """Which vocabulary columns come from header fields other than Subject (None when the
        selection keeps no places for them: model.header_places and
        model.header_discriminators).

        X (matrix | None): the columns to make sure of; None: every column. A column is
        classified when scoring first meets it, by its token's namespace: a model may
        hold millions of tokens and a batch of messages a few thousand.
        """
        if not (self.config.model.header_places or self.config.model.header_discriminators):
            return None
        vocabulary, known, header = getattr(self, "_headers", (None, None, None))
        n = len(self.vocabulary)
        if vocabulary is not self.vocabulary:  # a new or loaded model: start again
            known, header = np.zeros(0, bool), np.zeros(0, bool)
        if known.size < n:  # a vocabulary only grows (room as in ``dependence``)
            grown = np.zeros(max(n, 2 * known.size) - known.size, bool)
            known, header = np.concatenate([known, grown]), np.concatenate([header, grown])
            self._headers = (self.vocabulary, known, header)
        columns = np.arange(n) if X is None else np.asarray(X.indices)
        new = columns[~known[columns]]  # a gather: most columns are known after a batch
        if new.size:
            new = np.unique(new)
            tokens = self.vocabulary.tokens_
            take = getattr(tokens, "take", None)  # a TokenStore decodes many at once
            words = take(new) if take is not None else [tokens[int(c)] for c in new]
            header[new] = [is_header_token(t) for t in words]
            known[new] = True
        return header[:n]

    def pair_columns(self) -> np.ndarray | None:
        """Which vocabulary columns are word pairs (None when the tokenizer makes none)."""
        if not self.config.tokenizer.bigrams:
            return None
        vocabulary, known, done = getattr(self, "_pairs", (None, None, 0))
        n = len(self.vocabulary)
        if vocabulary is not self.vocabulary:  # a new or loaded model: start again
            known, done = np.zeros(0, bool), 0
        if done < n:  # a vocabulary only grows: extend the mask (room as in ``dependence``)
            if known.size < n:
                known = np.concatenate([known, np.zeros(max(n, 2 * known.size) - known.size,
                                                        bool)])
            known[done:n] = self.vocabulary.tokens_.startswith(evidence.PAIR_PREFIX, done)
            self._pairs = (self.vocabulary, known, n)
        return known[:n]

    def log_odds(self, raws: Iterable[bytes]) -> np.ndarray:
        """Spam log-odds of raw messages (streamed in batches)."""
        out = []
        iterator = iter(raws)
        while batch := list(islice(iterator, BATCH_SIZE)):
            out.append(self.log_odds_tokens(self.tokens_many(batch)) + self.numeric_log_odds(batch))
        return np.concatenate(out) if out else np.zeros(0)

    def cost_model(self, cost_ratio: float | None = None) -> CostModel:
        d = self.config.decision
        if self.calibration is None:
            # A learned threshold belongs to the cost ratio it was tuned for; an explicit
            # other ratio falls back to the Bayes rule ln(ratio).
            return uncalibrated(d, cost_ratio, self.threshold if cost_ratio is None else None)
        # A tuned model answers every λ: spam iff calibrated P(spam) > λ/(1+λ), i.e.
        # log-odds above the point where the calibration map crosses λ/(1+λ).
        from .decision.calibration import log_odds_threshold, review_thresholds

        ratio = d.cost_ratio if cost_ratio is None else cost_ratio
        between = (review_thresholds(self.calibration, ratio, d.review_cost)
                   if d.review_cost > 0 else None)
        return CostModel(cost_ratio=ratio, threshold=log_odds_threshold(self.calibration, ratio),
                         unsure_band=d.unsure_band, unsure_between=between)

    def p_spam(self, log_odds: np.ndarray) -> np.ndarray:
        """P(spam) for log-odds: calibrated when the model carries a calibration."""
        if self.calibration is None:
            return expit(log_odds)
        from .decision.calibration import predict_proba  # only tuned models need it

        return predict_proba(self.calibration, log_odds)

    def classify(self, messages: Iterable[RawMessage], cost_ratio: float | None = None
                 ) -> Iterator[ScoredMessage]:
        """Decide each message; lazily, batch by batch."""
        costs = self.cost_model(cost_ratio)
        iterator = iter(messages)
        while batch := list(islice(iterator, BATCH_SIZE)):
            scores = (self.log_odds_tokens(self.tokens_many([m.raw for m in batch]))
                      + self.numeric_log_odds([m.raw for m in batch]))
            decisions = costs.decide_many(scores, self.p_spam(scores))
            for message, decision in zip(batch, decisions):
                yield ScoredMessage(message.source, decision)

    def explain(self, message: RawMessage, k: int = 15, cost_ratio: float | None = None
                ) -> Explanation:
        """The k tokens that moved the log-odds most, with their counts."""
        tokens = self.tokens(message.raw)
        X = self._matrix([tokens], grow=False)
        model = self.model
        score = float(self.log_odds_matrix(X)[0] + self.numeric_log_odds([message.raw])[0])
        C, baseline = model.log_odds_contributions(X)
        prior = float(model.class_log_prior_[1] - model.class_log_prior_[0])
        C = sp.csr_matrix(C)
        C.sort_indices()
        cols, contrib = C.indices, C.data
        counts = dict(zip(X.indices.tolist(), X.data.tolist()))
        # The tokens the score is made of, strongest first: the same selection as scoring.
        m = self.config.model
        order = evidence.strongest(C, m.max_discriminators, self.pair_columns(),
                                   m.max_pair_discriminators, m.evidence == "each-side",
                                   m.min_strength, header=self.header_columns(X),
                                   header_places=m.header_places,
                                   header_clues=m.header_discriminators,
                                   dependence=self.dependence(X))
        used = len(order)
        correction = 0.0
        if m.combine == "chi-square":
            from .models.combining import chi_square_correction

            correction = float(chi_square_correction(contrib[order],
                                                     np.zeros(used, dtype=np.int64), 1)[0])
        clues = [(self.vocabulary.tokens_[cols[i]], float(contrib[i]), float(counts[cols[i]]),
                  float(model.feature_count_[1, cols[i]]), float(model.feature_count_[0, cols[i]]))
                 for i in order[:k]]
        costs = self.cost_model(cost_ratio)
        decision = costs.decide(score, float(self.p_spam(np.array([score]))[0]))
        # One batched look-up: token by token it was most of an explanation's time.
        unknown = int(np.count_nonzero(self.vocabulary.columns(tokens) < 0))
        return Explanation(message.source, decision, prior, baseline - prior, clues, unknown,
                           tokens_used=used, combining_log_odds=correction)

    def summary(self) -> dict:
        """What the model was trained on and its settings (for `textnb info`)."""
        mask = self.model.feature_mask_ if hasattr(self.model, "feature_mask_") else None
        return {
            "messages": dict(self.n_learned),
            "vocabulary_size": len(self.vocabulary),
            "features_kept": int(mask.sum()) if mask is not None else 0,
            # A tuned model's threshold is where its calibration crosses λ/(1+λ).
            "threshold": (self.cost_model().log_threshold if self.calibration is not None
                          else self.threshold),
            "calibration": self.calibration["method"] if self.calibration is not None else None,
            "config": self.config.to_dict(),
        }


def _label_code(message: RawMessage) -> int:
    try:
        return LABEL_CODES[message.label]
    except KeyError:
        raise EmptyTrainingSetError(
            f"message {message.source!r} has no label ({message.label!r}); give it as --spam "
            "or --ham, or through an index file") from None
