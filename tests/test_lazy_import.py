"""SciPy imported at first use (textnb.lazy_import): training counts without it, scoring
imports it when it first builds a matrix, and the scores are the usual ones."""

import json
import subprocess
import sys

import pytest

from textnb.lazy_import import lazy_module

from conftest import SAMPLE_INDEX

# In a fresh interpreter: the test process has imported SciPy already.
_CHECK = f"""
import json, sys, tempfile, pathlib
from textnb import commands
from textnb.config import FilterConfig
model = pathlib.Path(tempfile.mkdtemp()) / "m.tnb"
commands.train(model, FilterConfig(), index=[{str(SAMPLE_INDEX)!r}], jobs=1)
counted_without = "scipy._lib._array_api" not in sys.modules
from textnb import store
from textnb.sources import iter_index
spam_filter = store.load(model)
raws = [m.raw for m in iter_index({str(SAMPLE_INDEX)!r})][:5]
scores = spam_filter.log_odds(raws).tolist()
print(counted_without, "scipy._lib._array_api" in sys.modules, json.dumps(scores))
"""


def test_training_never_imports_scipy_and_scoring_does():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout
    counted_without, scored_with, scores = out.split(" ", 2)
    assert (counted_without, scored_with) == ("True", "True")
    from textnb.pipeline import SpamFilter
    from textnb.retrain import fit
    from textnb.sources import iter_index

    messages = list(iter_index(SAMPLE_INDEX))
    spam_filter = SpamFilter()
    fit(spam_filter, messages)
    assert json.loads(scores) == spam_filter.log_odds([m.raw for m in messages[:5]]).tolist()


def test_a_lazy_module_is_the_module_and_a_missing_one_is_named():
    import scipy.special

    assert lazy_module("scipy.special") is scipy.special
    assert lazy_module("scipy.special").expit(0.0) == 0.5
    with pytest.raises(ImportError, match="no_such_module_here"):
        lazy_module("no_such_module_here")


def test_the_resident_scorer_imports_scipy_before_its_threads_score():
    """A lazy module's first access is not thread-safe before Python 3.12: importing the
    server finishes SciPy's import in the importing thread."""
    check = ("import sys, types, textnb.server; "
             "print(all(type(sys.modules[m]) is types.ModuleType "
             "for m in ('scipy.sparse', 'scipy.special')))")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"
