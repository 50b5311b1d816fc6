"""textnb pmml-score: score records with any PMML NaiveBayesModel."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ._util import JsonOpt, app, operator_errors


# fmt: off
@app.command("pmml-score")
def pmml_score_cli(
    pmml: Path = typer.Argument(..., help="PMML document holding one NaiveBayesModel (any producer)."),
    data: Path = typer.Argument(..., help="CSV file: a header row of field names, then one record per line; empty cells are missing values."),
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Score a CSV file with a PMML NaiveBayesModel, by the PMML specification's procedure.

    One line per record: its number, the predicted value and the probability of each
    target value. Elements that would change the numbers and that textnb does not
    implement (Targets, transformations other than Discretize, other models) are refused
    by name.
    """
    from ..commands import pmml_score

    with operator_errors():
        result = pmml_score(pmml, data)
    classes = result["classes"]
    if not as_json:
        typer.echo(",".join(["record", "predicted"] + [f"probability({c})" for c in classes]))
    for i, (label, row) in enumerate(zip(result["predicted"], result["probabilities"]), 1):
        if as_json:
            typer.echo(json.dumps({"record": i, "predicted": label,
                                   "probabilities": dict(zip(classes, row.tolist()))}))
        else:
            typer.echo(",".join([str(i), label] + [repr(float(p)) for p in row]))
    if result["ignored_columns"]:
        typer.echo(f"textnb: note: columns the model does not read: "
                   f"{', '.join(result['ignored_columns'][:5])}"
                   + (" ..." if len(result["ignored_columns"]) > 5 else ""), err=True)
