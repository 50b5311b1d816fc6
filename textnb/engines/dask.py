"""The Dask engine (``--engine dask``): training and scoring on a Dask cluster.

``DaskEngine`` offers the engine calls (``textnb.engines``); the functions below do the
work. Commands reach it through ``engine=DaskEngine(...)`` (``textnb.commands``); this
module never imports them.

Naive Bayes training is counting, and counts add up: the counts of the parts of
the mail, summed, are the counts of the whole. So the work splits by files.

A training run, step by step
1. Partitions. The client lists the input's files in the order the single-process
   path reads them (``textnb.mail.sources``: sorted directory walks, Maildir ``cur/``
   then ``new/``, index lines) and cuts the list into contiguous runs. It reads
   no message, only directory listings and index files. The workers must see the
   same paths (a shared file system, or the same files on every machine).
2. Digests. Each partition is read and normalised on a worker, which returns each
   message's ledger digest and label (33 bytes a message). From these the client
   finds the messages given twice (learned once, with the last label, as
   ``textnb.modelfile.retrain`` does) and those the model's ledger already holds. Every
   digest has to reach the client anyway: the ledger is part of the model file.
3. Counts. Each partition is read again, and the messages to learn are tokenised
   and counted on a worker by ``engines.counting.count_work``, the local engine's
   own code. A partition's counts (``Counts``) are its distinct tokens in order of
   first sight, their counts per class and document frequencies, and its class counts.
4. Merge. The counts are merged SPLIT_EVERY at a time, level by level, on the
   workers: a tree reduction, in which no process receives more than SPLIT_EVERY
   partials. Only the root reaches the client, which adds it to the model.

The vocabulary: distributed, not hashed
A merge keeps the left partial's columns and appends the right one's unseen
tokens in their order. Partitions are contiguous runs of the input and are
merged in input order, so the result is the single process's order of first
sight, whatever the shape of the tree (the merge is associative). Feature
hashing would make the merge trivial, but colliding tokens would share counts,
so the model would differ from the single-process one, and ``explain`` would
have no token names to show. What travels up the tree is each partition's
distinct tokens, not each message's: on SpamAssassin the 6,047 messages hold
1,348,690 (message, token) pairs; cut into 128 partitions of 47 messages their
partitions' vocabularies hold 501,509 tokens, into 8 of 756 messages 240,024,
and the merged vocabulary 152,646 (``bench/dask_scaling.py``).

Identity. Counts are integer-valued floats, whose sums are exact (below 2**53) in
any order and grouping; the smoothing and logs run once, on those counts, at the
client. The model file's members equal the single-process ``textnb train``'s
byte for byte (tests/test_distributed.py, on the sample and SpamAssassin corpora).

Scoring (classify, evaluate) sends the model file's bytes to every worker once
and maps over partitions; ``classify`` streams the verdicts back in message order,
or has each worker write its partition's JSON lines (or Parquet) to a folder.

Dask is an optional extra (``pip install 'textnb[dask]'``) and is imported only
inside these functions, never when textnb is imported (nor when this module is).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ..config import FilterConfig
from ..errors import EmptyTrainingSetError, EngineError, SourceError
from ..labels import LABEL_CODES, LABELS
from ..modelfile import store
from ..modelfile.lifecycle import LearnReport, Lifecycle, decide
from ..models.ledger import DIGEST_SIZE, normalise
from ..spamfilter import ScoredMessage, SpamFilter

# The single-process plan and readers themselves, so a worker reads a file exactly as
# iter_labelled does (tests/test_distributed.py checks the two streams are equal).
from ..mail.sources import RawMessage, SourceFile, plan_labelled, plan_unlabelled, read_planned
from .counting import Counts, Work, count_work, merge_counts
from .local import ScoredBatch

__all__ = ["DaskEngine", "SourceFile", "Counts", "connect", "labelled_files", "unlabelled_files",
           "partition", "read_files", "merge_counts", "plan_run", "count_partition",
           "learn_files", "score_partition", "score_files", "classify_to_files",
           "decision_row"]

# Partials merged by one task (Dask's own tree reductions default to 8 too). The merge is a
# small part of the counting from 2 partitions to 128, so the fan-in is not worth tuning
# (docs/dask.md#partitions-and-the-merge).
SPLIT_EVERY = 8
# Default partitioning: at least this many partitions per worker thread (a slow
# partition then delays the end by a fraction of a worker's share) ...
PARTITIONS_PER_THREAD = 4
# ... and at most this many files in one: a few seconds of tokenising, long enough that
# Dask's overhead per task is noise, short enough to balance
# (docs/dask.md#partitions-and-the-merge).
FILES_PER_PARTITION = 1000


# -- the input, as files --------------------------------------------------------------


def _no_stdin(files: list[SourceFile]) -> list[SourceFile]:
    if any(f.form == "stdin" for f in files):
        raise SourceError("--engine dask reads the mail on the workers, from files; '-' "
                          "(standard input) cannot be split: save it to a file first")
    return files


def labelled_files(spam: Sequence[str] = (), ham: Sequence[str] = (), index: Sequence[str] = (),
                   tsv: Sequence[str] = ()) -> list[SourceFile]:
    """``sources.plan_labelled``, from files only (the workers cannot read standard input).

    RAISES SourceError when no source is given, a path is missing or one is '-'.
    """
    if not (spam or ham or index or tsv):
        raise SourceError("no training messages given; pass --spam SRC and --ham SRC, "
                          "or --index FILE (lines 'spam PATH' / 'ham PATH')")
    return _no_stdin(plan_labelled(spam, ham, index, tsv))


def unlabelled_files(sources: Sequence[str] = (), index: Sequence[str] = (),
                     tsv: Sequence[str] = ()) -> list[SourceFile]:
    """``sources.plan_unlabelled``, from files only (no standard input by default)."""
    if not (sources or index or tsv):
        raise SourceError("--engine dask needs files to read: give files, directories, "
                          "mboxes or Maildirs, or --index FILE (not standard input)")
    return _no_stdin(plan_unlabelled(sources, index, tsv))


def partition(files: Sequence[SourceFile], n_partitions: int) -> list[list[SourceFile]]:
    """Contiguous runs of files, as equal in length as can be (the first ones longer)."""
    n = max(1, min(n_partitions, len(files)))
    size, extra = divmod(len(files), n)
    parts, start = [], 0
    for i in range(n):
        stop = start + size + (i < extra)
        parts.append(list(files[start:stop]))
        start = stop
    return parts


def read_files(files: Sequence[SourceFile]) -> Iterator[RawMessage]:
    """The messages of some files, in order (run on the workers)."""
    return read_planned(files)


# -- the cluster --------------------------------------------------------------------


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise EngineError("--engine dask needs Dask, an optional extra: "
                          f"pip install 'textnb[dask]' ({exc})") from None
    return distributed


@contextmanager
def connect(scheduler=None):
    """A ``distributed.Client``, closed on exit.

    scheduler (str | Client | None): a scheduler's address ('tcp://10.0.0.5:8786'), a
        scheduler file (JSON, as ``dask scheduler --scheduler-file`` writes), or a
        Client to use as it is; None: $DASK_SCHEDULER_ADDRESS if set, else a cluster on
        this machine with one single-threaded worker process per core (tokenising is
        pure Python and holds the GIL, so threads would not run it in parallel).
    """
    distributed = _distributed()
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    import dask

    if scheduler is None and not dask.config.get("scheduler-address", None):
        with distributed.LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                                      processes=True, dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            yield client
        return
    where = {"address": scheduler}
    if scheduler and str(scheduler).endswith(".json"):
        if not os.path.isfile(scheduler):
            raise EngineError(f"no scheduler file '{scheduler}'; give the file that 'dask "
                              "scheduler --scheduler-file' wrote, or the address tcp://HOST:8786")
        where = {"scheduler_file": scheduler}
    try:
        client = distributed.Client(**where)
    except (OSError, TimeoutError, ValueError) as exc:
        shown = scheduler or dask.config.get("scheduler-address")
        raise EngineError(f"cannot reach the Dask scheduler at '{shown}' ({exc}); check the "
                          "address (tcp://HOST:8786) and that the scheduler is running") from None
    with client:
        yield client


def _default_partitions(client, n_files: int) -> int:
    threads = sum(client.nthreads().values()) or 1
    return max(PARTITIONS_PER_THREAD * threads, math.ceil(n_files / FILES_PER_PARTITION))


def _tree_merge(client, futures: list, merge: Callable):
    """Merge futures' results SPLIT_EVERY at a time, level by level, in order, on the workers."""
    level = list(futures)
    while len(level) > 1:
        level = [group[0] if len(group) == 1 else client.submit(merge, *group, pure=False)
                 for group in (level[i:i + SPLIT_EVERY] for i in range(0, len(level), SPLIT_EVERY))]
    return level[0]


