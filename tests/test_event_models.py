"""The event-model registry (textnb.models.naive_bayes.EVENT_MODELS): a third event model is one
class and one entry, and config, training, the model file, tune and PMML export read it.

The third model here, registered by the test only, is the multinomial reading presence
only (each token once per message): with binary features it is the multinomial with
binary features, so its scores are known; it has no PMML form, so export refuses it."""

import numpy as np
import pytest

from textnb.config import apply_overrides, FilterConfig
from textnb.errors import ConfigError, PMMLError
from textnb.evaluation import tune
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.models import naive_bayes
from textnb.models.naive_bayes import EVENT_MODELS, BernoulliNB, MultinomialNB, make_model
from textnb.pmml import export_pmml
from textnb.pmml.exchange import pmml_model
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX


class PresenceMultinomialNB(MultinomialNB):
    """The multinomial, counting each token once per message."""

    event_model = "presence-multinomial"
    counts_presence = True
    pmml_model = None


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(EVENT_MODELS, PresenceMultinomialNB.event_model, PresenceMultinomialNB)
    return PresenceMultinomialNB.event_model


def _trained(event_model: str, features: str = "binary") -> SpamFilter:
    config = apply_overrides(FilterConfig(), {"model.event_model": event_model,
                                              "features.features": features})
    spam_filter = SpamFilter(config)
    spam_filter.fit(iter_index(SAMPLE_INDEX))
    return spam_filter


def test_the_registry_holds_the_two_models_by_their_names():
    assert EVENT_MODELS == {"multinomial": MultinomialNB, "bernoulli": BernoulliNB}
    assert [cls.counts_presence for cls in EVENT_MODELS.values()] == [False, True]
    assert [pmml_model(name) for name in EVENT_MODELS] == ["RegressionModel", "NaiveBayesModel"]
    assert tune.SEARCH_GRID["model"] == (("multinomial", "binary"), ("multinomial", "tf"),
                                         ("bernoulli", "binary"))


def test_an_unregistered_model_is_refused_naming_the_registered_ones(registered):
    with pytest.raises(ConfigError, match="'multinomial' or 'bernoulli' or "
                                          "'presence-multinomial'"):
        apply_overrides(FilterConfig(), {"model.event_model": "complement"}).validate()
    with pytest.raises(ValueError, match="unknown event model 'complement'"):
        make_model("complement")


def test_a_third_model_is_one_class_and_one_entry(registered, tmp_path):
    third = _trained(registered)
    assert isinstance(third.model, PresenceMultinomialNB) and third.counts_presence
    plain = _trained("multinomial")
    raws = [m.raw for m in iter_index(SAMPLE_INDEX)]
    np.testing.assert_array_equal(third.log_odds(raws), plain.log_odds(raws))
    # With tf features it still reads each token once a message, in training and in
    # scoring (and model_checks holds its file to that when it is read back).
    tf = _trained(registered, "tf")
    np.testing.assert_array_equal(tf.model.feature_count_, plain.model.feature_count_)
    np.testing.assert_array_equal(tf.log_odds(raws), plain.log_odds(raws))
    path = store.save(tf, tmp_path / "third.tnb")
    loaded = store.load(path)
    assert type(loaded.model) is PresenceMultinomialNB
    np.testing.assert_array_equal(loaded.log_odds(raws), tf.log_odds(raws))


def test_pmml_export_refuses_a_model_it_cannot_express(registered):
    with pytest.raises(PMMLError, match="a presence-multinomial model has no PMML form .*"
                                        "exports multinomial and bernoulli models"):
        export_pmml(_trained(registered))


def test_nothing_outside_the_registry_names_an_event_model():
    """Config, pipeline, tune, model checks and PMML read the classes' attributes: no
    module compares an event model's name or lists the names (config.py's default,
    ``event_model: str = "multinomial"``, names one)."""
    import pathlib
    import re

    package = pathlib.Path(naive_bayes.__file__).parent
    named = [str(p.relative_to(package)) for p in package.rglob("*.py")
             if re.search(r'[!=]=\s*"(bernoulli|multinomial)"|"(bernoulli|multinomial)"\s*[!=]='
                          r'|\(\s*"(bernoulli|multinomial)",', p.read_text())
             and p.name != "naive_bayes.py"]
    assert named == []
