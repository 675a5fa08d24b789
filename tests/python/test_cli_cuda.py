"""`fissile compile MODEL --backend cuda --emit-only` and `fissile explain
MODEL --backend cuda`: the CUDA C of every kernel of a plan, compiled by
NVRTC for sm_90 and sm_80 without a GPU, with the launch (block size,
blocks) and ptxas's resources per kernel (docs/gpu-backend.md, "CUDA").
`--backend cuda` without --emit-only runs the plan on the machine's GPU:
every strategy against ONNX Runtime where there is an NVIDIA driver, a
clear error (exit code 3) where there is none.  Skipped only when the
build has no CUDA C dialect (NVRTC not found at configure), which the
command itself says, or, for the runs, when there is no driver.
"""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import fsl_models

OPSET = [helper.make_opsetid("", 17)]


def softmax_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 1000])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 1000])
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "softmax", [x], [y])
    return helper.make_model(g, opset_imports=OPSET, ir_version=8)


def conv_silu_model():
    """Conv with bias, then SiLU (x * sigmoid(x)): one LINEAR kernel, a
    generated convolution computing its epilogue before the store."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 32, 32])
    w = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    g = helper.make_graph(nodes, "conv_silu", [x], [y], [w, b])
    return helper.make_model(g, opset_imports=OPSET, ir_version=8)


def layernorm_model():
    """LayerNormalization over the last axis of [2, 128, 768] with scale and bias: one REDUCE kernel."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 128, 768])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 128, 768])
    s = numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "s")
    b = numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)], "layernorm",
                          [x], [y], [s, b])
    return helper.make_model(g, opset_imports=OPSET, ir_version=8)


def short_rows_model():
    """ReduceMax over rows of 16 elements (64 rows): a row fits in half a warp."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1])
    g = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["y"], axes=[1])], "short_rows", [x], [y])
    return helper.make_model(g, opset_imports=OPSET, ir_version=8)


def half_model():
    """An f16 Add: the dialect has no half type yet, so the kernel is refused (listed, not an error)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 4])
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "half", [x], [y])
    return helper.make_model(g, opset_imports=OPSET, ir_version=8)