# -- counts and their merge: textnb.engines.counting (Counts, merge_counts) ----------------


def _merge_partials(*partials: tuple[Counts, Counts]) -> tuple[Counts, Counts]:
    return (merge_counts(*(p[0] for p in partials)), merge_counts(*(p[1] for p in partials)))


# -- training: the worker side ----------------------------------------------------------


@dataclass
class _Plan:
    """What the counting pass does with each message of one partition.

    label (ndarray of int8, (m,)): the label to learn the message under, -1 to skip it.
    old (ndarray of int8, (m,)): for a message moved from the other class, its old label;
        -1 for a new one.
    digest (ndarray of uint8, (k, 32)): the digests of the k messages learned, to check
        the files did not change between the passes.
    old_hash (list[int], (k,)): the ledger's tokens hash of each moved message (0 for
        new ones): it must tokenise as it did when it was learned.
    """

    label: np.ndarray
    old: np.ndarray
    digest: np.ndarray
    old_hash: list[int]


def _digest_partition(files: Sequence[SourceFile]) -> tuple[np.ndarray, np.ndarray]:
    """Each message's ledger digest (uint8 (m, 32)) and label code (uint8 (m,))."""
    digests, labels = bytearray(), []
    for message in read_files(files):
        if message.label not in LABEL_CODES:
            raise EmptyTrainingSetError(
                f"message {message.source!r} has no label ({message.label!r}); give it as "
                "--spam or --ham, or through an index file")
        digests += hashlib.sha256(normalise(message.raw)).digest()
        labels.append(LABEL_CODES[message.label])
    return (np.frombuffer(bytes(digests), dtype=np.uint8).reshape(-1, DIGEST_SIZE),
            np.asarray(labels, dtype=np.uint8))


