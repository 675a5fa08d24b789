"""Exports real architectures with seeded random weights to ONNX.

    .venv/bin/python python/export_models.py [--bert-base] [--force]

Writes .cache/models/{resnet18,mobilenet_v3_small,transformer_encoder}.onnx
(and bert_base.onnx with --bert-base) with torch.onnx.export (TorchScript
exporter, opset 17).  Weights come from torch.manual_seed(0), and batch norm
statistics are randomised too so that no layer is an identity.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsl_models import BY_NAME, MODELS_DIR  # noqa: E402

OPSET = 17


def _torch():
    import torch
    return torch


def randomize_norms(model):
    torch = _torch()
    g = torch.Generator().manual_seed(1)
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.num_features, generator=g) * 0.5 + 0.75)
                if mod.affine:
                    mod.weight.copy_(torch.rand(mod.num_features, generator=g) * 0.5 + 0.75)
                    mod.bias.copy_(torch.randn(mod.num_features, generator=g) * 0.1)


class Encoder:
    """Factory for a BERT-like encoder built from torch.nn modules."""

    @staticmethod
    def build(vocab, hidden, layers, heads, ffn, max_len):
        torch = _torch()
        nn = torch.nn

        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(vocab, hidden)
                self.pos = nn.Embedding(max_len, hidden)
                self.norm = nn.LayerNorm(hidden, eps=1e-12)
                layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0,
                                                   activation="gelu", batch_first=True)
                self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.pool = nn.Linear(hidden, hidden)

            def forward(self, input_ids):
                pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
                x = self.norm(self.tok(input_ids) + self.pos(pos))
                x = self.layers(x)
                return x, torch.tanh(self.pool(x[:, 0]))

        m = Enc()
        # BERT-style init: small normal weights.
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.02 * math.sqrt(768 / hidden))
        return m


def build(name):
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=1000)
        randomize_norms(m)
        return m, ["output"], None
    if name == "mobilenet_v3_small":
        import torchvision
        m = torchvision.models.mobilenet_v3_small(num_classes=1000)
        randomize_norms(m)
        return m, ["output"], None
    if name == "transformer_encoder":
        return Encoder.build(1000, 64, 2, 4, 128, 64), ["hidden", "pooled"], None
    if name == "bert_base":
        return Encoder.build(30522, 768, 12, 12, 3072, 512), ["hidden", "pooled"], None
    raise KeyError(name)


def _shapes_match(spec):
    """Whether the exported file has the input shapes the registry asks for."""
    import onnx
    g = onnx.load(str(spec.path), load_external_data=False).graph
    have = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in g.input}
    return all(have.get(i.name) == tuple(i.shape) for i in spec.inputs)


def export(name, force=False):
    torch = _torch()
    spec = BY_NAME[name]
    if spec.path.exists() and not force and _shapes_match(spec):
        return spec.path
    torch.manual_seed(0)
    model, out_names, _ = build(name)
    model.eval()
    args = []
    for inp in spec.inputs:
        if inp.dtype == "int64":
            args.append(torch.randint(int(inp.low), int(inp.high), inp.shape))
        else:
            args.append(torch.rand(inp.shape) * (inp.high - inp.low) + inp.low)
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    tmp = spec.path.with_suffix(".tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Grad mode stays on: it keeps nn.TransformerEncoderLayer off its
        # fused fast path, which the exporter cannot handle.
        torch.onnx.export(model, tuple(args), str(tmp), opset_version=OPSET,
                          input_names=[i.name for i in spec.inputs], output_names=out_names,
                          do_constant_folding=True)
    tmp.rename(spec.path)
    print(f"export_models: {name}: {spec.path} ({spec.path.stat().st_size / 1e6:.1f} MB)", flush=True)
    return spec.path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bert-base", action="store_true", help="also export the BERT-base-sized encoder")
    ap.add_argument("--force", action="store_true", help="export again even if the file exists")
    ap.add_argument("names", nargs="*", help="models to export (default: the test models)")
    args = ap.parse_args()
    names = args.names or ["resnet18", "mobilenet_v3_small", "transformer_encoder"]
    if args.bert_base and "bert_base" not in names:
        names.append("bert_base")
    for n in names:
        export(n, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
