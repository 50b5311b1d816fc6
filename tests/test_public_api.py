"""The public API: ``from textnb import SpamFilter, FilterConfig, load, save`` and the
error classes, without making ``import textnb`` pull in NumPy, SciPy or spaCy."""

import os
import subprocess
import sys

import pytest

import textnb
from textnb import errors

from conftest import PROJECT, SAMPLE, SAMPLE_INDEX, every_message

ERROR_CLASSES = ["TextnbError", "SourceError", "MailboxFormatError", "NotFittedError",
                 "EmptyTrainingSetError", "EmptyVocabularyError", "ModelFormatError",
                 "WriteError", "ConfigError", "PMMLError", "EngineError"]


def test_the_names_are_the_modules_objects():
    from textnb import FilterConfig, SpamFilter, load, save
    from textnb import config, spamfilter
    from textnb.modelfile import store

    assert SpamFilter is spamfilter.SpamFilter
    assert FilterConfig is config.FilterConfig
    assert load is store.load and save is store.save


def test_all_lists_the_api_and_every_error_class():
    assert set(textnb.__all__) == {"SpamFilter", "FilterConfig", "load", "save",
                                   "__version__", *ERROR_CLASSES}
    for name in textnb.__all__:
        assert getattr(textnb, name) is not None
        assert name in dir(textnb)
    # every exception textnb.errors defines is exported, each a TextnbError
    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, Exception)}
    assert defined == set(ERROR_CLASSES)
    for name in ERROR_CLASSES:
        assert getattr(textnb, name) is getattr(errors, name)
        assert issubclass(getattr(textnb, name), textnb.TextnbError)


def test_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from textnb import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(textnb.__all__)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'SpamFiltre'"):
        textnb.SpamFiltre  # noqa: B018
    with pytest.raises(ImportError):
        exec("from textnb import SpamFiltre", {})


def _fresh_modules(*flags: str) -> set[str]:
    """The modules a new interpreter has loaded after ``import textnb``."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, *flags, "-c",
                           "import sys; before = set(sys.modules); import textnb; "
                           "print(*sorted(set(sys.modules) - before))"],
                          capture_output=True, text=True, env=env, timeout=60, check=True)
    return set(done.stdout.split())


def test_import_textnb_loads_nothing_heavy():
    """The mail path (textnb-client, textnb filter) imports the package first: it must
    cost no more than its own small file."""
    assert _fresh_modules() == {"textnb"}
    # -S: no site hooks, so not even typing is loaded yet (the C client's fallback path)
    assert _fresh_modules("-S") == {"textnb"}


def test_the_docstring_example(tmp_path):
    """What textnb/__init__.py shows, run on the sample corpus."""
    from textnb import FilterConfig, SpamFilter, load, save
    from textnb.mail.sources import iter_index, iter_messages

    spam_filter = SpamFilter(FilterConfig()).fit(iter_index(SAMPLE_INDEX))
    path = tmp_path / "sample.tnb"
    assert save(spam_filter, path) == path
    loaded = load(path)
    unlabelled = sorted(p for p in (SAMPLE / "unlabelled").iterdir())
    verdicts = list(loaded.classify(iter_messages(SAMPLE / "unlabelled"), cost_ratio=9))
    direct = list(spam_filter.classify(iter_messages(SAMPLE / "unlabelled"), cost_ratio=9))
    assert len(verdicts) == len(unlabelled) > 0
    assert [(v.source, v.decision) for v in verdicts] == [(v.source, v.decision) for v in direct]
    assert {v.decision.label for v in verdicts} <= {"spam", "ham", "unsure"}


def test_errors_are_catchable_from_the_package(tmp_path):
    from textnb import ModelFormatError, TextnbError, load

    bad = tmp_path / "not-a-model.tnb"
    bad.write_text("hello")
    with pytest.raises(ModelFormatError):
        load(bad)
    with pytest.raises(TextnbError):
        load(bad)


def test_a_model_made_by_fit_keeps_a_ledger_and_can_be_forgotten_exactly():
    """The docstring's example made a model nothing could be forgotten from: ``fit`` kept
    no ledger. Now it enters every message, and ``textnb forget``'s path removes them."""
    from textnb import SpamFilter
    from textnb.mail.sources import iter_index
    from textnb.modelfile.retrain import fit as train
    from textnb.modelfile.retrain import forget_messages

    messages = list(iter_index(SAMPLE_INDEX))
    made = SpamFilter().fit(messages)
    assert made.ledger.summary(made.n_learned)["untracked"] == 0
    result = forget_messages(made, messages[70:])
    assert sum(result["forgotten"].values()) == 30 and result["not_found"] == 0
    reference = SpamFilter(every_message())
    train(reference, messages[:70])
    assert made.n_learned == reference.n_learned and made.ledger == reference.ledger
    for ours, theirs in ((made.counts(), reference.counts()),):
        tokens = {t: i for i, t in enumerate(ours["tokens"])}
        for j, token in enumerate(theirs["tokens"]):
            i = tokens[token]
            assert ours["feature_count"][0, i] == theirs["feature_count"][0, j]
            assert ours["feature_count"][1, i] == theirs["feature_count"][1, j]
            assert ours["doc_freq"][i] == theirs["doc_freq"][j]
        held = {t for i, t in enumerate(ours["tokens"]) if ours["doc_freq"][i]}
        assert held == set(theirs["tokens"])
