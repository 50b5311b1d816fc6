"""The ledger: digests of normalised messages, the entries, and their place in the model file."""

import copy
import json
import zipfile

import numpy as np
import pytest

from textnb.errors import ModelFormatError
from textnb.mail.sources import iter_messages
from textnb.modelfile import store
from textnb.models.ledger import DIGEST_SIZE, Ledger, message_digest, normalise

MESSAGE = (b"Return-Path: <a@example.com>\n"
           b"Received: from mx.example.com (mx.example.com [192.0.2.1])\n"
           b"\tby mail.example.org; Mon, 1 Jan 2024 00:00:00 +0000\n"
           b"From: a@example.com\n"
           b"Subject: cheap pills\n"
           b"\n"
           b"Buy now.\n")


def _with_headers(message: bytes, *fields: bytes) -> bytes:
    head, _, body = message.partition(b"\n\n")
    return b"\n".join([head, *fields]) + b"\n\n" + body


@pytest.mark.parametrize("copy", [
    b"From a@example.com Mon Jan  1 00:00:00 2024\n" + MESSAGE,          # mbox envelope line
    MESSAGE.replace(b"\n", b"\r\n"),                                    # CRLF
    MESSAGE + b"\n\n",                                                  # mbox's blank line
    _with_headers(MESSAGE, b"Status: RO", b"X-Mozilla-Status: 0001",
                  b"X-Keywords: $Junk", b"Content-Length: 9"),          # client state
    _with_headers(MESSAGE, b"X-Spam-Status: Yes, score=9.1 required=5.0",
                  b"\ttests=BAYES_99", b"X-TextNB-Status: spam", b"X-Bogosity: Spam"),  # filters
    _with_headers(MESSAGE, b"Delivered-To: me@example.org", b"X-Original-To: me@example.org"),
])
def test_copies_of_one_message_have_one_digest(copy):
    assert message_digest(copy) == message_digest(MESSAGE)
    assert len(message_digest(copy)) == DIGEST_SIZE


@pytest.mark.parametrize("other", [
    MESSAGE.replace(b"Buy now.", b"Buy later."),
    MESSAGE.replace(b"192.0.2.1", b"192.0.2.2"),        # tokenised: received:ip:...
    MESSAGE.replace(b"<a@example.com>", b"<b@example.com>"),
    _with_headers(MESSAGE, b"X-Mailer: Mutt"),
])
def test_what_the_tokenizer_reads_is_part_of_the_digest(other):
    assert message_digest(other) != message_digest(MESSAGE)


def test_normalise_keeps_kept_fields_byte_for_byte_and_drops_continuations():
    raw = _with_headers(MESSAGE, b"X-Spam-Report: long", b"  continued", b"X-Mailer: Mutt")
    out = normalise(raw)
    assert b"continued" not in out and b"X-Spam" not in out
    assert b"X-Mailer: Mutt\n" in out
    assert b"Received: from mx.example.com (mx.example.com [192.0.2.1])\n\tby mail" in out
    assert out.endswith(b"\n\nBuy now.\n")


_DROP_SHAPES = [
    b"Subject: x\nStatus: RO\n\nbody\n",
    b"Subject: x\nSTATUS :RO\n\tcontinued\nTo: a\n\nbody\n\n\n",
    b"Subject: x\n\rX-Keywords: $x\n\nbody\n",
    b"X-Spam-Flag: YES\nX-Spamfoo: 1\nX-TEXTNB-Verdict: spam\n\nbody\n",
    b"Subject: no empty line\nstatus of the project: fine\nx-spam is a word\n",
    b"Subject: x\n\nStatus: in the body stays\n",
    b"From a@b Mon Jan  1 00:00:00 2001\r\nLines: 3\r\nSubject: crlf\r\n\r\nbody\r\n",
    b"Subject: x\nX-Virus-Scanned: yes\nDelivered-To: me\n\n",
    b"Subject: nothing to drop\nX-Mailer: y\n\nbody\n\n",
    b"\nno header\n",
    b"Status: RO\nSubject: the first line goes\n\nbody\n",
    b"\x0bx-spam-level: ***\nSubject: x\n\n",
]


