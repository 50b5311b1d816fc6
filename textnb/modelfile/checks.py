"""What a model must hold to before textnb scores with it, whichever reader made it.

A model reaches textnb as a model file (``textnb.modelfile.store``: every scoring command,
``info``, ``merge`` and the resident scorer's reload), a text dump (``textnb.modelfile.dump``)
or a PMML document (``textnb.pmml.exchange``), and each may come from elsewhere: a
colleague's export, a backup, a file another local user can write. Each reader
checks its own format (checksums, grammar, XML); :func:`check_model` then checks the
model itself, the same way for all three, so that no file can make the filter lie
(a NaN threshold passing every spam, class counts of 1e308 turning the priors into
NaN, a string threshold failing every score):

- every count finite, >= 0 and at most ``COUNT_LIMIT``, and the counts consistent
  with each other (:func:`check_counts`);
- the learned threshold absent or a finite number; a calibration map that maps;
- the settings within what ``FilterConfig.validate`` accepts on the command line,
  and the bounds on the work one hostile message may cost (``HOSTILE_MAIL_BOUNDS``)
  no higher than ``BOUND_CEILING`` times their defaults.

A model that fails is refused with :class:`InvalidModelError`, a ModelFormatError
naming the field and the fix; a running scorer then keeps the model it has.

:func:`loads_json` is ``json.loads`` for the JSON these files hold: nesting too deep
for Python's parser is a JSONDecodeError (a damaged file), not a RecursionError.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import Any

import numpy as np

from ..config import BOUND_CEILING, HOSTILE_MAIL_BOUNDS, FilterConfig, config_from_dict
from ..errors import ConfigError, ModelFormatError
from ..models.ledger import LABELS
from ..models.naive_bayes import EVENT_MODELS

__all__ = ["BOUND_CEILING", "COUNT_LIMIT", "HOSTILE_MAIL_BOUNDS", "INFLATION_ALLOWANCE",
           "InvalidModelError", "MAX_INFLATION", "check_calibration", "check_counts", "check_model",
           "check_settings", "loads_json", "model_config"]

# float64 holds every whole number up to 2**53 exactly, and the counts' exactness
# (unlearning gives the counts back bit for bit, textnb.models.naive_bayes) holds only below
# it. No mail store holds 9e15 messages or tokens: a count above it is damage or a
# crafted file (class counts of 1e308 overflow the priors' sum to inf).
COUNT_LIMIT = float(2 ** 53)

# The most a model file's members may inflate to: MAX_INFLATION times the file's size,
# plus INFLATION_ALLOWANCE for the smallest files. textnb's own files inflate about 7
# times (SpamAssassin's model: 33 MB of members in a 5.0 MB file; the sample corpus's:
# 0.43 MB in 0.06 MB); the ledger's column history, zeros until the model is pruned,
# inflates 940 times, but it is a small share of any file. Checked on the sizes the
# archive declares, before anything is inflated (a 2 MB file declaring 2 GiB is refused
# at once), and each member's inflate then stops one byte past its declared size,
# whatever its bytes would give (``_bounded``): reading a file of n bytes never holds
# more than about 100 n bytes of members.
MAX_INFLATION = 100
INFLATION_ALLOWANCE = 1 << 20

# The bounds on hostile mail and their ceiling are FilterConfig's (textnb/config.py):
# `--set` and every model reader refuse the same values.

_RETRAIN = "restore the file from a backup, or train the model again"


class InvalidModelError(ModelFormatError):
    """A model no training could have made: a count, total, threshold or setting out of
    bounds.

    The message is "SOURCE: PROBLEM; FIX".
    problem (str): what is wrong, without where or the fix (a text dump adds its line
        and its own fix).
    field (str): the part that is wrong ('threshold', 'class_count', 'mail.max_bytes', ...).
    column (int | None): the vocabulary column, when one token's counts are wrong.
    """

    def __init__(self, source: str, problem: str, fix: str, field: str,
                 column: int | None = None):
        super().__init__(f"{source}: {problem}; {fix}")
        self.problem, self.field, self.column = problem, field, column


def loads_json(data: str | bytes, what: str = "JSON") -> Any:
    """``json.loads(data)``; nesting deeper than Python's parser can follow raises
    json.JSONDecodeError (as any other damage does) instead of RecursionError.

    Every reader already turns a JSONDecodeError into its own "damaged" message, so
    a vocabulary or threshold nested 100,000 deep is reported as what it is."""
    try:
        return json.loads(data)
    except RecursionError:
        text = data.decode("latin-1") if isinstance(data, bytes) else data
        raise json.JSONDecodeError(f"{what} is nested deeper than the parser reads: the file "
                                   "is damaged or crafted", text[:100], 0) from None


def model_config(nested: dict, source: str) -> FilterConfig:
    """The FilterConfig a model's saved settings make, checked as ``--set`` and config
    files are (``config_from_dict``, ``FilterConfig.validate``) and against the
    hostile-mail ceilings; InvalidModelError naming the setting otherwise.

    source (str): how messages name the model, e.g. "model file 'm.tnb'"."""
    try:
        config = config_from_dict(nested).validate()
    except ConfigError as exc:
        raise InvalidModelError(source, f"a setting textnb does not accept: {exc}",
                                "export or train it again with settings textnb accepts",
                                field=str(exc).partition("=")[0]) from None
    check_settings(config, source)
    return config


def check_settings(config: FilterConfig, source: str) -> None:
    """InvalidModelError when a bound on hostile mail is above ``BOUND_CEILING`` times
    its default (``config`` has passed ``FilterConfig.validate``, as every
    SpamFilter's has)."""
    for section, key in HOSTILE_MAIL_BOUNDS:
        part = getattr(config, section)
        default = next(f.default for f in fields(part) if f.name == key)
        value, ceiling = getattr(part, key), BOUND_CEILING * default
        if value > ceiling:
            raise InvalidModelError(
                source, f"{section}.{key}={value:_} is above its ceiling of {ceiling:_} "
                f"({BOUND_CEILING} times the default, {default:_}): a model may not lift the "
                "bounds on hostile mail that far", "export it with the setting lowered, or "
                f"train it again with --set {section}.{key}=N", field=f"{section}.{key}")


def check_model(spam_filter, source: str):
    """``spam_filter`` if it holds to every rule in the module docstring; else
    InvalidModelError naming the field. RETURNS (SpamFilter)."""
    check_settings(spam_filter.config, source)
    counts = spam_filter.counts()
    check_counts(counts["class_count"], counts["feature_count"], counts["doc_freq"],
                 spam_filter.config, source, tokens=counts["tokens"])
    _check_threshold(spam_filter.threshold, source)
    if spam_filter.calibration is not None:
        check_calibration(spam_filter.calibration, source)
    for label, n in spam_filter.n_learned.items():
        if not (isinstance(n, int) and 0 <= n <= COUNT_LIMIT):
            raise InvalidModelError(source, f"it says it learned {n!r} {label} messages, not "
                                    "a whole number from 0 to 2**53", _RETRAIN, "n_learned")
    held = spam_filter.ledger.counts()
    for code, label in enumerate(LABELS):
        if held[label] > counts["class_count"][code]:
            raise InvalidModelError(source, f"its ledger holds {held[label]} {label} "
                                    f"messages, but class {label} counts only "
                                    f"{_number(counts['class_count'][code])}", _RETRAIN,
                                    "ledger")
    numeric = getattr(spam_filter, "numeric", None)
    if hasattr(numeric, "class_count_"):  # a numeric model that learned something
        for name, array in numeric.to_arrays().items():
            if not np.isfinite(np.asarray(array, dtype=np.float64)).all():
                raise InvalidModelError(source, f"numeric array {name!r} holds a value that is "
                                        "not a finite number", _RETRAIN, f"numeric.{name}")
    return spam_filter


def check_counts(class_count: np.ndarray, feature_count: np.ndarray, doc_freq: np.ndarray,
                 config: FilterConfig, source: str, tokens=None) -> None:
    """InvalidModelError unless the counts are ones that training can make.

    class_count (ndarray of shape (2,)): messages per class (0 ham, 1 spam).
    feature_count (ndarray of shape (2, n_tokens)): each token's count per class.
    doc_freq (ndarray of shape (n_tokens,)): the messages holding each token.
    tokens (Sequence[str] | None): the vocabulary, to name a token in the message.

    Every value is finite, >= 0 and at most ``COUNT_LIMIT`` (a comparison with NaN
    is false, so NaN fails each test below), and:

    - a token is in at most as many messages as there are: doc_freq <= Σ class_count;
    - each message holding a token counts it at least once: doc_freq <= ham + spam;
    - when a token counts once per message (features.features = "binary", or an event
      model that reads presence only, as Bernoulli does), its count in a class is at
      most the class's messages, and its message count is exactly ham + spam.
    """
    def fail(problem: str, field: str, column: int | None = None):
        where = f" (token {tokens[column]!r})" if column is not None and tokens is not None else ""
        raise InvalidModelError(source, problem + where, _RETRAIN, field, column)

    if not ((class_count >= 0).all() and (class_count <= COUNT_LIMIT).all()):
        fail(f"class counts {class_count.tolist()} are not numbers from 0 to 2**53",
             "class_count")
    if feature_count.size and not feature_count.min() >= 0:
        column = _first(~(feature_count >= 0).all(axis=0))
        fail(f"a feature count is {feature_count[:, column].tolist()}, not a number >= 0",
             "feature_count", column)
    both = feature_count[0] + feature_count[1]
    if (config.features.features == "binary"
            or EVENT_MODELS[config.model.event_model].counts_presence):
        # Here the bounds on the class counts bound everything else: each count by its
        # class's messages, and each message count, equal to ham + spam, by all of them.
        for code, label in enumerate(LABELS):
            if feature_count.size and not feature_count[code].max() <= class_count[code]:
                column = _first(~(feature_count[code] <= class_count[code]))
                fail(f"a token is in {_number(feature_count[code, column])} {label} messages, "
                     f"but class {label} has only {_number(class_count[code])}",
                     "feature_count", column)
        if not np.array_equal(doc_freq, both):
            column = _first(doc_freq != both)
            fail(f"a token is in {_number(doc_freq[column])} messages but counted "
                 f"{_number(both[column])} times; with features.features = \"binary\" (or a "
                 "Bernoulli model) the two are equal", "doc_freq", column)
        return
    if feature_count.size and not feature_count.max() <= COUNT_LIMIT:
        column = _first(~(feature_count <= COUNT_LIMIT).all(axis=0))
        fail(f"a feature count is {feature_count[:, column].tolist()}, over 2**53",
             "feature_count", column)
    total = class_count.sum()
    if doc_freq.size and not (doc_freq.min() >= 0 and doc_freq.max() <= total):
        column = _first(~((doc_freq >= 0) & (doc_freq <= total)))
        fail(f"a token is in {_number(doc_freq[column])} messages, of {_number(total)} "
             "learned", "doc_freq", column)
    if (doc_freq > both).any():
        column = _first(doc_freq > both)
        fail(f"a token is in {_number(doc_freq[column])} messages but counted only "
             f"{_number(both[column])} times", "doc_freq", column)


def _check_threshold(threshold, source: str) -> None:
    if threshold is None:
        return
    if not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
            and math.isfinite(threshold)):
        raise InvalidModelError(source, f"its threshold is {str(threshold)[:40]!r}, not a "
                                "finite number or null", "restore the file from a backup, or run "
                                "'textnb tune --write' to learn the threshold again", "threshold")


