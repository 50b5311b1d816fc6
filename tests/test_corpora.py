"""Tests for textnb.mail.corpora: the loaders on tiny fake layouts, then on the real corpora.

The real corpora are not part of the repository; tests marked ``corpus`` skip
when ``corpora_root()`` finds none. The expected numbers are the corpora
README's (../shared/corpora/README.md).
"""

import collections
import hashlib
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from textnb.errors import MailboxFormatError, SourceError
from textnb.mail.corpora import CORPORA, Example, corpora_root, is_test, iter_corpus, split

MANIFEST = Path(__file__).resolve().parents[1] / "corpora" / "manifest.toml"

ROOT = corpora_root()
needs_corpora = pytest.mark.skipif(
    ROOT is None,
    reason="public corpora not found: set TEXTNB_CORPORA or place them in ../shared/corpora",
)

# name -> (ham, spam), from the corpora README.
README_COUNTS = {
    "spamassassin": (4150, 1897),
    "enron": (3672 + 4361 + 4012, 1500 + 1496 + 1500),
    "lingspam": (2412, 481),
    "sms": (4827, 747),
}


def _write(path: Path, data: bytes = b"Subject: x\n\nbody\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def fake_root(tmp_path):
    """Two messages of each corpus, in the published layouts, plus the files to skip."""
    sa = tmp_path / "spamassassin"
    _write(sa / "easy_ham" / "00002.bbb", b"From a\nSubject: ham\n\nhi\n")
    _write(sa / "easy_ham" / "00001.aaa")
    _write(sa / "easy_ham" / "cmds", b"mv 1 2\n")
    _write(sa / "spam_2" / "00001.ccc")
    _write(sa / "_meta" / "spam.cmds", b"mv 1 2\n")
    for folder in ("easy_ham_2", "hard_ham", "spam"):
        (sa / folder).mkdir()
    for part in ("enron1", "enron2", "enron3"):
        _write(tmp_path / "enron-spam" / part / "ham" / "0001.x.ham.txt")
        _write(tmp_path / "enron-spam" / part / "spam" / "0002.x.spam.txt")
    for i in range(1, 11):
        _write(tmp_path / "lingspam" / "bare" / f"part{i}" / "3-1msg1.txt")
    _write(tmp_path / "lingspam" / "bare" / "part10" / "spmsga1.txt")
    _write(
        tmp_path / "sms-spam-collection" / "SMSSpamCollection",
        "ham\tOk lar...\nspam\tWIN £100 now\n".encode("utf-8"),
    )
    return tmp_path


# --- without the real corpora ---------------------------------------------------


def test_unknown_corpus_names_the_known_ones(fake_root):
    with pytest.raises(ValueError, match=r"'trec07p'.*spamassassin, enron, lingspam, sms"):
        iter_corpus("trec07p", fake_root)


def test_spamassassin_layout_skips_meta_and_cmds(fake_root):
    examples = list(iter_corpus("spamassassin", fake_root))
    assert [(e.relpath, e.label) for e in examples] == [
        ("easy_ham/00001.aaa", "ham"),
        ("easy_ham/00002.bbb", "ham"),
        ("spam_2/00001.ccc", "spam"),
    ]
    assert examples[1].raw == b"From a\nSubject: ham\n\nhi\n"


def test_enron_lingspam_sms_layouts(fake_root):
    enron = list(iter_corpus("enron", fake_root))
    assert enron[0] == Example("enron1/ham/0001.x.ham.txt", "ham", b"Subject: x\n\nbody\n")
    assert [e.label for e in enron] == ["ham", "spam"] * 3
    lingspam = {e.relpath: e.label for e in iter_corpus("lingspam", fake_root)}
    assert len(lingspam) == 11
    assert lingspam["part10/spmsga1.txt"] == "spam" and lingspam["part1/3-1msg1.txt"] == "ham"
    sms = list(iter_corpus("sms", fake_root))
    assert sms == [
        Example("00000", "ham", b"\nOk lar..."),
        Example("00001", "spam", "\nWIN £100 now".encode("utf-8")),
    ]


def test_iter_corpus_is_lazy_and_sorted(fake_root):
    it = iter_corpus("lingspam", fake_root)
    assert isinstance(it, Iterator)
    relpaths = [e.relpath for e in it]
    assert relpaths == sorted(relpaths)


def test_missing_folder_and_bad_sms_line_raise_domain_errors(fake_root):
    with pytest.raises(SourceError, match="enron-spam"):
        list(iter_corpus("enron", fake_root / "nowhere"))
    (fake_root / "sms-spam-collection" / "SMSSpamCollection").write_bytes(b"ham\tok\nmaybe spam\n")
    with pytest.raises(MailboxFormatError, match="line 2"):
        list(iter_corpus("sms", fake_root))


def test_corpora_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TEXTNB_CORPORA", str(tmp_path))
    assert corpora_root() == tmp_path
    monkeypatch.setenv("TEXTNB_CORPORA", str(tmp_path / "absent"))
    assert corpora_root() is None


def test_is_test_is_the_readme_formula():
    relpath = "easy_ham/00001.7c53336b37003a9286aba55d2945844c"
    digest = int(hashlib.md5(relpath.encode()).hexdigest(), 16)
    assert is_test(relpath) == (digest % 5 == 0)
    assert is_test(relpath, n_folds=1)
    # About one message in five lands in the test fold.
    share = sum(is_test(f"x/{i}") for i in range(10_000)) / 10_000
    assert 0.18 < share < 0.22


def test_split_keeps_order_and_rejects_a_single_example():
    examples = [Example(f"x/{i}", "ham", b"") for i in range(50)]
    train, test = split(iter(examples))
    assert len(train) + len(test) == 50
    assert all(is_test(e.relpath) for e in test) and not any(is_test(e.relpath) for e in train)
    assert train == [e for e in examples if e in train]
    with pytest.raises(TypeError, match="iterable of Example"):
        split(examples[0])


def test_manifest_covers_every_corpus():
    manifest = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))
    assert set(manifest) == set(CORPORA)
    for name, entry in manifest.items():
        for key in ("title", "source", "citation", "terms", "layout", "loader", "ham", "spam"):
            assert entry.get(key), f"manifest [{name}] lacks {key}"
        assert f"iter_corpus('{name}')" in entry["loader"]
        assert (entry["ham"], entry["spam"]) == README_COUNTS[name]


