"""The fast paths change no token, no count and no score.

Each fast path is checked against the simple path it replaced:

- the tokenizer's chunk caches and on-demand lexical attributes, against the
  one-spaCy-call-per-text tokenizer on a ``spacy.blank("en")`` vocabulary (every
  attribute precomputed in the lexeme, as textnb first did), with the caches off;
- ``Vocabulary.transform`` against counting in a dict per document;
- training and scoring with worker processes (``--jobs 2``) against one process:
  the same vocabulary in the same order, the same counts, the same model file.
- learning one message at a time (the model's running sums, on-demand
  log-probabilities and column-wise mask updates) against a refit on the same
  messages, and its scores against every log-probability computed from the counts.

On the project's sample corpus always, and on a slice of SpamAssassin and Enron
when the public corpora are present.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from textnb import spamfilter
from textnb.cli import app
from textnb.config import FilterConfig, TokenizerConfig
from textnb.engines import parallel_tokenize
from textnb.engines import workers
from textnb.features.vectorize import Vocabulary
from textnb.mail.corpora import iter_corpus
from textnb.mail.parse import parse_message
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import lifecycle, store
from textnb.spamfilter import SpamFilter
from textnb.text.tokenize import EmailTokenizer, LexicalAttributes

from conftest import EVERY_MESSAGE

CONFIGS = {
    "default": TokenizerConfig(),
    # Every header namespace, case kept, and word pairs (the bigram path of the cache).
    "all-headers-bigrams-cased": TokenizerConfig(header_mode="all", bigrams=True, lowercase=False),
}

EDGE_TEXTS = [
    "", " ", "\n\n", "a  b", " lead and trail ", "tab\tand\nnewline\r\nend", "nbsp\u00a0here",
    "x\u2028y\u3000z", "FREE!!! $1,000,000 (now) 25% off 1st 2nd",
    "see http://www.Pharma-Deals.example/buy/now.html, today", "www.example.com/x?a=b&c=d.",
    "mail Bob@Example.org. or <alice@example.net>", "word/word a=b x&y", "²3 ³ ٣٤ €5 £10 ¥ $",
    "\"quoted\" 'single' [brackets] {braces} *stars* |pipes| ~tilde~ `tick`",
    "a" * 95, "naïve café Straße ΑΒΓ привет 日本語テキスト", "---- ==== ____ ....",
    "repeat repeat repeat, repeat. REPEAT Repeat",
]


class _NoCache(dict):
    """A cache that never keeps anything: the simple path recomputes every value."""

    def __setitem__(self, key, value) -> None:
        pass


class ReferenceTokenizer(EmailTokenizer):
    """The simple path: one spaCy call per text on a blank English pipeline's vocabulary
    (all 23 lexical attributes computed and stored per new string), a Python loop over
    its words, and no caches. ``_map_word`` and every header rule are the production ones.
    """

    def __init__(self, cfg: TokenizerConfig, blank_tokenizer):
        super().__init__(cfg)
        self._address_cache = _NoCache()
        self._blank = blank_tokenizer
        vocab = blank_tokenizer.vocab
        self._lexeme = LexicalAttributes(
            like_url=lambda t: vocab[t].like_url, like_email=lambda t: vocab[t].like_email,
            like_num=lambda t: vocab[t].like_num, is_currency=lambda t: vocab[t].is_currency,
            is_space=lambda t: vocab[t].is_space)

    def text_tokens(self, text: str, namespace: str = "", limit: int | None = None) -> list[str]:
        # ``limit`` is ignored: the whole text, of which the production path's is a prefix.
        if not text:
            return []
        out: list[str] = []
        prev = None
        for word in self._blank(text):
            mapped = () if word.is_space else self._map_word(word.text, self._lexeme)
            if namespace:
                mapped = tuple(namespace + m for m in mapped)
            out.extend(mapped)
            if self.cfg.bigrams and mapped:
                first = mapped[0]
                if prev is not None and ":" not in first and ":" not in prev:
                    out.append(f"bi:{prev} {first}")
                prev = first
        return out


@pytest.fixture(scope="module")
def blank_tokenizer():
    """spaCy's Tokenizer with our rules on ``spacy.blank("en")``'s vocabulary."""
    import spacy
    from spacy.tokenizer import Tokenizer

    from textnb.text import tokenize as t

    return Tokenizer(spacy.blank("en").vocab, prefix_search=t._PREFIX.search,
                     suffix_search=t._SUFFIX.search, infix_finditer=t._INFIX.finditer,
                     token_match=t._TOKEN_MATCH.match)


def _sample_raws(sample_index) -> list[bytes]:
    raws = [m.raw for m in iter_index(sample_index)]
    return raws + [p.read_bytes() for p in sorted((sample_index.parent / "unlabelled").iterdir())]


def _corpus_slice(root, corpus: str, step: int) -> list[RawMessage]:
    """Every step-th message of a public corpus, in its order, labelled."""
    return [RawMessage(e.relpath, e.raw, e.label)
            for i, e in enumerate(iter_corpus(corpus, root)) if i % step == 0]


def _assert_same_tokens(raws: list[bytes], cfg: TokenizerConfig, blank_tokenizer) -> None:
    fast, simple = EmailTokenizer(cfg), ReferenceTokenizer(cfg, blank_tokenizer)
    for _ in range(2):  # the second pass is served from the caches
        for i, raw in enumerate(raws):
            email = parse_message(raw)
            assert fast(email) == simple(email), f"message {i} tokenises differently"


@pytest.fixture(params=["built", "python"])
def loops(request, monkeypatch):
    """The per-token loops textnb was built with (C where a compiler was there), then the
    Python ones (textnb._c.speedups' fallback): both must tokenise as the simple path."""
    from textnb._c import speedups

    if request.param == "python":
        monkeypatch.setattr(speedups, "_speedups", None)
    return speedups.implementation()


@pytest.mark.parametrize("name", CONFIGS)
def test_edge_texts_tokenise_as_the_simple_path(name, blank_tokenizer, loops):
    cfg = CONFIGS[name]
    fast, simple = EmailTokenizer(cfg), ReferenceTokenizer(cfg, blank_tokenizer)
    for namespace in ("", "subject:"):
        for text in EDGE_TEXTS + [" ".join(EDGE_TEXTS)]:
            assert fast.text_tokens(text, namespace) == simple.text_tokens(text, namespace), text


@pytest.mark.parametrize("name", CONFIGS)
def test_sample_corpus_tokenises_as_the_simple_path(name, sample_index, blank_tokenizer, loops):
    _assert_same_tokens(_sample_raws(sample_index), CONFIGS[name], blank_tokenizer)


@pytest.mark.corpus
@pytest.mark.parametrize("corpus,step", [("spamassassin", 30), ("enron", 100)])
@pytest.mark.parametrize("name", CONFIGS)
def test_public_corpus_slice_tokenises_as_the_simple_path(shared_corpora, corpus, step, name,
                                                          blank_tokenizer):
    raws = [m.raw for m in _corpus_slice(shared_corpora, corpus, step)]
    _assert_same_tokens(raws, CONFIGS[name], blank_tokenizer)


def _dict_counts(vocabulary: "_DictVocabulary", docs, grow: bool) -> sp.csr_matrix:
    """The simple path of Vocabulary.transform: a dict of counts per document."""
    data, indices, indptr = [], [], [0]
    for doc in docs:
        counts: dict[int, int] = {}
        for token in doc:
            j = vocabulary.index_.get(token)
            if j is None:
                if not grow:
                    continue
                j = vocabulary.index_[token] = len(vocabulary.tokens_)
                vocabulary.tokens_.append(token)
            counts[j] = counts.get(j, 0) + 1
        for j in sorted(counts):
            indices.append(j)
            data.append(counts[j])
        indptr.append(len(indices))
    return sp.csr_matrix((np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int64),
                          np.asarray(indptr, dtype=np.int64)),
                         shape=(len(indptr) - 1, len(vocabulary.tokens_)))


