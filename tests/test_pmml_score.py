"""The general PMML NaiveBayesModel scorer: the spec's worked example, its rules, its refusals."""

import math
import re

import numpy as np
import pytest
from scipy.special import expit
from typer.testing import CliRunner

from textnb.cli import app
from textnb.errors import PMMLError
from textnb.pmml.score import load_naive_bayes, read_csv_columns


@pytest.fixture(scope="module")
def spec_example(pmml_spec_example) -> bytes:
    return pmml_spec_example.encode("utf-8")


def test_spec_worked_example(spec_example):
    doc = load_naive_bayes(spec_example)
    assert doc.classes == ["100", "500", "1000", "5000", "10000"]
    record = {"gender": ["male"], "no of claims": ["2"], "domicile": [None], "age of car": [1]}
    p = doc.predict_proba(record)[0]
    # The spec: P("1000" | male, 2, -, 1) = L2 / (L0 + ... + L4), with the threshold .001
    # for the zero count of class 5000 and Σ of each input's PairCounts as denominators.
    assert p[2] == pytest.approx(0.01579, abs=5e-6)
    assert p[2] == pytest.approx(0.015787759239871, rel=1e-12)
    assert p.sum() == pytest.approx(1.0)
    assert doc.predict(record) == ["100"]


def test_spec_example_domicile_missing_equals_absent_column(spec_example):
    doc = load_naive_bayes(spec_example)
    with_none = doc.predict_proba({"gender": ["male"], "no of claims": ["2"], "domicile": [None],
                                   "age of car": [1.0]})
    without = doc.predict_proba({"gender": ["male"], "no of claims": ["2"], "age of car": ["1"]})
    assert np.array_equal(with_none, without)


def _doc(inputs: str, *, fields: str = "", mining: str = "", output_counts=(6, 4),
         threshold: str = "0.001", model_extra: str = "", version: str = "4_4") -> bytes:
    """A two-class (spam/ham) NaiveBayesModel around the given BayesInputs."""
    tvc = "".join(f'<TargetValueCount value="{c}" count="{n}"/>'
                  for c, n in zip(("ham", "spam"), output_counts))
    return f"""<?xml version="1.0"?>
<PMML version="4.4" xmlns="http://www.dmg.org/PMML-{version}">
<Header/>
<DataDictionary>
<DataField name="y" optype="categorical" dataType="string">
<Value value="ham"/><Value value="spam"/></DataField>
<DataField name="a" optype="categorical" dataType="string"/>
<DataField name="x" optype="continuous" dataType="double"/>
{fields}
</DataDictionary>
<NaiveBayesModel functionName="classification" threshold="{threshold}">
<MiningSchema><MiningField name="y" usageType="target"/><MiningField name="a"/>
<MiningField name="x"/>{mining}</MiningSchema>
{model_extra}
<BayesInputs>{inputs}</BayesInputs>
<BayesOutput fieldName="y"><TargetValueCounts>{tvc}</TargetValueCounts></BayesOutput>
</NaiveBayesModel>
</PMML>""".encode()


def _pairs(value, ham, spam):
    counts = "".join(f'<TargetValueCount value="{c}" count="{n}"/>'
                     for c, n in (("ham", ham), ("spam", spam)) if n is not None)
    return (f'<PairCounts value="{value}"><TargetValueCounts>{counts}</TargetValueCounts>'
            "</PairCounts>")


A_INPUT = f'<BayesInput fieldName="a">{_pairs("u", 1, 3)}{_pairs("v", 5, 1)}</BayesInput>'


def test_denominator_rule_uses_the_pair_counts_not_the_class_counts():
    doc = load_naive_bayes(_doc(A_INPUT, output_counts=(6, 4)))
    p = doc.predict_proba({"a": ["u"]})[0]
    # ham: 6 * 1/(1+5); spam: 4 * 3/(3+1)  (the class counts 6 and 4 are only the prior)
    ham, spam = 6 * 1 / 6, 4 * 3 / 4
    assert p == pytest.approx([ham / (ham + spam), spam / (ham + spam)], rel=1e-14)


def test_zero_and_omitted_counts_and_unlisted_values_get_the_threshold():
    inputs = f'<BayesInput fieldName="a">{_pairs("u", 0, 3)}{_pairs("v", 5, None)}</BayesInput>'
    doc = load_naive_bayes(_doc(inputs, threshold="0.01"))
    p_u = doc.predict_proba({"a": ["u"]})[0]
    assert p_u[0] / p_u[1] == pytest.approx((6 * 0.01) / (4 * 3 / 3), rel=1e-14)
    p_v = doc.predict_proba({"a": ["v"]})[0]
    assert p_v[0] / p_v[1] == pytest.approx((6 * 5 / 5) / (4 * 0.01), rel=1e-14)
    # A valid value no PairCounts lists: zero counts for every class, threshold for each,
    # so only the prior is left.
    assert doc.predict_proba({"a": ["w"]})[0] == pytest.approx([0.6, 0.4], rel=1e-14)


