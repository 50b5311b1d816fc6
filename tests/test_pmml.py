"""PMML export and import: round trips, the document's own numbers, and two real engines.

The engine tests run JPMML-Evaluator (in process, through JPype) and PyPMML (a Java
gateway process) on textnb's exported documents; they skip, saying what to install,
without a Java runtime or the packages (`.ci/run` installs them).
"""

import re
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.config import load_config
from textnb.errors import PMMLError
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.pmml import ESCAPED, export_pmml, field_name, import_pmml, token_of, with_max_features
from textnb.pmml.score import load_naive_bayes
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX

EVENT_MODELS = ["bernoulli", "multinomial"]
runner = CliRunner()


_SAMPLE: list = []


def _sample() -> tuple[list, list]:
    """The sample corpus's token lists and labels, tokenised once for the module."""
    if not _SAMPLE:
        f = SpamFilter()
        messages = list(iter_index(SAMPLE_INDEX))
        _SAMPLE.extend([[f.tokens(m.raw) for m in messages], [m.label for m in messages]])
    return _SAMPLE[0], _SAMPLE[1]


def _filter(event_model: str, **settings) -> SpamFilter:
    overrides = {"model.event_model": event_model, **settings}
    f = SpamFilter(load_config(None, overrides))
    f.learn_tokens(*_sample())
    return f


@pytest.fixture(scope="module")
def sample_tokens():
    return _sample()[0]


@pytest.mark.parametrize("event_model", EVENT_MODELS)
@pytest.mark.parametrize("settings", [{}, {"features.features": "tf", "features.min_df": 2},
                                      {"model.fit_prior": False, "features.max_features": 50}])
def test_round_trip_scores_identically(event_model, settings, sample_tokens):
    original = _filter(event_model, **settings)
    copy = import_pmml(export_pmml(original))
    pruned = not original.model.feature_mask_.all()
    for k in (0, 15):
        a = original.model.selected_log_odds(original._matrix(sample_tokens, grow=False), k)
        b = copy.model.selected_log_odds(copy._matrix(sample_tokens, grow=False), k)
        if pruned:  # the pruned columns (all zeros) are not exported: sums round apart
            assert np.abs(a - b).max() < 1e-9
        else:
            assert np.array_equal(a, b)
    assert copy.config == original.config and copy.n_learned == original.n_learned
    # ... and is a working model again: it saves, loads and learns like any other.
    again = store.loads(store.dumps(copy))
    assert np.array_equal(again.log_odds_tokens(sample_tokens), copy.log_odds_tokens(sample_tokens))


def test_bernoulli_document_scored_by_the_spec_procedure_equals_textnb(sample_tokens):
    f = _filter("bernoulli")
    doc = load_naive_bayes(export_pmml(f))
    X = f._matrix(sample_tokens, grow=False).tocsc()
    columns = {field_name(f.vocabulary.tokens_[j]): (X[:, j].toarray().ravel() > 0).astype(int)
               for j in np.flatnonzero(X.getnnz(axis=0))}
    p = doc.predict_proba(columns, len(sample_tokens))[:, doc.classes.index("spam")]
    assert np.abs(p - f.model.predict_proba(X.tocsr())[:, 1]).max() < 1e-12


def test_bernoulli_pair_counts_fold_in_the_pseudo_counts():
    f = _filter("bernoulli")
    text = export_pmml(f).decode()
    plain = [j for j, t in enumerate(f.vocabulary.tokens_) if re.fullmatch("[a-z]+", t)]
    j = max(plain, key=lambda j: f.model.feature_count_[1, j])  # the commonest spam word
    d_ham, d_spam = f.model.feature_count_[:, j].tolist()
    n_ham, n_spam = f.model.class_count_.tolist()
    a = f.model.alpha
    token = f.vocabulary.tokens_[j]
    block = re.search(f'<BayesInput fieldName="{token}">.*?</BayesInput>', text).group(0)
    present = '<PairCounts value="1"><TargetValueCounts><TargetValueCount value="ham" '
    assert f'{present}count="{d_ham + a!r}"/>' in block
    assert f'<TargetValueCount value="spam" count="{n_spam - d_spam + a!r}"/>' in block
    assert f'<TargetValueCount value="ham" count="{n_ham!r}"/>' in text  # BayesOutput


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_a_route_alpha_model_exports_exactly(event_model, sample_tokens):
    f = _filter(event_model, **{"model.route_alpha": 0.03})
    assert f.model.route_columns_.any() and not f.model.route_columns_.all()
    document = export_pmml(f)
    copy = import_pmml(document)
    assert copy.config.model.route_alpha == 0.03
    for k in (0, 15):
        a = f.model.selected_log_odds(f._matrix(sample_tokens, grow=False), k)
        assert np.array_equal(copy.model.selected_log_odds(copy._matrix(sample_tokens, grow=False),
                                                           k), a)
    if event_model == "bernoulli":  # textnb's own PMML scorer reads the per-term pseudo-counts
        doc = load_naive_bayes(document)
        X = f._matrix(sample_tokens, grow=False).tocsc()
        columns = {field_name(f.vocabulary.tokens_[j]): (X[:, j].toarray().ravel() > 0).astype(int)
                   for j in np.flatnonzero(X.getnnz(axis=0))}
        p = doc.predict_proba(columns, len(sample_tokens))[:, doc.classes.index("spam")]
        assert np.abs(p - f.model.predict_proba(X.tocsr())[:, 1]).max() < 1e-12
        plain = _filter(event_model, **{"model.route_alpha": 0.1}).model.log_odds(X.tocsr())
        assert np.abs(f.model.log_odds(X.tocsr()) - plain).max() > 1e-3  # route_alpha counts