def _slow_normalise(raw: bytes) -> bytes:
    """``normalise`` in Python with its shortcut off: every header line goes through the
    field-by-field pass."""
    from textnb._c import speedups
    from textnb.models import ledger

    text = raw.replace(b"\r\n", b"\n")
    if text.startswith(b"From "):
        text = text.partition(b"\n")[2]
    if text.startswith(b"\n"):
        return text.rstrip(b"\n") + b"\n"
    return speedups.normalise_fields_python(text, ledger._DROP_FIELD_NAMES,
                                            ledger._DROP_PREFIX_NAMES)


@pytest.mark.parametrize("loops", ["built", "python"])
def test_the_shortcut_normalises_as_the_field_by_field_pass(loops, monkeypatch):
    from textnb._c import speedups

    if loops == "python":
        monkeypatch.setattr(speedups, "_speedups", None)
    for raw in _DROP_SHAPES:
        assert normalise(raw) == _slow_normalise(raw), raw
    assert normalise(_DROP_SHAPES[1]) == b"Subject: x\nTo: a\n\nbody\n"
    assert normalise(_DROP_SHAPES[-2]) == b"Subject: the first line goes\n\nbody\n"


@pytest.mark.parametrize("corpus", ["spamassassin", "enron", "lingspam"])
def test_the_shortcut_on_the_public_corpora(shared_corpora, corpus):
    from textnb._c import speedups
    from textnb.mail.corpora import iter_corpus
    from textnb.models import ledger

    names = (ledger._DROP_FIELD_NAMES, ledger._DROP_PREFIX_NAMES)
    for example in iter_corpus(corpus, root=shared_corpora):
        expected = _slow_normalise(example.raw)
        assert speedups.normalise_message_python(example.raw, *names) == expected, example
        assert normalise(example.raw) == expected, example


def test_a_message_without_headers_keeps_its_leading_blank_line():
    assert normalise(b"\nK:)k:)good\n\n") == b"\nK:)k:)good\n"


def test_normalised_message_tokenises_like_the_original(sample_filter):
    # No dropped field is tokenised, in either header mode: learning the
    # normalised bytes learns what SpamFilter.fit learns from the raw ones.
    raw = _with_headers(MESSAGE, b"X-Spam-Flag: YES", b"Status: RO")
    assert sample_filter.tokens(normalise(raw)) == sample_filter.tokens(raw)


def test_ledger_entries_relabel_in_place_and_count_per_class():
    ledger = Ledger()
    d1, d2, d3 = (bytes([i]) * DIGEST_SIZE for i in (1, 2, 3))
    ledger.record(d1, "spam", 11)
    ledger.record(d2, "ham", 22)
    ledger.record(d3, "ham", 33)
    ledger.record(d1, "ham", 11)  # a move keeps the entry's place
    assert list(ledger) == [d1, d2, d3]
    assert ledger.label(d1) == "ham" and ledger.label(b"\0" * DIGEST_SIZE) is None
    assert ledger.counts() == {"ham": 3, "spam": 0}
    ledger.remove(d2)
    assert len(ledger) == 2 and d2 not in ledger
    assert ledger.summary({"ham": 5, "spam": 0}) == {"messages": 2, "ham": 2, "spam": 0,
                                                    "untracked": 3}
    with pytest.raises(ValueError, match="32 bytes"):
        ledger.record(b"short", "spam", 0)


def test_ledger_arrays_round_trip_and_validate():
    ledger = Ledger()
    for i in range(5):
        ledger.record(bytes([i]) * DIGEST_SIZE, ("ham", "spam")[i % 2], 2**64 - 1 - i)
    arrays = ledger.to_arrays()
    assert arrays["ledger_digest"].shape == (5, DIGEST_SIZE)
    assert arrays["ledger_digest"].dtype == np.uint8 and arrays["ledger_tokens"].dtype == np.uint64
    again = Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                               arrays["ledger_tokens"])
    assert again == ledger and list(again) == list(ledger)
    with pytest.raises(ValueError, match="disagree"):
        Ledger.from_arrays(arrays["ledger_digest"][:4], arrays["ledger_label"],
                           arrays["ledger_tokens"])
    with pytest.raises(ValueError, match="duplicate"):
        Ledger.from_arrays(np.zeros((2, DIGEST_SIZE), np.uint8), np.zeros(2, np.uint8),
                           np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="0 \\(ham\\) or 1"):
        Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"] + 2,
                           arrays["ledger_tokens"])


@pytest.fixture(scope="module")
def ledger_filter(sample_learned_filter):
    return sample_learned_filter


