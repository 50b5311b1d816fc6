"""The commands as plain functions: they take paths and options, return data, print nothing.

``textnb.cli`` wraps each in a typer command, one call each; other code and tests call
these directly. Where the work runs is an argument: ``engine`` (``textnb.engines``:
the local process pool, or a Dask cluster); None means the local engine with
``jobs`` processes (default 1 here; the CLI's default is every core). The daemons
(``serve``, ``milter``, ``web``) are in ``textnb.commands.daemons``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ..config import FilterConfig
from ..errors import EmptyTrainingSetError, EngineError, SourceError
from ..labels import require_both_classes
from ..mail.sources import (RawMessage, SourceFile, iter_index, iter_labelled, iter_messages,
                            iter_tsv, plan_labelled, read_planned)
from ..modelfile import store
from ..spamfilter import ScoredMessage, SpamFilter
from .daemons import milter, serve, web  # noqa: F401  (the long-running commands)


def engine_for(engine=None, jobs: int | None = 1):
    """``engine`` itself, or the local engine with ``jobs`` processes (None: every core)."""
    if engine is not None:
        return engine
    from ..engines import LocalEngine

    return LocalEngine(jobs)


def _check_sources(spam, ham, index, tsv) -> None:
    if not (spam or ham or index or tsv):
        raise SourceError("no training messages given; pass --spam SRC and --ham SRC, "
                          "or --index FILE (lines 'spam PATH' / 'ham PATH')")


def labelled_messages(spam: Sequence[str] = (), ham: Sequence[str] = (),
                      index: Sequence[str] = (), tsv: Sequence[str] = ()) -> Iterator[RawMessage]:
    """Every labelled message from the given sources, lazily."""
    if not (spam or ham or index or tsv):
        raise SourceError("no training messages given; pass --spam SRC and --ham SRC, "
                          "or --index FILE (lines 'spam PATH' / 'ham PATH')")
    return iter_labelled(spam=spam, ham=ham, index=index, tsv=tsv)


def unlabelled_messages(sources: Sequence[str] = (), index: Sequence[str] = (),
                        tsv: Sequence[str] = ()) -> Iterator[RawMessage]:
    """Messages to score: plain sources, index files (labels kept for evaluation), TSV files."""
    if not (sources or index or tsv):
        sources = ["-"]
    for src in sources:
        yield from iter_messages(src)
    for path in index:
        yield from iter_index(path)
    for path in tsv:
        yield from iter_tsv(path)


def train(model_path: Path, config: FilterConfig, spam: Sequence[str] = (),
          ham: Sequence[str] = (), index: Sequence[str] = (), tsv: Sequence[str] = (),
          progress: Callable[[int], None] | None = None, jobs: int | None = 1,
          engine=None, files: list[SourceFile] | None = None) -> dict[str, Any]:
    """Train a new model from scratch and save it atomically. Returns a summary.

    Trains through the ledger, as ``textnb.modelfile.retrain`` does: a message given twice is
    learned once, and the model can later be retrained and forgotten from exactly.
    The engine's workers parse, tokenise and count; the model does not depend on
    the engine or on how many processes it runs.

    Which messages are learned, in the order given, is ``config.training``'s (``thick``:
    those the model of the messages before gets wrong or right by less than the margin;
    ``all``: every one; ``textnb.modelfile.lifecycle``), as ``retrain --regime`` learns
    them (``textnb train`` learns a --spam and a --ham pile in the order they arrived in,
    or whole: ``in_one_sequence``, whose ``files`` are then given); an engine that cannot
    score as it learns refuses another regime than ``all`` (``engine.check``).
    """
    _check_sources(spam, ham, index, tsv)
    engine = engine_for(engine, jobs)
    engine.check(config.training.regime)
    start = time.perf_counter()
    spam_filter, report = _learn_anew(config, engine, spam, ham, index, tsv, progress, files)
    elapsed = time.perf_counter() - start
    _replace_model(spam_filter, model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), seconds=round(elapsed, 3),
                   size_bytes=Path(model_path).stat().st_size, duplicates=report.known,
                   regime=report.regime, passed=report.passed, **engine.run_info())
    return summary


def _learn_anew(config: FilterConfig, engine, spam: Sequence[str], ham: Sequence[str],
                index: Sequence[str], tsv: Sequence[str],
                progress: Callable[[int], None] | None,
                files: list[SourceFile] | None = None):
    """A new filter with ``config`` that learned the mail as every learning command does:
    the ledger plans (new, known, relabelled), the engine counts, the filter applies,
    learning what ``config.training`` selects. files: the mail's files in the order to
    learn them (``in_one_sequence``); None: as the engine plans them.
    RETURNS (SpamFilter, LearnReport)."""
    if files is None:
        files = engine.plan_labelled(spam, ham, index, tsv)
    spam_filter = SpamFilter(config)
    report = engine.learn(spam_filter, files, config.training.regime, config.training.margin,
                          progress)
    require_both_classes(spam_filter.n_learned)
    return spam_filter, report


def _replace_model(spam_filter: SpamFilter, model_path: Path) -> None:
    """Write a model that replaces whatever the file and its journal held (the journal's
    records are void: ``store.save`` with no ``journal_seq``)."""
    from ..modelfile.lock import model_lock

    with model_lock(model_path):  # never interleaved with a retrain of the same file
        store.save(spam_filter, model_path)


def retrain(model_path: Path, spam: Sequence[str] = (), ham: Sequence[str] = (),
            index: Sequence[str] = (), tsv: Sequence[str] = (), regime: str = "all",
            margin: float | None = None, progress: Callable[[int], None] | None = None,
            lock_timeout: float | None = None, jobs: int | None = 1, engine=None,
            maildir: str | Path | None = None, spam_folders: Sequence[str] = (),
            ham_folders: Sequence[str] = ()) -> dict[str, Any]:
    """``textnb.modelfile.retrain.retrain`` (locked, atomic, through the ledger) on an engine.

    maildir (str | Path | None): a mail store (``~/Maildir``) whose spam folder and inbox
        are learned besides ``spam`` and ``ham``; ``spam_folders`` and ``ham_folders`` name
        its folders (default: the first spam folder found, and INBOX;
        ``textnb.mail.folders.maildir_sources``).
    """
    from ..modelfile.retrain import DEFAULT_MARGIN
    from ..modelfile.retrain import retrain as retrain_model

    if maildir is not None:
        from ..mail.folders import maildir_sources

        spam_dirs, ham_dirs = maildir_sources(maildir, list(spam_folders), list(ham_folders))
        spam = [*spam, *map(str, spam_dirs)]
        ham = [*ham, *map(str, ham_dirs)]
    elif spam_folders or ham_folders:
        raise ValueError("spam_folders and ham_folders name folders of a maildir; give "
                         "maildir too")

    return retrain_model(model_path, spam, ham, index, tsv, regime,
                         DEFAULT_MARGIN if margin is None else margin, progress,
                         lock_timeout=lock_timeout, engine=engine_for(engine, jobs))


def scores(model_path: Path, files, engine, count_learned: bool = False
           ) -> tuple[SpamFilter, Iterator]:
    """The model, and the engine's ``ScoredBatch``es of the planned files (lazily)."""
    # Loaded now, to name a missing or damaged file before any work. The local engine's
    # processes tokenise, so spaCy is imported meanwhile (``store.load_while``), and they
    # score in batches, so the vocabulary is indexed there too.
    if engine.name == "local":
        from ..text.tokenize import import_spacy_modules

        spam_filter = store.load_while(model_path, import_spacy_modules, index=True)
    else:
        spam_filter = store.load(model_path)
    return spam_filter, engine.score(spam_filter, files, count_learned)


