"""`fissile report MODEL -o page.html`: one self-contained HTML page of a
measured run (docs/cli.md, "report").

The page must show the numbers of that run (checked against its --json),
hold only well-formed inline SVG and no script, escape model-provided
names, draw the plan with Graphviz when `dot` is on PATH and say so when it
is not, show the peer's latency from --peer, and refuse a bad --peer file or
an unwritable output with a clear error and without leaving a file behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

# untrusted model data: a node name that would be markup if not escaped
EVIL = '<script>alert("x&y")</script>'
EVIL_ESCAPED = "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;"

FAST = ["--repeats", "3", "--warmup", "1", "--threads", "1"]


def small_model():
    """x[8,64] @ W[64,32] + B, Relu, Softmax: a linear kernel and a reduce."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((32,)).astype(np.float32), "B")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name=EVIL),
        helper.make_node("Add", ["h", "B"], ["a"], name="add_bias_\u00f1\u2713"),
        helper.make_node("Relu", ["a"], ["r"], name="relu1"),
        helper.make_node("Softmax", ["r"], ["y"], name="softmax1", axis=-1),
    ]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "small.onnx"
    path.write_bytes(small_model().SerializeToString())
    return path


def fmt_time(s: float) -> str:
    """The page's duration format (tools/html.c, fmt_time)."""
    if abs(s) >= 1:
        return f"{s:.3f} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} \u00b5s"


def path_without_dot(tmp_path) -> str:
    """A PATH with every program of the current PATH except `dot`."""
    bin_dir = tmp_path / "bin_no_dot"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(":"):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = os.path.join(d, name)
            if name == "dot" or (bin_dir / name).exists() or not os.access(src, os.X_OK) or os.path.isdir(src):
                continue
            (bin_dir / name).symlink_to(src)
    return str(bin_dir)


def report(fissile, model, out, *args, env=None, check=True):
    proc = subprocess.run([str(fissile), "report", str(model), "-o", str(out), *args], capture_output=True,
                          text=True, timeout=600, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, flags=re.S)


def check_page(html: str, data: dict):
    """What every page must hold, against the run's own numbers."""
    assert "<script" not in html.lower()
    assert EVIL not in html and EVIL_ESCAPED in html
    for el in svgs(html):
        ET.fromstring(el)  # well-formed XML
    strategies = data["strategies"]
    assert [s["name"] for s in strategies] == ["unfused", "opfuse", "greedy", "optimal", "optimal-norewrite"]
    for s in strategies:
        assert s["status"] == "ok", s
        assert len(s["times_s"]) == 3
        ts = sorted(s["times_s"])
        assert s["median_s"] == ts[1] and s["min_s"] == ts[0]
        assert s["p10_s"] <= s["median_s"] <= s["p90_s"]
        # the measured and predicted numbers of this run are on the page
        assert fmt_time(s["median_s"]) in html, (s["strategy"], fmt_time(s["median_s"]))
        assert fmt_time(s["p10_s"]) + " \u2013 " + fmt_time(s["p90_s"]) in html
        assert fmt_time(s["predicted_s"]) in html
        assert f"<td>{s['kernels']}</td>" in html
    assert data["device_bandwidth"] > 0 and data["device_peak_flops"] > 0 and data["device_launch_s"] > 0
    bd = data["breakdown"]
    assert bd["strategy"] == "optimal"
    optimal = strategies[3]  # the breakdown is of optimal with the rewrites
    assert len(bd["kernels"]) == optimal["kernels"]
    kinds = {}
    for k in bd["kernels"]:
        kinds[k["kind"]] = kinds.get(k["kind"], 0) + 1
        if bd["source"] == "measured" and k["time_s"] is not None:
            assert k["time_s"] > 0
            assert fmt_time(k["time_s"]) in html
            # the fraction of the device's copy bandwidth the kernel reaches
            assert k["bandwidth_fraction"] == pytest.approx(k["bytes"] / k["time_s"] / data["device_bandwidth"])
    assert kinds == {k: v for k, v in optimal["by_kind"].items() if v}
    # every ONNX node appears in the breakdown, the MatMul with its escaped name
    nodes = {(n["op_type"], n["name"]) for k in bd["kernels"] for n in k["onnx_nodes"]}
    assert nodes == {("MatMul", EVIL), ("Add", "add_bias_\u00f1\u2713"), ("Relu", "relu1"), ("Softmax", "softmax1")}
    assert "add_bias_\u00f1\u2713" in html  # non-ASCII names pass through as UTF-8
    # histograms
    assert {o["op"]: o["count"] for o in data["onnx_ops"]} == {"MatMul": 1, "Add": 1, "Relu": 1, "Softmax": 1}
    assert "ONNX ops: 4 nodes, 4 distinct ops" in html
    assert sum(o["count"] for o in data["primitives"]) > 4
    assert "Primitives after fission" in html


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_report_with_dot(fissile, model, tmp_path):
    out, js = tmp_path / "report.html", tmp_path / "report.json"
    proc = report(fissile, model, out, "--json", str(js), *FAST)
    assert f"report: {out}" in proc.stdout
    html, data = out.read_text(encoding="utf-8"), json.loads(js.read_text())
    check_page(html, data)
    assert data["plan_graph"] is True and data["plan_note"] == ""
    graph = re.search(r'<div class="graph">\s*(<svg\b.*?</svg>)', html, flags=re.S)
    assert graph, "the plan graph is not inlined"
    root = ET.fromstring(graph.group(1))
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "optimal plan" in texts and "matmul" in texts
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html
    # nothing left behind beside the outputs
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_report_without_dot(fissile, model, tmp_path):
    out, js = tmp_path / "report.html", tmp_path / "report.json"
    env = dict(os.environ, PATH=path_without_dot(tmp_path))
    report(fissile, model, out, "--json", str(js), *FAST, env=env)
    html, data = out.read_text(encoding="utf-8"), json.loads(js.read_text())
    check_page(html, data)
    assert data["plan_graph"] is False
    assert "Graphviz `dot` was not found on PATH" in data["plan_note"]
    assert "Graphviz `dot` was not found on PATH" in html
    assert 'class="graph"' not in html
    assert len(svgs(html)) == 5  # latency, kinds, top kernels, two histograms