def test_model_file_holds_the_ledger_with_checksums(ledger_filter, model_path):
    store.save(ledger_filter, model_path)
    with zipfile.ZipFile(model_path) as zf:
        meta = json.loads(zf.read("textnb-model.json"))
    assert {"ledger_digest.npy", "ledger_label.npy", "ledger_tokens.npy"} <= set(meta["sha256"])
    assert meta["format_version"] == 1
    loaded = store.load(model_path)
    assert loaded.ledger == ledger_filter.ledger and len(loaded.ledger) == 100
    assert list(loaded.ledger) == list(ledger_filter.ledger)


def test_a_model_without_a_ledger_loads_with_an_empty_one(sample_filter, model_path):
    legacy = copy.copy(sample_filter)
    legacy.ledger = Ledger()  # a model saved before ledgers
    store.save(legacy, model_path)
    with zipfile.ZipFile(model_path) as zf:
        assert not any(name.startswith("ledger") for name in zf.namelist())
    loaded = store.load(model_path)
    assert len(loaded.ledger) == 0
    assert loaded.ledger.summary(loaded.n_learned)["untracked"] == 100


def test_an_altered_ledger_is_reported_as_damage(ledger_filter, model_path, tmp_path):
    store.save(ledger_filter, model_path)
    altered = tmp_path / "altered.tnb"
    with zipfile.ZipFile(model_path) as src, zipfile.ZipFile(altered, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "ledger_label.npy":
                data = data[:-1] + bytes([data[-1] ^ 1])
            dst.writestr(item, data)
    with pytest.raises(ModelFormatError, match="checksum mismatch in ledger_label.npy"):
        store.load(altered)


def test_same_message_from_mbox_and_from_a_file_has_one_digest(tmp_path):
    mbox = tmp_path / "box"
    mbox.write_bytes(b"From a@example.com Mon Jan  1 00:00:00 2024\n" + MESSAGE
                     + b"\nFrom b@example.com Mon Jan  1 00:00:00 2024\n" + b"Subject: x\n\ny\n")
    single = tmp_path / "one.eml"
    single.write_bytes(MESSAGE.replace(b"\n", b"\r\n"))
    from_mbox = next(iter_messages(mbox)).raw
    assert message_digest(from_mbox) == message_digest(single.read_bytes())


def test_the_column_history_is_32_bit_until_serials_outgrow_it():
    """born/last are int32 in memory (8 bytes a token fewer) and widen to int64, values
    kept, once a serial reaches 2**31 - 1; the file's arrays are the same either way."""
    ledger = Ledger()
    ledger.record(b"a" * 32, "spam", 1)
    ledger.saw(np.array([0, 2]), 0)
    assert ledger.born.dtype == ledger.last.dtype == np.int32
    assert ledger.last.tolist() == [0, 1, 0]
    ledger.record(b"b" * 32, "ham", 2, serial=2**31 + 5)
    ledger.saw(np.array([1, 3]), 2**31 + 5)
    assert ledger.born.dtype == ledger.last.dtype == np.int64
    assert ledger.last.tolist() == [0, 2**31 + 5, 0, 2**31 + 5]
    arrays = ledger.to_arrays(4)
    assert arrays["ledger_last"].dtype == np.int64
    again = Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                               arrays["ledger_tokens"], arrays["ledger_serial"],
                               arrays["ledger_born"], arrays["ledger_last"], arrays["ledger_state"])
    assert again == ledger and again.last.dtype == np.int64


def test_the_column_history_grown_in_steps_equals_one_grown_at_once():
    """cover() fills new columns in a buffer with room to grow (no copy per batch): the
    history is the same as when every column comes at once, and a copy taken between
    steps keeps its values."""
    steps, at_once = Ledger(), Ledger()
    for k in range(1, 40):
        steps.record(bytes([k]) * 32, "spam", k)
        steps.saw(np.arange(k * 3 - 3, k * 3 + 1), k - 1)
        if k == 20:
            before = (steps.born.copy(), steps.last.copy())
            early = Ledger.from_arrays(*steps.to_arrays().values())
    for k in range(1, 40):
        at_once.record(bytes([k]) * 32, "spam", k)
    at_once.cover(40 * 3 - 2)
    for k in range(1, 40):
        at_once.saw(np.arange(k * 3 - 3, k * 3 + 1), k - 1)
    assert steps.born.shape == (118,) and steps.same_history(at_once)
    assert np.array_equal(early.born, before[0]) and np.array_equal(early.last, before[1])