@lru_cache(maxsize=4)
def _tokenizing_filter(config: FilterConfig) -> SpamFilter:
    """One filter per worker process and config, only to tokenise: spaCy's load is paid once
    a process, not once a partition (docs/dask.md#partitions-and-the-merge)."""
    return SpamFilter(config)


def _changed(files: Sequence[SourceFile]) -> SourceError:
    first, last = files[0].path, files[-1].path
    return SourceError(f"the mail in {first} .. {last} changed while it was being learned "
                       "(messages added, removed or edited between the two passes); run "
                       "the command again")


def count_partition(files: Sequence[SourceFile], config: FilterConfig, plan: _Plan
                    ) -> tuple[Counts, Counts, list[int]]:
    """Counts to add (new messages, and moved ones under their new label), counts to
    remove (moved ones under their old label), and the tokens hash of each learned
    message: ``counting.count_work`` on the messages the plan picks."""
    work = Work([], [], [], [], [])
    k = n_read = 0
    for i, message in enumerate(read_files(files)):
        n_read += 1
        if i >= len(plan.label):
            raise _changed(files)
        if plan.label[i] < 0:
            continue
        norm = normalise(message.raw)
        if hashlib.sha256(norm).digest() != plan.digest[k].tobytes():
            raise _changed(files)
        work.norms.append(norm)
        work.labels.append(int(plan.label[i]))
        work.old.append(int(plan.old[i]))
        work.old_hash.append(int(plan.old_hash[k]) if plan.old[i] >= 0 else None)
        work.sources.append(message.source)
        k += 1
    if n_read != len(plan.label):
        raise _changed(files)
    counted = count_work(_tokenizing_filter(config), work)
    return counted.plus, counted.minus, counted.hashes