# --- on the real corpora -------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded():
    """Each corpus loaded once: name -> list of Example."""
    return {name: list(iter_corpus(name)) for name in CORPORA}


@pytest.mark.corpus
@needs_corpora
def test_spamassassin_split_is_4814_train_1233_test(loaded):
    train, test = split(loaded["spamassassin"])
    assert (len(train), len(test)) == (4814, 1233)


@pytest.mark.corpus
@needs_corpora
@pytest.mark.parametrize("name", CORPORA)
def test_counts_match_readme_and_manifest(loaded, name):
    labels = collections.Counter(e.label for e in loaded[name])
    assert (labels["ham"], labels["spam"]) == README_COUNTS[name]
    entry = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))[name]
    train, test = split(loaded[name])
    assert (len(train), len(test)) == (entry["split_train"], entry["split_test"])


@pytest.mark.corpus
@needs_corpora
def test_per_folder_counts(loaded):
    def by_folder(name, depth):
        return collections.Counter("/".join(e.relpath.split("/")[:depth]) for e in loaded[name])

    assert by_folder("spamassassin", 1) == {
        "easy_ham": 2500, "easy_ham_2": 1400, "hard_ham": 250, "spam": 500, "spam_2": 1397,
    }
    assert by_folder("enron", 2) == {
        "enron1/ham": 3672, "enron1/spam": 1500,
        "enron2/ham": 4361, "enron2/spam": 1496,
        "enron3/ham": 4012, "enron3/spam": 1500,
    }
    assert len(by_folder("lingspam", 1)) == 10


@pytest.mark.corpus
@needs_corpora
def test_relpaths_are_unique_sorted_and_in_the_readme_form(loaded):
    for name, examples in loaded.items():
        relpaths = [e.relpath for e in examples]
        assert relpaths == sorted(relpaths), name
        assert len(set(relpaths)) == len(relpaths), name
    assert loaded["spamassassin"][0].relpath == "easy_ham/00001.7c53336b37003a9286aba55d2945844c"
    assert not any(e.relpath.startswith("_meta") for e in loaded["spamassassin"])
    assert [e.relpath for e in loaded["sms"][:2]] == ["00000", "00001"]


@pytest.mark.corpus
@needs_corpora
def test_sms_text_is_utf8_and_repeats_match_readme(loaded):
    texts = [e.raw for e in loaded["sms"]]
    for raw in texts:
        raw.decode("utf-8")
        assert b"\t" not in raw and not raw.endswith(b"\n")
    # README: 403 of the 5,574 lines repeat an earlier text.
    assert len(texts) - len(set(texts)) == 403
