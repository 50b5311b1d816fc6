"""A task beside other work (textnb.beside): on a thread, or in a forked child process
whose answer, facts and arrays, comes back through a memory file."""

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from textnb import beside
from textnb.beside import beside_in_child, can_fork_child

needs_fork = pytest.mark.skipif(not (hasattr(os, "fork") and hasattr(os, "memfd_create")),
                                reason="forking a child with a memory file needs Linux")

_ARRAYS = {
    "floats": np.arange(12, dtype=np.float64).reshape(2, 6) / 7,
    "ints": np.array([-(2 ** 62), 0, 2 ** 62], dtype=np.int64),
    "bytes": np.frombuffer(b"caf\xc3\xa9 \x00\xff", dtype=np.uint8),
    "small": np.array([1, 2, 3], dtype=np.int32),
    "empty": np.zeros((0, 32), dtype=np.uint8),
    "fortran": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
    "big_endian": np.arange(5, dtype=">u4"),
}


def _children() -> list[int]:
    """This process's child processes still in the process table (zombies too)."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    return [int(pid) for task in tasks.iterdir()
            for pid in (task / "children").read_text().split()]


@needs_fork
def test_the_childs_facts_and_arrays_arrive_whole_and_writable():
    ran = []
    facts, arrays = beside_in_child(lambda: ({"n": 3, "name": "café", "list": [1, None]},
                                             _ARRAYS), lambda: ran.append(os.getpid()))
    assert ran == [os.getpid()]
    assert facts == {"n": 3, "name": "café", "list": [1, None]}
    assert arrays.keys() == _ARRAYS.keys()
    for name, expected in _ARRAYS.items():
        assert arrays[name].dtype == expected.dtype and arrays[name].shape == expected.shape
        np.testing.assert_array_equal(arrays[name], expected)
    floats = arrays["floats"]
    floats[0, 0] = 99.0  # mapped copy-on-write: writable here, and this process's alone
    assert floats[0, 0] == 99.0 and floats.flags.writeable
    assert _children() == []


@needs_fork
def test_the_task_runs_in_the_child_while_the_work_runs_here(tmp_path):
    marks = tmp_path / "pids"

    def task():
        with open(marks, "a") as f:
            f.write(f"{os.getpid()}\n")
        return {}, {}

    beside_in_child(task, lambda: None)
    pids = marks.read_text().split()
    assert len(pids) == 1 and int(pids[0]) != os.getpid()


@needs_fork
def test_a_task_that_fails_in_the_child_runs_again_here_and_raises_its_own_error(tmp_path):
    marks = tmp_path / "pids"
    ran = []

    def task():
        with open(marks, "a") as f:
            f.write(f"{os.getpid()}\n")
        raise LookupError("no such model")

    with pytest.raises(LookupError, match="no such model") as raised:
        beside_in_child(task, lambda: ran.append(True))
    assert ran == [True]
    pids = [int(p) for p in marks.read_text().split()]
    assert len(pids) == 2 and pids[0] != os.getpid() and pids[1] == os.getpid()
    assert raised.traceback[-1].name == "task"  # raised here, with its own traceback
    assert _children() == []


@needs_fork
def test_a_child_killed_before_it_answers_leaves_the_task_to_this_process():
    parent = os.getpid()

    def task():
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return {"here": True}, {"a": np.ones(3)}

    facts, arrays = beside_in_child(task, lambda: None)
    assert facts == {"here": True}
    np.testing.assert_array_equal(arrays["a"], np.ones(3))
    assert _children() == []


@needs_fork
def test_an_error_of_the_work_kills_and_reaps_the_child_at_once():
    def slow_task():
        import time

        time.sleep(30)
        return {}, {}

    with pytest.raises(RuntimeError, match="spaCy would not import"):
        beside_in_child(slow_task, lambda: (_ for _ in ()).throw(RuntimeError(
            "spaCy would not import")))
    assert _children() == []  # killed, not waited 30 s for, and not a zombie


@needs_fork
def test_arrays_of_objects_never_cross():
    parent = os.getpid()

    def task():
        value = np.array([{"a": 1}], dtype=object) if os.getpid() != parent else np.ones(1)
        return {}, {"objects": value}

    _, arrays = beside_in_child(task, lambda: None)  # the child refused: run here
    np.testing.assert_array_equal(arrays["objects"], np.ones(1))


@needs_fork
def test_without_a_memory_file_the_task_runs_on_a_thread(monkeypatch):
    def no_memfd(*args):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(beside.os, "memfd_create", no_memfd)
    threads = []
    facts, _ = beside_in_child(lambda: (threads.append(threading.current_thread().name)
                                        or {"ok": 1}, {}), lambda: None)
    assert facts == {"ok": 1} and threads == ["textnb-load"]


def test_no_child_is_forked_while_another_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork_child()
    finally:
        stop.set()
        other.join()


@needs_fork
def test_a_program_that_ignores_sigchld_gets_the_answer_all_the_same():
    import signal

    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    try:
        facts, arrays = beside_in_child(lambda: ({"n": 1}, {"a": np.arange(3)}), lambda: None)
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert facts == {"n": 1}
    np.testing.assert_array_equal(arrays["a"], np.arange(3))


@needs_fork
def test_out_of_descriptors_the_task_runs_on_a_thread(monkeypatch):
    def no_pipe():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(beside.os, "pipe", no_pipe)
    facts, _ = beside_in_child(lambda: ({"ok": 1}, {}), lambda: None)
    assert facts == {"ok": 1}
