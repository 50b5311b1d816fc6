"""The ledger's two tokens-hash definitions: both pinned, and a model whose ledger holds
version-1 hashes (every model saved before 2026-11-24) relabels, forgets, merges and
round-trips as it did, while the entries it learns from now on get version 2."""

import hashlib
import json
import zipfile

import numpy as np
import pytest

from textnb import commands, spamfilter
from textnb.engines.counting import count_tokens
from textnb.engines.workers import Workers
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import dump, lifecycle, store
from textnb.modelfile.merge import merge_filters
from textnb.modelfile.retrain import LedgerMismatchError, fit, forget_messages, learn_messages
from textnb.models.ledger import (DIGEST_SIZE, VERSION_2, Ledger, matches, normalise, tokens_hash,
                                  tokens_hash_v1)
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX, every_message

pytestmark = pytest.mark.usefixtures("memo_tokens")

MESSAGES = list(iter_index(SAMPLE_INDEX))  # 40 spam, 60 ham

# Hashes that saved models hold: these values may never change. The version-1 values
# were computed with the code that wrote every model before 2026-11-24 (git 4d024b9).
PINNED = [
    ([], 0xb4b2797457a0a6e4, 0x1e220a8397b1dcdaf),
    (["x"], 0x4f586ef96743df4a, 0x1f48d296f74ae7494),
    (["a", "b", "a"], 0x3853753b4b0f384a, 0x155b9e8f75331992e),
    (["subject:free", "caf\u00e9", "\udc80", "a\x00b", "\U0001F600"],
     0x33333144d023aa66, 0x19f606f4d924bbc18),
]


@pytest.mark.parametrize("tokens,v1,v2", PINNED)
def test_both_definitions_are_pinned(tokens, v1, v2):
    assert tokens_hash_v1(tokens) == v1 and tokens_hash(tokens) == v2
    assert matches(v1, tokens) and matches(v2, tokens)
    assert not matches(v1, tokens + ["y"]) and not matches(v2, tokens + ["y"])


def test_version_2_is_order_free_counts_repeats_and_is_tagged():
    assert tokens_hash(["a", "b", "a"]) == tokens_hash(["b", "a", "a"])
    assert tokens_hash(["a", "b"]) != tokens_hash(["a", "b", "b"])
    assert tokens_hash(["ab"]) != tokens_hash(["a", "b"])
    assert tokens_hash([]) != tokens_hash([""])
    assert VERSION_2 <= tokens_hash(["x"]) < 2 * VERSION_2
    assert 0 <= tokens_hash_v1(["x"]) < VERSION_2


def test_count_tokens_gives_each_lists_version_2_hash():
    lists = [tokens for tokens, _, _ in PINNED] + [["x", "x"], []]
    _, hashes = count_tokens(lists, [0, 1] * 3)
    assert hashes == [tokens_hash(t) for t in lists]


def test_a_ledger_keeps_each_entrys_version_through_arrays_files_and_dumps(tmp_path):
    spam_filter = _fit(MESSAGES[:20])
    ledger = spam_filter.ledger
    digests = list(ledger)
    assert all(ledger.tokens_hash(d) >= VERSION_2 for d in digests)  # new entries: version 2
    _to_version_1(spam_filter, digests[:7])
    arrays = ledger.to_arrays()
    assert arrays["ledger_hash_version"].tolist() == [1] * 7 + [2] * 13
    assert arrays["ledger_tokens"].dtype == np.uint64
    again = Ledger.from_arrays(*(arrays[f"ledger_{a}"] for a in (
        "digest", "label", "tokens", "serial", "born", "last", "state", "hash_version")))
    assert again.same_history(ledger)
    path = tmp_path / "m.tnb"
    store.save(spam_filter, path)
    assert store.load(path).ledger.same_history(ledger)
    lines = [line for line in dump.dump_lines(spam_filter) if line.startswith("ledger\t")]
    assert [len(line.split("\t")[-1]) for line in lines] == [16] * 7 + [17] * 13
    assert dump.loads(dump.dumps(spam_filter)).ledger == ledger


def test_a_file_without_hash_versions_holds_version_1(tmp_path):
    spam_filter = _fit(MESSAGES[:20])
    _to_version_1(spam_filter, list(spam_filter.ledger))
    path = tmp_path / "old.tnb"
    store.save(spam_filter, path)
    _drop_member(path, "ledger_hash_version.npy")
    loaded = store.load(path)
    assert loaded.ledger == spam_filter.ledger
    assert all(loaded.ledger.tokens_hash(d) < VERSION_2 for d in loaded.ledger)


