"""The commands on a shared store (``--store postgresql://...``), as plain functions.

Each is the model-file command's twin, with the store's URL and the model's name in place
of a model path (``textnb.modelfile.postgres``). ``train`` creates the model (or empties
an existing one and starts it afresh); ``retrain`` and ``forget`` change it through the
shared ledger, a few hundred messages per transaction; ``info`` and ``classify`` load it
(the newest snapshot and the log's tail) and work from memory; ``tune`` with ``write``
replaces the model by a tuned one in one transaction; ``import_model`` makes a model file
(or a dump of one) the store's model, ledger and all; ``serve`` is the scorer,
following the log and learning through the store, with an outbox for when it is away.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import FilterConfig
from ..labels import require_both_classes
from ..spamfilter import ScoredMessage

__all__ = ["IMPORT_FORMATS", "classify_batches", "compact", "export", "forget",
           "import_model", "info", "open_model", "retrain", "serve", "train", "tune"]

# What ``import_model`` reads: a model file, or what ``textnb export`` writes.
IMPORT_FORMATS = ("model", "text", "pmml")


def open_model(url: str, name: str, outbox: Path | None = None):
    """The model ``name`` of the store at ``url``, loaded (``SharedModel``)."""
    from ..modelfile.postgres.shared_model import SharedModel

    return SharedModel(url, name, outbox=outbox)


def train(url: str, name: str, config: FilterConfig, spam: Sequence[str] = (),
          ham: Sequence[str] = (), index: Sequence[str] = (), tsv: Sequence[str] = (),
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """A new model ``name`` in the store (an existing one is emptied first), learned from
    the labelled mail; the log is then folded into a snapshot, so hosts start fast."""
    from ..modelfile.postgres.database import SharedStore
    from ..modelfile.postgres.shared_model import new_filter_config
    from . import labelled_messages

    messages = labelled_messages(spam, ham, index, tsv)
    start = time.perf_counter()
    store = SharedStore(url)
    try:
        store.create(name, new_filter_config(config), reset=True)
    finally:
        store.close()
    return _learn(url, name, messages, progress, start, train=True)


def retrain(url: str, name: str, spam: Sequence[str] = (), ham: Sequence[str] = (),
            index: Sequence[str] = (), tsv: Sequence[str] = (),
            progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Learn new messages into the store's model and relabel known ones."""
    from . import labelled_messages

    messages = labelled_messages(spam, ham, index, tsv)
    return _learn(url, name, messages, progress, time.perf_counter())


def _learn(url, name, messages, progress, start, train: bool = False) -> dict[str, Any]:
    model = open_model(url, name)
    try:
        report = model.learn_messages(messages, progress=progress)
        model.catch_up()
        if train:
            require_both_classes(model.spam_filter.n_learned)
        model.fold(force=True)
        summary = _summary(model)
    finally:
        model.close()
    summary.update(seconds=round(time.perf_counter() - start, 3), learned=report["new"],
                   moved=report["moved"], duplicates=report["known"], read=report["read"])
    return summary


def forget(url: str, name: str, sources: Sequence[str] = (), index: Sequence[str] = (),
           tsv: Sequence[str] = (), progress: Callable[[int], None] | None = None
           ) -> dict[str, Any]:
    """Remove messages' counts from the store's model exactly (the ledger rows hold them)."""
    from . import unlabelled_messages

    model = open_model(url, name)
    try:
        report = model.learn_messages(unlabelled_messages(sources, index, tsv), kind="FORGET",
                                      progress=progress)
        model.catch_up()
        summary = _summary(model)
    finally:
        model.close()
    summary.update(read=report["read"], forgotten=report["forgotten"],
                   not_found=report["not_found"])
    return summary


def _summary(model) -> dict[str, Any]:
    spam_filter = model.spam_filter
    summary = spam_filter.summary()
    summary.update(model=model.path, store=model.store.shown, name=model.name,
                   log_record=model.seq,
                   ledger=spam_filter.ledger.summary(spam_filter.n_learned))
    return summary


def info(url: str, name: str) -> dict[str, Any]:
    """What the store's model holds (as ``textnb info`` says of a file)."""
    import numpy as np

    model = open_model(url, name)
    try:
        summary = _summary(model)
        summary.update(size_bytes=0, format_version=None)
        band = model.spam_filter.cost_model().unsure_between
        summary["review_band"] = (None if band is None else
                                  [b if np.isfinite(b) else None for b in band])
        summary["snapshot_record"] = model.store.snapshot_seq(model.model_id)
        summary["store_models"] = model.store.names()
    finally:
        model.close()
    return summary


