"""Numeric features: Gaussian and kernel-density naive Bayes, the mixed filter, its PMML export."""

import functools
import math

import numpy as np
import pytest
from scipy.special import expit

from textnb.config import load_config
from textnb.errors import ConfigError, PMMLError
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.models.gaussian import GaussianNB
from textnb.models.kde import GRID_STEPS, KernelDensityNB, loo_bandwidth, loo_log_likelihood
from textnb.models.numeric import FEATURES, feature_matrix
from textnb.pmml import export_pmml, field_name, import_pmml, with_max_features
from textnb.pmml.score import load_naive_bayes
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX

# The encyclopedia's sex classification example (seed 003): height (feet), weight (lbs),
# foot size (inches); classes male (0) and female (1), equal priors.
HEIGHT_WEIGHT_FOOT = np.array([[6, 180, 12], [5.92, 190, 11], [5.58, 170, 12], [5.92, 165, 10],
                               [5, 100, 6], [5.5, 150, 8], [5.42, 130, 7], [5.75, 150, 9]])
SEX = np.array([0, 0, 0, 0, 1, 1, 1, 1])
SAMPLE = np.array([[6, 130, 8]])


@pytest.fixture
def encyclopedia():
    return GaussianNB(var_smoothing=0, class_prior=(0.5, 0.5)).fit(HEIGHT_WEIGHT_FOOT, SEX)


ARTICLE_MEAN = np.array([[5.855, 176.25, 11.25], [5.4175, 132.5, 7.5]])
ARTICLE_VAR = np.array([[3.5033e-02, 1.2292e+02, 9.1667e-01], [9.7225e-02, 5.5833e+02, 1.6667e+00]])
ARTICLE_DENSITY = np.array([[1.5789, 5.9881e-06, 1.3112e-03], [2.2346e-01, 1.6789e-02, 2.8669e-01]])
ARTICLE_NUMERATOR = np.array([6.1984e-09, 5.3778e-04])


def test_encyclopedia_worked_example(encyclopedia):
    g = encyclopedia
    assert g.mean_ == pytest.approx(ARTICLE_MEAN, rel=1e-12)
    assert g.var_ == pytest.approx(ARTICLE_VAR, rel=1e-4)  # sample variances (ddof = 1)
    # The article evaluates the densities with its table's rounded variances, and
    # multiplies the densities rounded to 5 digits; with those parameters textnb's
    # densities and numerators are the article's to its printed precision.
    g.var_ = ARTICLE_VAR
    densities = np.exp(g.feature_log_density(SAMPLE)[0])
    assert densities == pytest.approx(ARTICLE_DENSITY, rel=1e-4)
    assert np.exp(g.joint_log_likelihood(SAMPLE))[0] == pytest.approx(ARTICLE_NUMERATOR, rel=1e-4)
    # With the exact fitted variances the numerators move by at most 2.1e-4
    # (male: 6.19707e-09; female: 5.37791e-04), and the posterior is their ratio.
    fitted = GaussianNB(var_smoothing=0, class_prior=(0.5, 0.5)).fit(HEIGHT_WEIGHT_FOOT, SEX)
    numerators = np.exp(fitted.joint_log_likelihood(SAMPLE))[0]
    assert numerators == pytest.approx(ARTICLE_NUMERATOR, rel=2.5e-4)
    assert fitted.predict_proba(SAMPLE)[0, 1] == pytest.approx(
        numerators[1] / numerators.sum(), rel=1e-12)


