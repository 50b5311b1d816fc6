"""Setting up the delivery path that bench/latency.py and bench/learn_latency.py time:
the installed console scripts, trained textnb and bogofilter models, the compiled C
client, and waiting for a resident scorer to answer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from textnb import __version__

PROJECT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def console_script(name: str, module: str) -> list[str]:
    """The installed console script beside this interpreter (not a pyenv shim), else -m."""
    path = BIN / name
    return [str(path)] if path.exists() else [sys.executable, "-m", module]


def train_textnb(train, model: Path) -> None:
    from textnb.mail.sources import RawMessage
    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    spam_filter = SpamFilter().fit(RawMessage(e.relpath, e.raw, e.label) for e in train)
    store.save(spam_filter, model)


def train_bogofilter(root: Path, train, db: Path) -> None:
    db.mkdir()
    for label, flag in (("spam", "-s"), ("ham", "-n")):
        files = [str(root / "spamassassin" / e.relpath) for e in train if e.label == label]
        for i in range(0, len(files), 500):  # stay under the argument-length limit
            subprocess.run(["bogofilter", "-C", "-d", str(db), flag, "-B", *files[i:i + 500]],
                           check=True)


def build_c_client(workdir: Path) -> Path | None:
    """clients/textnb-client.c compiled as `make -C clients` does; None without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("no C compiler (apt-get install gcc): the compiled client is left out", flush=True)
        return None
    binary = workdir / "textnb-client"
    subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", f'-DTEXTNB_VERSION="{__version__}"',
                    "-o", str(binary), str(PROJECT / "clients" / "textnb-client.c")], check=True)
    return binary


def wait_for_scorer(sock: Path, server: subprocess.Popen, seconds: float = 180.0) -> None:
    from textnb.delivery.client import ScorerUnavailable, ping

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"textnb serve exited with {server.returncode}: "
                               f"{server.stderr.read().decode(errors='replace')}")
        try:
            ping(str(sock), timeout=1.0)
            return
        except ScorerUnavailable:
            time.sleep(0.2)
    raise RuntimeError(f"textnb serve did not answer on {sock} within {seconds:.0f} s")
