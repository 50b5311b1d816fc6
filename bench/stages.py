"""Where textnb's time goes, per stage, beside bogofilter in the same run.

    python -m bench.stages [--corpus spamassassin] [--json OUT.json] [--before DIR]

On the corpus's README split (written to a temporary folder, one file a message,
``bench/peers.py``'s ``write_split``):

1. Stages alone, in this process, CPU seconds over the training split: reading the
   files, the ledger's normalisation and digest, ``parse_message``, tokenising
   (a new tokenizer: cold caches, as training sees them; spaCy's load is start-up),
   the tokens hash, counting (``learn_tokens`` in batches of ``pipeline.BATCH_SIZE``),
   saving; and for the test split, scoring the token lists.
2. The commands a user runs, CPU and wall seconds: ``textnb train --index`` and
   ``textnb classify --json`` with ``--jobs 1`` and with the default (every core),
   and bogofilter's bulk training and scoring (``peers.run_bogofilter``).
   "Everything else" = the single-process command's CPU minus its parse, tokenise
   and count (or score) stages: start-up, reading, digests, hashes, merging,
   building matrices, saving.
3. ``textnb filter`` on one message: its start-up split into the interpreter,
   importing textnb's CLI, importing the scoring modules (NumPy, SciPy, the pipeline),
   loading the model, building the tokenizer (spaCy's import) and scoring (the probe,
   one child process), the whole command in another, and the rest (the whole minus
   the parts: the CLI's dispatch, the message's input and output, exit); best of
   ``--repeats``. ``--startup-only`` runs just this.

With ``--before DIR`` (a folder holding an earlier ``textnb/``, e.g. from ``git
archive REV textnb | tar -x -C DIR``) the commands of 2. and the start-up of 3. are
also run with that code, in the same run (3. interleaved round by round), for a
before/after table.

The machine is shared: the load average is recorded before and after, and speeds
are reported as ratios to bogofilter's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import peers
from textnb import pipeline, store
from textnb.config import FilterConfig
from textnb.ledger import normalise, tokens_hash
from textnb.mail import parse_message
from textnb.pipeline import SpamFilter
from textnb.sources import plan_unlabelled, read_planned

STARTUP_PROBE = r"""
import contextlib, json, sys, time
t0 = time.perf_counter()
import textnb.cli                                   # what every command imports
t1 = time.perf_counter()
# The command's collector policy (textnb.cli.filter.one_message_gc), where the code has one.
with getattr(sys.modules["textnb.cli.filter"], "one_message_gc", contextlib.nullcontext)():
    from textnb import store                        # NumPy, SciPy, the pipeline
    from textnb.filter import score_with
    t2 = time.perf_counter()
    spam_filter = store.load(sys.argv[1])
    t3 = time.perf_counter()
    spam_filter.tokenizer.spacy                     # spaCy's blank tokenizer and rules
    t4 = time.perf_counter()
    score_with(spam_filter, open(sys.argv[2], "rb").read(), None)
    t5 = time.perf_counter()
print(json.dumps({"import_cli": t1 - t0, "import_scoring": t2 - t1, "load_model": t3 - t2,
                  "tokenizer": t4 - t3, "score": t5 - t4}))
