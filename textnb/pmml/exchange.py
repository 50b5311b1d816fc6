"""Export a trained filter as PMML 4.4, and import textnb's own PMML exports again.

The model classes do not know PMML exists: this module reads their counts and writes
the document, and builds a :class:`~textnb.spamfilter.SpamFilter` back from one.

Bernoulli -> ``NaiveBayesModel``
    One ``BayesInput`` per kept term, with ``PairCounts`` for present (``1``) and
    absent (``0``). The Lidstone pseudo-count is folded into the real-valued counts:

        count[1, c] = D_cj + α,   count[0, c] = D_c - D_cj + α

    so the spec's denominator rule, count / Σ_v count[v, c] = (D_cj + α) / (D_c + 2α),
    is textnb's p_cj exactly, and every count is > 0 (the ``threshold`` never applies).
    ``BayesOutput`` holds the class counts D_c (or the fixed prior, scaled), which the
    procedure uses for the prior only.

Multinomial -> ``RegressionModel``
    A NaiveBayesModel multiplies one factor P(value | class) per input, and the
    denominator rule renormalises each input's counts over its listed values. The
    multinomial's per-term factor θ_cj^x is not a distribution over x (Σ_x θ^x ≠ 1, and
    differently so per class), so no honest table of counts reproduces it. Its log is
    linear in x, though: log P(spam|x) - log P(ham|x) = b + Σ_j w_j x_j with
    b = log P(spam) - log P(ham), w_j = log θ_spam,j - log θ_ham,j. That is a
    ``RegressionModel`` with ``normalizationMethod="logit"``: P(spam) = 1 / (1 + e^-y),
    P(ham) = 1 - P(spam). The softmax form with one table per class is the same model,
    but PyPMML 1.5.8 exponentiates softmax inputs without subtracting their maximum, so
    per-class tables (y ≈ -2000) give 0/0 and even y = 800 against 0 overflows: NaN.

Input schema
    One field per kept term, named by the token (``subject:free``, ``url:example.com``);
    a token with characters XML 1.0 cannot hold is named ``textnb-escaped:`` + its
    ``unicode_escape`` form. Bernoulli fields are categorical integers 0/1 (presence);
    multinomial fields are doubles holding textnb's feature value (1 for presence with
    ``features = "binary"``, the default; the term count with ``"tf"``). Every field has
    ``missingValueReplacement="0"``: a record lists only the terms a message holds.
    Output fields ``probability(ham)`` / ``probability(spam)`` (renamed if a token
    takes the name) and the target ``class``.

What the document scores is the naive Bayes posterior over every kept term, which is
what textnb computes with ``model.max_discriminators = 0``; evidence selection (the k
strongest tokens of each message) and a tuned calibration are not PMML-expressible and
are carried only in textnb's ``Extension`` (with the config, counts the standard
elements cannot hold exactly, and the training totals), so :func:`import_pmml` gives
back a filter that scores identically in every mode.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from .. import __version__
from ..errors import NotFittedError, PMMLError
from ..labels import LABELS
from ..modelfile import store
from ..modelfile.checks import check_model, loads_json, model_config
from ..models.evidence import header_columns, selection_text
from ..models.naive_bayes import EVENT_MODELS
from ..spamfilter import SpamFilter

__all__ = ["export_pmml", "import_pmml", "pmml_model", "with_max_features", "field_name",
           "token_of"]

PMML_NS = "http://www.dmg.org/PMML-4_4"
FORMAT_NAME = "textnb-pmml"
FORMAT_VERSION = 1
CLASSES = LABELS  # textnb's label codes 0 and 1
ESCAPED = "textnb-escaped:"
# Characters an XML 1.0 attribute cannot hold, plus tab/CR/LF (kept as character
# references by the spec, but normalised to spaces by careless readers).
_XML_UNSAFE = re.compile("[\x00-\x08\x09\x0a\x0b\x0c\x0d\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Below every probability a textnb model holds (and below a Gaussian density 37 σ out),
# so neither engine substitutes it: zero counts do not occur, and textnb's numeric
# model floors its densities at the same value.
THRESHOLD = 1e-300


def field_name(token: str) -> str:
    """The PMML field name of a token (reversible: :func:`token_of`)."""
    if _XML_UNSAFE.search(token) or token.startswith(ESCAPED):
        return ESCAPED + token.encode("unicode_escape").decode("ascii")
    return token


def token_of(name: str) -> str:
    """The token a PMML field name stands for."""
    if name.startswith(ESCAPED):
        return name[len(ESCAPED):].encode("ascii").decode("unicode_escape")
    return name


# -- export ---------------------------------------------------------------------------

def with_max_features(spam_filter: SpamFilter, max_features: int) -> SpamFilter:
    """A copy of the filter pruned to its ``max_features`` most frequent terms.

    Its scores are those of the same training data with ``features.max_features`` set
    (the counts are shared, only the mask changes); for PMML consumers that cannot
    take a hundred thousand input fields.
    """
    from dataclasses import replace

    if max_features <= 0:
        raise PMMLError(f"max_features={max_features}; give a positive number of terms")
    cfg = spam_filter.config
    config = replace(cfg, features=replace(cfg.features, max_features=max_features))
    pruned = SpamFilter.from_counts(
        config, spam_filter.vocabulary.tokens_, spam_filter.model.class_count_.copy(),
        spam_filter.model.feature_count_.copy(), spam_filter.doc_freq_,
        n_learned=dict(spam_filter.n_learned))
    pruned.numeric = getattr(spam_filter, "numeric", None)
    return pruned


def pmml_model(event_model: str) -> str:
    """The PMML element that holds a model of ``event_model``: its class's ``pmml_model``
    (textnb.models.naive_bayes.EVENT_MODELS), 'NaiveBayesModel' or 'RegressionModel' (module
    docstring). PMMLError for an event model that has neither."""
    form = EVENT_MODELS[event_model].pmml_model
    if form not in ("NaiveBayesModel", "RegressionModel"):
        expressible = " and ".join(name for name, cls in EVENT_MODELS.items()
                                   if cls.pmml_model in ("NaiveBayesModel", "RegressionModel"))
        raise PMMLError(f"a {event_model} model has no PMML form textnb can write (it exports "
                        f"{expressible} models); keep the model file, or train one of those "
                        "(model.event_model) to export")
    return form


def export_pmml(spam_filter: SpamFilter) -> bytes:
    """The PMML 4.4 document (UTF-8 bytes) of a trained filter."""
    model = spam_filter.model
    if not hasattr(model, "class_count_"):
        raise NotFittedError("the filter is not trained; nothing to export")
    model._check_fitted()
    tables = pmml_model(model.event_model) == "NaiveBayesModel"  # else a regression
    kept = np.flatnonzero(model.feature_mask_)
    if kept.size == 0:
        raise PMMLError("the model keeps no terms (all pruned); lower features.min_df")
    tokens = spam_filter.vocabulary.tokens_.take(kept)
    names = [field_name(t) for t in tokens]
    numeric = getattr(spam_filter, "numeric", None)
    numeric_names = []
    taken = set(names)
    if numeric is not None:
        from ..models.numeric import export_parameters

        numeric_params = export_parameters(numeric)
        numeric_names = [_unique(f"textnb:{n}", taken) for n in numeric_params["features"]]
    target = _unique("class", taken)
    outputs = [_unique(f"probability({c})", taken) for c in CLASSES]
    meta = _meta(spam_filter, kept, tables, numeric_names)

    out: list[str] = ['<?xml version="1.0" encoding="UTF-8"?>\n',
                      f'<PMML xmlns="{PMML_NS}" version="4.4">\n',
                      f'<Header description={quoteattr(_description(spam_filter))}>'
                      f'<Application name="textnb" version={quoteattr(__version__)}/></Header>\n',
                      f'<DataDictionary numberOfFields="{len(names) + len(numeric_names) + 1}">\n',
                      f'<DataField name={quoteattr(target)} optype="categorical" dataType="string">'
                      + "".join(f'<Value value="{c}"/>' for c in CLASSES) + "</DataField>\n"]
    term_type = ('optype="categorical" dataType="integer"' if tables
                 else 'optype="continuous" dataType="double"')
    out.extend(f"<DataField name={quoteattr(n)} {term_type}/>\n" for n in names)
    out.extend(f'<DataField name={quoteattr(n)} optype="continuous" dataType="double"/>\n'
               for n in numeric_names)
    out.append("</DataDictionary>\n")
    extension = (f'<Extension extender="textnb" name="{FORMAT_NAME}">'
                 f"{escape(json.dumps(meta, separators=(',', ':')))}</Extension>\n")
    mining = ([f'<MiningSchema>\n<MiningField name={quoteattr(target)} usageType="target"/>\n']
              + [f'<MiningField name={quoteattr(n)} missingValueReplacement="0"/>\n'
                 for n in names]
              + [f"<MiningField name={quoteattr(n)}/>\n" for n in numeric_names]
              + ["</MiningSchema>\n<Output>\n"]
              + [f'<OutputField name={quoteattr(o)} optype="continuous" dataType="double" '
                 f'feature="probability" value="{c}"/>\n' for o, c in zip(outputs, CLASSES)]
              + ["</Output>\n"])
    algorithm = (f"textnb {model.event_model} naive Bayes, Lidstone alpha={model.alpha!r}"
                 + (f" (the route's tokens {model.route_alpha!r})" if model.per_column_alpha
                    else "")
                 + (f", {numeric_params['kind']} numeric features" if numeric_names else ""))
    if tables:
        out.append(f'<NaiveBayesModel modelName="textnb" functionName="classification" '
                   f'algorithmName={quoteattr(algorithm)} threshold="{THRESHOLD!r}">\n')
        out.append(extension)
        out.extend(mining)
        out.append("<BayesInputs>\n")
        out.extend(_bayes_inputs(model, kept, names))
        if numeric_names:
            out.extend(_gaussian_inputs(numeric_params, numeric_names))
        out.append(f"</BayesInputs>\n<BayesOutput fieldName={quoteattr(target)}>"
                   f"{_target_counts(_prior_counts(model))}</BayesOutput>\n"
                   "</NaiveBayesModel>\n</PMML>\n")
    else:
        out.append(f'<RegressionModel modelName="textnb" functionName="classification" '
                   f'algorithmName={quoteattr(algorithm)} normalizationMethod="logit">\n')
        out.append(extension)
        out.extend(mining)
        flp = model.feature_log_prob_[:, kept]
        weights = flp[1] - flp[0]
        intercept = float(model.class_log_prior_[1] - model.class_log_prior_[0])
        predictors = [f"<NumericPredictor name={quoteattr(n)} coefficient=\"{w!r}\"/>\n"
                      for n, w in zip(names, weights.tolist())]
        if numeric_names:
            quadratic, extra = _gaussian_predictors(numeric_params, numeric_names)
            intercept += extra
            predictors.extend(quadratic)
        out.append(f'<RegressionTable targetCategory="spam" intercept="{intercept!r}">\n')
        out.extend(predictors)
        out.append('</RegressionTable>\n<RegressionTable targetCategory="ham" intercept="0"/>\n'
                   "</RegressionModel>\n</PMML>\n")
    return "".join(out).encode("utf-8")


def _meta(spam_filter: SpamFilter, kept: np.ndarray, tables: bool, numeric_names) -> dict:
    """textnb's Extension; ``tables``: the document is a NaiveBayesModel (its PairCounts
    hold the counts), else a RegressionModel."""
    model = spam_filter.model
    meta = {**store.description(spam_filter, FORMAT_NAME, FORMAT_VERSION),
            "class_count": model.class_count_.tolist()}
    if not tables:  # the regression holds logs of ratios; the counts go here
        meta["feature_count"] = model.feature_count_[:, kept].tolist()
    if not tables and spam_filter.config.features.features == "tf":
        meta["doc_freq"] = spam_filter.doc_freq_[kept].tolist()  # not the counts' sum
    if numeric_names:
        from ..models.numeric import to_json

        meta["numeric"] = dict(to_json(spam_filter.numeric), fields=numeric_names)
    return meta


def _bayes_inputs(model, kept: np.ndarray, names: list[str]):
    # Each column's own pseudo-count (model.route_alpha): a consumer's P(term | class),
    # present / (present + absent), is then (D_cj + α_j) / (D_c + 2α_j), textnb's own.
    alpha = model.column_alpha(kept)
    fc = model.feature_count_[:, kept]
    cc = model.class_count_.reshape(-1, 1)
    present = (fc + alpha).T.tolist()
    absent = (cc - fc + alpha).T.tolist()
    for name, p, a in zip(names, present, absent):
        yield (f"<BayesInput fieldName={quoteattr(name)}>"
               f'<PairCounts value="1">{_target_counts(p)}</PairCounts>'
               f'<PairCounts value="0">{_target_counts(a)}</PairCounts></BayesInput>\n')


def _gaussian_inputs(params: dict, names: list[str]):
    for k, name in enumerate(names):
        stats = "".join(
            f'<TargetValueStat value="{c}"><GaussianDistribution '
            f'mean="{params["mean"][i][k]!r}" variance="{params["var"][i][k]!r}"/>'
            "</TargetValueStat>" for i, c in enumerate(CLASSES))
        yield (f"<BayesInput fieldName={quoteattr(name)}><TargetValueStats>{stats}"
               "</TargetValueStats></BayesInput>\n")


def _gaussian_predictors(params: dict, names: list[str]) -> tuple[list[str], float]:
    """log N(x; μ_s, σ_s²) - log N(x; μ_h, σ_h²) as a quadratic in x, plus its constant."""
    mean, var = np.asarray(params["mean"]), np.asarray(params["var"])
    a2 = -0.5 / var[1] + 0.5 / var[0]
    a1 = mean[1] / var[1] - mean[0] / var[0]
    a0 = (-0.5 * mean[1] ** 2 / var[1] - 0.5 * np.log(2 * np.pi * var[1])
          + 0.5 * mean[0] ** 2 / var[0] + 0.5 * np.log(2 * np.pi * var[0]))
    lines = []
    for k, name in enumerate(names):
        lines.append(f'<NumericPredictor name={quoteattr(name)} exponent="2" '
                     f'coefficient="{float(a2[k])!r}"/>\n')
        lines.append(f'<NumericPredictor name={quoteattr(name)} coefficient="{float(a1[k])!r}"/>\n')
    return lines, float(a0.sum())


def _prior_counts(model) -> list[float]:
    """BayesOutput counts whose ratios are the model's prior."""
    return (np.exp(model.class_log_prior_) * model.class_count_.sum()).tolist() \
        if (model.class_prior is not None or not model.fit_prior) else model.class_count_.tolist()


