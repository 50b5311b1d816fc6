"""Shared fixtures (the project's own sample corpus, a small trained filter) and the tiers.

Two tiers. Unit and integration tests run by default (``python3 -m pytest``, the
README's command: a few minutes on two cores). System tests carry the ``system`` marker
and are deselected by default (pyproject.toml's ``addopts``); ``python3 -m pytest -m
system`` runs them alone and ``-m "system or not system"`` runs both (CI's full pass,
.ci/run). A system test needs a real mail server, browser or MTA side, reads the public
corpora, or runs long (load, crash sweeps, long fuzzing). Whole files are named in
``SYSTEM_FILES`` below; single tests carry ``@pytest.mark.system`` in their file; a test
that reads the public corpora (the ``shared_corpora`` fixture or the ``corpus`` marker)
is one without saying so.
"""

from pathlib import Path

import pytest

from textnb.mail.corpora import corpora_root

PROJECT = Path(__file__).resolve().parents[1]
SAMPLE = PROJECT / "corpora" / "sample"
SAMPLE_INDEX = SAMPLE / "index"

# Tests of the counts' algebra (retrain = train on the union, merge = train on all, any
# number of workers = one process, a store = a file) learn every message: the thick
# default selects by scores, so such identities hold only within one regime.
# tests/test_train_regime.py and tests/test_cv_regime.py test the default itself.
EVERY_MESSAGE = ["--regime", "all"]


def every_message(config=None, **overrides):
    """``config`` (default: the defaults, with ``overrides``: dotted keys) learning every
    message (``training.regime = 'all'``)."""
    from textnb.config import load_config

    config = config or load_config(None, {k.replace("__", "."): v for k, v in overrides.items()})
    return config.learning_every_message()

# Files that are system tests as a whole, and what each runs.
SYSTEM_FILES = {
    "test_postfix.py": "a real Postfix running the milter recipe",
    "test_learning_docs.py": "a real Dovecot with Pigeonhole running the IMAPSieve recipe",
    "test_milter.py": "Debian's miltertest driving textnb milter",
    "test_review_browser.py": "Chromium, driven by Selenium, on the review page",
    "test_delivery.py": "real procmail, maildrop and sievec running the docs' recipes",
    "test_daemon_attacks.py": "the daemons under load: hundreds of connections, descriptor "
                              "and thread limits",
    "test_fuzz.py": "coverage-guided fuzzing of the mail path",
    "test_shared_store_hosts.py": "several hosts, scorer processes and a restarted "
                                  "PostgreSQL on one shared store",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if (item.path.name in SYSTEM_FILES or item.get_closest_marker("corpus")
                or "shared_corpora" in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="session")
def sample_index() -> Path:
    return SAMPLE_INDEX


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    root = corpora_root()
    if root is None:
        pytest.skip("the public corpora are absent: set TEXTNB_CORPORA or place them at "
                    "../shared/corpora to run this test")
    return root


@pytest.fixture(scope="session")
def pmml_spec_example() -> str:
    """The PMML 4 specification's worked naive Bayes example (a PMML document), read from
    the project's seeds beside it ($TEXTNB_SEEDS or ../shared/seeds), never copied here."""
    import os
    import re

    seeds = Path(os.environ.get("TEXTNB_SEEDS") or PROJECT.parent / "shared" / "seeds")
    found = sorted(seeds.glob("000_*.txt")) if seeds.is_dir() else []
    if not found:
        pytest.skip(f"the PMML specification's worked example is read from {seeds}/000_*.txt, "
                    "which is absent: set TEXTNB_SEEDS or place the project's seeds at "
                    "../shared/seeds to run this test")
    text = found[0].read_text(encoding="utf-8")
    return re.search(r"<\?xml.*?</PMML>", text, flags=re.S).group(0)


@pytest.fixture(scope="session")
def sample_filter():
    """A filter trained on the whole sample index with the default config."""
    from textnb.mail.sources import iter_index
    from textnb.spamfilter import SpamFilter

    return SpamFilter().fit(iter_index(SAMPLE_INDEX))


@pytest.fixture(scope="session")
def sample_learned_filter():
    """The sample trained through the ledger, every message (regime all: a ledger of all
    100; read-only use: ``sample_filter`` is fitted without one)."""
    from textnb.mail.sources import iter_index
    from textnb.modelfile.retrain import fit
    from textnb.spamfilter import SpamFilter

    spam_filter = SpamFilter(every_message())
    fit(spam_filter, iter_index(SAMPLE_INDEX))
    return spam_filter


@pytest.fixture(scope="session")
def sample_one_alpha_filter():
    """A filter trained on the whole sample index with one pseudo-count for the route and
    the text (model.route_alpha = alpha's 0.1, where the default gives the route 0.03;
    read-only use)."""
    from textnb.config import load_config
    from textnb.mail.sources import iter_index
    from textnb.spamfilter import SpamFilter

    return SpamFilter(load_config(None, {"model.route_alpha": 0.1})).fit(iter_index(SAMPLE_INDEX))


@pytest.fixture(scope="session")
def sample_model_file(tmp_path_factory, sample_filter) -> Path:
    """``sample_filter`` saved as a model file (read-only use: tests must not change it)."""
    from textnb.modelfile import store

    path = tmp_path_factory.mktemp("sample-model") / "sample.tnb"
    store.save(sample_filter, path)
    return path


@pytest.fixture(scope="module")
def memo_tokens():
    """SpamFilter.tokens and tokens_many memoised per message for one test module: the
    tokenizer is deterministic, and modules about counts, ledgers and files (retrain,
    prune, the journal) would take minutes tokenising the sample over and over. Use it
    with ``pytestmark = pytest.mark.usefixtures("memo_tokens")``."""
    from textnb.spamfilter import SpamFilter

    cache = {}
    tokens = SpamFilter.tokens

    def memo(self, raw):
        key = (self.config.tokenizer, raw)  # tests that change tokenizer settings too
        if key not in cache:
            cache[key] = tokens(self, raw)
        return list(cache[key])

    def memo_many(self, raws):
        if self._workers is not None:
            return self._workers.token_lists(raws, self.tokens)
        return [memo(self, raw) for raw in raws]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SpamFilter, "tokens", memo)
        mp.setattr(SpamFilter, "tokens_many", memo_many)
        yield


@pytest.fixture
def model_path(tmp_path) -> Path:
    return tmp_path / "model.tnb"