"""


def load() -> float:
    return os.getloadavg()[0]


def cpu(fn, *args):
    start = time.process_time()
    result = fn(*args)
    return result, time.process_time() - start


def stages(s: peers.Split) -> dict[str, float]:
    """CPU seconds of each stage alone, one process (module docstring, 1.)."""
    out = {}
    files = plan_unlabelled([str(s.workdir / "train")])
    raws, out["read"] = cpu(lambda: [m.raw for m in read_planned(files)])
    norms, out["digest"] = cpu(lambda: [__import__("hashlib").sha256(n).digest() and n
                                        for n in map(normalise, raws)])
    spam_filter = SpamFilter(FilterConfig())
    limits = spam_filter.mail_limits
    parsed, out["parse"] = cpu(lambda: [parse_message(n, limits) for n in norms])
    spam_filter.tokenizer.spacy  # start-up, not tokenising
    tokens, out["tokenise"] = cpu(lambda: [spam_filter.tokenizer(p) for p in parsed])
    _, out["tokens_hash"] = cpu(lambda: [tokens_hash(t) for t in tokens])
    labels = ["spam" if "/spam/" in f.path else "ham" for f in files]
    size = pipeline.BATCH_SIZE

    def count():
        for i in range(0, len(tokens), size):
            spam_filter.learn_tokens(tokens[i:i + size], labels[i:i + size])

    _, out["count"] = cpu(count)
    with tempfile.TemporaryDirectory() as tmp:
        _, out["save"] = cpu(store.save, spam_filter, Path(tmp) / "m.tnb")
    test = [m.raw for m in read_planned(plan_unlabelled([str(s.workdir / "test")]))]
    parsed = [parse_message(raw, limits) for raw in test]
    out["test_parse"] = cpu(lambda: [parse_message(raw, limits) for raw in test])[1]
    test_tokens, out["test_tokenise"] = cpu(lambda: [spam_filter.tokenizer(p) for p in parsed])
    _, out["score"] = cpu(lambda: [spam_filter.log_odds_tokens(test_tokens[i:i + size])
                                   for i in range(0, len(test_tokens), size)])
    return {k: round(v, 3) for k, v in out.items()}


def run(cmd: list[str], cwd: Path, code: Path | None = None) -> dict[str, float]:
    """Wall and CPU seconds (children's user + system) of one command (``code``: the
    folder whose ``textnb`` it imports, first on PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(used, 3)}


def train_default(s: peers.Split) -> Path:
    """``m-default.tnb``: the training split learned by the default ``textnb train``."""
    index = s.workdir / "train.index"
    index.write_text("".join(f"spam {p}\n" for p in s.train_spam)
                     + "".join(f"ham {p}\n" for p in s.train_ham))
    subprocess.run([sys.executable, "-m", "textnb", "train", "--model", "m-default.tnb",
                    "--index", index.name], cwd=s.workdir, check=True, stdout=subprocess.DEVNULL)
    return s.workdir / "m-default.tnb"


def commands(s: peers.Split, before: Path | None = None) -> dict[str, dict]:
    """textnb's train and classify, one process and the default (and the same commands
    of the ``before`` code), and bogofilter's."""
    index = s.workdir / "train.index"
    index.write_text("".join(f"spam {p}\n" for p in s.train_spam)
                     + "".join(f"ham {p}\n" for p in s.train_ham))
    textnb = [sys.executable, "-m", "textnb"]
    out = {}
    runs = [("jobs1", ["--jobs", "1"], None), ("default", [], None)]
    if before:
        runs += [("before_jobs1", ["--jobs", "1"], before), ("before_jobs2", ["--jobs", "2"], before)]
    for name, jobs, code in runs:
        model = f"m-{name}.tnb"
        out[f"train_{name}"] = run([*textnb, "train", "--model", model, "--index", index.name,
                                    "--json", *jobs], s.workdir, code)
        out[f"classify_{name}"] = run([*textnb, "classify", "--model", model, "--json", *jobs,
                                       "test"], s.workdir, code)
    bogo = peers.run_bogofilter(s)
    out["bogofilter"] = {"train_s": round(bogo.train_s, 3), "classify_s": round(bogo.classify_s, 3)}
    return out