class _DictVocabulary:
    """The plainest vocabulary: a list of tokens and a dict token -> column."""

    def __init__(self, tokens):
        self.tokens_ = list(tokens)
        self.index_ = {t: j for j, t in enumerate(self.tokens_)}


def _assert_same_csr(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    assert a.shape == b.shape
    for name in ("data", "indices", "indptr"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_transform_counts_as_a_dict_per_document(sample_filter, sample_index):
    docs = [sample_filter.tokens(raw) for raw in _sample_raws(sample_index)]
    docs[3:3] = [[], ["only", "only"], []]  # empty documents and repeats
    fast, simple = Vocabulary(["seen-before"]), _DictVocabulary(["seen-before"])
    for start in range(0, len(docs), 17):  # batches, as training sees them
        batch = docs[start:start + 17]
        _assert_same_csr(fast.transform(iter(batch), grow=True), _dict_counts(simple, batch, True))
        assert fast.tokens_ == simple.tokens_ and fast.index_ == simple.index_
    scoring = [["never-seen", *docs[0]], [], ["never-seen"]]
    _assert_same_csr(fast.transform(scoring), _dict_counts(simple, scoring, False))
    _assert_same_csr(fast.transform([]), _dict_counts(simple, [], False))


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 16 messages, so that the workers start (the first batch is the calling
    process's alone); returns how many times a pool was started."""
    monkeypatch.setattr(spamfilter, "BATCH_SIZE", 16)
    monkeypatch.setattr(lifecycle, "BATCH_SIZE", 16)
    started = []
    start = parallel_tokenize.TokenWorkers._start
    monkeypatch.setattr(parallel_tokenize.TokenWorkers, "_start",
                        lambda self: started.append(self.jobs) or start(self))
    pool = workers.Workers._pool  # the engines' (textnb.engines.workers)
    monkeypatch.setattr(workers.Workers, "_pool",
                        lambda self: started.append(self.jobs) or pool(self))
    return started


def _messages(sample_index, shared_root=None) -> list[RawMessage]:
    messages = list(iter_index(sample_index))
    if shared_root is not None:
        messages += _corpus_slice(shared_root, "spamassassin", 20)
    return messages


def _assert_same_model(a: SpamFilter, b: SpamFilter) -> None:
    assert a.vocabulary.tokens_ == b.vocabulary.tokens_
    assert a.n_learned == b.n_learned
    for name in ("class_count_", "feature_count_", "feature_log_prob_"):
        assert np.array_equal(getattr(a.model, name), getattr(b.model, name)), name
    assert np.array_equal(a.doc_freq_, b.doc_freq_)
    members_a, members_b = _members(store.dumps(a)), _members(store.dumps(b))
    assert members_a == members_b  # every array and the vocabulary, byte for byte


def _members(data: bytes) -> dict[str, bytes]:
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


@pytest.mark.parametrize("features", ["binary", "tf"])
def test_two_jobs_train_and_score_as_one(sample_index, features, small_batches):
    config = FilterConfig()
    config = replace(config, features=replace(config.features, features=features))
    messages = _messages(sample_index)
    one = SpamFilter(config).fit(messages)
    two = SpamFilter(config)
    with two.parallel(2):
        two.fit(messages)
        scores_two = two.log_odds(m.raw for m in messages)
    _assert_same_model(one, two)
    assert np.array_equal(one.log_odds(m.raw for m in messages), scores_two)
    assert small_batches == [2]


@pytest.mark.corpus
def test_three_jobs_train_as_one_on_spamassassin(sample_index, shared_corpora, small_batches):
    messages = _messages(sample_index, shared_corpora)
    one = SpamFilter().fit(messages)
    three = SpamFilter()
    with three.parallel(3):  # more processes than CPUs: still the same model
        three.fit(messages)
    _assert_same_model(one, three)
    assert small_batches == [3]


def test_cli_train_and_classify_with_jobs_give_the_same_model_and_verdicts(tmp_path,
                                                                          sample_index,
                                                                          small_batches):
    runner = CliRunner()
    unlabelled = str(sample_index.parent / "unlabelled")
    outputs = {}
    for jobs in ("1", "2"):
        model = str(tmp_path / f"j{jobs}.tnb")
        result = runner.invoke(app, ["train", "--model", model, "--index", str(sample_index),
                                     "--jobs", jobs, *EVERY_MESSAGE])
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, ["classify", "--model", model, "--json", "--jobs", jobs,
                                     unlabelled])
        assert result.exit_code == 0, result.output
        outputs[jobs] = [json.loads(line) for line in result.stdout.splitlines()]
    one, two = (_members((tmp_path / f"j{j}.tnb").read_bytes()) for j in ("1", "2"))
    meta_one, meta_two = (json.loads(m.pop("textnb-model.json")) for m in (one, two))
    assert one == two and meta_one == meta_two
    assert outputs["1"] == outputs["2"] and len(outputs["1"]) == 6
    assert small_batches == [2]  # training started workers; 6 messages to classify did not


@pytest.mark.parametrize("command", ["train", "classify"])
def test_jobs_with_the_dask_engine_is_a_usage_error(command, tmp_path, sample_index):
    args = ["--index", str(sample_index)] if command == "train" else [str(sample_index)]
    result = CliRunner().invoke(app, [command, "--model", str(tmp_path / "m.tnb"), *args,
                                      "--engine", "dask", "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs goes with --engine local" in result.output


# -- per-message learning: O(tokens) updates score as a full refit -------------------------

LEARNING_CONFIGS = {
    "default": {},  # binary multinomial, min_df 1: the column-by-column mask path
    "tf-all-tokens": {"features": {"features": "tf"}, "model": {"max_discriminators": 0}},
    "max-features": {"features": {"min_df": 2, "max_features": 300}},  # the whole-mask path
    "bernoulli": {"model": {"event_model": "bernoulli"}},
}


def _config(overrides: dict) -> FilterConfig:
    config = FilterConfig()
    return replace(config, **{section: replace(getattr(config, section), **values)
                              for section, values in overrides.items()})


def _reference_log_odds(spam_filter: SpamFilter, token_lists) -> np.ndarray:
    """The simple path: every log-probability of the vocabulary from the counts (the
    normaliser summed exactly with math.fsum), then the plain sparse product."""
    import math

    from textnb.features.vectorize import feature_mask
    from textnb.models.evidence import header_columns

    model, f = spam_filter.model, spam_filter.config.features
    mask = feature_mask(spam_filter.doc_freq_, max(f.min_df, 1), f.max_features)
    fc = model.feature_count_
    # Each column's pseudo-count, from its token: the route's (model.route_alpha) or alpha
    route_alpha = spam_filter.config.model.route_alpha
    a = np.where(header_columns(spam_filter.vocabulary.tokens_)[:fc.shape[1]],
                 model.alpha if route_alpha is None else route_alpha, model.alpha)
    X = spam_filter._matrix(token_lists, grow=False)
    prior = np.log(model.class_count_) - np.log(model.class_count_.sum())
    if model.event_model == "multinomial":
        flp = np.zeros_like(fc)
        for c in range(2):
            flp[c, mask] = (np.log(fc[c, mask] + a[mask])
                            - np.log(math.fsum(fc[c, mask]) + math.fsum(a[mask])))
        jll = X @ flp.T + prior
    else:
        cc = model.class_count_.reshape(-1, 1)
        presence = np.where(mask, np.log(fc + a) - np.log(cc + 2 * a), 0.0)
        absence = np.where(mask, np.log(cc - fc + a) - np.log(cc + 2 * a), 0.0)
        X.data.fill(1.0)
        jll = X @ (presence - absence).T + absence.sum(axis=1) + prior
    return jll[:, 1] - jll[:, 0]


def _learning_stream(sample_index, shared_root=None) -> list[RawMessage]:
    messages = list(iter_index(sample_index))
    if shared_root is not None:  # 200 SpamAssassin messages, every 30th, in corpus order
        messages += _corpus_slice(shared_root, "spamassassin", 30)[:200]
    return messages


def _assert_learning_one_by_one_scores_as_a_refit(messages: list[RawMessage],
                                                  config: FilterConfig) -> None:
    tokens = SpamFilter(config).tokens
    token_lists = [tokens(m.raw) for m in messages]
    labels = [m.label for m in messages]
    stepwise = SpamFilter(config)
    for toks, label in zip(token_lists, labels):  # as `retrain --regime thick`, online
        stepwise.learn_tokens([toks], [label])
        if min(stepwise.n_learned.values()):
            stepwise.log_odds_tokens([toks])  # scoring between updates must not go stale
    refit = SpamFilter(config)
    refit.learn_tokens(token_lists, labels)
    _assert_same_model(stepwise, refit)
    scores = stepwise.log_odds_tokens(token_lists)
    assert np.array_equal(scores, refit.log_odds_tokens(token_lists))
    if not config.model.max_discriminators:
        np.testing.assert_allclose(scores, _reference_log_odds(stepwise, token_lists),
                                   rtol=1e-12, atol=1e-9)
    # Forget the second half one message at a time: the scores are those of a model
    # that only ever saw the first half (its vocabulary has fewer columns, so the sums
    # run in another order: equal to rounding, not bit for bit).
    half = len(messages) // 2
    for toks, label in zip(token_lists[half:], labels[half:]):
        stepwise.learn_tokens([toks], [label], weight=-1.0)
    first_half = SpamFilter(config)
    first_half.learn_tokens(token_lists[:half], labels[:half])
    np.testing.assert_allclose(stepwise.log_odds_tokens(token_lists),
                               first_half.log_odds_tokens(token_lists), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("name", LEARNING_CONFIGS)
def test_learning_one_message_at_a_time_scores_as_a_refit(sample_index, name):
    _assert_learning_one_by_one_scores_as_a_refit(_learning_stream(sample_index),
                                                  _config(LEARNING_CONFIGS[name]))


@pytest.mark.corpus
@pytest.mark.parametrize("name", LEARNING_CONFIGS)
def test_learning_200_spamassassin_messages_one_by_one_scores_as_a_refit(
        sample_index, shared_corpora, name):
    _assert_learning_one_by_one_scores_as_a_refit(
        _learning_stream(sample_index, shared_corpora), _config(LEARNING_CONFIGS[name]))