def _pair(partial: tuple[Counts, Counts, list[int]]) -> tuple[Counts, Counts]:
    return partial[0], partial[1]


def _hashes(partial: tuple[Counts, Counts, list[int]]) -> list[int]:
    return partial[2]


# -- training: the client side ----------------------------------------------------------


def plan_run(digested: list[tuple[np.ndarray, np.ndarray]], ledger):
    """Decide what to learn over the whole run at once, by the decision every way of
    learning takes (``textnb.modelfile.lifecycle.decide``, as ``Lifecycle.sort`` for
    regime 'all'), from the digests the workers sent.

    RETURNS (plans, report, learned): a _Plan per partition, the LearnReport, and the
    learned messages' (digests, labels, is_new) in run order.
    """
    sizes = [len(labels) for _, labels in digested]
    digests = (np.concatenate([d for d, _ in digested]) if digested
               else np.zeros((0, DIGEST_SIZE), dtype=np.uint8))
    labels = (np.concatenate([lab for _, lab in digested]) if digested
              else np.zeros(0, dtype=np.uint8)).astype(np.int8)
    n = len(labels)
    raw = np.ascontiguousarray(digests).tobytes()
    keys = [raw[i * DIGEST_SIZE:(i + 1) * DIGEST_SIZE] for i in range(n)]
    known, changes = decide(keys, [LABELS[c] for c in labels.tolist()], ledger.label)
    label = np.full(n, -1, dtype=np.int8)
    old = np.full(n, -1, dtype=np.int8)
    report = LearnReport(regime="all", read=n, known=known)
    for place, final, was in changes:
        label[place] = LABEL_CODES[final]
        old[place] = -1 if was is None else LABEL_CODES[was]
        (report.learned if was is None else report.moved)[final] += 1

    plans, start = [], 0
    for size in sizes:
        part_label, part_old = label[start:start + size], old[start:start + size]
        picked = start + np.flatnonzero(part_label >= 0)
        old_hash = [ledger.tokens_hash(digests[i].tobytes()) if old[i] >= 0 else 0
                    for i in picked]
        plans.append(_Plan(part_label, part_old, digests[picked], old_hash))
        start += size
    picked = np.flatnonzero(label >= 0)
    return plans, report, (digests[picked], label[picked], old[picked] < 0)


def learn_files(client, spam_filter: SpamFilter, files: list[SourceFile],
                n_partitions: int | None = None, progress: Callable[[int], None] | None = None):
    """Add labelled files to a filter's counts and ledger on the cluster.

    RETURNS (LearnReport, dict): the report, and how the run went (partitions, workers,
        seconds of the digest pass and of the counting pass with its merge).
    """
    distributed = _distributed()
    start = time.perf_counter()
    parts = partition(files, n_partitions or _default_partitions(client, len(files)))
    digested = client.gather(client.map(_digest_partition, parts, pure=False))
    plans, report, (digests, labels, is_new) = plan_run(digested, spam_filter.ledger)
    digest_seconds = time.perf_counter() - start

    config = spam_filter.config
    leaves = [client.submit(count_partition, part, config, plan, pure=False)
              for part, plan in zip(parts, plans)]
    root = _tree_merge(client, client.map(_pair, leaves, pure=False), _merge_partials)
    sizes = {leaf.key: len(plan.label) for leaf, plan in zip(leaves, plans)}
    for leaf in distributed.as_completed(leaves):
        leaf.result()  # raises a worker's error here
        if progress:
            progress(sizes[leaf.key])
    hashes = client.gather(client.map(_hashes, leaves, pure=False))
    del leaves
    plus, minus = root.result()
    hashes = list(chain.from_iterable(hashes))

    if plus.class_count.any():
        plus.add_to(spam_filter)
    if minus.class_count.any():
        minus.add_to(spam_filter, weight=-1.0)
    lifecycle, ledger = Lifecycle(spam_filter), spam_filter.ledger
    for digest, code, new, tokens in zip(digests, labels, is_new, hashes):
        lifecycle.enter(digest.tobytes(), LABELS[code], int(tokens) if new else None)
    if len(digests) and len(plus.tokens):
        # Which message held which column stays on the workers; every column the run's
        # messages hold is stamped "now" (as Ledger.cover stamps new columns), no earlier
        # than in process, so a prune (textnb.modelfile.prune) keeps those tokens at least as long.
        ledger.saw(spam_filter.vocabulary.columns(plus.tokens), ledger.next_serial)
    run = {"partitions": len(parts), "workers": len(client.nthreads()),
           "digest_seconds": round(digest_seconds, 3),
           "count_seconds": round(time.perf_counter() - start - digest_seconds, 3)}
    return report, run