def _target_counts(counts) -> str:
    return ("<TargetValueCounts>" + "".join(
        f'<TargetValueCount value="{c}" count="{float(n)!r}"/>' for c, n in zip(CLASSES, counts))
        + "</TargetValueCounts>")


def _unique(name: str, taken: set) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _description(spam_filter: SpamFilter) -> str:
    m = spam_filter.model
    n = spam_filter.n_learned
    return (f"textnb {m.event_model} naive Bayes spam filter: P(spam | terms) over "
            f"{int(m.feature_mask_.sum())} terms, trained on {n.get('spam', 0)} spam and "
            f"{n.get('ham', 0)} ham")


def export_file(model_path: Path, out: Path, max_features: int = 0) -> dict:
    """``textnb export``: write a model file's PMML document atomically; returns a summary."""
    import time

    from ..modelfile import store

    spam_filter = store.load(model_path)
    start = time.perf_counter()
    if max_features:
        spam_filter = with_max_features(spam_filter, max_features)
    data = export_pmml(spam_filter)
    store.atomic_write(Path(out), data)
    m = spam_filter.model
    notes = []
    mc = spam_filter.config.model
    if mc.max_discriminators:
        chosen = selection_text(mc.max_discriminators, mc.max_pair_discriminators, mc.evidence,
                                spam_filter.config.tokenizer.bigrams, mc.header_places,
                                mc.clues_per_header_field, mc.tile_word_pairs,
                                mc.header_discriminators)
        notes.append(f"the document scores with every kept term; textnb classify uses "
                     f"{chosen} (model.max_discriminators), so its P(spam) equals the "
                     "document's only with max_discriminators = 0")
    if spam_filter.calibration is not None:
        notes.append("the tuned calibration is not part of the document's probabilities")
    if max_features:
        notes.append(f"pruned to the {max_features:,} most frequent terms: the scores are "
                     f"those of this model with features.max_features = {max_features}")
    return {"pmml": str(out), "model": str(model_path), "event_model": m.event_model,
            "pmml_model": pmml_model(m.event_model),
            "terms": int(m.feature_mask_.sum()), "size_bytes": len(data),
            "seconds": round(time.perf_counter() - start, 3), "notes": notes}


