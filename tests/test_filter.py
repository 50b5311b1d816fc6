"""textnb filter: verdict headers added, every other byte passed through, mail never eaten."""

import email
import email.policy
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from textnb import __version__
from textnb.cli import app
from textnb.delivery.verdict_headers import (
    EXIT_CODES,
    Verdict,
    add_verdict,
    exit_code,
    filter_message,
    header_end,
    verdict_fields,
)
from textnb.errors import ModelFormatError

from conftest import PROJECT, SAMPLE

runner = CliRunner()
VERSION = __version__.encode()

SPAM = Verdict("spam", 12.3456, 0.99999, 0.0)
HAM = Verdict("ham", -7.5, 0.00055, 0.0)
BLOCK = (b"X-TextNB-Status: spam\n"
         b"X-TextNB-Score: log-odds=12.346; p=0.999990; threshold=0.000; version=" + VERSION)


def added(raw, verdict=SPAM, spamassassin=False):
    return add_verdict(raw, verdict, spamassassin)


def parsed(raw):
    return email.message_from_bytes(raw, policy=email.policy.compat32)


# -- where the headers go ------------------------------------------------------------


def test_fields_go_before_the_blank_line():
    raw = b"Subject: hi\nTo: a@b.example\n\nbody\n\nmore\n"
    out = added(raw)
    assert out.startswith(b"Subject: hi\nTo: a@b.example\n" + BLOCK)
    assert out.endswith(b"\n\nbody\n\nmore\n")
    assert out.replace(BLOCK + b"\n", b"", 1) == raw
    assert parsed(out)["X-TextNB-Status"] == "spam"


def test_crlf_message_gets_crlf_fields():
    raw = b"Subject: hi\r\nTo: a@b.example\r\n\r\nbody \xe9\r\n"
    out = added(raw)
    assert BLOCK.replace(b"\n", b"\r\n") + b"\r\n\r\nbody \xe9\r\n" in out
    assert b"\n" not in out.replace(b"\r\n", b"")


def test_mbox_from_line_and_folded_headers():
    raw = (b"From someone@example.com  Thu Aug 22 13:17:22 2002\n"
           b"Received: from a\n\tby b\n  with c\nSubject: x\n\nbody\n")
    out = added(raw)
    assert out == raw.replace(b"Subject: x\n", b"Subject: x\n" + BLOCK + b"\n")
    assert parsed(out)["X-TextNB-Status"] == "spam"


@pytest.mark.parametrize("raw,expected", [
    (b"", BLOCK + b"\n"),                                       # nothing at all
    (b"\nonly a body\n", BLOCK + b"\n\nonly a body\n"),            # no header section
    (b"Subject: cut", b"Subject: cut\n" + BLOCK + b"\n"),          # stops inside its header
    (b"Subject: x\n", b"Subject: x\n" + BLOCK + b"\n"),            # all header, no body
    # No blank line: the body starts at the first line that cannot be a header, as
    # the email package reads it, so the fields must go before that line.
    (b"Subject: x\nHello there\n\nrest\n", b"Subject: x\n" + BLOCK + b"\nHello there\n\nrest\n"),
    (b"Subject: x\nBad header : y\n", b"Subject: x\n" + BLOCK + b"\nBad header : y\n"),
])
def test_edge_cases(raw, expected):
    assert added(raw) == expected


def test_body_bytes_are_untouched():
    body = bytes(range(256)) * 4 + b"\r\n\n\r\rFrom the start\n>From\n\x00"
    raw = b"Subject: binary\n\n" + body
    assert added(raw).endswith(b"\n\n" + body)


def test_earlier_verdicts_are_replaced_not_duplicated():
    raw = (b"X-TextNB-Status: ham\nSubject: x\nx-textnb-score: forged\n\tcontinued\n"
           b"X-Spam-Flag: YES\nX-Spam-Status: Yes, score=9\n\ttests=FORGED\n\nbody\n")
    out = added(raw, HAM)
    assert out.count(b"X-TextNB-Status") == 1 and b"forged" not in out
    assert b"X-Spam-Flag: YES" in out  # not ours to replace unless asked for
    sa = added(raw, HAM, spamassassin=True)
    assert b"X-Spam-Flag" not in sa and b"FORGED" not in sa
    assert parsed(sa).get_all("X-Spam-Status") == [
        "No, score=-7.5 required=0.0 tests=TEXTNB version=textnb-" + __version__]
    assert sa.startswith(b"Subject: x\n") and sa.endswith(b"\n\nbody\n")