def classify(model_path: Path, sources: Sequence[str] = (), index: Sequence[str] = (),
             tsv: Sequence[str] = (), cost_ratio: float | None = None, jobs: int | None = 1,
             engine=None, on_model=None) -> Iterator[ScoredMessage]:
    """Score and decide each message, lazily, in message order. The inputs are planned
    and the model loaded now (errors before any work); scoring runs as it is consumed.
    on_model (Callable[[SpamFilter], object] | None): called with the loaded model (the
    CLI reads its training health there, textnb.models.health)."""
    return chain.from_iterable(classify_batches(model_path, sources, index, tsv, cost_ratio,
                                                jobs, engine, on_model))


def classify_batches(model_path: Path, sources: Sequence[str] = (), index: Sequence[str] = (),
                     tsv: Sequence[str] = (), cost_ratio: float | None = None,
                     jobs: int | None = 1, engine=None, on_model=None
                     ) -> Iterator[list[ScoredMessage]]:
    """``classify``'s verdicts a scored batch at a time (lists, in message order), for a
    caller that writes each batch's output at once (the command line)."""
    engine = engine_for(engine, jobs)
    files = engine.plan_unlabelled(sources, index, tsv)
    spam_filter, batches = scores(model_path, files, engine)
    if on_model is not None:
        on_model(spam_filter)
    return _decisions(spam_filter, batches, cost_ratio)


