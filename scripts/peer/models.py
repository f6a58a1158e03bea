"""ddpbench's workloads as PyTorch modules, defined once for every peer script.

Parameter names match ddpbench's named_parameters() (and so its safetensors dumps):
  Mlp    workloads/mlp.cpp: Linear layers `layers.{i}`, ReLU between them, raw logits last.
  Gpt    workloads/gpt.cpp: GPT-2 with pre-LN blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))),
         LayerNorm eps 1e-5, GELU tanh approximation, causal self-attention with q|k|v
         packed along the last dim, a final ln_f and the LM head tied to wte (no bias).
  Embed  workloads/embed.cpp: embedding rows concatenated per sample, Linear+ReLU, Linear.
  ResNet workloads/resnet.cpp: torchvision's own ResNet (same names, shapes and buffers).

Used by replay_pytorch.py (loads ddpbench's dumped parameters) and torch_reference.py
(gpt2_init_: ddpbench's initialisation).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERNORM_EPS = 1e-5  # nn::LayerNorm's default, used by every GPT layer norm


class Mlp(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


class Attention(nn.Module):
    """Causal self-attention. With use_sdpa, F.scaled_dot_product_attention (PyTorch >= 2.0,
    its flash/memory-efficient kernels); otherwise the explicit softmax over the materialised
    [B, H, T, T] scores, as ddpbench's math attention does."""

    def __init__(self, c, n_head, use_sdpa=False):
        super().__init__()
        self.n_head = n_head
        self.use_sdpa = use_sdpa
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.n_head
        # q | k | v along the last dim; heads are contiguous slices of each.
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, hd).transpose(1, 2) for z in (q, k, v))
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GptMlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, n_head, use_sdpa=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=LAYERNORM_EPS)
        self.attn = Attention(c, n_head, use_sdpa)
        self.ln_2 = nn.LayerNorm(c, eps=LAYERNORM_EPS)
        self.mlp = GptMlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, c, n_layer, n_head, use_sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq_len, c)
        self.h = nn.ModuleList(Block(c, n_head, use_sdpa) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c, eps=LAYERNORM_EPS)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        h = self.wte(idx) + self.wpe(pos)[None]
        for block in self.h:
            h = block(h)
        return self.ln_f(h) @ self.wte.weight.t()


class Embed(nn.Module):
    def __init__(self, vocab, dim, ids_per_sample, hidden, classes):
        super().__init__()
        self.ids_per_sample = ids_per_sample
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.ModuleList([nn.Linear(ids_per_sample * dim, hidden), nn.Linear(hidden, classes)])

    def forward(self, ids):
        h = self.emb(ids).reshape(ids.shape[0], -1)
        return self.head[1](F.relu(self.head[0](h)))


def gpt2_init_(model, n_layer):
    """ddpbench's GPT initialisation (workloads/gpt.cpp): N(0, 0.02) weights, residual
    projections (c_proj) N(0, 0.02 / sqrt(2 n_layer)), wpe N(0, 0.01), zero biases, LayerNorm
    weights at one. PyTorch's own defaults would start the tied embedding at
    N(0, 1) and the loss near 90 instead of ln(vocab)."""
    proj_std = 0.02 / math.sqrt(2.0 * n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "wpe.weight":
                p.normal_(0.0, 0.01)
            elif p.dim() == 2:
                p.normal_(0.0, proj_std if name.endswith("c_proj.weight") else 0.02)
            elif name.endswith("bias"):
                p.zero_()


def model_from_shapes(family, workload, shapes, n_head=None):
    """The model whose parameters have these shapes ({name: shape}, e.g. from a dump's
    init.safetensors). A GPT's head count, which no shape carries, is `n_head` (a dump's
    meta.json has it under "preset")."""
    if family == "mlp":
        n = 0
        while f"layers.{n}.weight" in shapes:
            n += 1
        if n == 0:
            raise ValueError("no layers.0.weight in the parameters")
        widths = [shapes["layers.0.weight"][1]] + [shapes[f"layers.{i}.weight"][0] for i in range(n)]
        return Mlp(widths)
    if family == "gpt":
        vocab, c = shapes["wte.weight"]
        seq_len = shapes["wpe.weight"][0]
        n_layer = 0
        while f"h.{n_layer}.ln_1.weight" in shapes:
            n_layer += 1
        if not n_head:
            raise ValueError(f"unknown head count for GPT workload '{workload}': the dump has "
                             "no preset in meta.json; pass --n-head")
        return Gpt(vocab, seq_len, c, n_layer, n_head)
    if family == "embed":
        vocab, dim = shapes["emb.weight"]
        hidden, concat = shapes["head.0.weight"]
        classes = shapes["head.1.weight"][0]
        if concat % dim:
            raise ValueError(f"head.0 input {concat} is not a multiple of the embedding dim {dim}")
        return Embed(vocab, dim, concat // dim, hidden, classes)
    if family == "resnet":
        return resnet_from_shapes(shapes)
    raise ValueError(f"unknown workload family '{family}' (expected mlp, gpt, embed or resnet)")


def resnet_from_shapes(shapes):
    """torchvision's ResNet with the stages, block type and classes these shapes have."""
    from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
    layers = []
    for stage in range(1, 5):
        n = 0
        while f"layer{stage}.{n}.conv1.weight" in shapes:
            n += 1
        layers.append(n)
    block = Bottleneck if "layer1.0.conv3.weight" in shapes else BasicBlock
    return ResNet(block, layers, num_classes=shapes["fc.weight"][0])


def resnet_for(workload, classes):
    """The torchvision ResNet of a ddpbench resnet preset (workloads/presets.cpp), by name."""
    from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
    layers = {"resnet-tiny": (BasicBlock, [1, 1, 1, 1]), "resnet18": (BasicBlock, [2, 2, 2, 2]),
              "resnet50": (Bottleneck, [3, 4, 6, 3])}
    if workload not in layers:
        raise ValueError(f"not a resnet preset: {workload} (expected one of {sorted(layers)})")
    block, stages = layers[workload]
    return ResNet(block, stages, num_classes=classes)


def optimizer_spec(cfg):
    """(torch.optim class, its keyword arguments) for ddpbench's record config.optimizer:
    make_optimizer's, and what torch_reference.py hands ZeroRedundancyOptimizer."""
    name = cfg["name"]
    if name == "sgd":
        return torch.optim.SGD, {"lr": cfg["lr"], "momentum": cfg["momentum"], "dampening": 0.0,
                                 "weight_decay": cfg["weight_decay"], "nesterov": False}
    if name == "adamw":
        return torch.optim.AdamW, {"lr": cfg["lr"], "betas": (cfg["beta1"], cfg["beta2"]),
                                   "eps": cfg["eps"], "weight_decay": cfg["weight_decay"]}
    raise ValueError(f"unknown optimizer '{name}' (expected sgd or adamw)")


def make_optimizer(cfg, params):
    """torch.optim.SGD or AdamW from ddpbench's record config.optimizer."""
    cls, kwargs = optimizer_spec(cfg)
    return cls(params, **kwargs)
