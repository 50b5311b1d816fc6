"""SciPy's modules, imported at their first use: the commands that only count never do.

``import scipy.sparse`` or ``scipy.special`` costs ~0.2 s: SciPy 1.17's array-API layer
touches every attribute of NumPy, which imports NumPy's lazy submodules (``numpy.f2py``,
``numpy.ma``, ...; docs/design/startup.md#scipy-kept-off-the-scoring-path).
``textnb train`` and ``retrain`` count with NumPy alone, so the modules they share with
scoring (pipeline, naive_bayes, vectorize, decision) hold SciPy's as ``lazy_module``s, which import the real module at
the first attribute access (``importlib.util.LazyLoader``, the standard library's recipe).
Scoring with the default evidence selection reads bare CSR arrays (``textnb.features.csr_arrays``)
and never imports them either; the paths that need SciPy's products (plain naive Bayes,
``explain``, ``tune``) import them when they first run.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__all__ = ["lazy_module", "import_now"]


def lazy_module(name: str) -> types.ModuleType:
    """The module ``name``, imported when one of its attributes is first read (at once
    if it is imported already)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def import_now(*names: str) -> None:
    """Finish importing these (lazy) modules now, in this thread. A lazy module's first
    attribute access races with another thread's in Python 3.11 (python/cpython#114763:
    the module's class is reset before its attributes are filled), so the resident
    scorer and the milter, whose handler threads may score a user's model for the first
    time together, call this when they are imported."""
    for name in names:
        getattr(importlib.import_module(name), "__name__")
