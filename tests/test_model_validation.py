"""Models that cannot lie, and state that stays bounded: crafted model files, dumps and
PMML documents, and the memory a running scorer holds.

Each test is named after the attack. Every reader (model file, text dump, PMML) is held
to the same rules (textnb.modelfile.checks), and so is a running scorer's reload.
"""

import dataclasses
import hashlib
import io
import json
import math
import os
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import pytest

from textnb.config import FilterConfig
from textnb.modelfile.journal import Record, journal_path
from textnb.delivery.users import ModelSet, TooManyUsersError
from textnb.delivery.verdict_headers import score_with
from textnb.errors import ConfigError, ModelFormatError, PMMLError
from textnb.mail.parse import MailLimits
from textnb.modelfile import dump, store
from textnb.pmml import export_pmml, import_pmml
from textnb.spamfilter import SpamFilter

TOKENS = [["subject:cheap", "pills", "now"], ["subject:meeting", "agenda", "now"],
          ["subject:cheap", "offer"], ["subject:lunch", "agenda"]]
LABELS = ["spam", "ham", "spam", "ham"]
# Each reader: (write the filter in its format, read it back).
READERS = {
    "model file": (store.dumps, store.loads),
    "text dump": (dump.dumps, dump.loads),
    "PMML": (export_pmml, import_pmml),
}
DEEP = 100_000


def _toy(config: FilterConfig | None = None) -> SpamFilter:
    spam_filter = SpamFilter(config)
    spam_filter.learn_tokens(TOKENS, LABELS)
    return spam_filter


def _refused(reader: str, spam_filter: SpamFilter) -> str:
    """What ``reader`` says about the filter written in its format (it must refuse it)."""
    write, read = READERS[reader]
    data = write(spam_filter)
    with pytest.raises(ModelFormatError) as refusal:
        read(data)
    return str(refusal.value)


def _rezipped(data: bytes, members: dict[str, bytes] | None = None, meta_text=None) -> bytes:
    """A model file with some members replaced and their checksums updated;
    ``meta_text(meta) -> str`` writes the description's JSON (default: json.dumps)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        meta = json.loads(zin.read("textnb-model.json"))
        contents = {name: zin.read(name) for name in zin.namelist()}
    contents.update(members or {})
    for name in members or {}:
        meta["sha256"][name] = hashlib.sha256(contents[name]).hexdigest()
    contents["textnb-model.json"] = (meta_text or json.dumps)(meta).encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, content in contents.items():
            zout.writestr(name, content)
    return out.getvalue()


# -- F9: models that cannot lie ------------------------------------------------------
@pytest.mark.parametrize("reader", READERS)
def test_nan_threshold_refused_by_every_reader(reader):
    spam_filter = _toy()
    spam_filter.threshold = math.nan
    assert "threshold" in _refused(reader, spam_filter)


@pytest.mark.parametrize("reader", READERS)
def test_string_threshold_refused(reader):
    spam_filter = _toy()
    spam_filter.threshold = "5"
    assert "threshold" in _refused(reader, spam_filter)


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")  # the priors, before the check
@pytest.mark.parametrize("reader", READERS)
def test_huge_class_counts_refused(reader):
    """Class counts of 1e308 overflow the priors' sum; no mail store holds 2**53 messages."""
    spam_filter = _toy()
    spam_filter.model.class_count_[:] = 1e308
    assert "class" in _refused(reader, spam_filter)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # PMML's export takes logs
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("value", [-3.0, math.nan, math.inf])
def test_negative_counts_refused(reader, value):
    """A negative, NaN or infinite token count (the text dump refuses it as it parses)."""
    spam_filter = _toy()
    spam_filter.model.feature_count_[0, 1] = value
    assert "pills" in _refused(reader, spam_filter)  # the token, by name