def test_bad_hash_versions_and_values_are_refused():
    ledger = Ledger()
    ledger.record(b"a" * DIGEST_SIZE, "spam", 5)
    arrays = ledger.to_arrays()
    with pytest.raises(ValueError, match="1 or 2"):
        Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                           arrays["ledger_tokens"], hash_version=np.array([3], np.uint8))
    with pytest.raises(ValueError, match="disagree"):
        Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                           arrays["ledger_tokens"], hash_version=np.array([1, 2], np.uint8))
    with pytest.raises(ValueError, match="version 1"):
        ledger.record(b"b" * DIGEST_SIZE, "ham", 2 * VERSION_2)


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 16: sixty messages make several, so two jobs start their workers."""
    monkeypatch.setattr(spamfilter, "BATCH_SIZE", 16)
    monkeypatch.setattr(lifecycle, "BATCH_SIZE", 16)
    started, pool = [], Workers._pool
    monkeypatch.setattr(Workers, "_pool", lambda self: started.append(self.jobs) or pool(self))
    return started


@pytest.mark.parametrize("jobs", [None, 1, 2])
def test_a_version_1_model_relabels_and_forgets_as_a_version_2_one(tmp_path, jobs,
                                                                  small_batches):
    """Moves check each message by its entry's definition; the counts end up those of
    the same model with version-2 entries; old entries keep their hashes, and what the
    model learns now gets version 2."""
    flipped = [RawMessage(m.source, m.raw, {"spam": "ham", "ham": "spam"}[m.label])
               if i % 7 == 0 else m for i, m in enumerate(MESSAGES[:60])]
    index = _write_index(tmp_path, flipped)
    results = {}
    for name in ("v1", "v2"):
        spam_filter = _fit(MESSAGES[:40])
        old = _to_version_1(spam_filter, list(spam_filter.ledger)) if name == "v1" else {}
        if jobs is None:  # one message at a time (retrain's regimes, forget)
            learn_messages(spam_filter, flipped, regime="error")
            forget_messages(spam_filter, flipped[5:10])
        else:  # the engine: the workers check the moved messages
            path = tmp_path / f"{name}-{jobs}.tnb"
            store.save(spam_filter, path)
            commands.retrain(path, index=[str(index)], jobs=jobs)
            spam_filter = store.load(path)
        results[name] = (spam_filter, old)
    (v1, old), (v2, _) = results["v1"], results["v2"]
    assert small_batches == ([2, 2] if jobs == 2 else [])
    np.testing.assert_array_equal(v1.model.feature_count_, v2.model.feature_count_)
    np.testing.assert_array_equal(v1.doc_freq_, v2.doc_freq_)
    assert [(d, v1.ledger.label(d)) for d in v1.ledger] == [(d, v2.ledger.label(d))
                                                            for d in v2.ledger]
    moved = sum(v1.ledger.label(d) != _label_in(MESSAGES[:40], d) for d in old if d in v1.ledger)
    assert moved > 0  # some version-1 entries were relabelled, not just kept
    for d in v1.ledger:
        assert v1.ledger.tokens_hash(d) == old.get(d, v2.ledger.tokens_hash(d))
    assert any(d not in old for d in v1.ledger)  # and new ones were learned


def test_a_version_1_entry_still_refuses_a_changed_tokenizer(monkeypatch):
    spam_filter = _fit(MESSAGES[:10])
    _to_version_1(spam_filter, list(spam_filter.ledger))
    tokens = spam_filter.tokens
    monkeypatch.setattr(spam_filter, "tokens", lambda raw: tokens(raw) + ["new-tokenizer"])
    with pytest.raises(LedgerMismatchError):
        forget_messages(spam_filter, MESSAGES[:1])


def test_merging_a_version_1_model_with_a_version_2_one_checks_each_by_its_own():
    old, new = _fit(MESSAGES[:30]), _fit(MESSAGES[20:50])
    _to_version_1(old, list(old.ledger))
    merged, report = merge_filters([old, new], ["old", "new"], mail=MESSAGES)
    assert report["duplicates"] == 10
    reference, counts = _fit(MESSAGES[:50]).counts(), merged.counts()
    assert list(counts["tokens"]) == list(reference["tokens"])
    np.testing.assert_array_equal(counts["feature_count"], reference["feature_count"])
    for d in merged.ledger:  # each entry kept as its first input held it
        source = old if d in old.ledger else new
        assert merged.ledger.tokens_hash(d) == source.ledger.tokens_hash(d)


# -- helpers ---------------------------------------------------------------------------

def _fit(messages) -> SpamFilter:
    spam_filter = SpamFilter(every_message())
    fit(spam_filter, messages)
    return spam_filter


def _to_version_1(spam_filter: SpamFilter, digests) -> dict:
    """Give these entries the version-1 hash of their tokens, as a model saved before
    2026-11-24 holds them."""
    norms = {hashlib.sha256(normalise(m.raw)).digest(): normalise(m.raw) for m in MESSAGES}
    ledger, old = spam_filter.ledger, {}
    for d in digests:
        old[d] = tokens_hash_v1(spam_filter.tokens(norms[d]))
        ledger.record(d, ledger.label(d), old[d])
    return old


def _label_in(messages, digest: bytes):
    return next(m.label for m in reversed(messages)
                if hashlib.sha256(normalise(m.raw)).digest() == digest)


def _drop_member(path, name: str) -> None:
    """Rewrite a model file without one member (and its checksum), as an older textnb
    wrote it."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != name}
    meta_name = next(n for n in members if n.endswith(".json") and n != "vocabulary.json")
    meta = json.loads(members[meta_name])
    del meta["sha256"][name]
    members[meta_name] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


def _write_index(tmp_path, messages):
    folder = tmp_path / "mail"
    folder.mkdir(exist_ok=True)
    lines = []
    for i, m in enumerate(messages):
        (folder / f"{i}.eml").write_bytes(m.raw)
        lines.append(f"{m.label} {folder / f'{i}.eml'}")
    path = tmp_path / "written.index"
    path.write_text("\n".join(lines) + "\n")
    return path
