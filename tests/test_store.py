"""Model files: round trip, atomic writes, damage and version checks, no pickle."""

import io
import json
import random
import zipfile

import numpy as np
import pytest

from textnb.errors import ModelFormatError, WriteError
from textnb.features import token_store
from textnb.features.token_store import TokenStore
from textnb.mail.sources import iter_index
from textnb.modelfile import loaders, model_bytes, store, token_codec, zip_writer


def _scores(spam_filter, sample_index):
    return spam_filter.log_odds(m.raw for m in iter_index(sample_index))


def test_save_then_load_gives_identical_log_odds(sample_filter, sample_index, model_path):
    store.save(sample_filter, model_path)
    loaded = store.load(model_path)
    np.testing.assert_array_equal(_scores(loaded, sample_index), _scores(sample_filter, sample_index))
    assert loaded.vocabulary.tokens_ == sample_filter.vocabulary.tokens_
    assert loaded.n_learned == sample_filter.n_learned
    assert loaded.config == sample_filter.config


def test_file_is_a_zip_of_json_and_npy_only(sample_filter, model_path):
    store.save(sample_filter, model_path)
    with zipfile.ZipFile(model_path) as zf:
        names = set(zf.namelist())
        meta = json.loads(zf.read("textnb-model.json"))
    ledger = {f"{name}.npy" for name in sample_filter.ledger.to_arrays()}  # fit keeps one
    assert names == {"textnb-model.json", "vocabulary.json", "class_count.npy",
                     "feature_count.npy", "doc_freq.npy"} | ledger
    assert meta["format"] == "textnb-model" and meta["format_version"] == store.FORMAT_VERSION
    assert set(meta["sha256"]) == names - {"textnb-model.json"}


def test_members_written_piece_by_piece_are_the_whole_encodings(sample_filter, model_path,
                                                               monkeypatch):
    """save() streams each member into the archive (no member held whole); the bytes are
    those of json.dumps and np.save of the whole arrays, and the checksums hold."""
    monkeypatch.setattr(token_store, "_CHUNK", 7)  # many pieces, one of them short
    store.save(sample_filter, model_path)
    with zipfile.ZipFile(model_path) as zf:
        vocabulary = zf.read("vocabulary.json")
        feature_count = zf.read("feature_count.npy")
    assert vocabulary == json.dumps(list(sample_filter.vocabulary.tokens_)).encode("ascii")
    buffer = io.BytesIO()  # the counts' buffer has spare columns: a strided view
    np.save(buffer, np.ascontiguousarray(sample_filter.model.feature_count_), allow_pickle=False)
    assert feature_count == buffer.getvalue()
    assert store.load(model_path).vocabulary.tokens_ == sample_filter.vocabulary.tokens_
    assert store.loads(store.dumps(sample_filter)).vocabulary.tokens_ == sample_filter.vocabulary.tokens_


def test_members_deflated_by_isa_l_are_those_zlib_writes(sample_filter, model_path, tmp_path,
                                                          monkeypatch):
    """The members ISA-L deflates (where python-isal is installed) read back, with
    zipfile and its CRCs, as the bytes zipfile's own zlib writes; the file is smaller."""
    pytest.importorskip("isal", reason="python-isal is not installed here: zlib writes the "
                        "model, which the other tests cover")
    store.save(sample_filter, model_path)
    monkeypatch.setattr(zip_writer, "_deflater", lambda: None)
    with_zlib = store.save(sample_filter, tmp_path / "zlib.tnb")
    with zipfile.ZipFile(model_path) as isal, zipfile.ZipFile(with_zlib) as zlib_written:
        assert isal.testzip() is None
        assert isal.namelist() == zlib_written.namelist()
        for name in isal.namelist():
            assert isal.read(name) == zlib_written.read(name), name
        big = "vocabulary.json"
        assert isal.getinfo(big).compress_size != zlib_written.getinfo(big).compress_size
    assert model_path.stat().st_size < with_zlib.stat().st_size


