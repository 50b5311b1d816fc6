"""Score PMML ``NaiveBayesModel`` documents by the specification's procedure.

The PMML 4 procedure (DMG, "PMML 4.4 - Naive Bayes",
https://dmg.org/pmml/v4-4-1/NaiveBayes.html), for target values T_1 … T_m::

    P(T_i | I*) = L_i / Σ_k L_k,        L_k = count[T_k] · Π_j P(I_j* | T_k)
    P(I_j* | T_k) = count[I_j* T_k] / Σ_v count[I_jv T_k]

- the denominator is the sum of the input's ``PairCounts`` for that target value
  (the spec's "denominator rule"), not ``count[T_k]`` from ``BayesOutput``;
- a zero (or omitted) ``count[I_j* T_k]`` is replaced by the model's ``threshold``;
  a value no ``PairCounts`` lists has zero counts everywhere, so it gets the threshold
  for every target value;
- a missing input is left out of the product (after the ``MiningField``'s
  ``missingValueReplacement``, when it has one);
- a continuous input is either discretised by its ``DerivedField``/``Discretize``
  into the values its ``PairCounts`` list, or (PMML 4.2's ``TargetValueStats``)
  scored by the target value's ``GaussianDistribution`` or ``PoissonDistribution``;
  such a density is raised to ``threshold`` when it is smaller, as JPMML-Evaluator
  and PyPMML do.

Everything is computed in log space and normalised with ``logsumexp``, so a product
of a hundred thousand factors neither underflows nor loses the ratio between classes.

Anything else a document may hold that changes the numbers (``Targets``, derived
fields other than ``Discretize``, other model types, other distributions, output
expressions) is refused with a :class:`PMMLError` naming the element: textnb never
returns a number it did not compute by the rules above (reading and checking the
document is :mod:`textnb.pmml.parse`).
"""

from __future__ import annotations

import csv
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from ..errors import PMMLError
from .parse import Reader
from .values import FieldSpec, InputTable, InvalidValue, factorize

__all__ = ["NaiveBayesDocument", "load_naive_bayes", "read_csv_columns", "score_csv"]


class NaiveBayesDocument:
    """A PMML NaiveBayesModel, ready to score.

    Attributes
    ----------
    target : str, the predicted field.
    classes : list of str, its values in BayesOutput order (the columns of every result).
    inputs : list of str, the fields the model reads (MiningSchema order).
    threshold : float, the probability used for zero counts.
    """

    def __init__(self, target: str, classes: list[str], class_count: np.ndarray,
                 threshold: float, fields: dict[str, FieldSpec], inputs: list[InputTable],
                 model_name: str | None = None):
        self.target = target
        self.classes = classes
        self.class_count = class_count
        self.threshold = threshold
        self.model_name = model_name
        self._fields = fields
        self._inputs = inputs
        self.inputs = [f.name for f in fields.values() if f.usage == "active"]
        self._by_field: dict[str, list[InputTable]] = {}
        for inp in inputs:
            self._by_field.setdefault(inp.field, []).append(inp)
        with np.errstate(divide="ignore"):
            self._log_threshold = math.log(threshold) if threshold > 0 else -math.inf
            base = np.log(class_count)
        # Every input starts at its value for "field absent from the data" (the
        # replacement value, or missing); present fields swap that for their own.
        for inp in inputs:
            fld = fields[inp.field]
            inp.absent = inp.log_factors([fld.replacement], self._log_threshold)[0]
            base = base + inp.absent
        self._base = base

    def joint_log_likelihood(self, columns: Mapping[str, Sequence], n_rows: int | None = None
                             ) -> np.ndarray:
        """log L_k for each record: an ndarray of shape (n_rows, n_classes).

        columns: field name -> a sequence of raw values (str, number, None or NaN for
            missing), one per record. Fields the model reads but the mapping lacks are
            missing in every record (then replaced, where the MiningField says so).
        """
        if n_rows is None:
            lengths = {len(v) for v in columns.values()}
            if len(lengths) > 1:
                raise PMMLError(f"columns have different lengths {sorted(lengths)}; give "
                                "one value per record in every column")
            n_rows = lengths.pop() if lengths else 0
        jll = np.tile(self._base, (n_rows, 1))
        for name, column in columns.items():
            if name not in self._by_field:
                continue
            if len(column) != n_rows:
                raise PMMLError(f"column {name!r} has {len(column)} values, expected {n_rows}")
            uniques, inverse = factorize(column)
            prepared = [self._prepare(name, u, inverse, i) for i, u in enumerate(uniques)]
            for inp in self._by_field[name]:
                jll += (inp.log_factors(prepared, self._log_threshold) - inp.absent)[inverse]
        return jll

    def log_proba(self, columns: Mapping[str, Sequence], n_rows: int | None = None
                  ) -> np.ndarray:
        """log P(class | record), shape (n_rows, n_classes)."""
        jll = self.joint_log_likelihood(columns, n_rows)
        with np.errstate(invalid="ignore"):
            out = jll - logsumexp(jll, axis=1, keepdims=True)
        bad = np.flatnonzero(np.isnan(out).any(axis=1))
        if bad.size:
            raise PMMLError(f"record {bad[0] + 1}: every target value has likelihood 0 "
                            f"(threshold={self.threshold}); the document cannot score it")
        return out

    def predict_proba(self, columns: Mapping[str, Sequence], n_rows: int | None = None
                      ) -> np.ndarray:
        return np.exp(self.log_proba(columns, n_rows))

    def predict(self, columns: Mapping[str, Sequence], n_rows: int | None = None) -> list[str]:
        """The most probable target value per record (first in BayesOutput order on ties)."""
        return [self.classes[i] for i in np.argmax(self.joint_log_likelihood(columns, n_rows), 1)]

    def _prepare(self, name: str, raw, inverse: np.ndarray, unique_index: int):
        try:
            return self._fields[name].prepare(raw)
        except InvalidValue as exc:
            record = int(np.argmax(inverse == unique_index)) + 1
            raise PMMLError(f"record {record}: {exc}; fix the data, or set "
                            "invalidValueTreatment=\"asMissing\" on its MiningField") from None