def compact(url: str, name: str) -> dict[str, Any]:
    """``textnb compact``'s twin: the store's log folded into a snapshot of the model now,
    so hosts start from it, and the records it holds dropped (``SharedStore.fold``)."""
    model = open_model(url, name)
    try:
        before = model.store.snapshot_seq(model.model_id)
        folded = model.fold(force=True)
        summary = {"model": model.path, "store": model.store.shown, "name": model.name,
                   "log_record": model.seq, "snapshot_before": before,
                   "snapshot_after": model.store.snapshot_seq(model.model_id),
                   "folded": folded}
    finally:
        model.close()
    return summary


def tune(url: str, name: str, cost_ratios: Sequence[float], index: Sequence[str] = (),
         spam: Sequence[str] = (), ham: Sequence[str] = (), tsv: Sequence[str] = (),
         write: bool = False, progress: Callable[[int], None] | None = None, **options):
    """``commands.tune`` from the settings of the store's model. With ``write``, as
    ``tune --write`` replaces a model file: the store's model is replaced, in one
    transaction, by one trained on this mail with the tuned settings, carrying the
    calibration (``SharedModel.replace``), and every host following it scores with it
    from that commit on. RETURNS (TuneResult)."""
    from ..modelfile.postgres.shared_model import new_filter_config
    from . import check_rereadable, labelled_messages, tuned_config
    from . import tune as tune_settings

    if write:
        check_rereadable(spam, ham)
    model = open_model(url, name)
    model.close()  # tuning needs its settings only; the database waits for the write
    result = tune_settings(None, cost_ratios, index, spam, ham, tsv, progress=progress,
                           config=model.spam_filter.config.learning_every_message(),
                           **options)  # the store learns every message
    if write:
        config = new_filter_config(tuned_config(result, cost_ratios))
        model = open_model(url, name)
        try:
            model.replace(config, labelled_messages(spam, ham, index, tsv),
                          result.calibration, progress)
            model.fold(force=True)  # hosts that join start from the tuned model
        finally:
            model.close()
    return result


def export(url: str, name: str, out: Path, fmt: str = "pmml", max_features: int = 0
           ) -> dict[str, Any]:
    """``commands.export`` of the store's model: loaded, saved as a model file in a
    temporary folder (a snapshot is that file's bytes), and exported from there."""
    import tempfile

    from ..modelfile import store
    from . import export as export_file

    model = open_model(url, name)
    try:
        with tempfile.TemporaryDirectory(prefix="textnb-export-") as folder:
            path = Path(folder) / f"{name}.tnb"
            store.save(model.spam_filter, path)
            summary = export_file(path, out, fmt, max_features)
    finally:
        model.close()
    summary["model"] = model.path
    return summary


def import_model(url: str, name: str, source: Path, fmt: str = "model",
                 replace: bool = False) -> dict[str, Any]:
    """The model file at ``source`` (or a text dump or PMML document ``textnb export``
    wrote, ``fmt``) made the store's model ``name``, in one transaction
    (``SharedStore.load_model``): every host following the model, and every host that
    joins later, then scores as the file does, bit for bit, its calibration and settings
    included; its ledger comes along, so a message it learned is known to the store, and
    relabelling or forgetting one takes the message's counts from the mail the host has
    (checked against the ledger's tokens hash). ``replace``: an existing model of that
    name is replaced; without it, StoreError. Refused, naming why, for what the store
    cannot hold: numeric features beside the tokens, a pruned model, an untrained one.
    RETURNS the stored model's summary (as ``info``)."""
    from ..errors import TextnbError
    from ..modelfile import store
    from ..modelfile.postgres.database import SharedStore
    from ..modelfile.postgres.shared_model import new_filter_config

    start = time.perf_counter()
    spam_filter = _model_to_import(source, fmt)
    why = _why_not_stored(spam_filter)
    if why is not None:
        raise TextnbError(f"cannot import '{source}' into a store: {why}")
    ledger = [(digest, entry[0], entry[1])
              for digest, entry in spam_filter.ledger.entries().items()]
    database = SharedStore(url)
    try:
        database.load_model(name, new_filter_config(spam_filter.config), ledger,
                            lambda head: store.dumps(spam_filter, head), replace)
    finally:
        database.close()
    model = open_model(url, name)
    try:
        summary = _summary(model)
    finally:
        model.close()
    summary.update(source=str(source), format=fmt,
                   seconds=round(time.perf_counter() - start, 3))
    return summary