def test_missing_values_are_left_out_and_replacements_applied():
    doc = load_naive_bayes(_doc(A_INPUT))
    for missing in ([None], [float("nan")]):
        assert doc.predict_proba({"a": missing})[0] == pytest.approx([0.6, 0.4])
    assert doc.predict_proba({}, n_rows=1)[0] == pytest.approx([0.6, 0.4])
    replaced = load_naive_bayes(_doc(A_INPUT).replace(
        b'<MiningField name="a"/>', b'<MiningField name="a" missingValueReplacement="v"/>'))
    assert np.array_equal(replaced.predict_proba({"a": [None]}), doc.predict_proba({"a": ["v"]}))
    assert np.array_equal(replaced.predict_proba({}, n_rows=1), doc.predict_proba({"a": ["v"]}))


DISCRETIZED = ('<BayesInput fieldName="x"><DerivedField optype="categorical" dataType="string">'
               '<Discretize field="x" mapMissingTo="lo">'
               '<DiscretizeBin binValue="lo"><Interval closure="openClosed" rightMargin="1"/>'
               '</DiscretizeBin><DiscretizeBin binValue="hi"><Interval closure="openOpen" '
               'leftMargin="1" rightMargin="5"/></DiscretizeBin></Discretize></DerivedField>'
               f'{_pairs("lo", 4, 1)}{_pairs("hi", 1, 4)}</BayesInput>')


@pytest.mark.parametrize("x,expected", [(0.5, "lo"), (1, "lo"), (1.0000001, "hi"), (4.9, "hi"),
                                        ("3", "hi"), (None, "lo"), (5, None), (7, None)])
def test_discretize_bins_closures_and_map_missing_to(x, expected):
    doc = load_naive_bayes(_doc(DISCRETIZED, output_counts=(1, 1)))
    p = doc.predict_proba({"x": [x]})[0]
    want = {"lo": [0.8, 0.2], "hi": [0.2, 0.8], None: [0.5, 0.5]}[expected]  # None: no bin
    assert p == pytest.approx(want, rel=1e-14)


def test_gaussian_and_poisson_target_value_stats_floor_at_threshold():
    gauss = ('<BayesInput fieldName="x"><TargetValueStats>'
             '<TargetValueStat value="ham"><GaussianDistribution mean="0" variance="1"/>'
             '</TargetValueStat><TargetValueStat value="spam">'
             '<GaussianDistribution mean="1" variance="4"/></TargetValueStat>'
             '</TargetValueStats></BayesInput>')
    doc = load_naive_bayes(_doc(gauss, output_counts=(3, 6), threshold="1e-10"))
    lp = lambda x, m, v: -0.5 * math.log(2 * math.pi * v) - (x - m) ** 2 / (2 * v)  # noqa: E731
    for x in (0.0, 2.5):
        log_odds = math.log(6 / 3) + lp(x, 1, 4) - lp(x, 0, 1)
        assert doc.predict_proba({"x": [x]})[0, 1] == pytest.approx(expit(log_odds), rel=1e-13)
    # At x = 7 the ham density (9e-12) is below the threshold and is raised to it, as
    # JPMML-Evaluator and PyPMML do.
    log_odds = math.log(6 / 3) + lp(7, 1, 4) - math.log(1e-10)
    assert doc.predict_proba({"x": [7]})[0, 1] == pytest.approx(expit(log_odds), rel=1e-14)
    poisson = gauss.replace('GaussianDistribution mean="0" variance="1"',
                            'PoissonDistribution mean="2"').replace(
        'GaussianDistribution mean="1" variance="4"', 'PoissonDistribution mean="5"')
    doc = load_naive_bayes(_doc(poisson, output_counts=(1, 1)))
    log_odds = (3 * math.log(5) - 5) - (3 * math.log(2) - 2)
    assert doc.predict_proba({"x": [3]})[0, 1] == pytest.approx(expit(log_odds), rel=1e-13)


def test_a_hundred_thousand_tiny_factors_do_not_underflow():
    # 2,000 inputs, each a factor of 0.001 vs 0.0011: a product of 1e-6000 in linear space.
    n = 2000
    fields = "".join(f'<DataField name="t{i}" optype="categorical" dataType="integer"/>'
                     for i in range(n))
    mining = "".join(f'<MiningField name="t{i}" missingValueReplacement="0"/>' for i in range(n))
    inputs = "".join(f'<BayesInput fieldName="t{i}">{_pairs(1, 1, 1.1)}{_pairs(0, 999, 998.9)}'
                     "</BayesInput>" for i in range(n))
    doc = load_naive_bayes(_doc(inputs, fields=fields, mining=mining, output_counts=(1, 1)))
    present = {f"t{i}": [1] for i in range(n)}
    log_odds = n * (math.log(1.1 / 1000) - math.log(1 / 1000))
    assert doc.predict_proba(present)[0, 1] == pytest.approx(expit(log_odds), rel=1e-12)
    half = {f"t{i}": [1] for i in range(0, n, 2)}
    log_odds = n / 2 * (math.log(1.1) + math.log(998.9 / 999))
    assert doc.predict_proba(half)[0, 1] == pytest.approx(expit(log_odds), rel=1e-9)


