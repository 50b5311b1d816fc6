"""Text dumps (textnb.modelfile.dump): export -> import scores bit for bit alike, tokens of any
characters round-trip, a sorted dump still imports, and every kind of damage is refused
with the number of the line that is wrong."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from textnb.cli import app
from textnb.config import load_config
from textnb.mail.sources import iter_index
from textnb.modelfile import dump, retrain, store
from textnb.modelfile.dump import DumpFormatError, escape, unescape
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX

runner = CliRunner()
UNLABELLED = SAMPLE_INDEX.parent / "unlabelled"


def _trained(**settings) -> SpamFilter:
    """A filter trained on the sample corpus through the ledger, as `textnb train` does."""
    f = SpamFilter(load_config(None, settings))
    if settings.get("model.numeric_model", "none") != "none":
        # The ledger path learns from tokens, which leaves the numeric model unfitted.
        return f.fit(iter_index(SAMPLE_INDEX))
    retrain.fit(f, iter_index(SAMPLE_INDEX))
    return f


def _raws() -> list[bytes]:
    return [m.raw for m in iter_index(SAMPLE_INDEX)] + [p.read_bytes() for p in
                                                         sorted(UNLABELLED.iterdir())]


def assert_identical(a: SpamFilter, b: SpamFilter) -> None:
    ca, cb = a.counts(), b.counts()
    assert ca["tokens"] == cb["tokens"]
    for name in ("class_count", "feature_count", "doc_freq"):
        np.testing.assert_array_equal(ca[name], cb[name])
    np.testing.assert_array_equal(a.model.feature_mask_, b.model.feature_mask_)
    assert a.config == b.config and a.ledger == b.ledger
    assert a.n_learned == b.n_learned
    assert (a.threshold, a.calibration) == (b.threshold, b.calibration)


SETTINGS = [
    {},
    {"model.event_model": "bernoulli"},
    {"features.features": "tf", "features.min_df": 2},
    {"features.max_features": 300, "model.fit_prior": False, "model.alpha": 0.3},
    {"model.numeric_model": "gaussian"},
    {"model.numeric_model": "kde", "model.class_prior": [0.7, 0.3]},
    {"model.route_alpha": 0.03},
    {"model.route_alpha": 0.03, "model.event_model": "bernoulli", "features.min_df": 2},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_export_import_scores_bit_for_bit(settings):
    original = _trained(**settings)
    original.threshold = 1.2345678901234567
    copy = dump.loads(dump.dumps(original))
    assert_identical(original, copy)
    raws = _raws()
    # Identical arrays, not close ones: the same bits, message by message.
    assert np.array_equal(original.log_odds(raws), copy.log_odds(raws))
    assert dump.dumps(copy) == dump.dumps(original)  # a fixed point: diff shows nothing


def test_calibration_and_fractional_counts_round_trip_exactly():
    f = _trained()
    f.calibration = {"method": "platt", "a": 0.1 + 0.2, "b": -1e-300}
    f.learn_tokens([["odd", "weight"]], ["spam"], weight=1 / 3)  # counts that are not whole
    copy = dump.loads(dump.dumps(f))
    assert_identical(f, copy)
    assert "\ntoken\todd\t0\t0.3333333333333333\t0.3333333333333333\n" in dump.dumps(f).decode()


def test_dump_reads_as_documented_lines(sample_learned_filter):
    f = sample_learned_filter
    text = dump.dumps(f).decode()
    lines = text.split("\n")
    assert lines[0] == "textnb-dump\t1" and text.endswith("\n")
    assert "setting\tmodel.alpha\t0.1" in lines and "class\tham\t60" in lines
    assert re.search(r"^token\tsubject:payment\t0\t4\t4$", text, re.M)  # greppable
    assert re.search(r"^ledger\t[0-9a-f]{64}\t(ham|spam)\t1[0-9a-f]{16}$", text, re.M)
    assert lines[-2] == f"end\t{len(f.vocabulary)}\t100"


# -- tokens of any characters -----------------------------------------------------------

ODD_TOKENS = ["tab\there", "line\nbreak", "back\\slash", "cr\rlf", "\\t literally",
              "nul\x00", "lone \udc80 surrogate", "nbsp\u00a0", "ls\u2028", "caf\u00e9 \U0001f600",
              "", " lead and trail ", "#not a comment", "end\t1\t1"]


@pytest.mark.parametrize("token", ODD_TOKENS)
def test_escape_leaves_one_printable_field(token):
    field = escape(token)
    assert "\t" not in field and "\n" not in field and "\r" not in field
    assert field.isprintable() or field == ""
    field.encode("utf-8")  # surrogates are escaped: the dump is valid UTF-8
    assert unescape(field) == token


@given(st.text())
def test_escape_round_trips_any_text(token):
    assert unescape(escape(token)) == token


def test_model_with_odd_tokens_round_trips():
    f = SpamFilter()
    f.learn_tokens([ODD_TOKENS[:7], ODD_TOKENS[7:] + ["plain"]], ["spam", "ham"])
    copy = dump.loads(dump.dumps(f))
    assert copy.counts()["tokens"] == f.counts()["tokens"]
    assert np.array_equal(copy.log_odds_tokens([ODD_TOKENS]), f.log_odds_tokens([ODD_TOKENS]))


def test_a_sorted_dump_imports_and_scores_within_rounding(sample_learned_filter):
    f = sample_learned_filter
    data = dump.dumps(f)
    shuffled = b"".join(sorted(data.splitlines(keepends=True)))
    copy = dump.loads(shuffled)
    assert sorted(copy.counts()["tokens"]) == copy.counts()["tokens"]
    assert copy.ledger.counts() == f.ledger.counts()
    raws = _raws()
    # Columns in another order sum the same terms in another order (and may break
    # ties between equally strong clues differently): measured 0 here.
    np.testing.assert_allclose(copy.log_odds(raws), f.log_odds(raws), rtol=0, atol=1e-9)
    assert b"".join(sorted(dump.dumps(copy).splitlines(keepends=True))) == shuffled


# -- damage ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good(sample_learned_filter) -> list[bytes]:
    return dump.dumps(sample_learned_filter).split(b"\n")[:-1]


def _line_no(lines, prefix: bytes) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix)) + 1


def _refused(lines, match: str):
    with pytest.raises(DumpFormatError, match=match) as info:
        dump.loads(b"\n".join(lines) + b"\n", name="m.dump")
    return str(info.value)


def _edited(lines, prefix: bytes, new: bytes | None):
    i = _line_no(lines, prefix) - 1
    return lines[:i] + ([new] if new is not None else []) + lines[i + 1:], i + 1


def test_a_truncated_dump_is_refused(good):
    data = b"\n".join(good) + b"\n"
    half = data[: len(data) // 2]  # cut in the middle of a line
    with pytest.raises(DumpFormatError, match="stops in the middle of this line") as info:
        dump.loads(half, name="m.dump")
    last = len(half.split(b"\n"))
    assert f"line {last}:" in str(info.value)
    whole_lines = half[: half.rindex(b"\n") + 1]  # cut at a line end
    with pytest.raises(DumpFormatError, match="without its 'end' line: it was cut short"):
        dump.loads(whole_lines)


@pytest.mark.parametrize("prefix, new, problem", [
    (b"class\tspam", b"class\tspam\t-4", "'-4' is not a count"),
    (b"class\tspam", b"class\tspam\tnan", "'nan' is not a count"),
    (b"token\tsubject:payment", b"token\tsubject:payment\t0\t4", "has 4 TAB-separated field"),
    (b"token\tsubject:payment", b"token\tsubject:pay\\qment\t0\t4\t4", r"'\\q' is not an escape"),
    (b"token\tsubject:payment", b"token\tsubject:payment\t0\t4\t9", "is in 9 messages but counted only 4"),
    (b"token\tsubject:payment", b"token\tsubject:payment\t0\t41\t41", "in 41 spam messages, but class spam has only 40"),
    (b"token\tsubject:payment", b"token\tsubject:payment\t1\t4\t4", "counted 5 times"),
    (b"token\tsubject:payment", b"token\tsubject:caf\xe9\t0\t4\t4", "is not UTF-8"),
    (b"setting\tmodel.alpha", b"setting\tmodel.alpha\t-1", "model.alpha=-1"),
    (b"setting\tmodel.alpha", b"setting\tmodel.alpah\t0.1", "unknown config key model.alpah"),
    (b"setting\tmodel.evidence", b"setting\tmodel.evidence\teach-side", "is not JSON"),
    (b"setting\tmodel.fit_prior", b"setting\tmodel.fit_prior\t1", "give true or false"),
    (b"ledger\t", b"ledger\t" + b"ab" * 31 + b"\tspam\t" + b"0" * 16, "is not a SHA-256 digest"),
    (b"ledger\t", b"ledger\t" + b"ab" * 32 + b"\tpam\t" + b"0" * 16, "'pam' is neither ham nor spam"),
    (b"messages\tham", b"messages\tham\t1.5", "is not a whole number"),
    (b"threshold", b"threshold\t\"high\"", "is not a number or null"),
    (b"textnb-dump", b"textnb-dump\t2", "format version '2'.*upgrade textnb"),
    (b"written-by", b"tokens\t1", "unknown record 'tokens'"),
])
def test_a_bad_line_is_named(good, prefix, new, problem):
    lines, n = _edited(good, prefix, new)
    assert f"line {n}:" in _refused(lines, problem)


def test_a_repeated_record_names_both_lines(good):
    i = _line_no(good, b"token\tsubject:payment")
    message = _refused(good[:i] + [good[i - 1]] + good[i:], "listed twice")
    assert f"line {i + 1}: " in message and f"first on line {i}" in message
    j = _line_no(good, b"ledger\t")
    assert f"first on line {j}" in _refused(good + [good[j - 1]], "in the ledger twice")
    assert "keep one" in _refused(good + [b"class\tham\t60"], "second 'class ham'")


def test_lines_lost_or_settings_missing_are_refused(good):
    n = sum(line.startswith(b"token\t") for line in good)
    lines, _ = _edited(good, b"token\tsubject:payment", None)
    message = _refused(lines, f"'end' says {n} token and 100 ledger lines")
    assert f"holds {n - 1} and 100" in message and f"end<TAB>{n - 1}<TAB>100" in message
    lines, _ = _edited(good, b"setting\tmodel.alpha", None)
    _refused(lines, "no setting line for model.alpha.*whatever today's defaults are")
    lines, _ = _edited(good, b"class\tham", None)
    _refused(lines, "no 'class<TAB>ham<TAB>N' line")


def test_settings_added_later_take_the_value_older_files_were_scored_with(good):
    lines, _ = _edited(good, b"setting\tmodel.evidence", None)  # as a dump from before the key
    assert dump.loads(b"\n".join(lines) + b"\n").config.model.evidence == "strongest"
    lines, _ = _edited(good, b"setting\tmodel.route_alpha", None)
    assert dump.loads(b"\n".join(lines) + b"\n").config.model.route_alpha is None


def test_foreign_files_are_refused(tmp_path, sample_model_file):
    with pytest.raises(DumpFormatError, match="is a textnb model file, not a text dump"):
        dump.load(sample_model_file)
    (tmp_path / "x.pmml").write_text("<?xml version='1.0'?>\n<PMML/>\n")
    with pytest.raises(DumpFormatError, match="line 1: not a textnb text dump"):
        dump.load(tmp_path / "x.pmml")
    with pytest.raises(DumpFormatError, match="cannot read text dump .*nope"):
        dump.load(tmp_path / "nope")


def test_crlf_line_ends_and_comments_are_accepted(good):
    edited = b"\r\n".join(good + [b"# a note added by hand", b""]) + b"\r\n"
    assert_identical(dump.loads(edited), dump.loads(b"\n".join(good) + b"\n"))


# -- the command line ---------------------------------------------------------------------

def test_cli_export_import_and_classify_the_same(tmp_path, sample_model_file):
    out = tmp_path / "m.dump"
    result = runner.invoke(app, ["export", "--format", "text", "--model", str(sample_model_file),
                                 str(out)])
    assert result.exit_code == 0, result.output
    n = len(store.load(sample_model_file).vocabulary)
    assert f"exported {n:,} tokens and 100 ledger entries as text" in result.output
    piped = runner.invoke(app, ["export", "-f", "text", "--model", str(sample_model_file), "-"])
    assert piped.stdout.encode() == out.read_bytes()
    back = tmp_path / "back.tnb"
    result = runner.invoke(app, ["import", "--format", "text", str(out), "--model", str(back)])
    assert result.exit_code == 0, result.output
    assert f"imported a multinomial model of {n:,} terms (40 spam, 60 ham)" in result.output
    a = runner.invoke(app, ["classify", "--model", str(sample_model_file), "--json", str(UNLABELLED)])
    b = runner.invoke(app, ["classify", "--model", str(back), "--json", str(UNLABELLED)])
    assert a.exit_code == 0 and a.output == b.output


def test_cli_refuses_a_bad_dump_and_keeps_the_model(tmp_path, sample_model_file):
    out = tmp_path / "m.dump"
    out.write_bytes(dump.dumps(store.load(sample_model_file)).replace(b"class\tham\t60",
                                                                      b"class\tham\tsixty"))
    model = tmp_path / "keep.tnb"
    model.write_bytes(sample_model_file.read_bytes())
    before = model.read_bytes()
    result = runner.invoke(app, ["import", "-f", "text", str(out), "--model", str(model)])
    assert result.exit_code == 1
    assert re.search(r"error: text dump '.*m\.dump' line \d+: the ham count 'sixty' is not a "
                     r"count", result.output)
    assert model.read_bytes() == before
    bad = runner.invoke(app, ["export", "-f", "text", "--max-features", "5", str(out)])
    assert bad.exit_code == 2 and "--max-features prunes PMML documents only" in bad.output


# -- a real corpus ------------------------------------------------------------------------

@pytest.mark.corpus
@pytest.mark.slow
def test_spamassassin_test_split_scores_bit_for_bit(shared_corpora):
    from textnb.mail.corpora import iter_corpus, split

    train, test = split(iter_corpus("spamassassin", shared_corpora))
    f = SpamFilter()
    f.learn_tokens([f.tokens(e.raw) for e in train], [e.label for e in train])
    copy = dump.loads(dump.dumps(f))
    assert_identical(f, copy)
    tokens = [f.tokens(e.raw) for e in test]
    assert np.array_equal(f.log_odds_tokens(tokens), copy.log_odds_tokens(tokens))