def _why_not_stored(spam_filter) -> str | None:
    """Why the store cannot hold a model file's model as it is (None: it can)."""
    numeric = spam_filter.config.model.numeric_model
    if numeric not in (None, "none"):
        return (f"it learns numeric features (model.numeric_model = '{numeric}') beside the "
                "tokens, and a shared store keeps token counts only; train the model with "
                "--set model.numeric_model=none")
    if spam_filter.ledger.pruned_at:
        return ("it had rare tokens pruned (textnb compact --prune), and the store keeps no "
                "record of which tokens each message still counts, so a relabel or forget "
                "of an older message would not be exact; import a model that was never "
                "pruned, or train the store's model from your mail ('textnb train --store')")
    if not hasattr(spam_filter.model, "class_count_"):
        return ("it has learned nothing; train it first, or train the store's model from "
                "your mail ('textnb train --store')")
    return None


def _model_to_import(source: Path, fmt: str):
    """The filter a model file, text dump or PMML document holds (``IMPORT_FORMATS``)."""
    if fmt == "model":
        from ..modelfile.store import load
    elif fmt == "text":
        from ..modelfile.dump import load
    elif fmt == "pmml":
        from ..pmml import import_pmml as load
    else:
        raise ValueError(f"format {fmt!r} is not one textnb imports into a store; use "
                         f"{', '.join(IMPORT_FORMATS)}")
    return load(source)


def classify_batches(url: str, name: str, sources: Sequence[str] = (),
                     index: Sequence[str] = (), tsv: Sequence[str] = (),
                     cost_ratio: float | None = None, engine=None, on_model=None
                     ) -> Iterator[list[ScoredMessage]]:
    """``commands.classify_batches`` with the store's model, loaded once, scoring here."""
    from . import _decisions, engine_for

    engine = engine_for(engine)
    files = engine.plan_unlabelled(sources, index, tsv)
    model = open_model(url, name)
    model.close()  # scoring needs no database
    if on_model is not None:
        on_model(model.spam_filter)
    return _decisions(model.spam_filter, engine.score(model.spam_filter, files), cost_ratio)


def serve(url: str, name: str, address, *, outbox: Path | None, max_bytes: int = 10_000_001,
          max_clients: int = 8, timeout: float = 10.0, poll: float = 1.0,
          allow_remote: bool = False, socket_mode: int = 0o600,
          allow_any_user_to_teach: bool = False, key_file: Path | None = None,
          record: Path | None = None, record_days: float = 30.0, record_max_mb: int = 200,
          per_user: bool = False, max_resident_users: int = 16, max_users: int = 1000,
          metrics: str | None = None, stop: threading.Event | None = None,
          say: Callable[[str], None] = lambda line: None) -> None:
    """The resident scorer on the store's model: verdicts from memory, learns through the
    store (or the outbox while it is away), the log followed (``SharedModel.follow``).
    record (Path | None): record verdicts there for the review page (``textnb web``, which
        teaches through this scorer, so into the store).
    per_user (bool): a model per user in the store (``textnb.delivery.shared_users``).
    metrics (str | None): ``--metrics``'s address: the scorer's counters, as a file-store
        scorer's, and the store's own gauges (the log record held, learns waiting in the
        outbox; ``textnb.delivery.telemetry``)."""
    from ..delivery.client import KeyFileError, read_key, show_address
    from ..delivery.server import ScorerServer, check_who_may_teach
    from ..errors import TextnbError
    from .daemons import start_metrics, stop_metrics, start_recording

    try:
        key = read_key(key_file) if key_file is not None else None
    except KeyFileError as exc:
        raise TextnbError(str(exc)) from None
    check_who_may_teach(per_user, address, socket_mode, False, allow_any_user_to_teach)
    stop = stop if stop is not None else threading.Event()
    if per_user:
        from ..delivery.shared_users import SharedModelSet

        model = SharedModelSet(url, name, outbox, stop, poll, max_resident_users, max_users)
    else:
        model = open_model(url, name, outbox=outbox).warmed()
        model.follow(stop, poll)
    recorder = metrics_port = None
    try:
        telemetry, metrics_port = start_metrics(metrics, model, say)
        recorder = start_recording(record, record_days, record_max_mb, True, "serve",
                                   say=say)
        if telemetry is not None:
            telemetry.recorder = recorder
        server = ScorerServer(model, address, max_bytes=max_bytes, max_clients=max_clients,
                              timeout=timeout, reload_interval=poll,
                              allow_remote=allow_remote, socket_mode=socket_mode,
                              allow_any_user_to_teach=allow_any_user_to_teach,
                              telemetry=telemetry, recorder=recorder, key=key).bind()
        shown = model.shared if per_user else model
        say(f"textnb serve: {shown.path} (record {shown.seq})"
            + (", users' models beside it" if per_user else "")
            + f" on {show_address(server.bound_address)}; outbox {outbox}; SIGTERM stops")
        server.serve_forever(stop)
    finally:
        stop.set()
        stop_metrics(metrics_port)
        if recorder is not None:
            recorder.close()
        model.close()
