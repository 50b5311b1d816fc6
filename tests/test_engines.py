"""The engines (textnb.engines): one process or several, the same model, scores and report.

Batches of 16 messages, so that the sample corpus makes several and two worker
processes start; the reference is the single-process path of ``textnb.modelfile.retrain``.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import json
import os
import shutil
import zipfile

import numpy as np
import pytest

from textnb import commands, spamfilter
from textnb.config import FilterConfig, apply_overrides
from textnb.engines import LocalEngine, make_engine
from textnb.engines.workers import Workers
from textnb.mail.sources import iter_labelled, plan_labelled, plan_unlabelled, read_planned
from textnb.modelfile import lifecycle, retrain, store

from conftest import SAMPLE, SAMPLE_INDEX, every_message

# The ledger's column history (when each token column was first and last seen): the
# engines are compared with each other on every member, and with the single-process
# path on these.
HISTORY = ("ledger_born.npy", "ledger_last.npy")


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(spamfilter, "BATCH_SIZE", 16)
    monkeypatch.setattr(lifecycle, "BATCH_SIZE", 16)
    started = []
    pool = Workers._pool
    monkeypatch.setattr(Workers, "_pool", lambda self: started.append(self.jobs) or pool(self))
    return started


@pytest.fixture
def messy(tmp_path):
    """The sample as folders, an mbox and a TSV file; a ham given twice (once with CRLF),
    a spam given again as ham (in a later batch: a move), a TSV text twice."""
    spam, ham = tmp_path / "spam", tmp_path / "ham"
    shutil.copytree(SAMPLE / "spam", spam)
    shutil.copytree(SAMPLE / "ham", ham)
    raw = (SAMPLE / "ham" / "001.eml").read_bytes()
    (ham / "zz-crlf-copy.eml").write_bytes(raw.replace(b"\n", b"\r\n"))
    shutil.copy(SAMPLE / "spam" / "001.eml", ham / "zz-relabelled.eml")
    tsv = tmp_path / "texts.tsv"
    tsv.write_text("ham\tsee you at lunch\nspam\tWIN a FREE prize now\nham\tsee you at lunch\n")
    return {"spam": [str(spam)], "ham": [str(ham), str(SAMPLE / "mbox")], "tsv": [str(tsv)]}


def members(path, skip=()) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
        out = {name: zf.read(name) for name in zf.namelist() if name not in skip}
    meta = json.loads(out.pop("textnb-model.json"))
    meta.pop("created", None)
    for name in skip:
        meta.get("sha256", {}).pop(name, None)
    return {**out, "meta": json.dumps(meta, sort_keys=True).encode()}


def test_a_plan_reads_as_the_iterators_do(messy):
    files = plan_labelled(messy["spam"], messy["ham"], [str(SAMPLE_INDEX)], messy["tsv"])
    assert (list(read_planned(files))
            == list(iter_labelled(messy["spam"], messy["ham"], [str(SAMPLE_INDEX)], messy["tsv"])))
    assert [f.form for f in plan_unlabelled()] == ["stdin"]


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
def test_train_with_two_jobs_is_train_with_one_and_the_single_process_fit(
        tmp_path, messy, small_batches, event_model):
    config = every_message(apply_overrides(FilterConfig(), {"model.event_model": event_model,
                                                            "features.features": "tf"}))
    summaries = {}
    for jobs in (1, 2):
        summaries[jobs] = commands.train(tmp_path / f"j{jobs}.tnb", config, messy["spam"],
                                         messy["ham"], tsv=messy["tsv"], jobs=jobs)
    assert small_batches == [2]  # jobs=1 starts no pool
    assert members(tmp_path / "j1.tnb") == members(tmp_path / "j2.tnb")
    reference = spamfilter.SpamFilter(config)
    report = retrain.fit(reference, iter_labelled(messy["spam"], messy["ham"], tsv=messy["tsv"]))
    store.save(reference, tmp_path / "ref.tnb")
    assert (members(tmp_path / "j2.tnb", HISTORY) == members(tmp_path / "ref.tnb", HISTORY))
    assert summaries[1]["duplicates"] == summaries[2]["duplicates"] == report.known == 2
    assert summaries[2]["jobs"] == 2


def test_retrain_with_moves_with_two_jobs_is_the_single_process_retrain(tmp_path, messy,
                                                                         small_batches):
    first = tmp_path / "first.tnb"
    commands.train(first, every_message(), index=[str(SAMPLE_INDEX)])
    for name in ("one", "two", "ref"):
        shutil.copy(first, tmp_path / f"{name}.tnb")
    results = {name: commands.retrain(tmp_path / f"{name}.tnb", messy["spam"], messy["ham"],
                                      tsv=messy["tsv"], jobs=jobs)
               for name, jobs in (("one", 1), ("two", 2))}
    reference = retrain.retrain(tmp_path / "ref.tnb", messy["spam"], messy["ham"],
                                tsv=messy["tsv"])
    assert members(tmp_path / "one.tnb") == members(tmp_path / "two.tnb")
    assert members(tmp_path / "two.tnb", HISTORY) == members(tmp_path / "ref.tnb", HISTORY)
    for key in ("read", "learned", "moved", "known", "messages", "ledger"):
        assert results["one"][key] == results["two"][key] == reference[key], key
    assert reference["moved"] == {"spam": 0, "ham": 1}
    # Retraining the mail a model was trained on is all known: nothing counted or written.
    again = commands.retrain(first, index=[str(SAMPLE_INDEX)], jobs=2)
    assert not again["written"] and again["known"] == again["read"]


def test_classify_and_evaluate_with_two_jobs_equal_one(tmp_path, small_batches):
    model = tmp_path / "m.tnb"
    commands.train(model, every_message(), index=[str(SAMPLE_INDEX)])
    sources = [str(SAMPLE / "spam"), str(SAMPLE / "ham")]
    one = [(s.source, s.decision) for s in commands.classify(model, sources, jobs=1)]
    two = [(s.source, s.decision) for s in commands.classify(model, sources, jobs=2)]
    assert one == two and len(one) == 100
    spam_filter = store.load(model)
    raws = [m.raw for m in iter_labelled(spam=[sources[0]], ham=[sources[1]])]
    assert np.array_equal([d.log_odds for _, d in one], spam_filter.log_odds(raws))
    ev_one = commands.evaluate(model, index=[str(SAMPLE_INDEX)], jobs=1)
    ev_two = commands.evaluate(model, index=[str(SAMPLE_INDEX)], jobs=2)
    assert json.dumps(ev_one, default=float) == json.dumps(ev_two, default=float)
    assert small_batches == [2, 2]  # classify and evaluate each started workers


def test_unknown_engine_and_misplaced_options_are_named():
    with pytest.raises(ValueError, match="'spark' is not an engine"):
        make_engine("spark")
    with pytest.raises(ValueError, match="jobs go with the local engine"):
        make_engine("dask", jobs=2)
    with pytest.raises(ValueError, match="at least 1"):
        LocalEngine(0)


@pytest.fixture
def nothing_frozen():
    """No object frozen when the test starts, whatever ran in this process before: the
    command line's ``filter``, run in-process by other tests, freezes what is alive as
    it ends (``cli/filter.py``), as a process about to exit may. Frozen again after."""
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    yield
    if frozen:
        gc.freeze()


def _freeze_count(_state, _item) -> int:
    return gc.get_freeze_count()


def _collector_threshold(_state, _item) -> int:
    return gc.get_threshold()[0]


def test_workers_collect_less_often_and_the_caller_as_before():
    """engines.workers.BATCH_GC_THRESHOLD in every worker (forked or spawned); the calling
    process keeps its own."""
    from textnb.engines.workers import BATCH_GC_THRESHOLD

    before = gc.get_threshold()
    assert set(Workers(2, None, _collector_threshold).map(range(4))) == {BATCH_GC_THRESHOLD}
    assert gc.get_threshold() == before


def test_spawned_workers_collect_less_often_too(monkeypatch):
    """Where the platform cannot fork, the workers are spawned (engines.workers._pool):
    the same pool, the same threshold."""
    from textnb.engines.workers import BATCH_GC_THRESHOLD

    spawn = multiprocessing.get_context("spawn")
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    monkeypatch.setattr(multiprocessing, "get_context", lambda method=None: spawn)
    assert set(Workers(2, None, _collector_threshold).map(range(4))) == {BATCH_GC_THRESHOLD}


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="workers are forked only where the platform forks")
def test_forked_workers_start_with_what_they_inherit_frozen_and_the_caller_unfrozen(
        nothing_frozen):
    """engines.workers.start_pool: the objects a worker inherits are out of its
    collector's sight (no page copied for a collection's pass), and the calling process
    collects its own again."""
    assert gc.get_freeze_count() == 0
    counts = list(Workers(2, None, _freeze_count).map(range(4)))
    assert len(counts) == 4 and min(counts) > 1000  # the interpreter's and textnb's objects
    assert gc.get_freeze_count() == 0


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="workers are forked only where the platform forks")
def test_a_program_that_froze_objects_itself_keeps_them_frozen(nothing_frozen):
    """start_pool does not unfreeze what the calling program froze (gc.unfreeze would
    take back all of it), and does not freeze more."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        counts = list(Workers(2, None, _freeze_count).map(range(4)))
        assert len(counts) == 4
        # Not unfrozen (that would be 0) and nothing more frozen; a frozen object whose
        # last reference goes is still freed, so in a long test process the count may
        # drop by the few that other threads let go meanwhile.
        assert frozen - 50 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def _big_result(_state, item) -> bytes:
    return bytes(4_000_000) + bytes([item])


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="workers are forked only where the platform forks")
def test_the_pools_worker_handler_sleeps_while_results_arrive(monkeypatch):
    """engines.workers.QuietPool: the thread that replaces exited workers is not woken
    by the results pipe (the stock pool's wakes thousands of times over large results,
    polling every worker each time); it still wakes to act (close, cache emptied)."""
    import multiprocessing.pool

    assert hasattr(multiprocessing.pool.Pool, "_get_sentinels")  # the hook it overrides
    passes = []
    maintain = multiprocessing.pool.Pool._maintain_pool
    monkeypatch.setattr(multiprocessing.pool.Pool, "_maintain_pool",
                        staticmethod(lambda *args: passes.append(1) or maintain(*args)))
    results = list(Workers(2, None, _big_result).map(range(16)))
    assert [r[-1] for r in results] == list(range(16)) and len(results[0]) == 4_000_001
    assert len(passes) < 16  # the stock pool: thousands


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="workers are forked only where the platform forks")
def test_the_pool_replaces_a_worker_that_exits():
    """The worker handler still wakes when a worker exits (its sentinel), and a new
    worker takes the next tasks."""
    from textnb.engines.workers import QuietPool

    pool = QuietPool(1, maxtasksperchild=1, context=multiprocessing.get_context("fork"))
    try:
        pids = [pool.apply_async(os.getpid).get(timeout=30) for _ in range(3)]
    finally:
        pool.close()
        pool.join()
    assert len(set(pids)) == 3


def test_collecting_less_gives_the_thresholds_back_even_after_an_error():
    from textnb.engines.workers import BATCH_GC_THRESHOLD, collecting_less

    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with collecting_less():
            assert gc.get_threshold() == (BATCH_GC_THRESHOLD, *before[1:])
            raise RuntimeError("stop")
    assert gc.get_threshold() == before