def check_regime(regime: str) -> None:
    """EngineError for a regime that cannot be split across workers."""
    if regime != "all":
        raise EngineError(f"--regime {regime} scores each message with the model that all "
                          "earlier messages made, one at a time, so it cannot be split across "
                          "workers; use --engine local, or --regime all")


# -- scoring ------------------------------------------------------------------------------

_SCORING: dict[str, SpamFilter] = {}  # per worker process: model digest -> loaded filter


def _scoring_filter(key: str, data: bytes) -> SpamFilter:
    """The model, loaded once per worker process (the last two models are kept)."""
    if key not in _SCORING:
        while len(_SCORING) >= 2:
            _SCORING.pop(next(iter(_SCORING)))
        _SCORING[key] = store.loads(data, name=f"model {key[:12]}")
    return _SCORING[key]


def _load_model(model_path: Path) -> tuple[SpamFilter, bytes]:
    spam_filter = store.load(model_path)  # names a missing or damaged file before any work
    return spam_filter, Path(model_path).read_bytes()


def score_partition(files, key: str, data: bytes, count_learned: bool = False
                    ) -> tuple[list[str], list[str | None], np.ndarray, int]:
    """Each message's source, label and log-odds, and with ``count_learned`` how many of
    them the model's ledger holds (run on a worker)."""
    sources, labels, learned = [], [], []
    spam_filter = _scoring_filter(key, data)

    def raws():
        for message in read_files(files):
            sources.append(message.source)
            labels.append(message.label)
            if count_learned:
                learned.append(spam_filter.ledger.holding([message.raw]))
            yield message.raw

    scores = spam_filter.log_odds(raws())
    return sources, labels, scores, sum(learned)


def _scatter_model(client, data: bytes):
    return hashlib.sha256(data).hexdigest(), client.scatter(data, broadcast=True, hash=False)


def score_files(client, spam_filter: SpamFilter, files: Sequence[SourceFile],
                n_partitions: int | None = None, count_learned: bool = False
                ) -> Iterator[tuple]:
    """(sources, labels, log-odds, learned) per partition, in order, as the workers finish
    them."""
    key, model = _scatter_model(client, store.dumps(spam_filter))
    parts = partition(files, n_partitions or _default_partitions(client, len(files)))
    futures = [client.submit(score_partition, part, key, model, count_learned, pure=False)
               for part in parts]
    for i, future in enumerate(futures):
        yield future.result()
        futures[i] = None  # releases the partition's results on the cluster


def decision_row(scored: ScoredMessage) -> dict[str, Any]:
    """One verdict as ``textnb classify --json`` writes it."""
    return {"source": scored.source, **scored.decision.as_json()}


