"""PMML export on the SpamAssassin split: size, time, and two engines against textnb.

    python -m bench.pmml_engines [--event-model bernoulli] [--max-features N]
        [--engine jpmml --engine pypmml] [--limit N] [--json OUT]

Trains textnb (default settings, the chosen event model) on the corpora README's
training split, exports it as PMML 4.4, and scores the test split's term features
with JPMML-Evaluator and PyPMML (both need Java: apt-get install default-jre-headless;
pip install 'textnb[pmml]'), reporting the largest absolute difference from textnb's
own P(spam) over every kept term (what the document scores; textnb classify's evidence
selection is a different score). Also times textnb's own scorer (textnb.pmml.score) on
NaiveBayesModel documents, and the import.

JPMML-Evaluator is built with lax=True (it refuses "too many input fields" otherwise)
and without its default visitors: its ValueParser resolves each field's type by a
linear search, quadratic in the fields with a missingValueReplacement, which does not
finish in reasonable time on 134,016 fields. Evaluation is unchanged by either.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from textnb.config import load_config
from textnb.mail.corpora import iter_corpus, split
from textnb.pmml import export_pmml, field_name, import_pmml, with_max_features
from textnb.spamfilter import SpamFilter


def engine_scorer(name: str, path: Path):
    if name == "jpmml":
        import jpmml_evaluator as jp

        backend = jp.make_backend("jpype")
        builder = jp.LoadingModelEvaluatorBuilder(backend, lax=True)
        builder.javaModelEvaluatorBuilder.setVisitors(
            backend.newObject("org.jpmml.model.visitors.VisitorBattery"))
        evaluator = builder.loadFile(str(path)).build()
        return lambda r: evaluator.evaluate(r)["probability(spam)"]
    from pypmml import Model

    model = Model.fromFile(str(path))
    return lambda r: model.predict(r)["probability(spam)"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--event-model", action="append", choices=["bernoulli", "multinomial"])
    parser.add_argument("--max-features", type=int, default=0)
    parser.add_argument("--engine", action="append", choices=["jpmml", "pypmml"])
    parser.add_argument("--limit", type=int, default=0, help="score only the first N test messages")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    train, test = split(iter_corpus("spamassassin"))
    tokenizer = SpamFilter()
    start = time.perf_counter()
    train_tokens = [tokenizer.tokens(e.raw) for e in train]
    test_tokens = [tokenizer.tokens(e.raw) for e in test]
    if args.limit:
        test_tokens = test_tokens[:args.limit]
    print(f"tokenised {len(train) + len(test)} messages in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)
    results = []
    for event_model in args.event_model or ["bernoulli", "multinomial"]:
        f = SpamFilter(load_config(None, {"model.event_model": event_model}))
        f.learn_tokens(train_tokens, [e.label for e in train])
        if args.max_features:
            f = with_max_features(f, args.max_features)
        row: dict = {"event_model": event_model, "terms": int(f.model.feature_mask_.sum())}
        start = time.perf_counter()
        data = export_pmml(f)
        row.update(export_seconds=round(time.perf_counter() - start, 2), size_bytes=len(data))
        path = Path(tempfile.mkdtemp()) / f"{event_model}.pmml"
        path.write_bytes(data)
        start = time.perf_counter()
        import_pmml(path)
        row["import_seconds"] = round(time.perf_counter() - start, 2)
        X = f._matrix(test_tokens, grow=False)
        expected = f.model.predict_proba(X)[:, 1]
        names = [field_name(t) for t in f.vocabulary.tokens_]
        kept = f.model.feature_mask_
        value = (lambda v: 1) if event_model == "bernoulli" else float
        records = [{names[j]: value(v) for j, v in zip(X[i].indices, X[i].data) if kept[j]}
                   for i in range(X.shape[0])]
        if event_model == "bernoulli":
            from textnb.pmml.score import load_naive_bayes

            start = time.perf_counter()
            doc = load_naive_bayes(path)
            row["textnb_scorer_load_seconds"] = round(time.perf_counter() - start, 2)
            columns = {n: np.array([1 if n in r else 0 for r in records])
                       for n in {n for r in records for n in r}}
            got = doc.predict_proba(columns, len(records))[:, 1]
            row["textnb_scorer_max_abs_diff"] = float(np.abs(got - expected).max())
        for engine in args.engine or ["jpmml", "pypmml"]:
            start = time.perf_counter()
            score = engine_scorer(engine, path)
            loaded = time.perf_counter()
            got = np.array([score(r) for r in records])
            row[engine] = {"load_seconds": round(loaded - start, 1),
                           "score_seconds": round(time.perf_counter() - loaded, 1),
                           "max_abs_diff": float(np.abs(got - expected).max())}
        print(json.dumps(row))
        results.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
