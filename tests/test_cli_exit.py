"""``textnb.cli.main``: the script's way out skips freeing the interpreter's objects, and
loses nothing on the way (output, exit codes, exit handlers, other threads)."""

import subprocess
import sys

from conftest import EVERY_MESSAGE, PROJECT, SAMPLE


def run_main(code: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    """Run ``code`` then ``textnb.cli.main()`` with ``args`` in a fresh interpreter."""
    script = f"import sys, textnb.cli\n{code}\nsys.argv = ['textnb', *{list(args)!r}]\ntextnb.cli.main()\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_output_and_exit_codes_survive_the_fast_exit(tmp_path):
    model = tmp_path / "m.tnb"
    trained = run_main("", tmp_path, "train", "--model", str(model),
                       "--index", str(SAMPLE / "index"), "--jobs", "1", *EVERY_MESSAGE)
    assert trained.returncode == 0, trained.stderr
    assert "trained 40 spam and 60 ham" in trained.stdout
    # Every line of a long output reaches a file, though no object is freed at exit.
    out = tmp_path / "out.jsonl"
    with out.open("w") as fh:
        classified = subprocess.run(
            [sys.executable, "-m", "textnb", "classify", "--model", str(model), "--json",
             str(SAMPLE / "unlabelled"), str(SAMPLE / "mbox")],
            stdout=fh, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300)
    assert classified.returncode == 0, classified.stderr
    assert len(out.read_text().splitlines()) == 12
    missing = run_main("", tmp_path, "info", "--model", str(tmp_path / "absent.tnb"))
    assert missing.returncode == 1 and "no model at" in missing.stderr
    usage = run_main("", tmp_path, "classify", "--model", str(model), "--cost-ratio", "-3")
    assert usage.returncode == 2 and "--cost-ratio" in usage.stderr


def test_exit_handlers_run(tmp_path):
    marker = tmp_path / "handler-ran"
    result = run_main(f"import atexit, pathlib\n"
                      f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')",
                      tmp_path, "--version")
    assert result.returncode == 0 and "textnb" in result.stdout
    assert marker.read_text() == "yes"


def test_a_running_thread_is_waited_for(tmp_path):
    """With another thread still running, main exits the usual way, which joins it."""
    marker = tmp_path / "thread-done"
    result = run_main(f"import pathlib, threading, time\n"
                      f"def late():\n"
                      f"    time.sleep(0.5)\n"
                      f"    pathlib.Path({str(marker)!r}).write_text('done')\n"
                      f"threading.Thread(target=late).start()",
                      tmp_path, "--version")
    assert result.returncode == 0
    assert marker.read_text() == "done"


def test_script_entry_point_is_main():
    """The installed ``textnb`` script and ``python -m textnb`` both go through main."""
    text = (PROJECT / "pyproject.toml").read_text()
    assert 'textnb = "textnb.cli:main"' in text
    assert "main()" in (PROJECT / "textnb" / "__main__.py").read_text()
