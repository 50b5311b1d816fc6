"""textnb train: a new model from labelled mail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    EngineOpt,
    EngineStrictOpt,
    HamOpt,
    IndexOpt,
    JobsOpt,
    JsonOpt,
    MarginOpt,
    ModelOpt,
    Progress,
    RegimeOpt,
    SchedulerOpt,
    SpamOpt,
    StoreModelOpt,
    StoreOpt,
    TsvOpt,
    app,
    check_store,
    model_path,
    operator_errors,
    pick_engine,
    skipping_unreadable,
)


# fmt: off
@app.command("train")
def train_cli(
    model: Optional[Path] = ModelOpt,
    spam: Optional[List[str]] = SpamOpt,
    ham: Optional[List[str]] = HamOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="TOML config (default: built-in defaults, see configs/default.toml)."),
    event_model: Optional[str] = typer.Option(None, "--event-model", help="multinomial or bernoulli."),
    features: Optional[str] = typer.Option(None, "--features", help="tf (term frequency) or binary."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="Lidstone smoothing pseudo-count (> 0; 1 = Laplace)."),
    setting: Optional[List[str]] = typer.Option(None, "--set", help="Any config value as section.key=value, e.g. --set features.min_df=2 (repeatable)."),
    regime: Optional[str] = RegimeOpt,
    margin: Optional[float] = MarginOpt,
    as_json: bool = JsonOpt,
    engine: str = EngineOpt,
    scheduler: Optional[str] = SchedulerOpt,
    jobs: Optional[int] = JobsOpt,
    strict: bool = EngineStrictOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Train a new model from labelled mail and save it (replacing any model at that path).

    By default (training.regime thick) it learns, in the order given, only the messages
    the model of those before gets wrong or right by less than --margin: on a real
    mailbox in delivery order it ranks the next messages better than learning every one
    (docs/retraining.md).

    Give the mail in one sequence (--index in delivery order, --tsv, one source) or as a
    --spam and a --ham pile of one file a message (a Maildir, .eml files), put in the
    order they arrived in; from mbox piles, with --engine dask or --store, every
    message is learned (--regime all).

    Inputs that cannot be read are skipped and listed on stderr (exit 0); with
    --strict the first one stops the run (exit 1) and the old model stays.
    """
    from .. import commands
    from ..config import load_config, parse_override_value

    with operator_errors(), skipping_unreadable(strict):
        overrides = {"model.event_model": event_model, "features.features": features,
                     "model.alpha": alpha}
        for item in setting or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise typer.BadParameter(f"{item!r} is not section.key=value", param_hint="--set")
            overrides[key.strip()] = parse_override_value(value.strip())
        explicit = regime is not None or "training.regime" in overrides
        overrides.update({k: v for k, v in {"training.regime": regime,
                                            "training.margin": margin}.items() if v is not None})
        cfg = load_config(config, overrides)
        cfg, files = _regime_for_the_input(cfg, explicit, (spam, ham), engine, store,
                                           index or [], tsv or [])
        chosen = pick_engine(engine, scheduler, jobs)
        progress = Progress("trained")
        try:
            if check_store(store, model):
                if engine != "local":
                    raise typer.BadParameter("with --store the messages are counted in this "
                                             "process (--engine local)", param_hint="--engine")
                from ..commands.shared_store import train as store_train

                summary = store_train(store, store_model, cfg, spam or [], ham or [],
                                             index or [], tsv or [], progress=progress)
                summary.update(size_bytes=0)
            else:
                summary = commands.train(model_path(model), cfg, spam or [], ham or [], index or [],
                                         tsv or [], progress=progress, engine=chosen,
                                         files=files)
        finally:
            progress.close()
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        n = summary["messages"]
        passed = summary.get("passed", 0)
        typer.echo(f"trained {n['spam']:,} spam and {n['ham']:,} ham in {summary['seconds']:.1f} s; "
                   + (f"{passed:,} passed by the regime ({summary['regime']}); " if passed else "")
                   + f"{summary['vocabulary_size']:,} tokens; model written to {summary['model']}"
                   + (f" ({summary['size_bytes'] / 1e6:.1f} MB)" if store is None else ""))


def _regime_for_the_input(cfg, explicit: bool, piles: tuple, engine: str,
                          store: str | None, index=(), tsv=()):
    """The config with the regime this input allows, and the files in the order to learn
    them (None: as planned). Thick (the default) judges each message by the model of the
    ones before it, so it needs the mail in one sequence, in this process: a --spam pile
    and a --ham pile are put in the order they arrived in (``commands.in_one_sequence``);
    where no order can be found (an mbox pile), on another engine or into a shared store,
    every message is learned instead (and the model says so); a regime asked for by name
    is refused there, or learns in the order given, with a note, for unordered piles."""
    if cfg.training.regime == "all":
        return cfg, None
    where = ("--store" if store is not None else
             f"--engine {engine}" if engine != "local" else None)
    if explicit and where is not None:
        raise typer.BadParameter(f"training.regime {cfg.training.regime} scores each message "
                                 "with the model of the ones before it, in this process; "
                                 f"with {where} train learns every message (--regime all)",
                                 param_hint="--regime")
    if where is not None:
        return cfg.learning_every_message(), None
    from ..commands import in_one_sequence

    ordered_cfg, files = in_one_sequence(cfg, *piles, index, tsv)
    if explicit and all(piles) and files is None:
        # Each message is judged by the model of those before it, so the order is the
        # training: one class's sources wholly before the other's is not the mail's.
        typer.echo(f"note: --regime {cfg.training.regime} learns in the order given, every "
                   "--spam source before every --ham one (a pile holds several messages a "
                   "file, so the order they arrived in is not known); for that order, give "
                   "Maildirs or one file a message, or an --index listing it", err=True)
        return cfg, None
    return ordered_cfg, files
