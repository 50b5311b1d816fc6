"""The size bound (textnb.modelfile.prune): what it drops, and forget/relabel exact afterwards.

The invariant checked after every step: each column's counts are exactly the sum of
the tokens of the ledger's messages learned since the column was born
(``Ledger.held``), recomputed from the messages themselves.
"""

from collections import Counter

import numpy as np
import pytest

from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import dump, store
from textnb.modelfile.prune import prune
from textnb.modelfile.retrain import fit, forget_messages, learn_messages
from textnb.models.ledger import message_digest, normalise
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX, every_message

MESSAGES = list(iter_index(SAMPLE_INDEX))  # 40 spam, 60 ham


pytestmark = pytest.mark.usefixtures("memo_tokens")


def expected_counts(spam_filter: SpamFilter, by_digest: dict) -> dict:
    """token -> (ham, spam, messages) from the ledger's messages, each counted in the
    columns born at or before its serial (features are binary by default)."""
    ledger, out = spam_filter.ledger, {}
    ledger.cover(len(spam_filter.vocabulary))
    index = spam_filter.vocabulary.index_
    for digest in ledger:
        code = 1 if ledger.label(digest) == "spam" else 0
        for token in set(spam_filter.tokens(normalise(by_digest[digest].raw))):
            j = index.get(token)
            if j is None or ledger.born[j] > ledger.serial(digest):
                continue
            row = out.setdefault(token, [0.0, 0.0, 0.0])
            row[code] += 1
            row[2] += 1
    return {t: tuple(v) for t, v in out.items()}


def held_counts(spam_filter: SpamFilter) -> dict:
    fc, df = spam_filter.model.feature_count_, spam_filter.doc_freq_
    return {t: (fc[0, j], fc[1, j], df[j]) for j, t in enumerate(spam_filter.vocabulary.tokens_)
            if df[j] or fc[0, j] or fc[1, j]}


def assert_exact(spam_filter: SpamFilter, extra=()) -> None:
    by_digest = {message_digest(m.raw): m for m in (*MESSAGES, *extra)}
    assert held_counts(spam_filter) == expected_counts(spam_filter, by_digest)
    counts = spam_filter.ledger.counts()
    assert spam_filter.model.class_count_.tolist() == [counts["ham"], counts["spam"]]


@pytest.fixture
def pruned():
    """Trained on the first 80 messages; then tokens in one message outside the last 20
    are dropped."""
    spam_filter = SpamFilter(every_message())
    fit(spam_filter, MESSAGES[:80])
    result, report = prune(spam_filter, max_df=1, keep_last=20)
    return spam_filter, result, report


def test_prune_drops_rare_tokens_outside_the_window_and_keeps_the_rest(pruned):
    full, small, report = pruned
    df = full.doc_freq_
    recent = {t for m in MESSAGES[60:80] for t in full.tokens(normalise(m.raw))}
    dropped = set(full.vocabulary.tokens_) - set(small.vocabulary.tokens_)
    assert dropped and report.dropped == len(dropped)
    index = full.vocabulary.index_
    assert all(df[index[t]] <= 1 and t not in recent for t in dropped)
    assert all(t in small.vocabulary for j, t in enumerate(full.vocabulary.tokens_)
               if df[j] > 1 or t in recent)
    assert report.older_messages == 60 and report.window_start == 60
    assert small.ledger.pruned_at == 80 and small.ledger == full.ledger
    # the original is left as it was
    assert len(full.vocabulary) == report.tokens_before
    assert_exact(small)


def test_nothing_to_drop_leaves_the_history_unpruned():
    spam_filter = SpamFilter(every_message())
    fit(spam_filter, MESSAGES[:30])
    same, report = prune(spam_filter, max_df=1, keep_last=30)
    assert report.dropped == 0 and same.ledger.pruned_at == 0


def test_forget_of_a_held_message_is_exact_and_of_a_pruned_one_is_reported(pruned):
    _, model, _ = pruned
    by_digest = {message_digest(m.raw): m for m in MESSAGES}
    dropped_tokens = set(pruned[0].vocabulary.tokens_) - set(model.vocabulary.tokens_)
    lost = [m for m in MESSAGES[:60]
            if dropped_tokens & set(model.tokens(normalise(m.raw)))]
    kept = [m for m in MESSAGES[60:80]]
    assert lost and kept

    result = forget_messages(model, kept[:3])
    assert result["pruned"] == 0 and sum(result["forgotten"].values()) == 3
    assert_exact(model)
    # the same as the pruned model of a training set without them, in the kept columns
    without = SpamFilter(every_message())
    fit(without, [m for m in MESSAGES[:80] if m not in kept[:3]])
    other = held_counts(without)
    assert all(other.get(t) == v for t, v in held_counts(model).items() if v[2])

    result = forget_messages(model, lost[:2])
    assert result["pruned"] == 2 and sum(result["forgotten"].values()) == 2
    assert all(message_digest(m.raw) not in model.ledger for m in lost[:2])
    assert_exact(model)
    assert by_digest  # the invariant used every message above


