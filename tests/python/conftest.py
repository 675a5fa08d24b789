"""Shared pytest setup: import path, per-run seed, the fissile binary, time
limits for calls into the library made in-process, the markers slow and gpu."""
from __future__ import annotations

import faulthandler
import os
import secrets
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Appended, not prepended: python/fissile/ holds the package's *sources*; the
# installed package (with its compiled extension) must win over them.
sys.path.append(str(ROOT / "python"))

import fsl_models  # noqa: E402

# A fresh seed every run (so inputs differ between runs); FSL_SEED=N repeats one.
SEED = int(os.environ.get("FSL_SEED") or secrets.randbelow(2**31))


def pytest_report_header(config):
    return [f"fissile: seed {SEED} (repeat with FSL_SEED={SEED}), binary {fsl_models.fissile_bin()}"]


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded by the run seed and the test id."""
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture(scope="session")
def fissile():
    exe = fsl_models.fissile_bin()
    if not exe.exists():
        pytest.fail(f"{exe} not found: run `make build` first (or set FSL_BUILD_DIR)")
    return exe


# ---- time limits for in-process library calls ----
# A call into the library (fissile.InferenceSession, run) cannot be
# interrupted: it runs in C with the GIL released.  call_with_timeout runs it
# in a worker thread and fails the test when it has not returned in time; the
# hung worker is left running, and later calls fail at once rather than wait
# on the locks it may hold (the Python package compiles under one lock).

_CONFIG: pytest.Config | None = None
_HUNG: list[str] = []  # what hung first, once something has


def pytest_configure(config):
    global _CONFIG
    _CONFIG = config
    # The tiers (docs/testing.md): `make test` runs -m "not slow", `make test-full` -m slow.
    config.addinivalue_line("markers", "slow: in make test-full only (every strategy x backend on real models)")
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and driver (libcuda.so.1); skipped where there is none")


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu are skipped, with the reason, where there is no NVIDIA driver."""
    if any("gpu" in it.keywords for it in items) and not fsl_models.have_nvidia_driver():
        skip = pytest.mark.skip(reason="no NVIDIA driver on this machine (libcuda.so.1): the CUDA backend runs only "
                                       "on a GPU")
        for it in items:
            if "gpu" in it.keywords:
                it.add_marker(skip)


def _stderr_fd():
    """Where a faulthandler dump is seen: the copy of stderr made before
    pytest captured it (pytest's faulthandler plugin's); else sys.__stderr__."""
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key
        return _CONFIG.stash[fault_handler_stderr_fd_key]
    except (ImportError, AttributeError, KeyError):
        return sys.__stderr__


def call_with_timeout(seconds: float, what: str, fn):
    """fn() in a worker thread: its result, or its exception raised again
    here; a test failure naming `what` and the limit when it has not returned
    after `seconds`.  A hang that keeps this thread from resuming at all (the
    GIL held) ends the whole run 60 s later instead, with every thread's
    stack on stderr (faulthandler)."""
    if _HUNG:
        pytest.fail(f"{what}: not run, an earlier call hung ({_HUNG[0]}) and may still hold the library's locks",
                    pytrace=False)
    box: dict = {}

    def work():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 -- raised again in the test's thread
            box["error"] = e

    worker = threading.Thread(target=work, name=what, daemon=True)
    faulthandler.dump_traceback_later(seconds + 60, exit=True, file=_stderr_fd())
    try:
        worker.start()
        worker.join(seconds)
    finally:
        faulthandler.cancel_dump_traceback_later()
    if worker.is_alive():
        _HUNG.append(what)
        pytest.fail(f"{what}: did not finish within {seconds:g} s (a hang?); later library calls of this run are not "
                    f"made", pytrace=False)
    if "error" in box:
        raise box["error"]
    return box["value"]
