"""textnb evaluate: the field's metrics on held-out mail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    CostOpt,
    HamOpt,
    IndexOpt,
    JsonOpt,
    ModelOpt,
    SpamOpt,
    TsvOpt,
    app,
    model_path,
    operator_errors,
)


# fmt: off
@app.command("evaluate")
def evaluate_cli(
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    spam: Optional[List[str]] = SpamOpt,
    ham: Optional[List[str]] = HamOpt,
    tsv: Optional[List[str]] = TsvOpt,
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Measure a model on held-out labelled mail: (1-AUC)%, hm%, sm%, sm% at hm=0.1%, TCR."""
    from .. import commands

    with operator_errors():
        result = commands.evaluate(model_path(model), index or [], spam or [], ham or [],
                                   tsv or [], cost_ratio)
    if as_json:
        typer.echo(json.dumps(result, default=float))
        return
    for key, value in result.items():
        typer.echo(f"{key:<24} {value}")