def test_spamassassin_fields():
    names = [name for name, _ in verdict_fields(SPAM, spamassassin=True)]
    assert names == [b"X-TextNB-Status", b"X-TextNB-Score", b"X-Spam-Flag", b"X-Spam-Status"]
    assert dict(verdict_fields(SPAM, spamassassin=True))[b"X-Spam-Status"].startswith(b"Yes, ")
    unsure = dict(verdict_fields(Verdict("unsure", 0.1, 0.52, 0.0), spamassassin=True))
    assert b"X-Spam-Flag" not in unsure and unsure[b"X-Spam-Status"].startswith(b"No, ")


def test_header_end_reports_the_line_ending():
    assert header_end(b"A: 1\r\n\r\nb") == (6, b"\r\n")
    assert header_end(b"\r\nbody") == (0, b"\r\n")
    assert header_end(b"") == (0, b"\n")


# -- exit codes and faults -------------------------------------------------------------


def test_exit_codes_follow_bogofilter():
    labels = ("spam", "ham", "unsure")
    assert [exit_code(Verdict(label, 0, 0.5, 0)) for label in labels] == [0, 1, 2]
    assert exit_code(None) == 3
    assert exit_code(None, always_zero=True) == exit_code(HAM, always_zero=True) == 0
    assert EXIT_CODES == {"spam": 0, "ham": 1, "unsure": 2}


@pytest.mark.parametrize("fault", [RuntimeError("boom"), MemoryError(), RecursionError(),
                                   ModelFormatError("no model at 'x'")])
def test_any_fault_passes_the_message_through(fault):
    raw = b"Subject: x\n\nbody\n"

    def score(_):
        raise fault

    result = filter_message(raw, score)
    assert result.output == raw and result.verdict is None
    assert result.error


def test_a_bad_verdict_is_a_fault_too():
    result = filter_message(b"Subject: x\n\n", lambda raw: Verdict("maybe", 0, 0.5, 0))
    assert result.output == b"Subject: x\n\n" and "maybe" in result.error


# -- all of SpamAssassin, byte for byte -----------------------------------------------


def _check_pass_through(raw, eol, verdict=SPAM, spamassassin=False):
    block = b"".join(name + b": " + value + eol
                     for name, value in verdict_fields(verdict, spamassassin))
    out = added(raw, verdict, spamassassin)
    assert out.count(block) == 1
    assert out.replace(block, b"", 1) == raw  # every input byte, in order, nothing else
    start = out.index(block)
    assert start == 0 or out[:start].endswith(eol)
    return out


@pytest.mark.corpus
@pytest.mark.slow
def test_every_spamassassin_message_byte_for_byte(shared_corpora):
    """All 6,047 messages: as stored (LF; 514 with 8-bit bytes), with SpamAssassin's
    fields too, and converted to CRLF line ends (the corpus has no CRLF message)."""
    from textnb.mail.corpora import iter_corpus

    n = eight_bit = 0
    for example in iter_corpus("spamassassin", shared_corpora):
        raw = example.raw
        out = _check_pass_through(raw, b"\n")
        # The email package reads our fields as header fields, not as body text.
        assert parsed(out).get_all("X-TextNB-Status") == ["spam"], example.relpath
        _check_pass_through(raw, b"\n", HAM, spamassassin=True)
        _check_pass_through(raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), b"\r\n")
        n += 1
        eight_bit += not raw.isascii()
    assert n == 6047 and eight_bit == 514


# -- through the command line ------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("filter") / "model.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index")])
    assert result.exit_code == 0, result.output
    return path


def _filter(model, raw, *args):
    result = runner.invoke(app, ["filter", "--model", str(model), *args], input=raw)
    return result.exit_code, result.stdout_bytes, result.stderr_bytes


