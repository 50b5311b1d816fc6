"""textnb classify: a verdict per message."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    CostOpt,
    EngineOpt,
    EngineStrictOpt,
    IndexOpt,
    JobsOpt,
    JsonOpt,
    ModelOpt,
    SchedulerOpt,
    StoreModelOpt,
    StoreOpt,
    TsvOpt,
    app,
    check_store,
    check_cost_ratio,
    model_to_read,
    nothing_done,
    operator_errors,
    pick_engine,
    skipping_unreadable,
)


# fmt: off
@app.command("classify")
def classify_cli(
    sources: Optional[List[str]] = typer.Argument(None, help="Messages: files, directories, mbox, Maildir, or '-' for stdin (the default)."),
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
    engine: str = EngineOpt,
    scheduler: Optional[str] = SchedulerOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="With --engine dask: a new folder where each worker writes its partition's verdicts (part-00000.jsonl ...), instead of sending them back."),
    output_format: str = typer.Option("jsonl", "--output-format", help="With --output: jsonl (as --json prints) or parquet (needs pyarrow)."),
    jobs: Optional[int] = JobsOpt,
    strict: bool = EngineStrictOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Classify messages: one line each with the label, log-odds, P(spam) and the source.

    Inputs that cannot be read are skipped and listed on stderr (exit 0 if any message
    was classified); with --strict the first one stops the run (exit 1).
    """
    from .. import commands
    from ..models.health import training_health

    with operator_errors(), skipping_unreadable(strict) as skipped:
        check_cost_ratio(cost_ratio)
        chosen = pick_engine(engine, scheduler, jobs)
        if output is not None:
            if chosen.name != "dask":
                raise typer.BadParameter("--output goes with --engine dask (the workers write "
                                         "the files)", param_hint="--output")
            result = commands.classify_to_folder(model_to_read(model), output, sources or [],
                                                 index or [], tsv or [], cost_ratio,
                                                 output_format, engine=chosen)
            typer.echo(json.dumps(result) if as_json else
                       f"{result['messages']:,} messages ({result['counts']['spam']:,} spam) in "
                       f"{len(result['files'])} files in {output} ({result['seconds']:.1f} s)")
            return
        unhealthy: list[str] = []

        def on_model(spam_filter):
            unhealthy.extend(training_health(spam_filter.n_learned).problems)

        if check_store(store, model):
            from ..commands.shared_store import classify_batches as store_classify_batches

            batches = store_classify_batches(store, store_model, sources or [],
                                                    index or [], tsv or [], cost_ratio,
                                                    engine=chosen, on_model=on_model)
        else:
            batches = commands.classify_batches(model_to_read(model), sources or [],
                                                index or [], tsv or [], cost_ratio,
                                                engine=chosen, on_model=on_model)
        counts = {"spam": 0, "ham": 0, "unsure": 0}
        for batch in batches:
            # A batch's lines in one write: typer.echo flushes, and checks the stream for
            # a terminal, at every call, in the process that also hands the workers their
            # mail (docs/design/counting-and-scoring.md#scoring-a-batch). The lines
            # appear as each batch is scored.
            lines = []
            for scored in batch:
                d = scored.decision
                counts[d.label] += 1
                lines.append(json.dumps({"source": scored.source, **d.as_json()}) if as_json else
                             f"{d.label:<6} {d.log_odds:>10.2f} {d.p_spam:>8.6f}  {scored.source}")
            if lines:
                typer.echo("\n".join(lines))
    for line in unhealthy:  # after the verdicts, where a user reading them sees it
        typer.echo(f"textnb: warning: {line}", err=True)
    nothing_done(skipped, sum(counts.values()), strict)
    if not as_json and sys.stderr.isatty():
        typer.echo(", ".join(f"{v} {k}" for k, v in counts.items()), err=True)