def startup(model: Path, message: Path, codes: dict[str, Path | None],
            repeats: int = 5) -> dict[str, dict[str, float]]:
    """``textnb filter`` on one message with each code folder (None: this checkout): each
    part's seconds, best of ``repeats``, the codes interleaved round by round (module
    docstring, 3.). "rest" is the whole command minus the interpreter and the probe's
    parts: the CLI's dispatch, reading and writing the message, exit.

    Each folder's modules are compiled first (``compileall``): with
    PYTHONDONTWRITEBYTECODE set, code without cached bytecode would be compiled on every
    start, which a user's installed copy never is.
    """
    import compileall

    import textnb

    for code in codes.values():
        compileall.compile_dir(str((code or Path(textnb.__file__).parent.parent) / "textnb"),
                               quiet=1)
    best: dict[str, dict[str, float]] = {name: {} for name in codes}
    for _ in range(repeats):
        for name, code in codes.items():
            env = dict(os.environ, PYTHONPATH=str(code)) if code else None
            # Out of this checkout (cwd comes first on sys.path, before PYTHONPATH).
            cwd = model.parent
            python = run([sys.executable, "-c", "pass"], cwd)["wall_s"]
            probe = subprocess.run([sys.executable, "-c", STARTUP_PROBE, str(model), str(message)],
                                   check=True, capture_output=True, text=True, env=env, cwd=cwd)
            parts = {"python": python, **json.loads(probe.stdout)}
            start = time.perf_counter()
            with open(message, "rb") as stdin:
                subprocess.run([sys.executable, "-m", "textnb", "filter", "--model", str(model)],
                               stdin=stdin, stdout=subprocess.DEVNULL, check=False, env=env,
                               cwd=cwd)
            parts["whole_filter"] = time.perf_counter() - start
            parts["rest"] = parts["whole_filter"] - sum(v for k, v in parts.items()
                                                        if k != "whole_filter")
            for k, v in parts.items():
                best[name][k] = min(best[name].get(k, v), v)
    return {name: {k: round(v, 3) for k, v in parts.items()} for name, parts in best.items()}


def startup_codes(before: Path | None) -> dict[str, Path | None]:
    return {"before": before, "now": None} if before else {"now": None}


def table(result: dict) -> list[str]:
    st, cm = result["stages"], result["commands"]
    n_train, n_test = result["n_train"], result["n_test"]
    bogo = cm["bogofilter"]
    lines = [f"{result['corpus']}: {n_train:,} training, {n_test:,} test messages; "
             f"load {result['load_before']:.2f} -> {result['load_after']:.2f}"]
    for what, stage_names, n in (("train", ("parse", "tokenise", "count"), n_train),
                                 ("classify", ("test_parse", "test_tokenise", "score"), n_test)):
        single = cm[f"{what}_jobs1"]
        parts = [st[k] for k in stage_names]
        other = single["cpu_s"] - sum(parts)
        lines.append(f"{what}: " + ", ".join(f"{k} {v:.2f}" for k, v in zip(stage_names, parts))
                     + f", everything else {other:.2f} s CPU ({other / single['cpu_s']:.0%} of "
                     f"{single['cpu_s']:.2f})")
        for name in ("before_jobs1", "before_jobs2", "jobs1", "default"):
            if f"{what}_{name}" not in cm:
                continue
            r = cm[f"{what}_{name}"]
            ratio = bogo[f"{what}_s"] / r["wall_s"]
            lines.append(f"  {what} {name}: {r['wall_s']:.2f} s wall ({n / r['wall_s']:,.0f} msg/s, "
                         f"{ratio:.2f}x bogofilter's {n / bogo[f'{what}_s']:,.0f}), "
                         f"{r['cpu_s']:.2f} s CPU")
    lines.append("train's other parts alone (CPU s): " + ", ".join(
        f"{k} {st[k]:.2f}" for k in ("read", "digest", "tokens_hash", "save")))
    return lines + startup_table(result)


def startup_table(result: dict) -> list[str]:
    lines = [f"filter start-up, {name} (s): " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
             for name, parts in result["startup"].items()]
    if "load_startup" in result:
        lines.append(f"start-up load average {result['load_startup'][0]:.2f} -> "
                     f"{result['load_startup'][1]:.2f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--before", type=Path, help="a folder with an earlier textnb/ to "
                        "run the same commands with")
    parser.add_argument("--startup-only", action="store_true", help="only 3. (textnb filter's "
                        "start-up, best of --repeats), on a model trained with the default command")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the start-up probe")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="textnb-stages-") as tmp:
        s = peers.write_split(args.corpus, Path(tmp))
        result = {"corpus": args.corpus, "n_train": len(s.train_spam) + len(s.train_ham),
                  "n_test": len(s.test), "cores": os.cpu_count(), "load_before": load()}
        if args.startup_only:
            train_default(s)
        else:
            result["stages"] = stages(s)
            result["commands"] = commands(s, args.before)
        start_load = load()
        result["startup"] = startup(s.workdir / "m-default.tnb", s.workdir / s.test[0],
                                    startup_codes(args.before), args.repeats)
        result["load_startup"] = [start_load, load()]
        result["load_after"] = load()
    for line in startup_table(result) if args.startup_only else table(result):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