def test_cli_filter_pauses_the_collector_while_it_runs_and_restores_it(sample_model,
                                                                       monkeypatch):
    """The command is one message per process: no cyclic collection while it runs, and
    everything frozen before the collector is re-enabled and before the interpreter's
    collection at exit (gc.freeze at exit)."""
    import gc

    import textnb.delivery.verdict_headers

    seen, at_exit = [], []
    scorer = textnb.delivery.verdict_headers.in_process_scorer

    def watched(path, cost_ratio=None):
        score = scorer(path, cost_ratio)
        return lambda raw: (seen.append(gc.isenabled()), score(raw))[1]

    monkeypatch.setattr(textnb.delivery.verdict_headers, "in_process_scorer", watched)
    monkeypatch.setattr("atexit.register", at_exit.append)
    monkeypatch.setattr("textnb.cli.filter._freeze_registered", False)
    monkeypatch.setattr("textnb.cli.filter._froze", False)
    raw = sorted((SAMPLE / "unlabelled").iterdir())[0].read_bytes()
    code, out, _ = _filter(sample_model, raw)
    assert code in (0, 1, 2) and b"X-TextNB-Status: " in out
    assert seen == [False] and gc.isenabled() and at_exit == [gc.freeze]
    # Frozen on the way out: the collector, re-enabled, does not walk what the run made.
    assert gc.get_freeze_count() > 0
    unfreeze, unfrozen = gc.unfreeze, []
    monkeypatch.setattr("gc.unfreeze", lambda: (unfrozen.append(1), unfreeze()))
    _filter(sample_model, raw)  # a second run in the same process registers nothing more
    # ... and first unfreezes what the first run froze, so that garbage is collectable.
    assert at_exit == [gc.freeze] and gc.isenabled() and unfrozen == [1]
    unfreeze()  # nothing of this test stays uncollectable


def test_cli_filter_adds_headers_and_exits_by_verdict(sample_model):
    for path in sorted((SAMPLE / "unlabelled").iterdir())[:3]:
        raw = path.read_bytes()
        code, out, _ = _filter(sample_model, raw)
        label = parsed(out)["X-TextNB-Status"]
        assert code == EXIT_CODES[label]
        assert _without_our_fields(out) == raw


def test_cli_filter_options(sample_model):
    raw = (SAMPLE / "spam" / sorted(p.name for p in (SAMPLE / "spam").iterdir())[0]).read_bytes()
    code, out, _ = _filter(sample_model, raw, "--spamassassin", "--always-exit-0")
    assert code == 0 and parsed(out)["X-Spam-Status"].split(",")[0] in ("Yes", "No")
    code, out, _ = _filter(sample_model, raw, "--cost-ratio", "1e300")
    assert code == 1 and parsed(out)["X-TextNB-Status"] == "ham"


@pytest.mark.parametrize("args", [["--cost-ratio", "-1"], []])
def test_cli_filter_never_eats_mail(tmp_path, sample_model, args):
    raw = b"Subject: keep me\r\n\r\n\xff\xfe body\r\n"
    model = sample_model if args else tmp_path / "missing.tnb"
    code, out, err = _filter(model, raw, *args)
    assert (code, out) == (3, raw)
    assert b"passed through unchanged" in err
    assert _filter(model, raw, *args, "--always-exit-0")[:2] == (0, raw)


def _without_our_fields(out, eol=b"\n"):
    block = b"".join(line + eol for line in out.split(eol) if line.startswith(b"X-TextNB-"))
    return out.replace(block, b"", 1)


@pytest.mark.corpus
def test_real_filter_on_spamassassin_messages(shared_corpora, sample_model):
    """The real command on a message of each SpamAssassin folder, and as a delivery
    agent runs it (its own process, binary stdin) on an 8-bit message with CRLF ends."""
    from textnb.mail.corpora import iter_corpus

    examples = [e for i, e in enumerate(iter_corpus("spamassassin", shared_corpora))
                if i % 1000 == 7]
    for example in examples:
        code, out, _ = _filter(sample_model, example.raw)
        assert code == EXIT_CODES[parsed(out)["X-TextNB-Status"]]
        assert _without_our_fields(out) == example.raw, example.relpath

    eight_bit = next(e for e in iter_corpus("spamassassin", shared_corpora) if not e.raw.isascii())
    raw = eight_bit.raw.replace(b"\n", b"\r\n")
    done = subprocess.run([sys.executable, "-m", "textnb", "filter", "--model", str(sample_model)],
                          input=raw, capture_output=True, cwd=PROJECT, timeout=120)
    assert done.returncode == EXIT_CODES[parsed(done.stdout)["X-TextNB-Status"]], done.stderr
    assert _without_our_fields(done.stdout, b"\r\n") == raw
