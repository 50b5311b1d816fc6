"""Values of PMML fields: typing, validity, missing-value and invalid-value treatment,
and the per-input log-factor tables that :mod:`textnb.pmml.score` sums.

A raw cell (str, number, None) becomes the value the model sees in
:meth:`FieldSpec.prepare` (the ``MiningField``'s ``missingValueReplacement``,
``invalidValueTreatment`` and ``outliers`` applied), then a log-factor per target
value in :meth:`InputTable.log_factors`: a row of the input's ``PairCounts`` table
(after ``Discretize``), or a Gaussian/Poisson log-density floored at the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln

from ..errors import PMMLError

__all__ = ["DATA_TYPES", "FieldSpec", "InputTable", "InvalidValue", "factorize", "interval",
           "number", "parse_value", "required"]

DATA_TYPES = frozenset({"string", "integer", "float", "double", "boolean"})
MISSING, NO_MATCH = -1, -2  # row codes before they become table rows


@dataclass
class FieldSpec:
    """A DataField with its MiningField treatments."""

    name: str
    optype: str
    data_type: str
    valid: set = field(default_factory=set)  # listed valid values (normalised); empty: any
    invalid: set = field(default_factory=set)
    missing: set = field(default_factory=set)  # raw strings that mean "missing"
    intervals: list = field(default_factory=list)  # (closure, left, right)
    usage: str = "active"
    replacement: object = None  # missingValueReplacement, normalised
    invalid_treatment: str = "returnInvalid"
    invalid_replacement: object = None
    outliers: str = "asIs"
    low: float = -math.inf
    high: float = math.inf

    def prepare(self, raw):
        """A raw cell -> the value the model sees, or None (missing). Raises on invalid."""
        if is_missing(raw) or str(raw).strip() in self.missing:
            return self.replacement
        try:
            value = parse_value(self.data_type, raw)
            parsed, ok = True, self._is_valid(value)
        except ValueError:
            value, parsed, ok = raw, False, False
        if not ok:
            treatment = self.invalid_treatment
            if treatment == "asMissing":
                return self.replacement
            if treatment == "asValue":
                return self.invalid_replacement
            if treatment != "asIs" or not parsed:
                raise InvalidValue(f"value {raw!r} of field {self.name!r} is invalid "
                                    f"(dataType={self.data_type}"
                                    + (f", valid values {sorted(map(str, self.valid))[:6]}"
                                       if self.valid else "") + ")")
        if self.optype == "continuous" and self.outliers != "asIs":
            if value < self.low or value > self.high:
                if self.outliers == "asMissingValues":
                    return self.replacement
                value = min(max(value, self.low), self.high)
        return value

    def _is_valid(self, value) -> bool:
        if value in self.invalid:
            return False
        if self.optype == "continuous" and self.intervals:
            return value in self.valid or any(in_interval(value, *iv) for iv in self.intervals)
        return not self.valid or value in self.valid


class InvalidValue(ValueError):
    pass


@dataclass
class InputTable:
    """One BayesInput: how to turn a field's values into a log-factor per target value."""

    field: str
    kind: str  # "counts" or "gaussian" / "poisson"
    # counts: value key -> row of `table`; table has two more rows, no-match and missing
    keys: dict = field(default_factory=dict)
    table: np.ndarray | None = None
    key_type: str = "string"
    bins: list | None = None  # Discretize: [(bin value, closure, left, right)]
    map_missing_to: object = None
    default_value: object = None
    params: np.ndarray | None = None  # (n_classes, 2): mean, variance (Poisson: mean, -)
    absent: float | np.ndarray = 0.0  # its log-factors when the field is not in the data

    def log_factors(self, values: list, log_threshold: float) -> np.ndarray:
        """Log-factors of shape (len(values), n_classes) for prepared values (None: missing)."""
        if self.kind != "counts":
            x = np.array([np.nan if v is None else float(v) for v in values])
            mean, var = self.params[:, 0], self.params[:, 1]
            with np.errstate(invalid="ignore", divide="ignore"):
                if self.kind == "gaussian":
                    lp = -0.5 * (np.log(2 * np.pi * var) + (x[:, None] - mean) ** 2 / var)
                else:
                    k = x[:, None]
                    whole = (k >= 0) & (k == np.floor(k))
                    lp = np.where(whole, k * np.log(mean) - mean - gammaln(k + 1), -np.inf)
            lp = np.maximum(lp, log_threshold)
            return np.where(np.isnan(x)[:, None], 0.0, lp)
        rows = [self._row(v) for v in values]
        n = len(self.keys)
        return self.table[[n + 1 if r == MISSING else n if r == NO_MATCH else r for r in rows]]

    def _row(self, value) -> int:
        if self.bins is not None:
            value = self._discretize(value)
            if value is None:
                return MISSING
            value = parse_value(self.key_type, value)
        elif value is None:
            return MISSING
        return self.keys.get(value, NO_MATCH)

    def _discretize(self, x):
        if x is None:
            return self.map_missing_to
        for bin_value, closure, left, right in self.bins:
            if in_interval(x, closure, left, right):
                return bin_value
        return self.default_value


