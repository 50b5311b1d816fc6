"""The textnb command line: thin typer wrappers over ``textnb.commands``.

This is the only module that prints, exits, or turns domain errors into
messages and exit codes (1 for an operator error, 2 for bad usage via typer).
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from . import __version__
from .errors import TextnbError

app = typer.Typer(
    name="textnb",
    help="A cost-aware naive Bayes spam filter: train on your spam and ham, classify new mail.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# fmt: off
ModelOpt = typer.Option(None, "--model", "-m", help="Model file. Default: $TEXTNB_MODEL or ~/.local/share/textnb/model.tnb.")
SpamOpt = typer.Option(None, "--spam", help="Spam source: a file, directory, mbox, Maildir or '-' (repeatable).")
HamOpt = typer.Option(None, "--ham", help="Ham source: a file, directory, mbox, Maildir or '-' (repeatable).")
IndexOpt = typer.Option(None, "--index", help="Index file of 'spam PATH' / 'ham PATH' lines, paths relative to it (repeatable).")
TsvOpt = typer.Option(None, "--tsv", help="File of 'label<TAB>text' lines, as the SMS Spam Collection (repeatable).")
CostOpt = typer.Option(None, "--cost-ratio", "-r", help="Cost of losing a ham / cost of letting a spam through (λ): spam when log-odds > ln λ.")
JsonOpt = typer.Option(False, "--json", help="One JSON object per line, for scripts.")
# fmt: on


@contextmanager
def _operator_errors():
    """Turn domain errors into a one-line message on stderr and exit code 1."""
    try:
        yield
    except TextnbError as exc:
        typer.echo(f"textnb: error: {exc}", err=True)
        raise typer.Exit(1)
    except BrokenPipeError:  # `textnb classify ... | head` is normal use
        sys.stderr.close()
        raise typer.Exit(0)


def _model_path(model: Optional[Path]) -> Path:
    from .store import default_model_path
    return model if model is not None else default_model_path()


class _Progress:
    """A message counter on stderr, shown only when stderr is a terminal."""

    def __init__(self, verb: str):
        self.verb, self.count = verb, 0
        self.enabled = sys.stderr.isatty()

    def __call__(self, n: int) -> None:
        self.count += n
        if self.enabled:
            sys.stderr.write(f"\r{self.verb} {self.count:,} messages")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.count:
            sys.stderr.write("\n")


def _version_callback(value: bool):
    if value:
        typer.echo(f"textnb {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version_callback,
                                      is_eager=True, help="Show the version and exit.")):
    """textnb: naive Bayes spam filtering with explicit misclassification costs."""


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
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Train a new model from labelled mail and save it (replacing any model at that path)."""
    from . import commands
    from .config import load_config, parse_override_value

    with _operator_errors():
        overrides = {"model.event_model": event_model, "features.features": features,
                     "model.alpha": alpha}
        for item in setting or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise typer.BadParameter(f"{item!r} is not section.key=value", param_hint="--set")
            overrides[key.strip()] = parse_override_value(value.strip())
        cfg = load_config(config, overrides)
        progress = _Progress("trained")
        try:
            summary = commands.train(_model_path(model), cfg, spam or [], ham or [], index or [],
                                     tsv or [], progress=progress)
        finally:
            progress.close()
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        n = summary["messages"]
        typer.echo(f"trained {n['spam']:,} spam and {n['ham']:,} ham in {summary['seconds']:.1f} s; "
                   f"{summary['vocabulary_size']:,} tokens; model written to {summary['model']} "
                   f"({summary['size_bytes'] / 1e6:.1f} MB)")