def test_encyclopedia_example_as_pmml_target_value_stats(encyclopedia):
    """The fitted Gaussians as a PMML NaiveBayesModel: the spec's procedure gives the same."""
    g = encyclopedia
    names = ["height", "weight", "foot size"]
    stats = "".join(
        f'<BayesInput fieldName="{n}"><TargetValueStats>' + "".join(
            f'<TargetValueStat value="{c}"><GaussianDistribution mean="{float(g.mean_[i, k])!r}" '
            f'variance="{float(g.var_[i, k])!r}"/></TargetValueStat>'
            for i, c in enumerate(("male", "female"))) + "</TargetValueStats></BayesInput>"
        for k, n in enumerate(names))
    fields = "".join(f'<DataField name="{n}" optype="continuous" dataType="double"/>'
                     for n in names)
    doc = load_naive_bayes(f"""<PMML xmlns="http://www.dmg.org/PMML-4_4" version="4.4"><Header/>
<DataDictionary><DataField name="sex" optype="categorical" dataType="string"/>{fields}
</DataDictionary>
<NaiveBayesModel functionName="classification" threshold="1e-300"><MiningSchema>
<MiningField name="sex" usageType="target"/>{"".join(f'<MiningField name="{n}"/>' for n in names)}
</MiningSchema><BayesInputs>{stats}</BayesInputs><BayesOutput fieldName="sex"><TargetValueCounts>
<TargetValueCount value="male" count="4"/><TargetValueCount value="female" count="4"/>
</TargetValueCounts></BayesOutput></NaiveBayesModel></PMML>""".encode())
    p = doc.predict_proba({n: [v] for n, v in zip(names, SAMPLE[0])})[0]
    assert p == pytest.approx(g.predict_proba(SAMPLE)[0], rel=1e-12)
    assert p[1] == pytest.approx(5.3778e-04 / (5.3778e-04 + 6.1984e-09), rel=1e-8)


def test_gaussian_statistics_add_and_subtract_exactly():
    rng = np.random.RandomState(0)
    Z, y = rng.normal(size=(60, 3)) * [1, 10, 100], rng.randint(0, 2, 60)
    one = GaussianNB().fit(Z, y)
    chunked = GaussianNB()
    for part in np.array_split(np.arange(60), 4):
        chunked.partial_fit(Z[part], y[part])
    assert chunked.mean_ == pytest.approx(one.mean_, rel=1e-12)
    assert chunked.var_ == pytest.approx(one.var_, rel=1e-12)
    more = GaussianNB().fit(Z, y).partial_fit(Z[:10] + 3, y[:10]).unlearn(Z[:10] + 3, y[:10])
    assert more.var_ == pytest.approx(one.var_, rel=1e-9)
    assert more.class_count_ == pytest.approx(one.class_count_)


def test_gaussian_guards():
    Z = np.array([[1.0, 5], [1.0, 6], [1.0, 7], [2.0, 1], [3.0, 2], [4.0, 3]])
    y = np.array([0, 0, 0, 1, 1, 1])
    g = GaussianNB().fit(Z, y)  # feature 0 is constant in class 0: smoothing keeps it finite
    assert np.isfinite(g.log_likelihood([[1.5, 5]])).all()
    floored = GaussianNB(min_density=1e-300).fit(Z, y)
    assert floored.log_likelihood([[1e6, 5]]).min() >= 2 * math.log(1e-300)
    with pytest.raises(ValueError, match="NaN or infinite"):
        GaussianNB().fit([[np.nan]], [0])


def test_loo_bandwidth_is_bounded_when_values_repeat():
    rng = np.random.RandomState(1)
    counts = rng.poisson(3, size=400).astype(float)  # heavy ties, as link counts are
    h, at_edge = loo_bandwidth(counts)
    assert not at_edge and 0.05 < h < 3
    # Leave-one-value-out: a grid of ever smaller h does not run off to +inf.
    scores = loo_log_likelihood(counts, np.array([1e-3, 1e-2, 1e-1, 1.0]))
    assert np.isfinite(scores).all() and np.argmax(scores) >= 2


def test_loo_bandwidth_on_normal_data_near_silverman():
    x = np.random.RandomState(2).normal(size=500)
    h, at_edge = loo_bandwidth(x)
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    silverman = 0.9 * min(x.std(ddof=1), iqr / 1.34) * 500 ** -0.2
    assert not at_edge and silverman / 2 <= h <= silverman * 2
    assert len(GRID_STEPS) == 19


def test_kde_density_integrates_to_one_and_unlearns():
    rng = np.random.RandomState(3)
    Z = np.column_stack([rng.normal(size=80), rng.exponential(size=80)])
    y = np.repeat([0, 1], 40)
    grid = np.linspace(-8, 12, 4001)
    for k in range(2):
        kde = KernelDensityNB().fit(Z[:, [k]], y)
        density = np.exp(kde.log_likelihood(grid[:, None]))
        assert np.trapezoid(density, grid, axis=0) == pytest.approx([1.0, 1.0], abs=1e-6)
    kde = KernelDensityNB().fit(Z, y)
    before = kde.log_odds(Z[:5])
    kde.partial_fit(Z[:3] + 1, y[:3]).unlearn(Z[:3] + 1, y[:3])
    assert kde.log_odds(Z[:5]) == pytest.approx(before, rel=1e-12)
    with pytest.raises(ValueError, match="never added"):
        kde.unlearn(Z[:1] + 99, y[:1])


