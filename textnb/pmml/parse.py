"""Read a PMML ``NaiveBayesModel`` into log-factor tables (for :mod:`textnb.pmml.score`).

The document is streamed with ``iterparse``: each ``BayesInput`` is tabulated when it
ends and its elements are dropped, so a model of a hundred thousand inputs costs its
tables (inputs with as many values share one array), not its DOM. Every element is
checked against the nesting this module implements; anything else that could change
the numbers is refused with a :class:`PMMLError` naming it, and annotations
(``Header``, ``Extension``, ``ModelStats``, ``ModelExplanation``,
``ModelVerification``) are skipped. Field values are typed by their ``dataType`` and
checked by their ``Value``/``Interval`` lists and ``MiningField`` treatments.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import PMMLError
from .values import (
    DATA_TYPES,
    FieldSpec,
    InputTable,
    interval,
    number,
    parse_value,
    required,
)

__all__ = ["Reader"]

_NAMESPACE = re.compile(r"^(?:\{https?://www\.dmg\.org/PMML-\d_\d\})?(?P<local>[A-Za-z]\w*)$")
_SKIPPED = frozenset({"Extension", "Header", "MiningBuildTask", "ModelStats", "ModelExplanation",
                      "ModelVerification"})
_TARGET_USAGE = frozenset({"predicted", "target"})
# Which element may appear in which (anything not listed is refused, naming it).
_CHILDREN = {
    None: {"PMML"},
    "PMML": {"DataDictionary", "TransformationDictionary", "NaiveBayesModel"},
    "DataDictionary": {"DataField"},
    "DataField": {"Value", "Interval"},
    "TransformationDictionary": set(),
    "NaiveBayesModel": {"MiningSchema", "Output", "LocalTransformations", "BayesInputs",
                        "BayesOutput"},
    "MiningSchema": {"MiningField"},
    "Output": {"OutputField"},
    "LocalTransformations": set(),
    "BayesInputs": {"BayesInput"},
    "BayesInput": {"DerivedField", "PairCounts", "TargetValueStats"},
    "DerivedField": {"Discretize"},
    "Discretize": {"DiscretizeBin"},
    "DiscretizeBin": {"Interval"},
    "PairCounts": {"TargetValueCounts"},
    "TargetValueCounts": {"TargetValueCount"},
    "BayesOutput": {"TargetValueCounts"},
    "TargetValueStats": {"TargetValueStat"},
    "TargetValueStat": {"GaussianDistribution", "PoissonDistribution"},
}
# -- reading -------------------------------------------------------------------------

class Reader:
    """Streams a document: tabulates each input as it ends, then drops its elements."""

    def __init__(self, name: str):
        self.name = name
        self.fields: dict[str, FieldSpec] = {}
        self.mining: dict[str, dict] = {}
        self.pending: list[tuple] = []  # (input, PairCounts rows or stats) to tabulate
        self.model: dict | None = None
        self.output: tuple[str, list] | None = None
        self._tags: dict[str, str] = {}

    def read(self, stream) -> tuple:
        handlers = {"DataField": self._end_DataField, "MiningField": self._end_MiningField,
                    "OutputField": self._end_OutputField, "BayesInput": self._end_BayesInput,
                    "BayesOutput": self._end_BayesOutput, "NaiveBayesModel": self._end_model}
        root = None
        for _, elem in ET.iterparse(stream):  # "end" events: each element is complete
            tag = self._local(elem.tag)
            handler = handlers.get(tag)
            if handler is not None:
                if tag not in ("NaiveBayesModel", "BayesInput"):  # BayesInput checks its own
                    self._check(elem, tag)
                handler(elem)
                if tag != "NaiveBayesModel":
                    elem.clear()  # tabulated: a large model costs its tables, not its DOM
            root = elem
        tag = self._local(root.tag)
        if tag != "PMML":
            self._refuse(tag, None)
        self._check(root, "PMML")
        if self.model is None:
            raise PMMLError(f"'{self.name}' holds no NaiveBayesModel")
        return self._finish()

    def _local(self, tag: str) -> str:
        local = self._tags.get(tag)
        if local is None:
            m = _NAMESPACE.match(tag)
            local = self._tags[tag] = m["local"] if m else tag
        return local

    def _check(self, elem, tag: str) -> None:
        """Every element below elem may stand where it is (annotations are skipped)."""
        allowed = _CHILDREN.get(tag, ())
        for child in elem:
            child_tag = self._local(child.tag)
            if child_tag in _SKIPPED:
                continue
            if child_tag not in allowed:
                self._refuse(child_tag, tag)
            self._check(child, child_tag)

    def _refuse(self, tag: str, parent: str | None):
        if tag.startswith("{"):
            raise PMMLError(f"'{self.name}': element {tag} is not in a PMML namespace "
                            "(http://www.dmg.org/PMML-4_x); is this a PMML document?")
        if parent == "PMML" and tag.endswith(("Model", "Network", "Scorecard")):
            raise PMMLError(f"'{self.name}': PMML model element <{tag}> is not supported; "
                            "textnb scores NaiveBayesModel documents only (use a PMML engine "
                            "such as JPMML-Evaluator or PyPMML for other models)")
        if parent is None:
            raise PMMLError(f"'{self.name}': the root element is <{tag}>, not <PMML>")
        raise PMMLError(f"'{self.name}': PMML element <{tag}> in <{parent}> is not supported by "
                        "textnb's NaiveBayesModel scorer (it would change the probabilities); "
                        "score this document with a PMML engine such as JPMML-Evaluator")

    # -- element handlers (called at each element's end, children complete) -------------
    def _end_model(self, elem):
        if self.model is not None:
            raise PMMLError(f"'{self.name}' holds more than one NaiveBayesModel; textnb "
                            "scores one model per document")
        a = elem.attrib
        if a.get("functionName") != "classification":
            raise PMMLError(f"'{self.name}': NaiveBayesModel functionName="
                            f"{a.get('functionName')!r}; only 'classification' is defined")
        if a.get("isScorable", "true") == "false":
            raise PMMLError(f"'{self.name}': the NaiveBayesModel says isScorable=\"false\"")
        self.model = {"name": a.get("modelName"),
                      "threshold": number(a, "threshold", "NaiveBayesModel")}

    def _end_DataField(self, elem):
        a = elem.attrib
        name = required(a, "name", "DataField")
        fld = FieldSpec(name, a.get("optype", "categorical"), a.get("dataType", "string"))
        for child in elem:
            tag = self._local(child.tag)
            if tag == "Interval":
                fld.intervals.append(interval(child.attrib))
            elif tag == "Value":
                value = required(child.attrib, "value", "Value")
                prop = child.attrib.get("property", "valid")
                if prop == "missing":
                    fld.missing.add(value.strip())
                elif fld.data_type in DATA_TYPES:
                    try:
                        (fld.valid if prop == "valid" else fld.invalid).add(
                            parse_value(fld.data_type, value))
                    except ValueError:
                        raise PMMLError(f"'{self.name}': DataField {name!r} lists value "
                                        f"{value!r}, which is not a {fld.data_type}") from None
        self.fields[name] = fld

    def _end_MiningField(self, elem):
        self.mining[required(elem.attrib, "name", "MiningField")] = dict(elem.attrib)

    def _end_OutputField(self, elem):
        feature = elem.attrib.get("feature", "predictedValue")
        if feature not in ("predictedValue", "predictedDisplayValue", "probability"):
            raise PMMLError(f"'{self.name}': OutputField {elem.attrib.get('name')!r} has "
                            f"feature={feature!r}; textnb outputs the predicted value and "
                            "the probabilities only")

    def _end_BayesInput(self, elem):
        name = required(elem.attrib, "fieldName", "BayesInput")
        inp = InputTable(field=name, kind="counts")
        pairs: list[tuple[str, dict]] = []
        for child in elem:
            tag = self._local(child.tag)
            if tag == "PairCounts":
                pairs.append((required(child.attrib, "value", "PairCounts"),
                              self._counts(child, "PairCounts")))
            elif tag == "DerivedField":
                self._check(child, tag)
                self._read_discretize(inp, child)
            elif tag == "TargetValueStats":
                self._check(child, tag)
                inp.kind = "stats"
                pairs = [(None, self._stats(child))]
            elif tag not in _SKIPPED:
                self._refuse(tag, "BayesInput")
        if not pairs:
            raise PMMLError(f"'{self.name}': BayesInput {name!r} has no PairCounts")
        self.pending.append((inp, pairs))

    def _read_discretize(self, inp: InputTable, derived):
        (disc,) = [c for c in derived if self._local(c.tag) == "Discretize"] or [None]
        if disc is None:
            raise PMMLError(f"'{self.name}': the DerivedField of BayesInput {inp.field!r} "
                            "has no Discretize (the only mapping a BayesInput may use)")
        inp.field = required(disc.attrib, "field", "Discretize")
        inp.key_type = disc.attrib.get("dataType", derived.attrib.get("dataType", "string"))
        inp.map_missing_to = disc.attrib.get("mapMissingTo")
        inp.default_value = disc.attrib.get("defaultValue")
        inp.bins = []
        for b in disc:
            if self._local(b.tag) != "DiscretizeBin":
                continue
            (iv,) = [c for c in b if self._local(c.tag) == "Interval"] or [None]
            if iv is None:
                raise PMMLError(f"'{self.name}': a DiscretizeBin of {inp.field!r} has no Interval")
            inp.bins.append((required(b.attrib, "binValue", "DiscretizeBin"),
                             *interval(iv.attrib)))

    def _counts(self, elem, where: str) -> dict:
        counts: dict[str, float] = {}
        local = self._local
        for tvcs in elem:  # checks the nesting as it reads (the hot loop of a large model)
            tag = local(tvcs.tag)
            if tag != "TargetValueCounts":
                if tag not in _SKIPPED:
                    self._refuse(tag, where)
                continue
            for tvc in tvcs:
                tag = local(tvc.tag)
                if tag != "TargetValueCount":
                    if tag not in _SKIPPED:
                        self._refuse(tag, "TargetValueCounts")
                    continue
                if len(tvc):
                    self._check(tvc, tag)
                count = number(tvc.attrib, "count", "TargetValueCount")
                if count < 0:
                    raise PMMLError(f"'{self.name}': negative count {count} in {where}")
                counts[required(tvc.attrib, "value", "TargetValueCount")] = count
        return counts

    def _stats(self, elem) -> dict:
        stats = {}
        for tvs in elem:
            if self._local(tvs.tag) != "TargetValueStat":
                continue
            (dist,) = [c for c in tvs if self._local(c.tag) not in _SKIPPED] or [None]
            if dist is None:
                raise PMMLError(f"'{self.name}': a TargetValueStat has no distribution")
            kind = self._local(dist.tag)
            mean = number(dist.attrib, "mean", kind)
            var = number(dist.attrib, "variance", kind) if kind == "GaussianDistribution" else 0.0
            if (kind == "GaussianDistribution" and not var > 0) or (
                    kind == "PoissonDistribution" and not mean > 0):
                raise PMMLError(f"'{self.name}': {kind} with mean={mean}, variance={var} has "
                                "no density; the variance (Poisson: mean) must be > 0")
            stats[required(tvs.attrib, "value", "TargetValueStat")] = (kind, mean, var)
        return stats

    def _end_BayesOutput(self, elem):
        self.output = (required(elem.attrib, "fieldName", "BayesOutput"),
                       list(self._counts(elem, "BayesOutput").items()))

    # -- assembling -------------------------------------------------------------------
    def _finish(self) -> tuple:
        """(target, classes, class counts, threshold, fields, inputs, model name)."""
        if self.output is None:
            raise PMMLError(f"'{self.name}': the NaiveBayesModel has no BayesOutput")
        target, class_counts = self.output
        fields = {}
        for name, attrs in self.mining.items():
            if name not in self.fields:
                raise PMMLError(f"'{self.name}': MiningField {name!r} has no DataField")
            fields[name] = self._with_mining(self.fields[name], attrs)
        if target not in fields or fields[target].usage not in _TARGET_USAGE:
            raise PMMLError(f"'{self.name}': BayesOutput field {target!r} is not the "
                            "MiningSchema's target (usageType=\"target\")")
        ttype = fields[target].data_type
        classes = [value for value, _ in class_counts]
        index = {parse_value(ttype, value): i for i, value in enumerate(classes)}
        inputs = self._tabulate(fields, index, ttype)
        return (target, classes, np.array([c for _, c in class_counts]),
                self.model["threshold"], fields, inputs, self.model["name"])

    def _with_mining(self, fld: FieldSpec, attrs: dict) -> FieldSpec:
        fld.usage = attrs.get("usageType", "active")
        fld.optype = attrs.get("optype", fld.optype)
        if fld.usage != "active":
            return fld
        if fld.data_type not in DATA_TYPES:
            raise PMMLError(f"'{self.name}': field {fld.name!r} has dataType={fld.data_type!r}; "
                            f"textnb reads {', '.join(sorted(DATA_TYPES))}")
        if "missingValueReplacement" in attrs:
            fld.replacement = parse_value(fld.data_type, attrs["missingValueReplacement"])
        fld.invalid_treatment = attrs.get("invalidValueTreatment", "returnInvalid")
        if fld.invalid_treatment not in ("returnInvalid", "asIs", "asMissing", "asValue"):
            raise PMMLError(f"'{self.name}': invalidValueTreatment={fld.invalid_treatment!r} "
                            f"of field {fld.name!r} is not a PMML treatment")
        if fld.invalid_treatment == "asValue":
            fld.invalid_replacement = parse_value(fld.data_type, attrs["invalidValueReplacement"])
        fld.outliers = attrs.get("outliers", "asIs")
        fld.low = float(attrs.get("lowValue", -math.inf))
        fld.high = float(attrs.get("highValue", math.inf))
        return fld

    def _tabulate(self, fields: dict, index: dict, ttype: str) -> list[InputTable]:
        """Log-factor tables for every input; inputs with as many values share one array."""
        n_classes = len(index)
        columns: dict[str, int] = {}

        def column(inp: InputTable, target_value: str) -> int:
            try:
                j = columns[target_value] = index[parse_value(ttype, target_value)]
            except (KeyError, ValueError):
                raise PMMLError(f"'{self.name}': BayesInput {inp.field!r} names target "
                                f"value {target_value!r}, which BayesOutput does not "
                                "list") from None
            return j

        with np.errstate(divide="ignore"):
            log_threshold = math.log(self.model["threshold"])
        groups: dict[int, list[tuple[InputTable, np.ndarray]]] = {}
        for inp, pairs in self.pending:
            if inp.field not in fields or fields[inp.field].usage != "active":
                raise PMMLError(f"'{self.name}': BayesInput {inp.field!r} is not an active "
                                "field of the MiningSchema")
            if inp.kind == "stats":
                self._distribution(inp, pairs[0][1], n_classes, column)
                continue
            if inp.bins is None:
                inp.key_type = fields[inp.field].data_type
            counts = np.zeros((len(pairs), n_classes))
            for row, (value, by_class) in enumerate(pairs):
                try:
                    inp.keys[parse_value(inp.key_type, value)] = row
                except ValueError:
                    raise PMMLError(f"'{self.name}': PairCounts value {value!r} of "
                                    f"{inp.field!r} is not a {inp.key_type}") from None
                for target_value, count in by_class.items():
                    j = columns.get(target_value)
                    counts[row, column(inp, target_value) if j is None else j] = count
            groups.setdefault(len(pairs), []).append((inp, counts))
        for n_values, members in groups.items():
            counts = np.stack([c for _, c in members])
            with np.errstate(divide="ignore", invalid="ignore"):
                # the denominator rule: Σ over the input's values, per target value
                table = np.log(counts) - np.log(counts.sum(axis=1, keepdims=True))
            table[counts == 0] = log_threshold
            extra = np.zeros((len(members), 2, n_classes))
            extra[:, 0] = log_threshold  # a value no PairCounts lists: zero counts
            table = np.concatenate([table, extra], axis=1)  # last row: missing
            for g, (inp, _) in enumerate(members):
                inp.table = table[g]
        return [inp for inp, _ in self.pending]

    def _distribution(self, inp: InputTable, stats: dict, n_classes: int, column) -> None:
        params = np.full((n_classes, 2), np.nan)
        for value, (_, mean, var) in stats.items():
            params[column(inp, value)] = (mean, var)
        kinds = {kind for kind, _, _ in stats.values()}
        if np.isnan(params[:, 0]).any() or len(kinds) != 1:
            raise PMMLError(f"'{self.name}': TargetValueStats of {inp.field!r} must give one "
                            "kind of distribution for every target value")
        inp.kind = "gaussian" if kinds == {"GaussianDistribution"} else "poisson"
        inp.params = params