def import_file(pmml_path: Path, model_path: Path) -> dict:
    """``textnb import``: a textnb PMML export back to a model file; returns a summary."""
    from ..modelfile import store

    spam_filter = import_pmml(pmml_path)
    store.save(spam_filter, model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), pmml=str(pmml_path))
    return summary


# -- import ---------------------------------------------------------------------------

def import_pmml(source: str | Path | bytes) -> SpamFilter:
    """A filter from a document :func:`export_pmml` wrote; PMMLError for anything else,
    and textnb.modelfile.checks' InvalidModelError (a ModelFormatError) for a model that
    breaks the rules every model file and text dump is held to."""
    name = "<bytes>" if isinstance(source, bytes) else str(source)
    where = f"PMML document '{name}'"
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with open(source, "rb") if not isinstance(source, bytes) else io.BytesIO(source) as fh:
            if fh.read(4) == b"PK\x03\x04":
                raise PMMLError(f"'{name}' is a textnb model file, not a PMML document; "
                                f"'textnb export --model {name} OUT.pmml' makes one from it")
        doc = _read_export(stream, name)
    except ET.ParseError as exc:
        raise PMMLError(f"'{name}' is not well-formed XML ({exc})") from None
    except (FileNotFoundError, IsADirectoryError):
        raise PMMLError(f"no PMML document at '{name}'; check the path") from None
    meta = doc["meta"]
    try:
        config = model_config(meta["config"], where)
        class_count = np.asarray(meta["class_count"], dtype=np.float64)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PMMLError(f"'{name}': textnb's Extension is damaged ({exc})") from None
    m = config.model
    tables = pmml_model(m.event_model) == "NaiveBayesModel"
    if tables != (doc["kind"] == "NaiveBayesModel"):
        raise PMMLError(f"'{name}': a {doc['kind']} cannot hold a {m.event_model} model")
    terms = doc["terms"]
    n = len(terms)
    if tables:
        present = np.array([doc["pairs"][t]["1"] for t in terms]).T.reshape(2, n)
        absent = np.array([doc["pairs"][t]["0"] for t in terms]).T.reshape(2, n)
        alpha = _pseudo_counts(m, terms)
        counts = present - alpha
        snapped = np.round(counts)
        counts = np.where(np.abs(counts - snapped) < 1e-6, snapped, counts)
        if not (np.allclose(counts + alpha, present, rtol=1e-12, atol=0)
                and np.allclose(class_count.reshape(-1, 1) - counts + alpha, absent,
                                rtol=1e-9, atol=1e-9)):
            alphas = f"alpha={m.alpha}" + (f", route_alpha={m.route_alpha}"
                                           if m.route_alpha is not None else "")
            raise PMMLError(f"'{name}': PairCounts disagree with the class counts and "
                            f"{alphas} in textnb's Extension; was the document edited?")
    else:
        try:
            counts = np.asarray(meta["feature_count"], dtype=np.float64).reshape(2, n)
        except (KeyError, TypeError, ValueError) as exc:
            raise PMMLError(f"'{name}': textnb's Extension is damaged ({exc})") from None
    doc_freq = meta["doc_freq"] if "doc_freq" in meta else counts.sum(axis=0)
    try:
        spam_filter = SpamFilter.from_counts(
            config, [token_of(t) for t in terms], class_count, counts, doc_freq,
            threshold=meta.get("threshold"), calibration=meta.get("calibration"))
    except ValueError as exc:
        raise PMMLError(f"'{name}': textnb's Extension is damaged ({exc})") from None
    spam_filter.n_learned = {k: int(v) for k, v in meta.get("n_learned", {}).items()}
    if "numeric" in meta:
        from ..models.numeric import from_json

        spam_filter.numeric = from_json(meta["numeric"])
    check_model(spam_filter, where)  # before the coefficients: logs of bad counts say less
    if not tables:
        model = spam_filter.model
        weights = model.feature_log_prob_[1] - model.feature_log_prob_[0]
        stored = np.array([doc["coefficients"][t] for t in terms])
        if not np.allclose(weights, stored, rtol=0, atol=1e-9):
            raise PMMLError(f"'{name}': the coefficients disagree with the counts in textnb's "
                            "Extension; was the document edited?")
    return spam_filter