def _decisions(spam_filter: SpamFilter, batches, cost_ratio) -> Iterator[list[ScoredMessage]]:
    costs = spam_filter.cost_model(cost_ratio)
    for batch in batches:
        decisions = costs.decide_many(batch.log_odds, spam_filter.p_spam(batch.log_odds))
        yield list(map(ScoredMessage, batch.sources, decisions))


def classify_to_folder(model_path: Path, output: Path, sources: Sequence[str] = (),
                       index: Sequence[str] = (), tsv: Sequence[str] = (),
                       cost_ratio: float | None = None, output_format: str = "jsonl",
                       engine=None) -> dict[str, Any]:
    """Verdicts written by the workers to part files in ``output`` (Dask engine only:
    ``textnb.engines.dask.classify_to_files``)."""
    from ..engines.dask import classify_to_files

    if engine is None or engine.name != "dask":
        raise EngineError("--output goes with --engine dask (the workers write the files)")
    return classify_to_files(model_path, output, sources, index, tsv, cost_ratio,
                             output_format, engine.scheduler, engine.n_partitions)


def info(model_path: Path) -> dict[str, Any]:
    """What a model was trained on, its settings and its size."""
    spam_filter = store.load(model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), size_bytes=Path(model_path).stat().st_size,
                   format_version=store.FORMAT_VERSION,
                   ledger=spam_filter.ledger.summary(spam_filter.n_learned))
    band = spam_filter.cost_model().unsure_between
    # the log-odds (low, high) labelled 'unsure'; an end no score passes is None (JSON)
    summary["review_band"] = (None if band is None else
                              [b if np.isfinite(b) else None for b in band])
    return summary


def explain(model_path: Path, source: str, k: int = 15, cost_ratio: float | None = None):
    """Explanations of every message in a source."""
    spam_filter = store.load(model_path)
    for message in iter_messages(source):
        yield spam_filter.explain(message, k=k, cost_ratio=cost_ratio)


def evaluate(model_path: Path, index: Sequence[str] = (), spam: Sequence[str] = (),
             ham: Sequence[str] = (), tsv: Sequence[str] = (), cost_ratio: float | None = None,
             jobs: int | None = 1, engine=None) -> dict[str, Any]:
    """The field's metrics on held-out labelled messages (only labels and log-odds are kept)."""
    _check_sources(spam, ham, index, tsv)
    engine = engine_for(engine, jobs)
    files = engine.plan_labelled(spam, ham, index, tsv)
    spam_filter, batches = scores(model_path, files, engine, count_learned=True)
    is_spam: list[bool] = []
    log_odds = []
    learned = 0
    for batch in batches:
        is_spam += [label == "spam" for label in batch.labels]
        log_odds.append(batch.log_odds)
        learned += batch.learned
    y = np.array(is_spam, dtype=bool)
    summary = evaluation_summary(spam_filter, y, np.concatenate(log_odds) if log_odds
                                 else np.zeros(0), cost_ratio)
    summary["learned"] = learned  # messages the model was trained on: optimistic figures
    return summary


def evaluation_summary(spam_filter: SpamFilter, y: np.ndarray, scores: np.ndarray,
                       cost_ratio: float | None = None) -> dict[str, Any]:
    """The field's metrics from labels (True for spam) and log-odds (shared by the engines)."""
    from ..evaluation.metrics import summary as metric_summary

    missing = [name for name, n in (("spam", int(y.sum())), ("ham", int((~y).sum()))) if not n]
    if missing:
        raise EmptyTrainingSetError(
            f"no {' or '.join(missing)} messages among the {len(y):,} given; evaluation needs "
            "both (give --spam and --ham sources, or an index that lists both)")
    costs = spam_filter.cost_model(cost_ratio)
    threshold = costs.log_threshold
    result = metric_summary(y, scores, threshold)
    result.update(n_messages=len(y), n_spam=int(y.sum()), n_ham=int((~y).sum()),
                  threshold=threshold, cost_ratio=costs.cost_ratio)
    # TCR and weighted accuracy at λ are those of the model's own rule *for that λ*
    # (ln λ, or where its calibration crosses λ/(1+λ)), as Androutsopoulos et al.
    # measure them; not those of the one threshold above.
    from ..decision.calibration import brier_score, expected_calibration_error
    from ..evaluation.tune import DEFAULT_COST_RATIOS, operating_point

    rows = [operating_point(y, scores, spam_filter.cost_model(lam).log_threshold, lam)
            for lam in DEFAULT_COST_RATIOS]
    for row in rows:
        result[f"tcr_lam{row['cost_ratio']:g}"] = row["tcr"]
        result[f"wacc_lam{row['cost_ratio']:g}"] = row["wacc"]
    p_spam = spam_filter.p_spam(scores)
    result.update(cost_ratios=rows, calibration=(spam_filter.calibration or {}).get("method"),
                  brier=brier_score(y, p_spam), ece=expected_calibration_error(y, p_spam))
    return result