@pytest.mark.parametrize("token", ["plain", "a\x00b", "tab\there", "new\nline", "\ud800x",
                                   ESCAPED + "x", "back\\slash", "ünï"])
def test_field_names_round_trip_and_are_xml_safe(token):
    name = field_name(token)
    assert token_of(name) == token
    assert not re.search("[\x00-\x1f\ud800-\udfff]", name)
    if token in ("plain", "back\\slash", "ünï"):
        assert name == token


def test_import_refuses_foreign_and_edited_documents(tmp_path):
    with pytest.raises(PMMLError, match="not a PMML document exported by textnb"):
        import_pmml(b'<PMML xmlns="http://www.dmg.org/PMML-4_4" version="4.4"><Header/>'
                    b'<DataDictionary/><NaiveBayesModel functionName="classification" '
                    b'threshold="0.1"/></PMML>')
    data = export_pmml(_filter("bernoulli")).decode()
    edited = re.sub(r'count="([0-9.]+)"', 'count="7.5"', data, count=3)
    with pytest.raises(PMMLError, match="was the document edited"):
        import_pmml(edited.encode())
    data = export_pmml(_filter("multinomial")).decode()
    edited = re.sub(r'coefficient="(-?[0-9.e-]+)"', 'coefficient="0.5"', data, count=1)
    with pytest.raises(PMMLError, match="was the document edited"):
        import_pmml(edited.encode())
    newer = data.replace('"format_version":1', '"format_version":2')
    with pytest.raises(PMMLError, match="upgrade textnb"):
        import_pmml(newer.encode())


def test_with_max_features_is_the_pruned_model(sample_tokens):
    f = _filter("multinomial")
    pruned = with_max_features(f, 40)
    direct = _filter("multinomial", **{"features.max_features": 40})
    assert np.array_equal(pruned.log_odds_tokens(sample_tokens),
                          direct.log_odds_tokens(sample_tokens))
    assert int(pruned.model.feature_mask_.sum()) == 40


def test_cli_export_and_import(tmp_path):
    model = tmp_path / "m.tnb"
    assert runner.invoke(app, ["train", "--model", str(model), "--index", str(SAMPLE_INDEX),
                               "--event-model", "bernoulli"]).exit_code == 0
    out = tmp_path / "m.pmml"
    result = runner.invoke(app, ["export", "--model", str(model), "--format", "pmml", str(out)])
    assert result.exit_code == 0, result.output
    assert "as a PMML NaiveBayesModel" in result.output and "max_discriminators" in result.output
    back = tmp_path / "back.tnb"
    result = runner.invoke(app, ["import", "--format", "pmml", str(out), "--model", str(back)])
    assert result.exit_code == 0, result.output
    assert "imported a bernoulli model" in result.output
    unlabelled = str(SAMPLE_INDEX.parent / "unlabelled")
    a = runner.invoke(app, ["classify", "--model", str(model), "--json", unlabelled])
    b = runner.invoke(app, ["classify", "--model", str(back), "--json", unlabelled])
    assert a.output == b.output
    bad = runner.invoke(app, ["export", "--model", str(model), "--format", "onnx", str(out)])
    assert bad.exit_code == 2 and "'onnx' is not a format" in bad.output
    missing = runner.invoke(app, ["import", str(tmp_path / "nope.pmml"), "--model", str(back)])
    assert missing.exit_code == 1 and "no PMML document at" in missing.output


