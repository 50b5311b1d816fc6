"""bench/ as a suite: every module a benchmark or a helper, benchmarks importing only the
helpers, ``python -m bench`` listing them, and the docs naming only what exists (or the
commit that holds it)."""

import ast
import re
import subprocess
import sys

import pytest

from conftest import PROJECT

from bench.__main__ import HELPERS, SUITE, main

BENCH = PROJECT / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("__"))
BENCHMARKS = {name for modules in SUITE.values() for name in modules}


def test_every_module_is_a_benchmark_or_a_helper():
    assert sorted(BENCHMARKS | set(HELPERS)) == MODULES


@pytest.mark.parametrize("name", MODULES)
def test_a_module_imports_no_benchmark_only_helpers(name):
    tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "bench":
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench."):
            imported.add(node.module.split(".")[1])
    assert imported <= set(HELPERS), f"bench/{name}.py imports {imported - set(HELPERS)}"


def test_python_m_bench_lists_the_suite_and_runs_one(capsys):
    assert main([]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in BENCHMARKS)
    assert main(["no_such_bench"]) == 2
    run = subprocess.run([sys.executable, "-m", "bench", "accuracy", "--help"], cwd=PROJECT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("usage: accuracy.py")


def test_the_docs_name_benchmarks_that_exist_or_the_commit_that_holds_them():
    pages = [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("**/*.md")),
             *sorted((PROJECT / "configs").glob("*.toml"))]
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for name in set(re.findall(r"bench[./](\w+)", text)) - {"results", "py"}:
            gone = not (BENCH / f"{name}.py").exists()
            if gone and not re.search(r"commit `?[0-9a-f]{7,}", text):
                missing.append(f"{page.name}: bench.{name}")
    assert not missing, missing


def test_the_dependent_evidence_bench_fits_a_model_per_fit_time_setting_and_rows():
    """A variant of alpha or features must be fitted as such, not scored by the default
    model (the selection of clues is all the other variants change); two training sets of
    one size are two models."""
    import numpy as np
    import scipy.sparse as sp

    from bench.dependent_evidence import Fitted, variant_config

    from types import SimpleNamespace

    X = sp.csr_matrix(np.array([[2, 0, 1], [0, 3, 1], [1, 0, 0], [0, 1, 2]], dtype=float))
    fitted = Fitted(X, np.array([1, 0, 1, 0]),
                    SimpleNamespace(headers=np.array([False, True, False])))
    every = {"training.regime": "all"}  # fitted in one go (thick: row by row, as train)
    default, smoother = variant_config(every), variant_config({**every, "model.alpha": 1.0})
    # --variant x=model.route_alpha=0.03
    route = variant_config({**every, "model.route_alpha": 0.03})
    first, last = np.array([0, 1]), np.array([2, 3])
    assert fitted.model(first, default) is fitted.model(first, default)
    assert fitted.model(first, default) is not fitted.model(last, default)
    assert not np.allclose(fitted.model(first, default).feature_log_prob_,
                           fitted.model(first, smoother).feature_log_prob_)
    routed = fitted.model(first, route).feature_log_prob_  # only the route's column moves
    plain = fitted.model(first, variant_config({**every, "model.route_alpha": 0.1})
                         ).feature_log_prob_
    assert not np.allclose(routed[:, 1], plain[:, 1])
    assert fitted.model(first, route).route_columns_.tolist() == [False, True, False]
    assert fitted.features(variant_config({**every, "features.features": "tf"})) is X
    assert fitted.features(default).max() == 1


def test_the_train_regimes_bench_learns_through_the_regime_and_restores_the_tokenizer():
    """bench.train_regimes trains as `textnb train --regime` does (thick learns fewer of the
    same messages) and its token cache is the tokenizer's answer, removed afterwards."""
    from bench.common import TokenCache, cache_tokens
    from bench.train_regimes import trained_scores
    from textnb.config import FilterConfig
    from textnb.mail.sources import iter_index
    from textnb.spamfilter import SpamFilter

    from conftest import SAMPLE_INDEX

    messages = list(iter_index(SAMPLE_INDEX))
    original = SpamFilter.tokens
    tokens: dict = {}
    cache_tokens(tokens, messages, SpamFilter(FilterConfig()))
    with TokenCache(tokens):
        every, n_every = trained_scores(messages, messages[:10], FilterConfig(), "all", 0.0)
        thick, n_thick = trained_scores(messages, messages[:10], FilterConfig(), "thick", 5.0)
    assert SpamFilter.tokens is original
    again, _ = trained_scores(messages, messages[:10], FilterConfig(), "all", 0.0)
    assert (again == every).all()  # the cache gave the tokenizer's own tokens
    assert n_every == 100 and 0 < n_thick < n_every