def load_naive_bayes(source: str | Path | bytes) -> NaiveBayesDocument:
    """Read a PMML document (a path or its bytes) holding one NaiveBayesModel."""
    import io

    name = "<bytes>" if isinstance(source, bytes) else str(source)
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        return NaiveBayesDocument(*Reader(name).read(stream))
    except ET.ParseError as exc:
        raise PMMLError(f"'{name}' is not well-formed XML ({exc})") from None
    except (FileNotFoundError, IsADirectoryError):
        raise PMMLError(f"no PMML document at '{name}'; check the path") from None


def read_csv_columns(path: str | Path) -> tuple[dict[str, list], int]:
    """A CSV file with a header row -> ({column: values}, n_rows); empty cells are missing."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise PMMLError(f"'{path}' is empty; give a CSV file with a header row of "
                                "field names")
            if len(set(header)) != len(header):
                raise PMMLError(f"'{path}' names a column twice in its header")
            columns: dict[str, list] = {h: [] for h in header}
            lists = list(columns.values())
            n = 0
            for line_no, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise PMMLError(f"'{path}' line {line_no}: {len(row)} cells, the header "
                                    f"has {len(header)}")
                for values, cell in zip(lists, row):
                    values.append(cell if cell != "" else None)
                n += 1
    except (FileNotFoundError, IsADirectoryError):
        raise PMMLError(f"no CSV file at '{path}'; check the path") from None
    except UnicodeDecodeError as exc:
        raise PMMLError(f"'{path}' is not UTF-8 ({exc.reason}); re-encode it") from None
    return columns, n


def score_csv(pmml_path: str | Path, csv_path: str | Path) -> dict:
    """``textnb pmml-score``: the predicted value and the probabilities of every record."""
    doc = load_naive_bayes(pmml_path)
    columns, n_rows = read_csv_columns(csv_path)
    unknown = [c for c in columns if c not in doc.inputs]
    proba = doc.predict_proba(columns, n_rows)
    return {"target": doc.target, "classes": doc.classes,
            "predicted": [doc.classes[i] for i in np.argmax(proba, axis=1)],
            "probabilities": proba, "ignored_columns": unknown}