# -- real PMML engines ------------------------------------------------------------------

def _engines():
    """The two PMML engines that check textnb's exports, or a skip naming their install."""
    if shutil.which("java") is None:
        pytest.skip("no Java runtime for the PMML engines: apt-get install default-jre-headless")
    reason = "the PMML engines are absent: pip install -e '.[pmml]'"
    return pytest.importorskip("jpmml_evaluator", reason=reason), pytest.importorskip(
        "pypmml", reason=reason)


def _jpmml_scorer(jpmml, path):
    """JPMML-Evaluator, one record at a time (its default builder takes <= 1000 fields)."""
    evaluator = jpmml.make_evaluator(str(path))
    return lambda records: [evaluator.evaluate(r) for r in records]


def _pypmml_scorer(pypmml, path):
    """PyPMML, all records in one call (a frame with 0 for absent terms): a call per
    record costs ~20 ms of gateway round trip, the evaluation far less."""
    import pandas as pd

    model = pypmml.Model.fromFile(str(path))

    def score(records):
        columns = sorted({name for r in records for name in r})
        frame = pd.DataFrame([[r.get(c, 0) for c in columns] for r in records], columns=columns)
        return model.predict(frame).to_dict("records")
    return score


@pytest.fixture(scope="module")
def spamassassin_split(shared_corpora):
    """Tokens and labels of the SpamAssassin train and test splits, tokenised once."""
    from textnb.mail.corpora import iter_corpus, split

    train, test = split(iter_corpus("spamassassin", shared_corpora))
    f = SpamFilter()
    return ([f.tokens(e.raw) for e in train], [e.label for e in train],
            [f.tokens(e.raw) for e in test])


# A full SpamAssassin model has 134,016 terms (a 70.8 MB Bernoulli, 30.7 MB multinomial
# document), which the engines take minutes to load and score (bench/pmml_engines.py
# measures them; docs/pmml.md has the numbers); here they score the model pruned to
# its 500 most frequent terms, every one of them an input of every record.
ENGINE_TERMS = 500


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_engines_agree_with_textnb_on_the_spamassassin_test_split(event_model, spamassassin_split,
                                                                  tmp_path):
    jpmml, pypmml = _engines()
    train_tokens, labels, test_tokens = spamassassin_split
    cfg = load_config(None, {"model.event_model": event_model,
                             "features.max_features": ENGINE_TERMS})
    f = SpamFilter(cfg)
    f.learn_tokens(train_tokens, labels)
    path = tmp_path / f"{event_model}.pmml"
    path.write_bytes(export_pmml(f))
    X = f._matrix(test_tokens, grow=False)
    expected = f.model.predict_proba(X)[:, 1]  # the posterior over every kept term
    names = [field_name(t) for t in f.vocabulary.tokens_]
    kept = f.model.feature_mask_
    value = (lambda v: 1) if event_model == "bernoulli" else float
    records = [{names[j]: value(v) for j, v in zip(X[i].indices, X[i].data) if kept[j]}
               for i in range(X.shape[0])]
    assert len(records) == 1233
    for name, make in (("JPMML-Evaluator", _jpmml_scorer), ("PyPMML", _pypmml_scorer)):
        score = make(jpmml if name.startswith("JPMML") else pypmml, path)
        got = np.array([row["probability(spam)"] for row in score(records)])
        diff = np.abs(got - expected).max()
        print(f"{event_model} {name}: largest |P(spam) difference| {diff:.3g}")
        assert diff < 1e-9, name


def test_engines_reproduce_the_spec_worked_example(tmp_path, pmml_spec_example):
    jpmml, pypmml = _engines()
    text = pmml_spec_example
    # The seed's transcription says https://; the PMML namespace (which JPMML checks) is http.
    text = text.replace("https://www.dmg.org", "http://www.dmg.org").replace(
        "</MiningSchema>", '</MiningSchema><Output><OutputField name="p1000" optype="continuous" '
        'dataType="double" feature="probability" value="1000"/></Output>')
    path = tmp_path / "spec.pmml"
    path.write_text(text)
    record = {"gender": "male", "no of claims": "2", "age of car": 1}
    ours = load_naive_bayes(path.read_bytes()).predict_proba(
        {k: [v] for k, v in record.items()})[0, 2]
    for score in (_jpmml_scorer(jpmml, path), _pypmml_scorer(pypmml, path)):
        assert score([record])[0]["p1000"] == pytest.approx(ours, rel=1e-14)
