"""Shared pytest setup: import path, per-run seed, the fissile binary."""
from __future__ import annotations

import os
import secrets
import sys
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