def tune(model_path: Path | None, cost_ratios: Sequence[float], index: Sequence[str] = (),
         spam: Sequence[str] = (), ham: Sequence[str] = (), tsv: Sequence[str] = (),
         n_folds: int = 5, chronological: bool = False, search: bool = False,
         write: bool = False, progress: Callable[[int], None] | None = None,
         review_cost: float | None = None, config: FilterConfig | None = None,
         jobs: int | None = None):
    """Cross-validate the model's settings on labelled mail and tune its decision.

    With ``write``, the model file is replaced by one trained on that mail by
    ``train``'s own steps (the ledger plans, the engine counts, the file is replaced),
    with the chosen settings, carrying the calibration: the map was fitted to the scores
    of models trained on this mail, so it belongs to such a model and to no other. The
    mail is read a second time for that. An explicit first cost ratio becomes the
    model's default.
    review_cost (float | None): the cost of a person's look at one message, in units of
        a spam let through: the rows then give the three-way rule's figures
        (``decision.review_region``), and with ``write`` it becomes the model's
        ``decision.review_cost``. None: the model's own (0: two-way).
    config (FilterConfig | None): the settings to start from; None: the model file's
        (a shared store's model gives its own: ``shared_store.tune``).
    jobs (int | None): processes that tokenise the mail (for the folds, and with
        ``write`` for training); None: every core. The result does not depend on it.
    Returns a ``textnb.evaluation.tune.TuneResult``.
    """
    from dataclasses import replace

    from ..evaluation.tune import DEFAULT_COST_RATIOS
    from ..evaluation.tune import tune as tune_filter

    if write:
        check_rereadable(spam, ham)
    if config is None:
        config = store.load(model_path).config
    if review_cost is not None:
        config = replace(config, decision=replace(config.decision,
                                                  review_cost=float(review_cost))).validate()
    config, files = in_one_sequence(config, spam, ham, index, tsv)
    engine = engine_for(None, jobs)
    messages = (read_planned(files) if files is not None
                else labelled_messages(spam, ham, index, tsv))
    result = tune_filter(config, messages,
                         cost_ratios or DEFAULT_COST_RATIOS, n_folds=n_folds,
                         chronological=chronological, do_search=search, progress=progress,
                         review_cost=config.decision.review_cost,
                         tokenised=engine.tokenised)
    if write:
        chosen = tuned_config(result, cost_ratios)
        # Learned by train's own steps, so the file's counts, ledger and journal are those
        # train writes. Its thick pass judges each message by the decision the folds'
        # passes used (the model's, untuned); the tuned cost ratio is the written model's.
        spam_filter, _ = _learn_anew(replace(chosen, decision=result.config.decision),
                                     engine, spam, ham, index, tsv, progress, files)
        spam_filter.config = chosen
        spam_filter.calibration = result.calibration
        spam_filter.threshold = None  # the calibration answers every λ
        _replace_model(spam_filter, model_path)
    return result


def in_one_sequence(config: FilterConfig, spam: Sequence[str], ham: Sequence[str],
                    index: Sequence[str] = (), tsv: Sequence[str] = ()
                    ) -> tuple[FilterConfig, list[SourceFile] | None]:
    """``config``, and the mail's files in the order its regime learns them.

    A thick pass judges each message by the model of the ones before it, so it needs the
    mail in one sequence. An --index, a --tsv or one pile is one; a --spam pile and a
    --ham pile are put in the order their messages arrived in (``textnb.mail.arrival``:
    Maildir names, Received: dates), and when that cannot be found (a pile is an mbox or
    standard input), ``training.regime = 'all'``: every message is learned.
    RETURNS (config, files): files None when they are learned as planned."""
    if config.training.regime == "all" or not (spam and ham):
        return config, None
    from ..mail.arrival import arrival_order

    ordered = arrival_order(plan_labelled(spam, ham, index, tsv))
    if ordered is None:
        return config.learning_every_message(), None
    return config, ordered


