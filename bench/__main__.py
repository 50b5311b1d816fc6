"""The benchmark suite: what a maintainer re-runs, by subject.

    python -m bench                   # list the suite
    python -m bench NAME [ARGS...]    # run one: the same as python -m bench.NAME [ARGS...]
    python -m bench NAME --help       # its options

Each benchmark is a module run from the project folder; most read the public corpora
(``$TEXTNB_CORPORA`` or ../shared/corpora) and write JSON under bench/results/. The
modules in ``HELPERS`` are shared code, not benchmarks. Design experiments that were
measured once and decided (what was built, what was not) are not in the suite; their
docs pages name the commit that holds each script.
"""

from __future__ import annotations

import runpy
import sys

# subject -> {module: what it measures}
SUITE = {
    "accuracy, against the peers": {
        "accuracy": "textnb's rows of the README's accuracy table (hash or chronological split)",
        "peers": "bogofilter, spamprobe and scikit-learn on the same splits",
        "significance": "a paired bootstrap of the accuracy table's wins and losses",
        "tenfold_parts": "cross-validation over a whole corpus, against bogofilter and scikit-learn",
        "list_reader": "SpamAssassin relabelled as a reader of its mailing lists would",
        "online": "online accuracy in delivery order for the three training regimes",
        "train_regimes": "trained once, learning every message or thick, then the next mail",
        "learning_curve": "accuracy against the number of learned messages, and imbalance",
        "per_user": "a user's own counts, a shared model's, or both",
        "select_defaults": "the default settings, chosen on training data only",
        "tune_costs": "tuned thresholds against ln λ and bogofilter on the test split",
        "tune_folds": "tuned cost on every message, fold by fold, against bogofilter",
        "search_rule": "how tune --search chooses, judged on the next messages",
        "fold_kinds": "the tuned map fitted on blocks or on the past only, on real mail",
        "dependent_evidence": "one clue per header field and tiled word pairs, on real mail",
        "review_cost": "what the third verdict, unsure, saves when a look has a cost",
        "review_band": "the review queue's band: mail kept for review against mistakes caught",
        "numeric_features": "numeric message features beside the tokens",
        "html_renderers": "the two HTML renderers: CPU time and accuracy",
        "pmml_engines": "PMML export: size, time, two engines against textnb",
    },
    "speed and memory": {
        "compare": "throughput, memory and model size against bogofilter and the others",
        "ceiling": "the ceiling parsing and tokenising set, beside the commands",
        "stages": "time per stage, beside bogofilter in the same run",
        "command_stages": "one command's CPU split by stage, from inside the run",
        "model_growth": "how a model grows with mail, and what bounding it costs",
        "retrain_speed": "100 new messages into a model of the whole SpamAssassin corpus",
        "retrain_time": "where a small retrain's time goes, with and without the journal",
        "scoring_ahead": "a thick pass's scoring calls: their cost and the block policy",
        "dask_scaling": "training and scoring on Dask against one process",
        "hostile": "time and peak memory of every hostile-catalogue case",
        "resident_users": "memory per resident user of serve --models",
    },
    "latency": {
        "latency": "per-message latency of the delivery paths",
        "learn_latency": "learning one message: the scorer, retrain, bogofilter",
        "record_latency": "what recording verdicts costs the scorer's clients",
        "shared_store": "the PostgreSQL shared store: learns/s with three hosts, a scorer's "
                        "latency against the file store's, a host joining",
    },
    "load": {
        "server_load": "the resident scorer under many clients at once",
        "server_attack": "the resident scorer while slow clients attack it",
        "review_load": "the review page under load while the scorer answers mail",
    },
    "tools for a change": {
        "same_tokens": "whether two versions of textnb make the same tokens on the corpora",
        "tokenise_ab": "two versions' training stages, interleaved in one process",
        "profile_train": "cProfile over training, summed by stage",
    },
}
# Shared code the benchmarks import; a benchmark imports only these, never another one.
HELPERS = ("bytecode", "common", "delivery", "folds", "peers", "postgres", "stats",
           "token_cache")


def listing() -> str:
    lines = ["python -m bench NAME [ARGS]  (NAME --help for its options)"]
    for subject, modules in SUITE.items():
        lines += ["", f"{subject}:"]
        lines += [f"  {name:<17} {what}" for name, what in modules.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, args = argv[0], argv[1:]
    if not any(name in modules for modules in SUITE.values()):
        print(f"no benchmark {name!r} in the suite\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv = [name, *args]  # run_module sets argv[0] to the module's file
    runpy.run_module(f"bench.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
