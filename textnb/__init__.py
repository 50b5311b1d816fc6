"""textnb: a cost-aware naive Bayes spam filter.

The public API::

    from textnb import SpamFilter, FilterConfig, load, save
    from textnb.mail.sources import iter_index, iter_messages

    spam_filter = SpamFilter(FilterConfig()).fit(iter_index("corpora/sample/index"))
    save(spam_filter, "sample.tnb")                       # atomically
    for scored in load("sample.tnb").classify(iter_messages("corpora/sample/unlabelled"),
                                              cost_ratio=9):
        print(scored.source, scored.decision.label, scored.decision.log_odds)

and the error classes, all subclasses of ``TextnbError``. Everything else is a module
of its own (``textnb.mail.sources`` reads mail,
``textnb.evaluation.cross_validation`` measures, ...).

``import textnb`` stays cheap: ``textnb-client`` and ``textnb filter`` sit in the
mail path, where start-up time is per message, and the filter, its config and the
model store pull in NumPy and SciPy (spaCy only when a message is tokenised). So
every name is imported on first use, through the module's ``__getattr__`` (PEP 562),
and this file imports nothing, not even ``typing`` (``python -S``, which the compiled
client's fallback may use, has not loaded it).
"""

__version__ = "0.1.0"

_ERRORS = ("TextnbError", "SourceError", "MailboxFormatError", "NotFittedError",
           "EmptyTrainingSetError", "EmptyVocabularyError", "ModelFormatError", "WriteError",
           "ConfigError", "PMMLError", "EngineError")

# name -> the module that defines it, imported on first access.
_LAZY = {
    "SpamFilter": "spamfilter",
    "FilterConfig": "config",
    "load": "modelfile.store",
    "save": "modelfile.store",
    **{name: "errors" for name in _ERRORS},
}

__all__ = ["SpamFilter", "FilterConfig", "load", "save", *_ERRORS, "__version__"]

TYPE_CHECKING = False  # true for type checkers and IDEs; at run time __getattr__ imports
if TYPE_CHECKING:
    from .config import FilterConfig
    from .errors import (ConfigError, EmptyTrainingSetError, EmptyVocabularyError,
                         EngineError, MailboxFormatError, ModelFormatError, NotFittedError,
                         PMMLError, SourceError, TextnbError, WriteError)
    from .modelfile.store import load, save
    from .spamfilter import SpamFilter


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'textnb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
