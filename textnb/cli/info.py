"""textnb info: what a model holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import (
    JsonOpt,
    ModelOpt,
    StoreModelOpt,
    StoreOpt,
    app,
    check_store,
    model_to_read,
    operator_errors,
)


@app.command("info")
def info_cli(model: Optional[Path] = ModelOpt, as_json: bool = JsonOpt,
             store: Optional[str] = StoreOpt, store_model: str = StoreModelOpt):
    """Show what a model was trained on, its settings and its size."""
    from .. import commands
    from ..models.evidence import selection_text
    from ..models.health import training_health

    with operator_errors():
        if check_store(store, model):
            from ..commands.shared_store import info as store_info

            summary = store_info(store, store_model)
        else:
            summary = commands.info(model_to_read(model))
    health = training_health(summary["messages"])
    summary["health"] = health.to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    cfg = summary["config"]
    n = summary["messages"]
    threshold = summary["threshold"]
    if store is not None:
        typer.echo(f"model:       {summary['model']} (log record {summary['log_record']}, "
                   f"snapshot at {summary['snapshot_record']}; the store holds "
                   f"{', '.join(summary['store_models'])})")
    else:
        typer.echo(f"model:       {summary['model']} ({summary['size_bytes'] / 1e6:.2f} MB, "
                   f"format {summary['format_version']})")
    typer.echo(f"trained on:  {n.get('spam', 0):,} spam, {n.get('ham', 0):,} ham")
    ledger = summary["ledger"]
    typer.echo(f"ledger:      {ledger['messages']:,} messages ({ledger['spam']:,} spam, "
               f"{ledger['ham']:,} ham)" + (f"; {ledger['untracked']:,} learned messages not "
                                            "in it (cannot be forgotten)" if ledger["untracked"] else ""))
    typer.echo(f"vocabulary:  {summary['vocabulary_size']:,} tokens ({summary['features_kept']:,} kept)")
    typer.echo(f"model:       {cfg['model']['event_model']} NB, {cfg['features']['features']} "
               f"features, alpha={cfg['model']['alpha']}"
               + (f" (the route's tokens {cfg['model']['route_alpha']})"
                  if cfg["model"].get("route_alpha") not in (None, cfg["model"]["alpha"])
                  else ""))
    m = cfg["model"]
    typer.echo("evidence:    " + selection_text(m["max_discriminators"],
                                                 m["max_pair_discriminators"],
                                                 m.get("evidence", "strongest"),
                                                 cfg["tokenizer"]["bigrams"],
                                                 m.get("header_places", 0),
                                                 m.get("clues_per_header_field", 0),
                                                 m.get("tile_word_pairs", False),
                                                 m.get("header_discriminators", 0)))
    typer.echo(f"decision:    cost ratio {cfg['decision']['cost_ratio']}, threshold "
               + (f"{threshold:.3f} (tuned)" if threshold is not None else "ln(cost ratio)"))
    d, band = cfg["decision"], summary["review_band"]
    if band is not None:
        low, high = band
        ends = [f"above {low:.3f}" if low is not None else "from the lowest (no message is called ham)",
                f"at or below {high:.3f}" if high is not None else
                "with no upper end (no message is called spam)"]
        rule = (f"review cost {d['review_cost']:g} per message" if d.get("review_cost")
                else f"band {d['unsure_band']:g} either side of the threshold")
        typer.echo(f"unsure:      log-odds {' and '.join(ends)}: left to a person ({rule})")
    t = cfg.get("training", {"regime": "all"})
    typer.echo("learning:    " + {"all": "every message given (training.regime all)",
                                  "error": "the messages it gets wrong or is unsure of "
                                           "(training.regime error)",
                                  "thick": "the messages it gets wrong or right by less "
                                           f"than {t.get('margin', 40):g} beyond the threshold "
                                           "(training.regime thick)"}[t["regime"]])
    limits = summary["health"]
    typer.echo("training:    " + (f"ok (at least {limits['min_per_class']} messages of each "
                                  f"class, at most {limits['max_imbalance']:g} to 1)"
                                  if health.ok else "\n             ".join(health.problems)))


