"""A short coverage-guided fuzzing run of parse -> tokenise (fuzz/fuzz_parse.py).

The long run and its figures are in docs/hostile-mail.md ("Properties and fuzzing"). This one gives CI
about 25 seconds of atheris on the seed corpus (the sample corpus and the small
catalogue cases) and fails on any crash: an exception, the parser's catch-all
floor, a bound not respected, or one input taking longer than 20 seconds.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from conftest import PROJECT

HARNESS = PROJECT / "fuzz" / "fuzz_parse.py"


@pytest.mark.slow
def test_short_fuzzing_run_finds_no_crash(tmp_path):
    if importlib.util.find_spec("atheris") is None:
        pytest.skip("atheris is not installed: pip install 'textnb[fuzz]' (Linux wheels for "
                    "CPython 3.11; elsewhere it needs a clang toolchain)")
    corpus = tmp_path / "corpus"
    subprocess.run([sys.executable, str(HARNESS), "--write-seeds", str(corpus)], check=True,
                   capture_output=True)
    assert len(list(corpus.iterdir())) > 50
    run = subprocess.run(
        [sys.executable, str(HARNESS), "-max_total_time=25", "-timeout=20", "-rss_limit_mb=3000",
         "-max_len=20000", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=300, check=False)
    log = run.stdout + run.stderr
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-")))
    assert run.returncode == 0 and not crashes, f"fuzzing found {crashes}:\n{log[-3000:]}"
    done = re.search(r"Done (\d+) runs in (\d+) second", log)
    assert done and int(done.group(1)) > 100, log[-2000:]