def _write_partition(files, key: str, data: bytes, cost_ratio: float | None, path: str,
                     output_format: str) -> dict[str, int]:
    """Score a partition and write its verdicts to ``path`` (atomically); count the labels."""
    rows = [decision_row(s) for s in _scoring_filter(key, data).classify(read_files(files),
                                                                          cost_ratio)]
    tmp = f"{path}.tmp"
    if output_format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {name: [row[name] for row in rows] for name in
                   ("source", "label", "log_odds", "p_spam", "threshold")}
        pq.write_table(pa.table(columns), tmp)
    else:
        with open(tmp, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
    os.replace(tmp, path)
    counts = {"spam": 0, "ham": 0, "unsure": 0}
    for row in rows:
        counts[row["label"]] += 1
    return counts


def classify_to_files(model_path: Path, output: Path, sources: Sequence[str] = (),
                      index: Sequence[str] = (), tsv: Sequence[str] = (),
                      cost_ratio: float | None = None, output_format: str = "jsonl",
                      scheduler=None, n_partitions: int | None = None) -> dict[str, Any]:
    """Score on the workers and have each write its partition's verdicts to ``output``.

    output (Path): a new or empty folder that the workers can write to; it gets
        ``part-00000.jsonl`` ... (or ``.parquet``), in message order.
    output_format (str): 'jsonl' (``classify --json``'s lines) or 'parquet' (needs pyarrow).
    RETURNS (dict): ``files`` written, ``counts`` per label, ``messages``, ``seconds``.
    """
    if output_format not in ("jsonl", "parquet"):
        raise EngineError(f"unknown output format '{output_format}'; use jsonl or parquet")
    if output_format == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise EngineError("Parquet output needs pyarrow on the client and the workers: "
                              "pip install pyarrow (or write jsonl)") from None
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise SourceError(f"output folder '{output}' is not an empty folder; give a new one "
                          "(the part files of two runs would mix)")
    files = unlabelled_files(sources, index, tsv)
    _, data = _load_model(model_path)
    output.mkdir(parents=True, exist_ok=True)
    with connect(scheduler) as client:
        start = time.perf_counter()
        key, model = _scatter_model(client, data)
        parts = partition(files, n_partitions or _default_partitions(client, len(files)))
        paths = [str(output.resolve() / f"part-{i:05d}.{output_format}") for i in range(len(parts))]
        futures = [client.submit(_write_partition, part, key, model, cost_ratio, path,
                                 output_format, pure=False) for part, path in zip(parts, paths)]
        counts = {"spam": 0, "ham": 0, "unsure": 0}
        for part_counts in client.gather(futures):
            for label, n in part_counts.items():
                counts[label] += n
        seconds = time.perf_counter() - start
    return {"files": paths, "counts": counts, "messages": sum(counts.values()),
            "seconds": round(seconds, 3)}


# -- the engine ---------------------------------------------------------------------------


class DaskEngine:
    """Count and score on a Dask cluster.

    scheduler (str | Client | None): see ``connect``.
    n_partitions (int | None): default: PARTITIONS_PER_THREAD per worker thread, and no
        more than FILES_PER_PARTITION files in one.
    """

    name = "dask"

    def __init__(self, scheduler=None, n_partitions: int | None = None):
        self.scheduler, self.n_partitions = scheduler, n_partitions
        self._run: dict = {}

    def check(self, regime: str = "all") -> None:
        check_regime(regime)

    def plan_labelled(self, spam=(), ham=(), index=(), tsv=()) -> list[SourceFile]:
        return labelled_files(spam, ham, index, tsv)

    def plan_unlabelled(self, sources=(), index=(), tsv=()) -> list[SourceFile]:
        return unlabelled_files(sources, index, tsv)

    def run_info(self) -> dict:
        return {"engine": self.name, **self._run}

    def learn(self, spam_filter: SpamFilter, files: Sequence[SourceFile], regime: str = "all",
              margin: float | None = None, progress: Callable[[int], None] | None = None):
        self.check(regime)
        with connect(self.scheduler) as client:
            report, self._run = learn_files(client, spam_filter, list(files),
                                            self.n_partitions, progress)
        return report

    def score(self, spam_filter: SpamFilter, files: Sequence[SourceFile],
              count_learned: bool = False) -> Iterator[ScoredBatch]:
        with connect(self.scheduler) as client:
            for sources, labels, scores, learned in score_files(
                    client, spam_filter, files, self.n_partitions, count_learned):
                yield ScoredBatch(sources, labels, scores, learned)