def test_zipfile_member_writers_still_take_a_compressor(tmp_path):
    """zip_writer._deflate_with swaps zipfile's compressor for ISA-L's through the member
    writer's ``_compressor``: if a Python release renames it, the swap would quietly stop
    (the files stay right, only slower); this says so."""
    with zipfile.ZipFile(tmp_path / "x.zip", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("member", "w") as out:
            assert getattr(out, "_compressor", None) is not None
            out.write(b"x")


def test_save_leaves_no_temporary_files(sample_filter, model_path):
    store.save(sample_filter, model_path)
    store.save(sample_filter, model_path)
    assert [p.name for p in model_path.parent.iterdir()] == ["model.tnb"]


def test_failed_write_keeps_the_old_model(sample_filter, model_path, monkeypatch):
    store.save(sample_filter, model_path)
    before = model_path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        store.save(sample_filter, model_path)
    assert model_path.read_bytes() == before
    assert [p.name for p in model_path.parent.iterdir()] == ["model.tnb"]


def test_a_write_that_fails_on_the_saving_thread_is_raised_and_keeps_the_old_model(
        sample_filter, model_path, monkeypatch):
    """zip_writer.MemberWriter: members are deflated and written on a second thread; its error
    (here the disk filling up inside a member) reaches the caller, as WriteError, with
    the old file kept and no thread left behind."""
    import threading

    store.save(sample_filter, model_path)
    before = model_path.read_bytes()
    writes = []

    def full(self, data):
        writes.append(threading.current_thread().name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zip_writer._Hashing, "write", full)
    with pytest.raises(WriteError, match="no space left on device"):
        store.save(sample_filter, model_path)
    assert writes == ["textnb-save"]  # the first chunk; the rest were drained, not written
    assert model_path.read_bytes() == before
    assert [p.name for p in model_path.parent.iterdir()] == ["model.tnb"]
    assert not [t for t in threading.enumerate() if t.name == "textnb-save"]


def test_an_error_making_a_member_stops_the_saving_thread(sample_filter, monkeypatch):
    """An error on the calling thread (making a member's bytes) is raised as it is, after
    the saving thread has ended."""
    import threading

    def broken(fh, tokens):
        fh.write(b"[")
        raise MemoryError("made up")

    monkeypatch.setattr(model_bytes, "write_json_list", broken)
    with pytest.raises(MemoryError, match="made up"):
        store.dumps(sample_filter)
    assert not [t for t in threading.enumerate() if t.name == "textnb-save"]


def test_arrays_are_written_as_np_save_writes_them(monkeypatch):
    """zip_writer.write_npy: the counts' strided view (spare columns) a row at a time, a
    contiguous array in pieces, any other layout through np.save: np.save's bytes."""
    monkeypatch.setattr(zip_writer, "_NPY_PIECE", 24)  # many pieces a row
    buffer = np.arange(2 * 50, dtype=np.float64).reshape(2, 50)
    arrays = [buffer[:, :37], buffer, np.arange(13, dtype=np.int64), np.zeros(0),
              np.zeros((0, 4)), np.asfortranarray(buffer), buffer[:, ::2], buffer[::-1],
              np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
              np.frombuffer(bytes(range(64)), dtype=np.uint8).reshape(2, 32)]
    for array in arrays:
        expected, got = io.BytesIO(), io.BytesIO()
        np.save(expected, array, allow_pickle=False)
        zip_writer.write_npy(got, array)
        assert got.getvalue() == expected.getvalue(), (array.shape, array.strides)


def test_missing_model_says_how_to_train(tmp_path):
    with pytest.raises(ModelFormatError, match="textnb train"):
        store.load(tmp_path / "nope.tnb")


@pytest.mark.parametrize("cut", [0, 10, 100, -50, -1])
def test_truncated_file_is_reported_damaged(sample_filter, model_path, cut):
    data = store.dumps(sample_filter)
    model_path.write_bytes(data[:cut])
    with pytest.raises(ModelFormatError, match="damaged"):
        store.load(model_path)


def test_every_flipped_byte_in_a_member_is_detected(sample_filter, model_path):
    data = bytearray(store.dumps(sample_filter))
    rng = np.random.RandomState(1)
    for position in rng.randint(0, len(data), size=60):
        flipped = bytearray(data)
        flipped[position] ^= 0x40
        model_path.write_bytes(bytes(flipped))
        try:
            loaded = store.load(model_path)
        except ModelFormatError:
            continue
        # A flip that still loads can only have hit bytes that carry no data
        # (ZIP padding, an unused header field); the model must then be intact.
        assert loaded.vocabulary.tokens_ == sample_filter.vocabulary.tokens_
        np.testing.assert_array_equal(loaded.model.feature_count_, sample_filter.model.feature_count_)


def test_newer_format_version_asks_for_an_upgrade(sample_filter, model_path):
    data = store.dumps(sample_filter)
    model_path.write_bytes(_with_meta(data, lambda meta: meta.update(
        format_version=store.FORMAT_VERSION + 1)))
    with pytest.raises(ModelFormatError, match="upgrade textnb"):
        store.load(model_path)


def test_not_a_model_file(tmp_path):
    path = tmp_path / "mail.eml"
    path.write_bytes(b"Subject: hi\n\nhello\n")
    with pytest.raises(ModelFormatError, match="damaged"):
        store.load(path)


def test_default_model_path_respects_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TEXTNB_MODEL", str(tmp_path / "m.tnb"))
    assert store.default_model_path() == tmp_path / "m.tnb"
    monkeypatch.delenv("TEXTNB_MODEL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_model_path() == tmp_path / "textnb" / "model.tnb"


def test_a_file_saved_before_evidence_modes_keeps_scoring_as_it_did(sample_index, model_path,
                                                                   sample_filter):
    """Files written before `model.evidence` existed were scored with one ranking of the
    k strongest clues; the default is now "each-side", but such a file keeps its scores."""
    from textnb.config import FilterConfig, ModelConfig
    from textnb.spamfilter import SpamFilter

    old = SpamFilter(FilterConfig(model=ModelConfig(evidence="strongest")))
    old.fit(iter_index(sample_index))
    want = _scores(old, sample_index)
    assert not np.array_equal(want, _scores(sample_filter, sample_index))
    model_path.write_bytes(_with_meta(store.dumps(old),
                                      lambda meta: meta["config"]["model"].pop("evidence")))
    loaded = store.load(model_path)
    assert loaded.config.model.evidence == "strongest"
    np.testing.assert_array_equal(_scores(loaded, sample_index), want)


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_members_are_inflated_where_they_lie_as_zipfile_reads_them(sample_filter, inflater,
                                                                   monkeypatch):
    """``loaders._member_bytes``: one inflate call on the file's bytes, with ISA-L where it
    is installed and zlib where not, gives what ``ZipFile.read`` gives, stored members too."""
    import io
    import zlib

    if inflater == "zlib":
        monkeypatch.setattr(loaders, "_inflater", lambda: (zlib.decompress, zlib.crc32))
    else:
        pytest.importorskip("isal", reason="python-isal is not installed here")
    data = store.dumps(sample_filter)
    stored = _rewritten(data, "doc_freq.npy", b"\x93NUMPY not really")  # ZIP_STORED members
    for archive in (data, stored):
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            for info in zf.infolist():
                assert loaders._member_bytes(zf, archive, info.filename,
                                           loaders._inflater()) == zf.read(info.filename)
    loaded = store.loads(data)
    assert store.dumps(loaded) == data


def test_npy_members_read_as_np_load_reads_them_into_arrays_of_their_own():
    import io

    arrays = [np.arange(12, dtype=np.float64).reshape(3, 4) / 7, np.zeros((0, 32), np.uint8),
              np.zeros(0, np.int64), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              np.arange(5, dtype=">u4"), np.array([True, False]), np.array(3.5),
              np.frombuffer(bytes(range(64)), dtype=np.uint8).reshape(2, 32)]
    for expected in arrays:
        for version in ((1, 0), (2, 0)):
            out = io.BytesIO()
            np.lib.format.write_array(out, expected, version=version)
            got, loaded = loaders._npy(out.getvalue()), np.load(io.BytesIO(out.getvalue()))
            assert got.dtype == loaded.dtype and got.shape == loaded.shape
            np.testing.assert_array_equal(got, expected)
            assert got.flags.owndata and got.flags.writeable
            assert (got.flags.c_contiguous, got.flags.f_contiguous) == (
                loaded.flags.c_contiguous, loaded.flags.f_contiguous)
    objects = io.BytesIO()
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle=False"):  # np.load's words
        loaders._npy(objects.getvalue())
    with pytest.raises(ValueError):
        loaders._npy(out.getvalue()[:-1])  # cut short


def test_a_member_whose_inflated_bytes_miss_their_crc_is_damage(sample_filter):
    """Bytes that inflate, but not to what the archive lists (the central directory's
    CRC-32, which zipfile checks too), are damage."""
    data = bytearray(store.dumps(sample_filter))
    entry = bytes(data).rfind(b"class_count.npy") - 46  # its central directory entry
    assert data[entry:entry + 4] == b"PK\x01\x02"
    data[entry + 16] ^= 0xFF  # the entry's CRC-32
    with pytest.raises(ModelFormatError, match="damaged"):
        store.loads(bytes(data))


def _with_meta(data: bytes, edit) -> bytes:
    """A model file's bytes with its metadata (textnb-model.json) changed in place by
    ``edit(meta)``, as a file written by another version of textnb would have it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            content = zin.read(name)
            if name == "textnb-model.json":
                meta = json.loads(content)
                edit(meta)
                content = json.dumps(meta).encode()
            zout.writestr(name, content)
    return out.getvalue()


def _rewritten(data: bytes, member: str, content: bytes) -> bytes:
    """A model file's bytes with one member replaced (and its checksum updated)."""
    import hashlib
    import io

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        meta = json.loads(zin.read("textnb-model.json"))
        meta["sha256"][member] = hashlib.sha256(content).hexdigest()
        for name in zin.namelist():
            zout.writestr(name, json.dumps(meta) if name == "textnb-model.json"
                          else content if name == member else zin.read(name))
    return out.getvalue()


def test_a_loaded_model_scores_one_message_without_its_index_as_with_it(sample_model_file,
                                                                       sample_index):
    """``load`` leaves the vocabulary's index unbuilt (``textnb filter`` scores one
    message); the scores are those of the model with the index, bit for bit."""
    indexed, _ = store.load_for_update(sample_model_file)
    raws = [m.raw for m in iter_index(sample_index)][::7]
    for raw in raws:
        lazy = store.load(sample_model_file)
        np.testing.assert_array_equal(lazy.log_odds([raw]), indexed.log_odds([raw]))
    lazy = store.load(sample_model_file)
    np.testing.assert_array_equal(lazy.log_odds(raws), indexed.log_odds(raws))


def test_a_repeated_token_is_damage_when_loading_for_update(sample_filter, model_path):
    tokens = list(sample_filter.vocabulary.tokens_)
    tokens[1] = tokens[0]
    model_path.write_bytes(_rewritten(store.dumps(sample_filter), "vocabulary.json",
                                      json.dumps(tokens).encode("ascii")))
    with pytest.raises(ModelFormatError, match="damaged.*duplicate"):
        store.load_for_update(model_path)
    lazy = store.load(model_path)  # load builds no index: the repeat is not seen yet
    lazy.log_odds([b"Subject: one message\n\nscored without the index\n"])
    with pytest.raises(ValueError, match="duplicate"):  # until the columns are indexed
        lazy.vocabulary.check()
    with pytest.raises(ModelFormatError, match="damaged.*duplicate"):  # classify's load
        store.load_while(model_path, lambda: None, index=True)


# Tokens whose JSON holds every kind of escape next to the list's own quotes and ", "
# separators: quotes, backslash runs of each parity, a token that is itself '", "',
# control characters, non-ASCII, astral and lone surrogates, the empty token.
_AWKWARD_TOKENS = ['"', '\\', '\\"', 'a\\', 'a\\\\', '\\\\\\"x', '", "', 'x", ', ', ', ', "b',
                   '', ' ', 'tab\there', 'nul\x00', 'café', '\U0001f600', '\ud83d\ude00x\udcff',
                   '\udcff', 'bi:free money', 'url:a/b', '[', ']', '"]']


@pytest.fixture(params=["C", "Python"])
def either_loops(request, monkeypatch):
    """The vocabulary's JSON read and written by the C module, then without it."""
    from textnb._c import speedups

    if request.param == "C" and speedups._speedups is None:
        pytest.skip("textnb._c._speedups was not built: the Python loops are the only ones")
    if request.param == "Python":
        monkeypatch.setattr(speedups, "_speedups", None)
    return request.param


@pytest.mark.usefixtures("either_loops")
@pytest.mark.parametrize("tokens", [
    _AWKWARD_TOKENS, _AWKWARD_TOKENS[::-1], ["plain", "words", "only"], ['"'], [""], ["x"],
    [t + s for t in _AWKWARD_TOKENS for s in ("", '"', "\\")],
    ["".join(random.Random(seed).choices('ab"\\, []\n\u00e9\U0001f600\udcff', k=seed % 9))
     for seed in range(2000)]])
def test_the_vocabulary_is_read_as_json_reads_it(tokens, monkeypatch):
    """``_read_json_list`` cuts the writer's JSON at its quotes, decoding only the tokens
    with an escape; the tokens are json.loads's, byte for byte in the store."""
    data = json.dumps(tokens).encode("ascii")
    expected = TokenStore(json.loads(data))
    parsed, loads = [], json.loads
    monkeypatch.setattr(json, "loads", lambda text: parsed.append(text) or loads(text))
    got = token_codec.read_json_list(data)
    assert got == expected and list(got) == loads(data)
    if any("\\" not in json.dumps(token) for token in tokens):
        assert data not in parsed  # not the whole list: the escaped tokens at most


@pytest.mark.usefixtures("either_loops")
@pytest.mark.parametrize("tokens", [
    _AWKWARD_TOKENS, ["plain", "words"], [""], ["", ""], ["a\\"], ["\\", "u0000"],
    ["\\u0000"], ["x\\u0000y", "z"], ["a\x00b", "c"], ["\ud83d", "\ude00"],
    [t + s for t in _AWKWARD_TOKENS for s in ("", '"', "\\", "\\u0000", "\x00")],
    ["".join(random.Random(seed).choices('ab"\\u0\x00, []\n\u00e9\U0001f600\udcff\x7f',
                                         k=seed % 11)) for seed in range(3000)]])
def test_the_vocabulary_is_written_as_json_writes_it(tokens, monkeypatch):
    """``_write_json_list`` of a TokenStore (its bytes, joined by NUL, one json.dumps) gives
    json.dumps's bytes, in one chunk or many; regions whose tokens hold a NUL or the text
    \\u0000 go the slow way."""
    for chunk in (1 << 16, 7):
        monkeypatch.setattr(token_store, "_CHUNK", chunk)
        out = io.BytesIO()
        token_codec.write_json_list(out, TokenStore(tokens))
        assert out.getvalue() == json.dumps(tokens).encode("ascii")


@pytest.mark.usefixtures("either_loops")
@pytest.mark.parametrize("data", [
    b"[]", json.dumps(["a", "b"], indent=1).encode(), json.dumps(["caf\u00e9"],
                                                                 ensure_ascii=False).encode(),
    b'["a","b"]', b'[ "a", "b" ]', b'["tab\there"]', b'["\\u12"]', b'["\\x"]', b'["a", "b"',
    b'["\\ud83d\\ude00", "\\ud83d\\u0041", "\\ud83d"]', b'["\\ud83d\\uzzzz"]', b'["\xc3\xa9"]'])
def test_a_vocabulary_of_another_shape_is_read_by_json(data):
    """Valid JSON the writer does not produce (spacing, raw UTF-8) is read by json.loads;
    what json.loads rejects (a raw control character) is still rejected."""
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(ValueError):
            token_codec.read_json_list(data)
        return
    assert list(token_codec.read_json_list(data)) == expected


def test_load_while_gives_the_model_load_gives(sample_filter, sample_index, model_path):
    store.save(sample_filter, model_path)
    ran = []
    loaded = store.load_while(model_path, lambda: ran.append(True))
    assert ran == [True]
    np.testing.assert_array_equal(_scores(loaded, sample_index),
                                  _scores(store.load(model_path), sample_index))


def test_load_while_can_index_the_vocabulary_for_batches(sample_model_file, sample_index):
    indexed = store.load_while(sample_model_file, lambda: None, index=True)
    raws = [m.raw for m in iter_index(sample_index)]
    np.testing.assert_array_equal(indexed.log_odds(raws),
                                  store.load(sample_model_file).log_odds(raws))


def test_load_while_raises_the_loads_error_after_the_work(tmp_path):
    damaged = tmp_path / "damaged.tnb"
    damaged.write_bytes(b"PK\x03\x04 not really")
    ran = []
    with pytest.raises(ModelFormatError, match="damaged"):
        store.load_while(damaged, lambda: ran.append(True))
    assert ran == [True]


def test_load_while_raises_the_works_error_once_the_load_is_done(sample_filter, model_path,
                                                                monkeypatch):
    import threading

    store.save(sample_filter, model_path)
    loads = []
    real = loaders._start_read
    monkeypatch.setattr(loaders, "_start_read",
                        lambda path, index: loads.append(real(path, index)) or loads[-1])

    def work():
        raise RuntimeError("spaCy would not import")

    with pytest.raises(RuntimeError, match="would not import"):
        store.load_while(model_path, work)
    assert len(loads) == 1  # the load ran to its end, and no thread is left behind
    assert not [t for t in threading.enumerate() if t.name == "textnb-load"]


def test_a_save_without_a_thread_to_spare_writes_the_same_file(tmp_path, monkeypatch):
    """Regression (docs/security.md, a thread that cannot start): at a pids limit the
    save deflates on the calling thread; the file is byte for byte the threaded one."""
    import threading

    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    spam_filter = SpamFilter()
    spam_filter.learn_tokens([["cheap", "pills"], ["meeting", "notes"]], ["spam", "ham"])
    threaded = tmp_path / "threaded.tnb"
    store.save(spam_filter, threaded)

    def cannot_start(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", cannot_start)
    inline = tmp_path / "inline.tnb"
    store.save(spam_filter, inline)
    assert inline.read_bytes() == threaded.read_bytes()
    assert store.load(inline).log_odds([b"Subject: cheap\n\npills\n"]).tolist() == \
        store.load(threaded).log_odds([b"Subject: cheap\n\npills\n"]).tolist()


def test_the_same_model_saved_at_other_times_is_the_same_bytes(sample_filter, monkeypatch):
    """Regression: the description member took the clock's time (ZipFile.writestr of a
    name), so two saves a second apart differed and a save-load-save check failed under
    load."""
    import time

    first = store.dumps(sample_filter)
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)
    monkeypatch.setattr(time, "localtime", lambda t=None: time.gmtime(later))
    assert store.dumps(sample_filter) == first


def test_route_alpha_is_saved_and_a_loaded_model_scores_as_the_saved(sample_filter,
                                                                     sample_one_alpha_filter,
                                                                     sample_index, model_path):
    want = _scores(sample_filter, sample_index)
    assert not np.array_equal(want, _scores(sample_one_alpha_filter, sample_index))  # it matters
    store.save(sample_filter, model_path)
    loaded = store.load(model_path)
    assert loaded.config.model.route_alpha == 0.03
    np.testing.assert_array_equal(loaded.model.route_columns_, sample_filter.model.route_columns_)
    np.testing.assert_array_equal(_scores(loaded, sample_index), want)


def test_a_file_saved_before_the_training_section_says_it_learned_every_message(
        sample_learned_filter, model_path):
    # Models were trained on every message before train learned thick by default.
    model_path.write_bytes(_with_meta(store.dumps(sample_learned_filter),
                                      lambda meta: meta["config"].pop("training")))
    loaded = store.load(model_path)
    assert (loaded.config.training.regime, loaded.config.training.margin) == ("all", 40.0)


def test_a_file_saved_before_route_alpha_keeps_scoring_as_it_did(sample_one_alpha_filter,
                                                                 sample_index, model_path):
    # Such a file was trained with one pseudo-count for both (route_alpha = alpha's 0.1)
    model_path.write_bytes(_with_meta(store.dumps(sample_one_alpha_filter),
                                      lambda meta: meta["config"]["model"].pop("route_alpha")))
    loaded = store.load(model_path)
    assert loaded.config.model.route_alpha is None
    assert loaded.model.route_columns_known == 0  # nothing classified: no route_alpha
    np.testing.assert_array_equal(_scores(loaded, sample_index),
                                  _scores(sample_one_alpha_filter, sample_index))