def test_relabel_moves_what_is_held_and_says_which_were_pruned(pruned):
    _, model, _ = pruned
    dropped_tokens = set(pruned[0].vocabulary.tokens_) - set(model.vocabulary.tokens_)
    lost = next(m for m in MESSAGES[:60] if dropped_tokens & set(model.tokens(normalise(m.raw))))
    whole = MESSAGES[70]
    flip = {"spam": "ham", "ham": "spam"}
    report = learn_messages(model, [RawMessage(m.source, m.raw, flip[m.label])
                                    for m in (lost, whole)])
    assert sum(report.moved.values()) == 2 and report.pruned == 1
    assert_exact(model)


def test_a_dropped_token_that_returns_counts_from_then_on(pruned):
    _, model, _ = pruned
    dropped_tokens = set(pruned[0].vocabulary.tokens_) - set(model.vocabulary.tokens_)
    old = next(m for m in MESSAGES[:60] if dropped_tokens & set(model.tokens(normalise(m.raw))))
    token = sorted(dropped_tokens & set(model.tokens(normalise(old.raw))))[0]
    # a new message bringing the token back (the old one with a new line: a new digest)
    again = RawMessage("again", old.raw.rstrip(b"\n") + b"\nP.S. again\n", old.label)
    learn_messages(model, [again])
    j = model.vocabulary.index_[token]
    assert model.doc_freq_[j] == 1 and model.ledger.born[j] == model.ledger.pruned_at
    assert_exact(model, [again])
    result = forget_messages(model, [old])  # its count for the token was dropped
    assert result["pruned"] == 1 and model.doc_freq_[j] == 1
    assert_exact(model, [again])
    forget_messages(model, [again])
    assert model.doc_freq_[j] == 0
    assert_exact(model)


def test_pruned_model_round_trips_file_and_text_dump_with_its_history(pruned, tmp_path):
    _, model, _ = pruned
    learn_messages(model, MESSAGES[80:85])  # columns born at the prune
    assert model.ledger.born.any()
    path = store.save(model, tmp_path / "m.tnb")
    loaded = store.load(path)
    assert loaded.ledger.same_history(model.ledger)
    scores = model.log_odds(m.raw for m in MESSAGES)
    np.testing.assert_array_equal(loaded.log_odds(m.raw for m in MESSAGES), scores)
    imported = dump.loads(dump.dumps(model))
    assert imported.ledger == model.ledger
    assert all(imported.ledger.serial(d) == model.ledger.serial(d) for d in model.ledger)
    np.testing.assert_array_equal(imported.ledger.born, model.ledger.born)
    np.testing.assert_array_equal(imported.log_odds(m.raw for m in MESSAGES), scores)
    # and forget stays exact on the imported model
    result = forget_messages(imported, MESSAGES[:5])
    assert_exact(imported)
    forget_messages(imported, MESSAGES[80:85])
    assert_exact(imported)
    assert Counter(result["forgotten"]) == Counter({m.label: 0 for m in MESSAGES[:5]}) + \
        Counter(m.label for m in MESSAGES[:5])


def test_forget_says_which_messages_had_pruned_tokens(pruned, tmp_path):
    from typer.testing import CliRunner

    from textnb.cli import app

    full, model, _ = pruned
    dropped_tokens = set(full.vocabulary.tokens_) - set(model.vocabulary.tokens_)
    lost = next(m for m in MESSAGES[:60] if dropped_tokens & set(model.tokens(normalise(m.raw))))
    path = store.save(model, tmp_path / "m.tnb")
    result = CliRunner().invoke(app, ["forget", "--model", str(path), lost.source,
                                      MESSAGES[75].source])
    assert result.exit_code == 0, result.output
    assert "1 of them had tokens a size bound dropped earlier" in result.output
    after = store.load(path)
    assert message_digest(lost.raw) not in after.ledger and len(after.ledger) == 78
    assert_exact(after)


def test_merge_refuses_a_pruned_input_by_name(pruned):
    from textnb.modelfile.merge import MergeError, merge_filters

    full, small, _ = pruned
    with pytest.raises(MergeError, match=r"'b\.tnb' had rare tokens pruned.*merge models "
                                         r"before pruning"):
        merge_filters([full, small], names=["a.tnb", "b.tnb"])


def test_a_dump_that_lost_a_born_line_is_refused_naming_the_history_line(pruned):
    from textnb.modelfile.dump import DumpFormatError

    _, model, _ = pruned
    learn_messages(model, MESSAGES[80:90])  # their new tokens count from the prune
    lines = dump.dumps(model).decode().splitlines(keepends=True)
    born = [i for i, line in enumerate(lines) if line.startswith("born\t")]
    history = next(i for i, line in enumerate(lines) if line.startswith("history\t"))
    assert born
    del lines[born[0]]
    with pytest.raises(DumpFormatError, match=rf"line {history + 1}: 'history' says "
                                              rf"{len(born)} born lines"):
        dump.loads("".join(lines).encode())
