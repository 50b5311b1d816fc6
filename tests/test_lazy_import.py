"""SciPy imported at first use (textnb.features.lazy_scipy): training counts without it, scoring
with the default evidence selection reads bare CSR arrays (textnb.features.csr_arrays) without it, a
path that needs SciPy's products imports it then, and the scores are the usual ones."""

import json
import subprocess
import sys

import numpy as np
import pytest

from textnb.features.lazy_scipy import lazy_module

from conftest import SAMPLE_INDEX

# In a fresh interpreter: the test process has imported SciPy already.
_CHECK = f"""
import json, sys, tempfile, pathlib
from textnb import commands
from textnb.config import FilterConfig, TrainingConfig
model = pathlib.Path(tempfile.mkdtemp()) / "m.tnb"
every = FilterConfig(training=TrainingConfig(regime="all"))  # counted in batches
commands.train(model, every, index=[{str(SAMPLE_INDEX)!r}], jobs=1)
commands.train(model, FilterConfig(), index=[{str(SAMPLE_INDEX)!r}], jobs=1)  # one by one
counted_without = "scipy._lib._array_api" not in sys.modules
from textnb.modelfile import store
from textnb.mail.sources import iter_index
spam_filter = store.load(model)
raws = [m.raw for m in iter_index({str(SAMPLE_INDEX)!r})][:5]
scores = spam_filter.log_odds(raws).tolist()
p_spam = spam_filter.p_spam(spam_filter.log_odds(raws)).tolist()
scored_without = "scipy._lib._array_api" not in sys.modules
plain = spam_filter.model.log_odds(spam_filter.vocabulary.rows(spam_filter.tokens_many(raws)))
print(counted_without, scored_without, "scipy._lib._array_api" in sys.modules,
      json.dumps([scores, p_spam, plain.tolist()]))
"""


def test_training_and_default_scoring_never_import_scipy():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout
    counted_without, scored_without, product_with, results = out.split(" ", 3)
    assert (counted_without, scored_without, product_with) == ("True", "True", "True")
    scores, p_spam, plain = json.loads(results)
    from textnb.mail.sources import iter_index

    from textnb.modelfile.retrain import fit
    from textnb.spamfilter import SpamFilter

    spam_filter = SpamFilter()  # the defaults: the thick regime
    fit(spam_filter, iter_index(SAMPLE_INDEX))
    raws = [m.raw for m in list(iter_index(SAMPLE_INDEX))[:5]]
    assert scores == spam_filter.log_odds(raws).tolist()
    from scipy.special import expit

    assert p_spam == expit(np.array(scores)).tolist()
    assert plain == spam_filter.model.log_odds(
        spam_filter.vocabulary.transform(spam_filter.tokens_many(raws))).tolist()


def test_a_lazy_module_is_the_module_and_a_missing_one_is_named():
    import scipy.special

    assert lazy_module("scipy.special") is scipy.special
    assert lazy_module("scipy.special").expit(0.0) == 0.5
    with pytest.raises(ImportError, match="no_such_module_here"):
        lazy_module("no_such_module_here")


def test_the_resident_scorer_imports_scipy_before_its_threads_score():
    """A lazy module's first access is not thread-safe before Python 3.12: importing the
    server finishes SciPy's import in the importing thread."""
    check = ("import sys, types, textnb.delivery.server; "
             "print(all(type(sys.modules[m]) is types.ModuleType "
             "for m in ('scipy.sparse', 'scipy.special')))")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"