def check_calibration(calibration, source: str) -> None:
    """A calibration map ``textnb.decision.calibration`` can apply: isotonic knots (x, p) of
    finite numbers, both non-decreasing, p within [0, 1]; or Platt's finite a and b."""
    from ..decision.calibration import FORMAT, METHODS

    method = calibration.get("method") if isinstance(calibration, dict) else None
    version = calibration.get("format", FORMAT) if isinstance(calibration, dict) else None
    if method not in METHODS or not isinstance(version, int) or version > FORMAT:
        raise InvalidModelError(source, f"its calibration (method {str(method)[:40]!r}, "
                                f"format {str(version)[:20]}) is not a calibration map this "
                                "textnb reads", "run 'textnb tune --write' again (or upgrade "
                                "textnb, if a newer one wrote it)", "calibration")
    keys = ("x", "p") if method == "isotonic" else ("a", "b")
    try:
        values = [np.asarray(calibration[k], dtype=np.float64) for k in keys]
    except (KeyError, TypeError, ValueError):
        values = None
    if method == "isotonic":
        ok = (values is not None and values[0].ndim == 1 and values[0].shape == values[1].shape
              and values[0].size >= 1 and np.isfinite(values[0]).all()
              and (np.diff(values[0]) >= 0).all() and (values[1] >= 0).all()
              and (values[1] <= 1).all() and (np.diff(values[1]) >= 0).all())
    else:
        ok = values is not None and all(v.ndim == 0 and np.isfinite(v) for v in values)
    if not ok:
        raise InvalidModelError(source, f"its {method} calibration map is not one (its "
                                f"{' and '.join(keys)} must be finite numbers"
                                + (", the knots non-decreasing and p within [0, 1]"
                                   if method == "isotonic" else "") + ")",
                                "run 'textnb tune --write' again", "calibration")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _number(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < COUNT_LIMIT else repr(x)