@pytest.mark.parametrize("form", ["schema", "bench_py_row"])
def test_report_shows_the_peer(fissile, model, tmp_path, form):
    peer = tmp_path / "peer.json"
    if form == "schema":
        peer.write_text(json.dumps({"name": "onnxruntime 9.9 <cpu>", "median_s": 0.00123, "p10_s": 0.0011,
                                    "p90_s": 0.0015}))
        want = {"name": "onnxruntime 9.9 <cpu>", "median_s": 0.00123, "p10_s": 0.0011, "p90_s": 0.0015}
    else:  # bench/bench.py's row: {"ort": {"status", "median_s", "min_s", "times_s"}}
        times = [0.002, 0.0021, 0.0025, 0.0019, 0.003]
        peer.write_text(json.dumps({"name": "x", "ort": {"status": "ok", "median_s": 0.0021, "min_s": 0.0019,
                                                          "times_s": times}}))
        want = {"name": "onnxruntime", "median_s": 0.0021, "p10_s": float(np.percentile(times, 10)),
                "p90_s": float(np.percentile(times, 90))}
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    report(fissile, model, out, "--peer", str(peer), "--json", str(js), "--strategies", "optimal", *FAST)
    html, data = out.read_text(encoding="utf-8"), json.loads(js.read_text())
    for key, v in want.items():
        assert data["peer"][key] == pytest.approx(v) if key != "name" else data["peer"][key] == v
    assert fmt_time(want["median_s"]) in html
    assert fmt_time(want["p10_s"]) + " \u2013 " + fmt_time(want["p90_s"]) in html
    name_html = want["name"].replace("<", "&lt;").replace(">", "&gt;")
    assert name_html in html and "<cpu>" not in html
    for el in svgs(html):
        ET.fromstring(el)


@pytest.mark.parametrize("content,why", [
    (None, "No such file"),
    ("{not json", "not valid JSON"),
    ('{"name": "ort"}', "median_s"),
    ('{"median_s": -1}', "median_s"),
    ('{"median_s": 0.001, "p90_s": "slow"}', "p90_s"),
    ("[1, 2]", "expected a JSON object"),
])
def test_bad_peer_file(fissile, model, tmp_path, content, why):
    peer = tmp_path / "peer.json"
    if content is not None:
        peer.write_text(content)
    out = tmp_path / "r.html"
    out.write_text("old page")
    proc = report(fissile, model, out, "--peer", str(peer), *FAST, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"--peer '{peer}'" in proc.stderr and why in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "Sanitizer" not in proc.stderr
    assert out.read_text() == "old page"  # nothing measured, nothing written


def test_unwritable_output(fissile, model, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in [blocker / "r.html", tmp_path / "missing_dir" / "r.html", tmp_path]:
        proc = report(fissile, model, out, *FAST, check=False)
        assert proc.returncode == 2, proc.stderr
        assert f"cannot write '{out}'" in proc.stderr, proc.stderr
    # an unwritable --json fails before anything is measured or written
    out = tmp_path / "r.html"
    proc = report(fissile, model, out, "--json", str(blocker / "r.json"), *FAST, check=False)
    assert proc.returncode == 2 and f"cannot write '{blocker / 'r.json'}'" in proc.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "small.onnx"]


def test_report_usage_errors(fissile, model, tmp_path):
    proc = subprocess.run([str(fissile), "report", str(model)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "missing -o FILE" in proc.stderr
    proc = report(fissile, model, tmp_path / "r.html", "--strategies", "fastest", check=False)
    assert proc.returncode == 1 and "--strategies" in proc.stderr
    proc = report(fissile, tmp_path / "missing.onnx", tmp_path / "r.html", check=False)
    assert proc.returncode == 2 and "missing.onnx" in proc.stderr
    assert not (tmp_path / "r.html").exists()
    help_text = subprocess.run([str(fissile), "report", "--help"], capture_output=True, text=True).stdout
    assert "--peer FILE" in help_text and "-o, --output FILE" in help_text
