"""Exports real architectures with seeded random weights to ONNX.

    .venv/bin/python python/export_models.py [--bench] [--bert-base] [--force] [NAME...]

Writes .cache/models/<name>.onnx for the exported models of the registry
(python/fsl_models.py): by default the "test"-tagged ones, with --bench the
bench-only ones too (bert_base, style_transfer at 224x224).  torchvision
resnet18 and mobilenet_v3_small, BERT-like encoders, and the families Korch
evaluates: Johnson et al. fast style transfer, SegFormer (MiT-b0),
YOLOX-Nano, EfficientViT-B1.  TorchScript exporter, opset 17.  Weights come
from torch.manual_seed(0), and normalisation statistics and affine
parameters are randomised too so that no layer is an identity.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsl_models import BY_NAME, MODELS, MODELS_DIR  # noqa: E402

OPSET = 17


def _torch():
    import torch
    return torch


def randomize_norms(model):
    """Random statistics and affine parameters for every normalisation layer.

    Batch norm gets running mean ~N(0, 0.1), variance in [0.75, 1.25) and,
    when affine, scale in [0.75, 1.25) and bias ~N(0, 0.1); instance and
    layer norm get the same scale and bias draws, so that no layer is an
    identity.  Modules are visited in `model.modules()` order from one
    generator seeded with 1.
    """
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
        elif isinstance(mod, (torch.nn.modules.instancenorm._InstanceNorm, torch.nn.LayerNorm)):
            if mod.weight is not None:
                with torch.no_grad():
                    mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) * 0.5 + 0.75)
                    mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)


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


def style_transfer(width=32, res_blocks=5):
    """Johnson et al. fast style-transfer net ("Perceptual Losses for Real-Time
    Style Transfer", 2016), as in pytorch/examples fast_neural_style: reflection
    padded convs with InstanceNorm + ReLU down (9x9, 3x3 s2, 3x3 s2), residual
    blocks at 1/4 resolution, nearest Upsample x2 + conv twice, a 9x9 conv to
    RGB.  `width` is the first layer's channel count (32 in the paper).
    """
    torch = _torch()
    nn = torch.nn

    def conv(cin, cout, k, stride=1, upsample=False):
        layers = [nn.Upsample(scale_factor=2, mode="nearest")] if upsample else []
        return nn.Sequential(*layers, nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, stride))

    def norm(c):
        return nn.InstanceNorm2d(c, affine=True)

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(conv(c, c, 3), norm(c), nn.ReLU(), conv(c, c, 3), norm(c))

        def forward(self, x):
            return x + self.body(x)

    w = width
    return nn.Sequential(
        conv(3, w, 9), norm(w), nn.ReLU(),
        conv(w, 2 * w, 3, 2), norm(2 * w), nn.ReLU(),
        conv(2 * w, 4 * w, 3, 2), norm(4 * w), nn.ReLU(),
        *[Residual(4 * w) for _ in range(res_blocks)],
        conv(4 * w, 2 * w, 3, upsample=True), norm(2 * w), nn.ReLU(),
        conv(2 * w, w, 3, upsample=True), norm(w), nn.ReLU(),
        conv(w, 3, 9))


def segformer(dims=(32, 64, 160, 256), heads=(1, 2, 5, 8), depths=(2, 2, 2, 2),
              sr_ratios=(8, 4, 2, 1), mlp_ratio=4, decoder_dim=256, classes=19):
    """SegFormer (Xie et al. 2021): Mix Transformer encoder + all-MLP decoder.

    Defaults are MiT-b0.  Each stage: overlapping patch embedding (7x7 s4,
    then 3x3 s2 convs) + LayerNorm; blocks of efficient self-attention whose
    keys/values come from a spatial-reduction conv (kernel = stride =
    sr_ratio) + LayerNorm; Mix-FFN (Linear, 3x3 depthwise conv, GELU,
    Linear).  The decoder projects every stage to decoder_dim, bilinearly
    upsamples to 1/4 resolution, concatenates, fuses with a 1x1 conv + BN +
    ReLU and classifies; the output is logits at 1/4 input resolution.
    """
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, dim, heads, sr):
            super().__init__()
            self.heads, self.scale = heads, (dim // heads) ** -0.5
            self.q = nn.Linear(dim, dim)
            self.kv = nn.Linear(dim, 2 * dim)
            self.proj = nn.Linear(dim, dim)
            self.sr = nn.Conv2d(dim, dim, sr, sr) if sr > 1 else None
            self.norm = nn.LayerNorm(dim) if sr > 1 else None

        def forward(self, x, h, w):
            b, n, c = x.shape
            q = self.q(x).reshape(b, n, self.heads, c // self.heads).permute(0, 2, 1, 3)
            if self.sr is not None:
                x = self.sr(x.permute(0, 2, 1).reshape(b, c, h, w)).reshape(b, c, -1).permute(0, 2, 1)
                x = self.norm(x)
            kv = self.kv(x).reshape(b, -1, 2, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            attn = (q @ kv[0].transpose(-2, -1)) * self.scale
            x = (attn.softmax(dim=-1) @ kv[1]).transpose(1, 2).reshape(b, n, c)
            return self.proj(x)

    class MixFFN(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden)
            self.dw = nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden)
            self.fc2 = nn.Linear(hidden, dim)

        def forward(self, x, h, w):
            x = self.fc1(x)
            b, n, c = x.shape
            x = self.dw(x.transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)
            return self.fc2(F.gelu(x))

    class Block(nn.Module):
        def __init__(self, dim, heads, sr):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention(dim, heads, sr)
            self.ffn = MixFFN(dim, dim * mlp_ratio)

        def forward(self, x, h, w):
            x = x + self.attn(self.norm1(x), h, w)
            return x + self.ffn(self.norm2(x), h, w)

    class Stage(nn.Module):
        def __init__(self, i, cin):
            super().__init__()
            k, s = (7, 4) if i == 0 else (3, 2)
            self.embed = nn.Conv2d(cin, dims[i], k, s, k // 2)
            self.embed_norm = nn.LayerNorm(dims[i])
            self.blocks = nn.ModuleList(Block(dims[i], heads[i], sr_ratios[i]) for _ in range(depths[i]))
            self.norm = nn.LayerNorm(dims[i], eps=1e-6)

        def forward(self, x):
            x = self.embed(x)
            b, c, h, w = x.shape
            x = self.embed_norm(x.flatten(2).transpose(1, 2))
            for blk in self.blocks:
                x = blk(x, h, w)
            return self.norm(x).reshape(b, h, w, c).permute(0, 3, 1, 2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stages = nn.ModuleList(Stage(i, ([3] + list(dims))[i]) for i in range(len(dims)))
            self.proj = nn.ModuleList(nn.Linear(d, decoder_dim) for d in dims)
            self.fuse = nn.Sequential(nn.Conv2d(len(dims) * decoder_dim, decoder_dim, 1, bias=False),
                                      nn.BatchNorm2d(decoder_dim), nn.ReLU())
            self.classify = nn.Conv2d(decoder_dim, classes, 1)

        def forward(self, x):
            feats = []
            for stage in self.stages:
                x = stage(x)
                feats.append(x)
            size = feats[0].shape[2:]
            outs = []
            for f, proj in zip(feats, self.proj):
                b, c, h, w = f.shape
                f = proj(f.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(b, -1, h, w)
                if f.shape[2:] != size:
                    f = F.interpolate(f, size=size, mode="bilinear", align_corners=False)
                outs.append(f)
            return self.classify(self.fuse(torch.cat(outs[::-1], dim=1)))

    return Net()


def yolox(depth=0.33, width=0.25, depthwise=True, classes=80, strides=(8, 16, 32)):
    """YOLOX (Ge et al. 2021, Megvii-BaseDetection/YOLOX); defaults are
    YOLOX-Nano.  CSPDarknet backbone (Focus stem, CSP layers, SPP with max
    pools 5/9/13) with BN + SiLU, PAFPN neck (nearest Upsample + Concat, CSP
    layers, strided convs), decoupled head per level (stem, 2 cls convs,
    2 reg convs, cls/reg/obj 1x1 predictions).  The output is
    [1, anchors, 5 + classes]: decoded box centre and size in input pixels,
    objectness and class probabilities (sigmoid), as YOLOX exports with
    decode_in_inference.
    """
    torch = _torch()
    nn = torch.nn

    class BaseConv(nn.Module):
        def __init__(self, cin, cout, k, s=1, groups=1):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False)
            self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    def Conv(cin, cout, k, s=1):
        if depthwise:
            return nn.Sequential(BaseConv(cin, cin, k, s, groups=cin), BaseConv(cin, cout, 1))
        return BaseConv(cin, cout, k, s)

    class Bottleneck(nn.Module):
        def __init__(self, cin, cout, shortcut):
            super().__init__()
            self.conv1, self.conv2 = BaseConv(cin, cout, 1), Conv(cout, cout, 3)
            self.add = shortcut and cin == cout

        def forward(self, x):
            y = self.conv2(self.conv1(x))
            return y + x if self.add else y

    class CSPLayer(nn.Module):
        def __init__(self, cin, cout, n, shortcut=True):
            super().__init__()
            hidden = cout // 2
            self.conv1, self.conv2 = BaseConv(cin, hidden, 1), BaseConv(cin, hidden, 1)
            self.conv3 = BaseConv(2 * hidden, cout, 1)
            self.m = nn.Sequential(*[Bottleneck(hidden, hidden, shortcut) for _ in range(n)])

        def forward(self, x):
            return self.conv3(torch.cat([self.m(self.conv1(x)), self.conv2(x)], dim=1))

    class SPP(nn.Module):
        def __init__(self, cin, cout, ks=(5, 9, 13)):
            super().__init__()
            hidden = cin // 2
            self.conv1 = BaseConv(cin, hidden, 1)
            self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in ks)
            self.conv2 = BaseConv(hidden * (len(ks) + 1), cout, 1)

        def forward(self, x):
            x = self.conv1(x)
            return self.conv2(torch.cat([x] + [p(x) for p in self.pools], dim=1))

    class Focus(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv = BaseConv(4 * cin, cout, 3)

        def forward(self, x):
            return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2],
                                        x[..., ::2, 1::2], x[..., 1::2, 1::2]], dim=1))

    bc, bd = int(width * 64), max(round(depth * 3), 1)
    c3, c4, c5 = int(256 * width), int(512 * width), int(1024 * width)
    nd = round(3 * depth)
    hw = int(256 * width)

    class Head(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.stem = BaseConv(cin, hw, 1)
            self.cls = nn.Sequential(Conv(hw, hw, 3), Conv(hw, hw, 3))
            self.reg = nn.Sequential(Conv(hw, hw, 3), Conv(hw, hw, 3))
            self.cls_pred = nn.Conv2d(hw, classes, 1)
            self.reg_pred = nn.Conv2d(hw, 4, 1)
            self.obj_pred = nn.Conv2d(hw, 1, 1)

        def forward(self, x):
            x = self.stem(x)
            r = self.reg(x)
            return torch.cat([self.reg_pred(r), self.obj_pred(r).sigmoid(),
                              self.cls_pred(self.cls(x)).sigmoid()], dim=1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = Focus(3, bc)
            self.dark2 = nn.Sequential(Conv(bc, 2 * bc, 3, 2), CSPLayer(2 * bc, 2 * bc, bd))
            self.dark3 = nn.Sequential(Conv(2 * bc, 4 * bc, 3, 2), CSPLayer(4 * bc, 4 * bc, 3 * bd))
            self.dark4 = nn.Sequential(Conv(4 * bc, 8 * bc, 3, 2), CSPLayer(8 * bc, 8 * bc, 3 * bd))
            self.dark5 = nn.Sequential(Conv(8 * bc, 16 * bc, 3, 2), SPP(16 * bc, 16 * bc),
                                       CSPLayer(16 * bc, 16 * bc, bd, shortcut=False))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.lateral_conv0 = BaseConv(c5, c4, 1)
            self.C3_p4 = CSPLayer(2 * c4, c4, nd, False)
            self.reduce_conv1 = BaseConv(c4, c3, 1)
            self.C3_p3 = CSPLayer(2 * c3, c3, nd, False)
            self.bu_conv2 = Conv(c3, c3, 3, 2)
            self.C3_n3 = CSPLayer(2 * c3, c4, nd, False)
            self.bu_conv1 = Conv(c4, c4, 3, 2)
            self.C3_n4 = CSPLayer(2 * c4, c5, nd, False)
            self.heads = nn.ModuleList(Head(c) for c in (c3, c4, c5))

        def forward(self, x):
            size = x.shape[2:]
            x2 = self.dark3(self.dark2(self.stem(x)))
            x1 = self.dark4(x2)
            x0 = self.dark5(x1)
            fpn_out0 = self.lateral_conv0(x0)
            f_out0 = self.C3_p4(torch.cat([self.up(fpn_out0), x1], 1))
            fpn_out1 = self.reduce_conv1(f_out0)
            pan_out2 = self.C3_p3(torch.cat([self.up(fpn_out1), x2], 1))
            pan_out1 = self.C3_n3(torch.cat([self.bu_conv2(pan_out2), fpn_out1], 1))
            pan_out0 = self.C3_n4(torch.cat([self.bu_conv1(pan_out1), fpn_out0], 1))
            outs, grids, scales = [], [], []
            for head, feat, s in zip(self.heads, (pan_out2, pan_out1, pan_out0), strides):
                outs.append(head(feat).flatten(start_dim=2))
                h, w = size[0] // s, size[1] // s
                yv, xv = torch.meshgrid([torch.arange(h), torch.arange(w)], indexing="ij")
                grids.append(torch.stack((xv, yv), 2).reshape(1, -1, 2).float())
                scales.append(torch.full((1, h * w, 1), float(s)))
            out = torch.cat(outs, dim=2).permute(0, 2, 1)
            grid, stride = torch.cat(grids, dim=1), torch.cat(scales, dim=1)
            return torch.cat([(out[..., :2] + grid) * stride, out[..., 2:4].exp() * stride,
                              out[..., 4:]], dim=-1)

    return Net()


def efficientvit(widths=(16, 32, 64, 128, 256), depths=(1, 2, 3, 3, 4), dim=16, expand=4,
                 head_widths=(1536, 1600), classes=1000):
    """EfficientViT (Cai et al. 2023, mit-han-lab/efficientvit) classifier;
    defaults are EfficientViT-B1.  Conv stem + DSConv, MBConv stages, then
    stages of EfficientViT blocks: lightweight multi-scale linear attention
    (1x1 qkv conv, 5x5 depthwise + grouped 1x1 aggregation, ReLU linear
    attention with the ones-padded value trick, 1x1 projection + BN) and
    an MBConv, all with Hardswish; head: 1x1 conv, global average pool,
    Linear + LayerNorm + Hardswish, Linear.
    """
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    def conv(cin, cout, k=1, s=1, groups=1, bias=False, norm=True, act=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=bias)]
        if norm:
            layers.append(nn.BatchNorm2d(cout))
        if act:
            layers.append(nn.Hardswish())
        return nn.Sequential(*layers)

    def mbconv(cin, cout, s=1, fewer_norm=False):
        mid = round(cin * expand)
        return nn.Sequential(conv(cin, mid, 1, bias=fewer_norm, norm=not fewer_norm),
                             conv(mid, mid, 3, s, groups=mid, bias=fewer_norm, norm=not fewer_norm),
                             conv(mid, cout, 1, act=False))

    class Residual(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return x + self.body(x)

    class LiteMLA(nn.Module):
        def __init__(self, c, scales=(5,), eps=1e-15):
            super().__init__()
            heads = c // dim
            td = heads * dim
            self.eps = eps
            self.qkv = conv(c, 3 * td, norm=False, act=False)
            self.aggreg = nn.ModuleList(nn.Sequential(
                nn.Conv2d(3 * td, 3 * td, s, padding=s // 2, groups=3 * td, bias=False),
                nn.Conv2d(3 * td, 3 * td, 1, groups=3 * heads, bias=False)) for s in scales)
            self.proj = conv(td * (1 + len(scales)), c, act=False)

        def forward(self, x):
            qkv = self.qkv(x)
            qkv = torch.cat([qkv] + [op(qkv) for op in self.aggreg], dim=1)
            b, _, h, w = qkv.shape
            qkv = qkv.reshape(b, -1, 3 * dim, h * w)
            q, k, v = F.relu(qkv[:, :, :dim]), F.relu(qkv[:, :, dim:2 * dim]), qkv[:, :, 2 * dim:]
            v = F.pad(v, (0, 0, 0, 1), mode="constant", value=1)
            out = (v @ k.transpose(-1, -2)) @ q
            out = out[:, :, :-1] / (out[:, :, -1:] + self.eps)
            return self.proj(out.reshape(b, -1, h, w))

    layers = [conv(3, widths[0], 3, 2)]
    layers += [Residual(nn.Sequential(conv(widths[0], widths[0], 3, groups=widths[0]),
                                      conv(widths[0], widths[0], act=False)))
               for _ in range(depths[0])]
    cin = widths[0]
    for w, d in zip(widths[1:3], depths[1:3]):
        for i in range(d):
            block = mbconv(cin, w, 2 if i == 0 else 1)
            layers.append(block if i == 0 else Residual(block))
            cin = w
    for w, d in zip(widths[3:], depths[3:]):
        layers.append(mbconv(cin, w, 2, fewer_norm=True))
        cin = w
        for _ in range(d):
            layers += [Residual(LiteMLA(w)), Residual(mbconv(w, w, fewer_norm=True))]
    layers += [conv(cin, head_widths[0]), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(head_widths[0], head_widths[1], bias=False), nn.LayerNorm(head_widths[1]),
               nn.Hardswish(), nn.Linear(head_widths[1], classes)]
    return nn.Sequential(*layers)


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
    builders = {"style_transfer": (style_transfer, "output"),
                "style_transfer_small": (style_transfer, "output"), "segformer_b0": (segformer, "logits"),
                "yolox_nano": (yolox, "output"), "efficientvit_b1": (efficientvit, "output")}
    if name in builders:
        fn, out = builders[name]
        m = fn()
        randomize_norms(m)
        return m, [out], None
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
    ap.add_argument("--bench", action="store_true", help="also export the bench-only models")
    ap.add_argument("--bert-base", action="store_true", help="also export the BERT-base-sized encoder")
    ap.add_argument("--force", action="store_true", help="export again even if the file exists")
    ap.add_argument("names", nargs="*", help="models to export (default: the test models)")
    args = ap.parse_args()
    exported = [m for m in MODELS if m.source == "export"]
    names = args.names or [m.name for m in exported if "test" in m.tags]
    extra = [m.name for m in exported if args.bench and "bench" in m.tags]
    extra += ["bert_base"] if args.bert_base else []
    names += [n for n in extra if n not in names]
    for n in names:
        export(n, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