def test_invalid_values_fail_naming_record_field_and_fix():
    fields = ('<DataField name="c" optype="categorical" dataType="integer"><Value value="1"/>'
              "</DataField>")
    inputs = A_INPUT + f'<BayesInput fieldName="c">{_pairs(1, 1, 2)}</BayesInput>'
    doc = load_naive_bayes(_doc(inputs, fields=fields, mining='<MiningField name="c"/>'))
    with pytest.raises(PMMLError, match=r"record 2: value '7' of field 'c' is invalid.*asMissing"):
        doc.predict_proba({"c": ["1", "7"]})
    with pytest.raises(PMMLError, match=r"record 1: value 'x' of field 'c' is invalid"):
        doc.predict_proba({"c": ["x"]})
    lenient = load_naive_bayes(_doc(inputs, fields=fields, mining=(
        '<MiningField name="c" invalidValueTreatment="asMissing"/>')))
    assert lenient.predict_proba({"c": ["7"]})[0] == pytest.approx([0.6, 0.4])


@pytest.mark.parametrize("change,element", [
    ({"model_extra": '<Targets><Target field="y"/></Targets>'}, "<Targets>"),
    ({"model_extra": '<LocalTransformations><DerivedField name="d" optype="continuous" '
                     'dataType="double"><FieldRef field="x"/></DerivedField>'
                     "</LocalTransformations>"},
     "<DerivedField> in <LocalTransformations>"),
    ({"inputs": '<BayesInput fieldName="x"><DerivedField optype="categorical" dataType="string">'
                '<Apply function="floor"><FieldRef field="x"/></Apply></DerivedField>'
                f'{_pairs("1", 1, 1)}</BayesInput>'}, "<Apply> in <DerivedField>"),
    ({"inputs": '<BayesInput fieldName="x"><TargetValueStats><TargetValueStat value="ham">'
                '<AnyDistribution mean="0" variance="1"/></TargetValueStat></TargetValueStats>'
                '</BayesInput>'}, "<AnyDistribution>"),
    ({"model_extra": '<Output><OutputField name="o" feature="transformedValue">'
                     '<FieldRef field="x"/></OutputField></Output>'},
     "<FieldRef> in <OutputField>"),
])
def test_unsupported_elements_fail_naming_the_element(change, element):
    kwargs = {"inputs": A_INPUT, **change}
    inputs = kwargs.pop("inputs")
    with pytest.raises(PMMLError, match=re.escape(element)):
        load_naive_bayes(_doc(inputs, **kwargs))


def test_other_model_types_are_refused_by_name():
    doc = (b'<PMML xmlns="http://www.dmg.org/PMML-4_4" version="4.4"><Header/><DataDictionary/>'
           b'<TreeModel functionName="classification"/></PMML>')
    with pytest.raises(PMMLError, match=r"<TreeModel> is not supported.*NaiveBayesModel"):
        load_naive_bayes(doc)
    with pytest.raises(PMMLError, match="not well-formed"):
        load_naive_bayes(b"<PMML")


def test_annotations_are_skipped():
    extra = ('<Extension extender="x"><anything xmlns="urn:x"><deep/></anything></Extension>'
             '<ModelStats><UnivariateStats field="a"/></ModelStats>')
    assert load_naive_bayes(_doc(A_INPUT, model_extra=extra)).classes == ["ham", "spam"]


def test_cli_pmml_score(tmp_path):
    pmml = tmp_path / "m.pmml"
    pmml.write_bytes(_doc(A_INPUT + DISCRETIZED))
    data = tmp_path / "d.csv"
    data.write_text("a,x\nu,0.5\nv,\n,3\n")
    result = CliRunner().invoke(app, ["pmml-score", str(pmml), str(data)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "record,predicted,probability(ham),probability(spam)"
    doc = load_naive_bayes(pmml.read_bytes())
    columns, n = read_csv_columns(data)
    p = doc.predict_proba(columns, n)
    for line, row in zip(lines[1:], p):
        cells = line.split(",")
        assert [float(c) for c in cells[2:]] == pytest.approx(row.tolist(), rel=1e-15)
    bad = CliRunner().invoke(app, ["pmml-score", str(data), str(data)])
    assert bad.exit_code == 1 and "textnb: error:" in bad.output