@pytest.mark.parametrize("reader", READERS)
def test_inconsistent_counts_refused(reader):
    """A token in more spam messages than the spam class holds (binary features)."""
    spam_filter = _toy()
    spam_filter.model.feature_count_[1, 0] = 7  # subject:cheap, in 2 spams
    spam_filter.doc_freq_[0] = 7
    assert "subject:cheap" in _refused(reader, spam_filter)


@pytest.mark.parametrize("reader", READERS)
def test_nan_calibration_refused(reader):
    spam_filter = _toy()
    spam_filter.calibration = {"method": "platt", "format": 1, "n_ham": 2, "n_spam": 2,
                               "a": math.nan, "b": 0.0}
    assert "calibration" in _refused(reader, spam_filter)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("section, key", [("mail", "max_bytes"), ("tokenizer", "max_tokens")])
def test_imported_model_cannot_raise_hostile_mail_bounds(reader, section, key):
    config = FilterConfig()
    part = getattr(config, section)
    config = dataclasses.replace(config, **{section: dataclasses.replace(part, **{key: 10**12})})
    # No configuration textnb accepts can hold it (--set refuses it too), so the file is
    # crafted: a filter's settings replaced after it was made.
    with pytest.raises(ConfigError, match=f"{section}.{key}"):
        config.validate()
    spam_filter = _toy()
    spam_filter.config = config
    assert f"{section}.{key}" in _refused(reader, spam_filter)


def test_a_raised_bound_within_its_ceiling_is_kept():
    limits = dataclasses.replace(MailLimits(), max_bytes=50_000_000)
    spam_filter = _toy(dataclasses.replace(FilterConfig(), mail=limits))
    for write, read in READERS.values():
        assert read(write(spam_filter)).config.mail.max_bytes == 50_000_000


def test_a_running_scorer_keeps_its_model_on_a_bad_reload(tmp_path):
    from textnb.delivery.server import ResidentModel

    path = tmp_path / "model.tnb"
    store.save(_toy(), path)
    resident = ResidentModel(path)
    before = resident.spam_filter
    probe = b"Subject: cheap pills\n\ncheap pills now\n"
    want = score_with(before, probe).log_odds
    bad = _toy()
    bad.threshold = math.nan
    store.atomic_write(path, store.dumps(bad))
    assert resident.check() is False
    assert resident.spam_filter is before
    assert score_with(resident.spam_filter, probe).log_odds == want


def test_a_journal_that_makes_the_counts_lie_is_refused(tmp_path):
    """The model's journal (``textnb.modelfile.journal``) is applied as the file loads; the
    sum is held to the same rules as the file."""
    from textnb.modelfile import count_patch

    path = tmp_path / "model.tnb"
    store.save(_toy(), path)
    spam_filter, state = store.load_for_update(path)
    before = count_patch.Snapshot.of(spam_filter)
    spam_filter.model.class_count_[1] = 1e300
    record = count_patch.encode(count_patch.diff(before, spam_filter))
    store.journal(path).append(Record("PATCH", None, record), state.seq)
    with pytest.raises(ModelFormatError, match="journal.*class counts"):
        store.load(path)


# -- F8: a zip bomb ------------------------------------------------------------------
def _deflated_zeros(n_pieces: int) -> bytes:
    """A raw deflate stream of n_pieces * 16 MiB of zeros, 16 kB a piece: one piece
    compressed and ended by a full flush (which resets the compressor) is repeated."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = compressor.compress(bytes(1 << 24)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return piece * n_pieces + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def _zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A ZIP archive built by hand, so that a member may declare any size:
    (name, data as stored, method, CRC-32, declared inflated size) each."""
    out, directory = bytearray(), bytearray()
    for name, data, method, crc, size in members:
        offset, encoded = len(out), name.encode()
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc,
                           len(data), size, len(encoded), 0) + encoded + data
        directory += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0,
                                 0x21, crc, len(data), size, len(encoded), 0, 0, 0, 0, 0,
                                 offset) + encoded
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members),
                      len(directory), len(out), 0)
    return bytes(out + directory + end)