def check_rereadable(spam: Sequence[str], ham: Sequence[str]) -> None:
    """SourceError when ``tune --write`` is given standard input, which it cannot read
    a second time."""
    if "-" in [*spam, *ham]:
        raise SourceError("tune --write reads the mail twice (to tune, then to train), so "
                          "it cannot take '-' (standard input); save the mail to a file")


def tuned_config(result, cost_ratios: Sequence[float]) -> FilterConfig:
    """The settings ``tune --write`` gives a model: those tuned (``result.config``, the
    model's decision kept), with an explicit first cost ratio as its default."""
    from dataclasses import replace

    chosen = result.config
    if cost_ratios:
        chosen = replace(chosen, decision=replace(chosen.decision,
                                                  cost_ratio=float(cost_ratios[0])))
    return chosen


def forget(model_path: Path, sources: Sequence[str] = (), index: Sequence[str] = (),
           tsv: Sequence[str] = (), progress: Callable[[int], None] | None = None,
           lock_timeout: float | None = None) -> dict[str, Any]:
    """Remove messages' counts from the model exactly, as if never learned (locked,
    atomic, through the ledger: ``textnb.modelfile.retrain.forget``). Returns a summary."""
    from ..modelfile.retrain import forget as forget_messages

    return forget_messages(model_path, sources, index, tsv, progress=progress,
                           lock_timeout=lock_timeout)


def compact(model_path: Path, prune: bool = False, max_df: int | None = None,
            keep_last: int | None = None, lock_timeout: float | None = None) -> dict[str, Any]:
    """Fold the model's journal into its file; with ``prune``, also drop rare tokens
    (``max_df`` and ``keep_last`` default to the bound measured in
    docs/model-file.md#a-bound-on-size). Returns a summary."""
    from ..modelfile.prune import PRUNE_KEEP_LAST, PRUNE_MAX_DF
    from ..modelfile.prune import compact as compact_model

    return compact_model(model_path, prune, PRUNE_MAX_DF if max_df is None else max_df,
                         PRUNE_KEEP_LAST if keep_last is None else keep_last,
                         lock_timeout=lock_timeout)


EXPORT_FORMATS = ("pmml", "text")


def _check_format(fmt: str) -> None:
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format {fmt!r} is not one textnb writes; use "
                         f"{' or '.join(EXPORT_FORMATS)}")


def export(model_path: Path, out: Path, fmt: str = "pmml", max_features: int = 0
           ) -> dict[str, Any]:
    """Write the model as a PMML 4.4 document or as a text dump (``out`` replaced
    atomically; ``-`` is standard output for a dump). ``max_features`` prunes a PMML
    export to its most frequent terms (0: all). Returns a summary."""
    _check_format(fmt)
    if fmt == "text":
        if max_features:
            raise ValueError("max_features prunes PMML documents only; a text dump holds "
                             "the whole model")
        from ..modelfile.dump import export_file as export_text

        return export_text(model_path, out)
    from ..pmml import export_file as export_pmml

    return export_pmml(model_path, out, max_features)


def import_model(source: Path, model_path: Path, fmt: str = "pmml") -> dict[str, Any]:
    """A model file (written atomically) from a PMML document or text dump that textnb
    exported; it scores as the exported model did. Returns the model's summary."""
    _check_format(fmt)
    if fmt == "text":
        from ..modelfile.dump import import_file
    else:
        from ..pmml import import_file
    return import_file(source, model_path)


def merge(inputs: Sequence[str | Path], model_path: Path, mail: Sequence[str] = (),
          index: Sequence[str] = (), on_conflict: str = "refuse",
          lock_timeout: float | None = None) -> dict[str, Any]:
    """Merge models trained with equal settings into ``model_path``, as if trained on all
    of their mail: a message learned by several (found in ``mail``/``index``) counts
    once; ``on_conflict`` settles one learned under both labels
    (``textnb.modelfile.merge.CONFLICT_POLICIES``). Returns a summary."""
    from ..modelfile.merge import merge_files

    if len(inputs) < 2:
        raise ValueError(f"give two or more models to merge, got {len(inputs)}")
    return merge_files(inputs, model_path, mail, index, on_conflict, lock_timeout=lock_timeout)


def pmml_score(pmml_path: Path, csv_path: Path) -> dict[str, Any]:
    """Score a CSV file's records with any PMML NaiveBayesModel, by the specification's
    procedure: ``classes``, ``predicted`` and ``probabilities`` per record, and the
    ``ignored_columns`` the model does not read."""
    from ..pmml.score import score_csv

    return score_csv(pmml_path, csv_path)
