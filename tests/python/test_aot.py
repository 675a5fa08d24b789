"""Compiled model files (.fsl, docs/aot.md): `fissile compile MODEL -o
FILE.fsl` then `fissile run FILE.fsl` in a fresh process, in an empty
folder, with an empty kernel cache and no C compiler (FSL_CC names a
program that does not exist), gives the same outputs bit for bit as running
the ONNX model; damaged files give clear errors, never a crash.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fsl_models

MAGIC = b"\x89FSL\r\n\x1a\n"


def small_model():
    """MatMul + bias + GELU-ish + Softmax over a dynamic batch, with a
    Reshape whose shape is an input (frozen with --const)."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((16, 24)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b")
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16]),
           helper.make_tensor_value_info("shape", TensorProto.INT64, [3])]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["z"]),
        helper.make_node("Tanh", ["z"], ["t"]),
        helper.make_node("Mul", ["z", "t"], ["g"]),
        helper.make_node("Softmax", ["g"], ["s"], axis=-1),
        helper.make_node("Reshape", ["s", "shape"], ["y"]),
    ]
    g = helper.make_graph(nodes, "small", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run(fissile, *args, env=None, cwd=None, timeout=300):
    return subprocess.run([str(fissile), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


def has_cpu(fissile):
    return "cpu" in run(fissile, "run", "--help").stdout


@pytest.fixture
def compiled(fissile, tmp_path, rng):
    """small.onnx compiled for the default backend with a bound batch and a
    frozen shape input; the input file and the in-process outputs."""
    onnx_path = tmp_path / "small.onnx"
    onnx_path.write_bytes(small_model().SerializeToString())
    np.save(tmp_path / "shape.npy", np.array([3, 2, 12], dtype=np.int64))
    x = rng.standard_normal((3, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    common = ["--const", f"shape={tmp_path / 'shape.npy'}", "--dim", "batch=3"]
    p = run(fissile, "compile", onnx_path, *common, "-o", tmp_path / "small.fsl")
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr and (tmp_path / "small.fsl").read_bytes().startswith(MAGIC)
    p = run(fissile, "run", onnx_path, *common, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "ref")
    assert p.returncode == 0, p.stderr
    return tmp_path


def fresh_env(tmp_path):
    """No C compiler and an empty kernel cache: only the file's kernels can run."""
    return dict(os.environ, FSL_CC=str(tmp_path / "no-such-compiler"), FSL_CACHE_DIR=str(tmp_path / "empty-cache"))


def test_round_trip_bit_for_bit_without_compiler(fissile, compiled, tmp_path):
    if not has_cpu(fissile):
        pytest.skip("this build has no cpu backend")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(compiled / "small.fsl", alone / "small.fsl")
    shutil.copy(compiled / "x.npy", alone / "x.npy")
    p = run(fissile, "run", "small.fsl", "--input", "x=x.npy", "--output-dir", "out", env=fresh_env(tmp_path),
            cwd=alone)
    assert p.returncode == 0, p.stderr
    assert "compiling" not in p.stderr, p.stderr
    assert (alone / "out" / "y.npy").read_bytes() == (compiled / "ref" / "y.npy").read_bytes()
    y = np.load(alone / "out" / "y.npy")
    assert y.shape == (3, 2, 12) and np.allclose(y.sum(axis=(1, 2)), 1.0, atol=1e-5)
    # the file's settings: a frozen input is gone, the batch is bound
    p = run(fissile, "inspect", alone / "small.fsl", env=fresh_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "inputs (1)" in p.stdout and "3 x 16" in p.stdout, p.stdout
    # compile again from the file (a re-save) gives a file that runs the same
    p = run(fissile, "compile", alone / "small.fsl", "-o", alone / "again.fsl", env=fresh_env(tmp_path))
    assert p.returncode == 0, p.stderr
    p = run(fissile, "run", "again.fsl", "--input", "x=x.npy", "--output-dir", "out2", env=fresh_env(tmp_path),
            cwd=alone)
    assert p.returncode == 0, p.stderr
    assert (alone / "out2" / "y.npy").read_bytes() == (compiled / "ref" / "y.npy").read_bytes()


def test_real_model_round_trip(fissile, tmp_path, rng):
    """A real model (ResNet-18 from the model cache): compiled file and ONNX
    model give the same bits."""
    model = fsl_models.BY_NAME["resnet18"]
    if not model.path.exists():
        pytest.skip("resnet18 not in the model cache (make models)")
    if not has_cpu(fissile):
        pytest.skip("this build has no cpu backend")
    inputs = fsl_models.random_inputs(model, rng)
    p = run(fissile, "compile", model.path, "--strategy", "greedy", "-o", tmp_path / "r.fsl")
    assert p.returncode == 0, p.stderr
    names = ["output"]
    want = fsl_models.run_fissile(model.path, inputs, names, extra_args=["--backend", "cpu", "--strategy", "greedy"])
    env = fresh_env(tmp_path)
    old = dict(os.environ)
    try:
        os.environ.update(env)
        got = fsl_models.run_fissile(tmp_path / "r.fsl", inputs, names, extra_args=["--backend", "cpu"])
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert got["output"].tobytes() == want["output"].tobytes()


def patched(data: bytes, old: bytes, new: bytes) -> bytes:
    i = data.find(old)
    assert i >= 0, old
    return data[:i] + new + data[i + len(old):]


def test_bad_files_are_clear_errors(fissile, compiled, tmp_path):
    data = (compiled / "small.fsl").read_bytes()
    cases = {
        "truncated": (data[: len(data) // 2], "not a valid compiled model file"),
        "header_only": (data[:12], "not a valid compiled model file"),
        "garbage": (MAGIC + bytes(range(256)) * 4, "format"),
        # format 1 had no rewrite-search replay in PLAN: refused, not misread
        "old_format": (data[:8] + (1).to_bytes(4, "little") + data[12:], "compiled model file format 1"),
        "wrong_version": (patched(data, b"0.1.0", b"9.9.9"), "compiled by fissile 9.9.9"),
        "trailing": (data + b"\0", "bytes after the last section"),
    }
    if has_cpu(fissile):
        cases["wrong_fingerprint"] = (patched(data, b"oneDNN", b"ONEDNN"), "compiled for another machine")
        cases["damaged_kernels"] = (data[:-100] + bytes(b ^ 0x5A for b in data[-100:]), "damaged")
    for name, (blob, want) in cases.items():
        path = tmp_path / f"{name}.fsl"
        path.write_bytes(blob)
        p = run(fissile, "run", path, "--input", f"x={compiled / 'x.npy'}", env=fresh_env(tmp_path))
        assert p.returncode in (2, 3), (name, p.returncode, p.stderr)
        assert want in p.stderr and f"{name}.fsl" in p.stderr, (name, p.stderr)
        assert "internal error" not in p.stderr


def test_failed_write_keeps_the_old_file(fissile, compiled, tmp_path):
    """Writing into a missing folder fails clearly; an existing file is
    replaced whole or not at all (temporary name + rename)."""
    p = run(fissile, "compile", compiled / "small.onnx", "--const", f"shape={compiled / 'shape.npy'}", "--dim",
            "batch=3", "-o", tmp_path / "missing" / "x.fsl")
    assert p.returncode != 0 and "cannot write" in p.stderr, p.stderr
    assert not list(tmp_path.glob("**/*.tmp"))


def test_python_session_runs_a_compiled_file(compiled, tmp_path):
    """fissile.InferenceSession("model.fsl") runs the file's plan with its
    bindings (no compiler: FSL_CC is set to a missing program for the whole
    process's compile attempts), bit for bit as the CLI run of the ONNX
    model; naming another strategy compiles again from the embedded model."""
    fissile_pkg = pytest.importorskip("fissile")
    if "cpu" not in fissile_pkg.backends():
        pytest.skip("this build has no cpu backend")
    x = np.load(compiled / "x.npy")
    old = dict(os.environ)
    try:
        os.environ.update(fresh_env(tmp_path))
        sess = fissile_pkg.InferenceSession(str(compiled / "small.fsl"))
        assert [i.name for i in sess.get_inputs()] == ["x"]
        assert sess.get_inputs()[0].shape == [3, 16]
        (y,) = sess.run(None, {"x": x})
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert y.tobytes() == np.load(compiled / "ref" / "y.npy").tobytes()
    assert sess.plan["backend"] == "cpu" and sess.plan["strategy"] == "optimal"
    greedy = fissile_pkg.InferenceSession(str(compiled / "small.fsl"), strategy="greedy")
    (y2,) = greedy.run(None, {"x": x})
    assert greedy.plan["strategy"] == "greedy"
    np.testing.assert_allclose(y2, y, rtol=1e-5, atol=1e-7)


def test_two_compiled_files_in_one_process(fissile, compiled, tmp_path):
    """Two compiled model files loaded at once each run their own kernels:
    the objects are loaded from memory under /proc/self/fd/N, and dlopen
    finds loaded objects by that name, so an fd number reused while the
    first object is loaded would give the second model the first's code."""
    fissile_pkg = pytest.importorskip("fissile")
    if "cpu" not in fissile_pkg.backends():
        pytest.skip("this build has no cpu backend")
    onnx_path = compiled / "small.onnx"
    common = ["--const", f"shape={compiled / 'shape.npy'}", "--dim", "batch=3"]
    p = run(fissile, "compile", onnx_path, *common, "--strategy", "unfused", "-o", tmp_path / "unfused.fsl")
    assert p.returncode == 0, p.stderr
    x = np.load(compiled / "x.npy")
    want = np.load(compiled / "ref" / "y.npy")
    first = fissile_pkg.InferenceSession(str(compiled / "small.fsl"))
    second = fissile_pkg.InferenceSession(str(tmp_path / "unfused.fsl"))
    for sess in (second, first, second):
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


def test_round_trip_with_no_generated_kernel(fissile, tmp_path, rng):
    """A plan whose every kernel is a library call (MatMul + bias + Relu: one
    oneDNN matmul with post-ops) exports no kernel object; its file loads."""
    if not has_cpu(fissile):
        pytest.skip("this build has no cpu backend")
    w = numpy_helper.from_array(rng.standard_normal((16, 24)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    g = helper.make_graph(nodes, "lib", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 24])], [w, b])
    onnx_path = tmp_path / "lib.onnx"
    onnx_path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    x = rng.standard_normal((4, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = run(fissile, "compile", onnx_path, "--backend", "cpu", "-o", tmp_path / "lib.fsl")
    assert p.returncode == 0, p.stderr
    p = run(fissile, "run", tmp_path / "lib.fsl", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
            tmp_path / "out", env=fresh_env(tmp_path))
    assert p.returncode == 0, p.stderr
    want = np.maximum(x @ numpy_helper.to_array(w) + numpy_helper.to_array(b), 0)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-4, atol=1e-5)