def _bomb(declared: int) -> bytes:
    """The toy model with feature_count.npy replaced by 2 GiB of deflated zeros (2 MB),
    declaring ``declared`` bytes."""
    with zipfile.ZipFile(io.BytesIO(store.dumps(_toy()))) as zf:
        members = [(n, zf.read(n), 0, zlib.crc32(zf.read(n)), len(zf.read(n)))
                   for n in zf.namelist() if n != "feature_count.npy"]
    members.append(("feature_count.npy", _deflated_zeros(128), 8, 0, declared))
    return _zip(members)


_PEAK = """
import json, resource, sys, time
from textnb.modelfile import store
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    store.loads(data)
    outcome = "loaded"
except store.ModelFormatError as exc:
    outcome = "ModelFormatError: " + str(exc)
except MemoryError:
    outcome = "MemoryError"
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start,
                  "peak_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                     - before) / 1024}))
"""


@pytest.mark.parametrize("declared", [2 << 30, 64], ids=["declares-2GiB", "declares-64B"])
def test_zip_bomb_member_refused_with_bounded_memory(tmp_path, declared):
    """A 2 MB file whose member inflates to 2 GiB: refused whether its header declares
    the 2 GiB (before inflating) or 64 bytes (the inflate stops there), in a child
    process whose address space is capped, so a reader that inflated it could not
    take the machine's memory."""
    path = tmp_path / "bomb.tnb"
    path.write_bytes(_bomb(declared))
    assert path.stat().st_size < 3_000_000
    cap = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
    result = subprocess.run([sys.executable, "-c", cap + _PEAK, str(path)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    report = json.loads(result.stdout)
    assert report["outcome"].startswith("ModelFormatError") and "damaged" in report["outcome"]
    assert report["seconds"] < 2
    assert report["peak_growth_mb"] < 64


_JOURNAL_PEAK = _PEAK.replace("store.loads(data)", "store.load(sys.argv[1])")


def test_zip_bomb_journal_record_refused_with_bounded_memory(tmp_path):
    """A journal record (a count patch, ``textnb.modelfile.count_patch``) of 0.26 MB that inflates to 256 MiB is
    read as damage (a record cut short) once it passes 100 times its size: the model loads
    as its file says, the reader's memory bounded by the record's size."""
    path = tmp_path / "model.tnb"
    store.save(_toy(), path)
    _, state = store.load_for_update(path)
    # zlib's header, 256 MiB of deflated zeros, and a checksum never reached
    store.journal(path).append(
        Record("PATCH", None, b"\x78\x9c" + _deflated_zeros(16) + bytes(4)), state.seq)
    cap = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
    result = subprocess.run([sys.executable, "-c", cap + _JOURNAL_PEAK, str(path)],
                            capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout)
    assert report["outcome"] == "loaded"
    assert report["seconds"] < 2 and report["peak_growth_mb"] < 64


# -- F10: JSON nested too deep ------------------------------------------------------
NESTED = "[" * DEEP + "]" * DEEP


def test_deeply_nested_json_is_damaged_not_recursion(tmp_path):
    data = dump.dumps(_toy())
    for line in (b"threshold\tnull", b"setting\tmodel.alpha\t0.1"):
        head = line.rpartition(b"\t")[0]
        crafted = data.replace(line, head + b"\t" + NESTED.encode())
        with pytest.raises(ModelFormatError, match="damaged"):
            dump.loads(crafted)
    model = store.dumps(_toy())
    for crafted in (
        _rezipped(model, {"vocabulary.json": NESTED.encode()}),
        _rezipped(model, meta_text=lambda m: json.dumps(m).replace('"threshold": null',
                                                                   f'"threshold": {NESTED}')),
    ):
        with pytest.raises(ModelFormatError, match="damaged"):
            store.loads(crafted)
    pmml = export_pmml(_toy())
    assert pmml.count(b'"threshold":null') == 1
    with pytest.raises(PMMLError, match="damaged"):
        import_pmml(pmml.replace(b'"threshold":null', b'"threshold":' + NESTED.encode()))
    # A journal record (a count patch, textnb.modelfile.count_patch) that is not JSON is read
    # as one cut short: the model loads as its file and the records before it say.
    path = tmp_path / "model.tnb"
    store.save(_toy(), path)
    _, state = store.load_for_update(path)
    store.journal(path).append(Record("PATCH", None, zlib.compress(NESTED.encode())), state.seq)
    assert store.load(path).n_learned == _toy().n_learned


# -- F2: bounded per-user state ------------------------------------------------------
MESSAGE = b"Subject: cheap pills %d\nFrom: a@example.org\n\ncheap pills now %d\n"


@pytest.fixture
def folder(tmp_path):
    models = tmp_path / "models"
    store.save(_toy(), models / "_shared" / "model.tnb")
    return models


def _learn(models: ModelSet, user: str, i: int) -> None:
    models.for_learning(user).update("LEARN", MESSAGE % (i, i), "spam")


def _resident(models: ModelSet) -> list[str]:
    return [model.path.parent.name for model in models.loaded()[1:]]


def test_user_models_are_evicted_lru(folder):
    models = ModelSet(folder, flush_seconds=3600, max_resident=2)  # never written by time
    _learn(models, "alice", 1)
    _learn(models, "bob", 2)
    alice = models.user_model("alice")  # alice is now the most recent
    probe = MESSAGE % (1, 1)
    want = score_with(alice.spam_filter, probe).log_odds
    _learn(models, "carol", 3)
    assert _resident(models) == ["alice", "carol"]  # bob, least recent, dropped ...
    bob = folder / "bob" / "model.tnb"
    assert bob.exists() and not journal_path(bob).exists()  # ... and written first
    _learn(models, "dave", 4)
    assert _resident(models) == ["carol", "dave"]
    assert alice.flush(force=True) is False and alice.check() is False  # dropped: inert
    again = models.user_model("alice")  # loaded again from its file, scoring as before
    assert again is not alice and _resident(models) == ["dave", "alice"]
    assert score_with(again.spam_filter, probe).log_odds == want
    assert again.spam_filter.n_learned == alice.spam_filter.n_learned
    _learn(models, "bob", 5)  # bob's model, reloaded, keeps learning
    assert models.user_model("bob").spam_filter.n_learned["spam"] == 2 + 2


def test_learn_cannot_create_unbounded_users(folder):
    models = ModelSet(folder, flush_seconds=3600, max_users=2)
    _learn(models, "u1", 1)
    _learn(models, "u2", 2)
    with pytest.raises(TooManyUsersError, match="--max-users 2"):
        _learn(models, "u3", 3)
    assert not (folder / "u3").exists()
    assert models.for_scoring("u3")[1] == "shared"
    _learn(models, "u1", 4)  # users who have a model keep learning
    (folder / "spare").mkdir()  # an admin's folder counts too
    fresh = ModelSet(folder, max_users=3)
    with pytest.raises(TooManyUsersError):
        _learn(fresh, "u3", 3)


def test_users_learning_at_once_past_the_bound_lose_nothing(folder):
    """Models are dropped and loaded again while learns for them run on other threads:
    every learn ends up in its user's model (a learn keeps its model loaded)."""
    import threading

    from textnb.models.ledger import message_digest

    models = ModelSet(folder, flush_seconds=3600, max_resident=2)
    threads = [threading.Thread(target=_learn, args=(models, f"user{i % 4}", 100 + i))
               for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(models.loaded()) - 1 <= 2
    again = ModelSet(folder)  # the next start: each file and its journal
    for u in range(4):
        ledger = again.user_model(f"user{u}").spam_filter.ledger
        assert [ledger.label(message_digest(MESSAGE % (100 + i, 100 + i)))
                for i in range(u, 24, 4)] == ["spam"] * 6