# -- values --------------------------------------------------------------------------

def is_missing(raw) -> bool:
    return raw is None or (isinstance(raw, float) and math.isnan(raw))


def parse_value(data_type: str, raw):
    """A raw value (str or number) as the PMML dataType; ValueError when it is not one."""
    if data_type in ("double", "float"):
        if isinstance(raw, str):
            raw = raw.strip()
        value = float(raw)
        if math.isnan(value):
            raise ValueError("NaN")
        return value
    if data_type == "integer":
        if isinstance(raw, str):
            raw = raw.strip()
            try:
                return int(raw)
            except ValueError:
                raw = float(raw)
        if isinstance(raw, (bool, np.bool_)):
            raise ValueError("boolean")
        value = float(raw)
        if not value.is_integer():
            raise ValueError(f"{raw!r} is not an integer")
        return int(value)
    if data_type == "boolean":
        text = str(raw).strip().lower()
        if text in ("true", "1", "1.0"):
            return True
        if text in ("false", "0", "0.0"):
            return False
        raise ValueError(f"{raw!r} is not a boolean")
    return raw if isinstance(raw, str) else str(raw)


def factorize(column: Sequence) -> tuple[list, np.ndarray]:
    """Distinct values of a column (missing ones folded into None) and each cell's index."""
    if isinstance(column, np.ndarray) and column.dtype.kind in "biuf":
        uniques, inverse = np.unique(column, return_inverse=True)
        values = [None if isinstance(u, float) and math.isnan(u) else u
                  for u in uniques.tolist()]
        return values, inverse.reshape(-1)
    codes: dict = {}
    inverse = np.empty(len(column), dtype=np.intp)
    values: list = []
    for i, raw in enumerate(column):
        key = None if is_missing(raw) else (type(raw) is str, raw)
        j = codes.get(key)
        if j is None:
            j = codes[key] = len(values)
            values.append(None if key is None else raw)
        inverse[i] = j
    return values, inverse


def interval(attrs: dict) -> tuple[str, float, float]:
    closure = required(attrs, "closure", "Interval")
    if closure not in ("openOpen", "openClosed", "closedOpen", "closedClosed"):
        raise PMMLError(f"Interval closure={closure!r} is not a PMML closure")
    return (closure, float(attrs.get("leftMargin", -math.inf)),
            float(attrs.get("rightMargin", math.inf)))


def in_interval(x, closure: str, left: float, right: float) -> bool:
    x = float(x)
    above = x >= left if closure.startswith("closed") else x > left
    below = x <= right if closure.endswith("Closed") else x < right
    return above and below


def required(attrs: dict, key: str, element: str) -> str:
    try:
        return attrs[key]
    except KeyError:
        raise PMMLError(f"<{element}> lacks its required attribute {key!r}") from None


def number(attrs: dict, key: str, element: str) -> float:
    text = required(attrs, key, element)
    try:
        return float(text)
    except ValueError:
        raise PMMLError(f"<{element}> {key}={text!r} is not a number") from None