def run(fissile, *args, timeout=300):
    return subprocess.run([str(fissile), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def emit(fissile, path, *extra):
    proc = run(fissile, "compile", path, "--backend", "cuda", "--emit-only", *extra)
    if proc.returncode == 3 and "no CUDA C dialect" in proc.stderr:
        pytest.skip("this build has no CUDA C dialect (NVRTC not found at configure): " + proc.stderr.strip())
    return proc


def usage_rows(text):
    """{function: (part, block, grid, [(regs, spill st, spill ld, stack, smem, cmem) per arch])} from the
    resource table; block and grid are None where any block size does (grid-stride over threads)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(\d+)\s+(fsl_k\d+)\s+(\w+)\s+(\d+|any)\s+(\d+|-)\s.*?\|(.*)$", line)
        if m:
            archs = [tuple(int(v) for v in part.split()) for part in m.group(6).split("|")]
            block = None if m.group(4) == "any" else int(m.group(4))
            grid = None if m.group(5) == "-" else int(m.group(5))
            rows[m.group(2)] = (m.group(3), block, grid, archs)
    return rows


@pytest.mark.parametrize("model", [softmax_model, conv_silu_model])
def test_emit_only_compiles_every_kernel(fissile, tmp_path, model):
    path = tmp_path / "m.onnx"
    path.write_bytes(model().SerializeToString())
    cu = tmp_path / "m.cu"
    proc = emit(fissile, path, "-o", cu)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sm_90" in proc.stdout and "sm_80" in proc.stdout and "no errors, no warnings" in proc.stdout
    assert "0 refused" in proc.stdout
    src = cu.read_text()
    assert 'extern "C" __global__ void fsl_k0(' in src
    rows = usage_rows(proc.stdout)
    assert rows, proc.stdout
    for fn, (part, block, grid, archs) in rows.items():
        assert fn in src
        assert len(archs) == 2
        for regs, spst, spld, stack, smem, cmem in archs:
            assert regs > 0 and cmem > 0 and min(spst, spld, stack, smem) >= 0
    parts = {part: (block, grid, archs) for part, block, grid, archs in rows.values()}
    if model is conv_silu_model:
        assert set(parts) == {"conv"}  # bias and SiLU in the convolution's store: one function
        assert "fsl_expf" in src  # the sigmoid of SiLU, fused into the convolution
        # an implicit matmul through two 16 x 16 tiles of float in shared memory, a block per tile
        block, grid, archs = parts["conv"]
        assert block == 256 and grid == 32 * 32 * 32 // 256
        assert all(smem >= 2 * 16 * 16 * 4 for *_, smem, _ in archs)
    else:
        assert set(parts) == {"reduce"}


@pytest.mark.parametrize("model,lanes,rows", [(softmax_model, 256, 8), (layernorm_model, 256, 256),
                                              (short_rows_model, 16, 64)])
def test_reduce_rows_run_a_block_each(fissile, tmp_path, model, lanes, rows):
    """A REDUCE kernel runs a kept-space row on `lanes` threads of a block (docs/gpu-backend.md, "CUDA"),
    and rows shorter than a block several to a block (16 rows of 16 threads: 64 rows in 4 blocks of
    256); the table reports the block size the code assumes and the blocks with work; rows longer than a
    warp combine the warps' partial results through shared memory (ptxas reports it on both
    architectures), a row of a warp or less combines in registers only (warp shuffles, no shared
    memory)."""
    per_block = 256 // lanes
    path = tmp_path / "m.onnx"
    path.write_bytes(model().SerializeToString())
    cu = tmp_path / "m.cu"
    proc = emit(fissile, path, "-o", cu)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no errors, no warnings" in proc.stdout and "0 refused" in proc.stdout
    src = cu.read_text()
    rows_ = usage_rows(proc.stdout)
    assert [part for part, *_ in rows_.values()] == ["reduce"], proc.stdout
    (_, got_block, grid, archs), = rows_.values()
    assert (got_block, grid) == (256, rows // per_block)
    if per_block == 1:
        assert "blockIdx.x; o_ < %d; o_ += (int64_t)gridDim.x" % rows in src
    else:
        assert "blockIdx.x; t_ < %d; t_ += (int64_t)gridDim.x" % (rows // per_block) in src
        assert "q_ = lg_ / %d, l_ = lg_ %% %d" % (lanes, lanes) in src
    assert "__shfl_xor_sync(" in src
    assert "j_ += %d)" % lanes in src  # each thread its strided part of the row
    for regs, spst, spld, stack, smem, cmem in archs:
        assert spst == spld == stack == 0
        assert (smem > 0) == (lanes > 32)
    assert ("__syncthreads();" in src) == (lanes > 32) and ("__shared__" in src) == (lanes > 32)


def test_refused_kernels_are_listed_not_errors(fissile, tmp_path):
    path = tmp_path / "half.onnx"
    path.write_bytes(half_model().SerializeToString())
    proc = emit(fissile, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 refused" in proc.stdout
    assert re.search(r"refused: kernel 0 \(Add '.*'\): .*float16", proc.stdout), proc.stdout


def test_explain_writes_dot_and_the_resources_to_stderr(fissile, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(conv_silu_model().SerializeToString())
    proc = run(fissile, "explain", path, "--backend", "cuda")
    if proc.returncode == 3 and "no CUDA C dialect" in proc.stderr:
        pytest.skip("this build has no CUDA C dialect (NVRTC not found at configure)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("digraph")
    assert "fsl_k" not in proc.stdout
    assert usage_rows(proc.stderr), proc.stderr


def test_backend_cuda_without_a_gpu(fissile, tmp_path):
    """Without an NVIDIA driver, --backend cuda (compile, run, bench) is a
    clear error with exit code 3 (unsupported), never a crash."""
    if fsl_models.have_nvidia_driver():
        pytest.skip("this machine has an NVIDIA driver: test_backend_cuda_runs_every_strategy runs instead")
    path = tmp_path / "m.onnx"
    path.write_bytes(softmax_model().SerializeToString())
    for args in (["compile", path, "--backend", "cuda"], ["run", path, "--backend", "cuda"]):
        proc = run(fissile, *args)
        if proc.returncode == 3 and "no CUDA backend" in proc.stderr:
            pytest.skip("this build has no CUDA backend (NVRTC not found at configure)")
        assert proc.returncode == 3, proc.stderr
        assert "no NVIDIA driver" in proc.stderr and "libcuda.so.1" in proc.stderr, proc.stderr
    proc = run(fissile, "run", path, "--backend", "cuda", "--no-graph")
    assert proc.returncode == 3 and "no NVIDIA driver" in proc.stderr, proc.stderr
    proc = run(fissile, "run", path, "--backend", "cpu", "--no-graph")
    assert proc.returncode == 1 and "--no-graph needs --backend cuda" in proc.stderr, proc.stderr
    proc = run(fissile, "bench", path, "--backend", "cuda", "--strategies", "greedy", "--repeats", "1")
    assert "no NVIDIA driver" in proc.stdout + proc.stderr
    proc = run(fissile, "compile", path, "--emit-only")
    assert proc.returncode == 1 and "--emit-only needs --backend cuda" in proc.stderr
    proc = run(fissile, "explain", path, "--backend", "cpu")
    assert proc.returncode == 1 and "--backend cuda only" in proc.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", ["1", "0"])
@pytest.mark.parametrize("strategy", ["unfused", "opfuse", "greedy", "optimal"])
@pytest.mark.parametrize("model", [softmax_model, conv_silu_model, layernorm_model, short_rows_model])
def test_backend_cuda_runs_every_strategy(fissile, tmp_path, model, strategy, graphs):
    """On a GPU: every strategy of each model on --backend cuda, with CUDA
    graphs and step by step (FSL_CUDA_GRAPHS=0), against ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    m = model()
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    inp = m.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(1).uniform(-2, 2, shape).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    proc = subprocess.run([str(fissile), "run", str(path), "--backend", "cuda", "--strategy", strategy, "--input",
                           f"{inp.name}=" + str(tmp_path / "x.npy"), "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "FSL_CUDA_GRAPHS": graphs})
    assert proc.returncode == 0, proc.stderr
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {inp.name: x})
    for o, w in zip(m.graph.output, want):
        got = np.load(out / f"{o.name}.npy")
        err = np.linalg.norm(got - w) / max(np.linalg.norm(w), 1e-30)
        assert err <= 1e-4, (o.name, err)