def _pseudo_counts(m, terms: list[str]):
    """The pseudo-count folded into each term's PairCounts: alpha, or with a route_alpha of
    its own that for the route's terms (``textnb.models.evidence.header_columns``)."""
    if m.route_alpha is None or m.route_alpha == m.alpha:
        return m.alpha
    return np.where(header_columns([token_of(t) for t in terms]), m.route_alpha, m.alpha)


def _read_export(stream, name: str) -> dict:
    """The parts of a textnb export that import needs, streamed."""
    not_ours = (f"'{name}' is not a PMML document exported by textnb (no textnb Extension); "
                "score other documents with 'textnb pmml-score'")
    doc: dict = {"kind": None, "meta": None, "terms": [], "pairs": {}, "coefficients": {}}
    numeric_fields: set = set()
    target = None
    for event, elem in ET.iterparse(stream, events=("start", "end")):
        tag = elem.tag.rpartition("}")[2]
        if event == "start":
            if tag in ("NaiveBayesModel", "RegressionModel", "TreeModel", "MiningModel"):
                if doc["kind"] is not None:
                    raise PMMLError(not_ours)
                doc["kind"] = tag
            continue
        if tag == "Extension" and elem.get("extender") == "textnb":
            try:
                doc["meta"] = loads_json(elem.text or "", "textnb's Extension")
            except json.JSONDecodeError as exc:
                raise PMMLError(f"'{name}': textnb's Extension is not JSON ({exc})") from None
            if not isinstance(doc["meta"], dict) or doc["meta"].get("format") != FORMAT_NAME:
                raise PMMLError(not_ours)
            _check_version(doc["meta"], name)
            numeric_fields = set(doc["meta"].get("numeric", {}).get("fields", []))
        elif tag == "MiningField":
            if elem.get("usageType") in ("target", "predicted"):
                target = elem.get("name")
            elif elem.get("name") not in numeric_fields:
                doc["terms"].append(elem.get("name"))
            elem.clear()
        elif tag == "BayesInput":
            field = elem.get("fieldName")
            if field not in numeric_fields:
                pairs = {}
                for pc in elem.iter(f"{{{PMML_NS}}}PairCounts"):
                    tvc = {t.get("value"): float(t.get("count"))
                           for t in pc.iter(f"{{{PMML_NS}}}TargetValueCount")}
                    pairs[pc.get("value")] = [tvc.get(c, 0.0) for c in CLASSES]
                if set(pairs) != {"0", "1"}:
                    raise PMMLError(f"'{name}': BayesInput {field!r} is not a textnb term "
                                    "(PairCounts for 1 and 0)")
                doc["pairs"][field] = pairs
            elem.clear()
        elif tag == "NumericPredictor":
            if elem.get("name") not in numeric_fields:
                doc["coefficients"][elem.get("name")] = float(elem.get("coefficient"))
            elem.clear()
    if doc["meta"] is None or doc["kind"] is None or target is None:
        raise PMMLError(not_ours)
    table = doc["pairs"] if doc["kind"] == "NaiveBayesModel" else doc["coefficients"]
    missing = [t for t in doc["terms"] if t not in table]
    if missing or len(table) != len(doc["terms"]):
        raise PMMLError(f"'{name}': {len(missing) or abs(len(table) - len(doc['terms']))} "
                        "term fields and model inputs do not match; was the document edited?")
    return doc


def _check_version(meta: dict, name: str) -> None:
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise PMMLError(f"'{name}' was exported as textnb PMML format {version}; this textnb "
                        f"({__version__}) reads format {FORMAT_VERSION}; "
                        + ("upgrade textnb" if newer else "export it again with this textnb"))