# fmt: off
@app.command("classify")
def classify_cli(
    sources: Optional[List[str]] = typer.Argument(None, help="Messages: files, directories, mbox, Maildir, or '-' for stdin (the default)."),
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Classify messages: one line each with the label, log-odds, P(spam) and the source."""
    from . import commands

    with _operator_errors():
        if cost_ratio is not None and not cost_ratio > 0:
            raise typer.BadParameter(f"{cost_ratio} must be > 0 (e.g. 9: losing a ham costs as "
                                     "much as letting 9 spams through)", param_hint="--cost-ratio")
        counts = {"spam": 0, "ham": 0, "unsure": 0}
        for scored in commands.classify(_model_path(model), sources or [], index or [], tsv or [],
                                        cost_ratio):
            d = scored.decision
            counts[d.label] += 1
            if as_json:
                typer.echo(json.dumps({"source": scored.source, "label": d.label,
                                       "log_odds": d.log_odds, "p_spam": d.p_spam,
                                       "threshold": d.threshold}))
            else:
                typer.echo(f"{d.label:<6} {d.log_odds:>10.2f} {d.p_spam:>8.6f}  {scored.source}")
    if not as_json and sys.stderr.isatty():
        typer.echo(", ".join(f"{v} {k}" for k, v in counts.items()), err=True)


@app.command("info")
def info_cli(model: Optional[Path] = ModelOpt, as_json: bool = JsonOpt):
    """Show what a model was trained on, its settings and its size."""
    from . import commands

    with _operator_errors():
        summary = commands.info(_model_path(model))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    cfg = summary["config"]
    n = summary["messages"]
    threshold = summary["threshold"]
    typer.echo(f"model:       {summary['model']} ({summary['size_bytes'] / 1e6:.2f} MB, "
               f"format {summary['format_version']})")
    typer.echo(f"trained on:  {n.get('spam', 0):,} spam, {n.get('ham', 0):,} ham")
    typer.echo(f"vocabulary:  {summary['vocabulary_size']:,} tokens ({summary['features_kept']:,} kept)")
    typer.echo(f"model:       {cfg['model']['event_model']} NB, {cfg['features']['features']} "
               f"features, alpha={cfg['model']['alpha']}")
    typer.echo(f"decision:    cost ratio {cfg['decision']['cost_ratio']}, threshold "
               + (f"{threshold:.3f} (tuned)" if threshold is not None else "ln(cost ratio)"))


# fmt: off
@app.command("explain")
def explain_cli(
    source: str = typer.Argument(..., help="A message file, mbox, directory or '-'."),
    model: Optional[Path] = ModelOpt,
    top: int = typer.Option(15, "--top", "-k", help="How many tokens to show."),
    cost_ratio: Optional[float] = CostOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Explain a decision: the tokens that moved the log-odds most, with their counts."""
    from . import commands

    with _operator_errors():
        for e in commands.explain(_model_path(model), source, top, cost_ratio):
            d = e.decision
            if as_json:
                typer.echo(json.dumps({
                    "source": e.source, "label": d.label, "log_odds": d.log_odds,
                    "p_spam": d.p_spam, "threshold": d.threshold, "prior_log_odds": e.prior_log_odds,
                    "unknown_tokens": e.unknown_tokens,
                    "clues": [{"token": t, "log_odds": c, "count": n, "spam_count": s, "ham_count": h}
                              for t, c, n, s, h in e.clues]}))
                continue
            typer.echo(f"{e.source}: {d.label} (log-odds {d.log_odds:.2f}, threshold "
                       f"{d.threshold:.2f}, P(spam) {d.p_spam:.4f})")
            typer.echo(f"  prior log-odds {e.prior_log_odds:+.2f}; {e.unknown_tokens} tokens never seen in training")
            typer.echo(f"  {'contribution':>12}  {'count':>5}  {'in spam':>8}  {'in ham':>8}  token")
            for token, contrib, count, s, h in e.clues:
                typer.echo(f"  {contrib:>+12.3f}  {count:>5.0f}  {s:>8.0f}  {h:>8.0f}  {token}")


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
    from . import commands

    with _operator_errors():
        result = commands.evaluate(_model_path(model), index or [], spam or [], ham or [],
                                   tsv or [], cost_ratio)
    if as_json:
        typer.echo(json.dumps(result, default=float))
        return
    for key, value in result.items():
        typer.echo(f"{key:<24} {value}")


if __name__ == "__main__":  # pragma: no cover
    app()