@pytest.fixture(scope="module")
def sample_messages():
    return list(iter_index(SAMPLE_INDEX))


@functools.lru_cache(maxsize=None)
def _fitted(event_model: str, numeric_model: str) -> SpamFilter:
    """A filter trained on the sample corpus (tests only read it)."""
    cfg = load_config(None, {"model.event_model": event_model,
                             "model.numeric_model": numeric_model})
    return SpamFilter(cfg).fit(iter_index(SAMPLE_INDEX))


@pytest.mark.parametrize("kind", ["gaussian", "kde"])
def test_mixed_filter_adds_the_numeric_evidence_and_saves(kind, sample_messages, tmp_path):
    mixed = _fitted("multinomial", kind)
    text = _fitted("multinomial", "none")
    raws = [m.raw for m in sample_messages]
    Z = feature_matrix(raws)
    assert Z.shape == (len(raws), len(FEATURES))
    assert mixed.log_odds(raws) == pytest.approx(text.log_odds(raws) + mixed.numeric.log_odds(Z),
                                                 rel=1e-12)
    again = store.loads(store.dumps(mixed))
    assert np.array_equal(again.log_odds(raws), mixed.log_odds(raws))
    with pytest.raises(ConfigError, match="use 'none', 'gaussian' or 'kde'"):
        load_config(None, {"model.numeric_model": "poisson"})


def _mixed_posterior(f, raws):
    X = f._matrix([f.tokens(r) for r in raws], grow=False)
    jll = f.model.joint_log_likelihood(X)
    return expit(jll[:, 1] - jll[:, 0] + f.numeric_log_odds(raws))


def test_bernoulli_gaussian_exports_target_value_stats(sample_messages):
    f = _fitted("bernoulli", "gaussian")
    data = export_pmml(f)
    assert b"<GaussianDistribution" in data and b'fieldName="textnb:log_size"' in data
    raws = [m.raw for m in sample_messages]
    doc = load_naive_bayes(data)
    X = f._matrix([f.tokens(r) for r in raws], grow=False).tocsc()
    columns = {field_name(f.vocabulary.tokens_[j]): (X[:, j].toarray().ravel() > 0).astype(int)
               for j in np.flatnonzero(X.getnnz(axis=0))}
    Z = feature_matrix(raws)
    columns.update({f"textnb:{name}": Z[:, k] for k, name in enumerate(FEATURES)})
    p = doc.predict_proba(columns, len(raws))[:, 1]
    assert np.abs(p - _mixed_posterior(f, raws)).max() < 1e-12
    copy = import_pmml(data)
    assert np.array_equal(copy.log_odds(raws), f.log_odds(raws))
    with pytest.raises(PMMLError, match="no kernel density"):
        export_pmml(_fitted("multinomial", "kde"))


@pytest.mark.parametrize("event_model", ["bernoulli", "multinomial"])
def test_engines_score_the_mixed_model(event_model, sample_messages, tmp_path):
    from test_pmml import _engines

    jpmml, pypmml = _engines()
    f = with_max_features(_fitted(event_model, "gaussian"), 300)  # fewer fields load faster
    path = tmp_path / "mixed.pmml"
    path.write_bytes(export_pmml(f))
    raws = [m.raw for m in sample_messages]
    expected = _mixed_posterior(f, raws)
    Z = feature_matrix(raws)
    X = f._matrix([f.tokens(r) for r in raws], grow=False)
    value = (lambda v: 1) if event_model == "bernoulli" else float
    kept = f.model.feature_mask_
    records = [{**{field_name(f.vocabulary.tokens_[j]): value(v)
                   for j, v in zip(X[i].indices, X[i].data) if kept[j]},
                **{f"textnb:{n}": float(Z[i, k]) for k, n in enumerate(FEATURES)}}
               for i in range(len(raws))]
    evaluator = jpmml.make_evaluator(str(path))
    model = pypmml.Model.fromFile(str(path))
    for score in (evaluator.evaluate, model.predict):
        got = np.array([score(r)["probability(spam)"] for r in records])
        assert np.abs(got - expected).max() < 1e-9
