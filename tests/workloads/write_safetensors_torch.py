#!/usr/bin/env python3
"""PyTorch side of the safetensors compatibility test (tests/workloads/test_safetensors.cpp).

    write_safetensors_torch.py write PATH   writes the reference tensors to PATH
    write_safetensors_torch.py check PATH   reads PATH (written by ddpbench) and verifies it

The writer is implemented here by hand with struct/json, so that the test does not depend on
the `safetensors` package; `check` reads with the project's one Python reader
(scripts/peer/safetensors_lite.py, strict), and when the package is installed, also with it. The reference tensors must stay in sync with reference_tensors() in the C++ test.
Exit status: 0 when everything matches, 1 on a mismatch (printed on stderr).
"""
import json
import os
import struct
import sys

import torch

# The one Python reader (scripts/peer/safetensors_lite.py, the replay's), in its strict mode.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts", "peer"))
import safetensors_lite  # noqa: E402

DTYPES = {
    "F32": torch.float32,
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "I32": torch.int32,
    "I64": torch.int64,
}
NAMES = {v: k for k, v in DTYPES.items()}


def reference_tensors():
    """Name -> tensor, in file order (deliberately not alphabetical)."""
    return {
        "weight.f32": (torch.arange(30, dtype=torch.float64) * 0.25 - 3).float().reshape(2, 3, 5),
        "emb.bf16": ((torch.arange(12, dtype=torch.float64) - 5) * 0.5).to(torch.bfloat16).reshape(3, 4),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "ids.i32": (torch.arange(12, dtype=torch.int64) * 1000 - 6000).to(torch.int32).reshape(4, 1, 3),
        "half.f16": (torch.arange(7, dtype=torch.float64) * 1.5 - 4).to(torch.float16),
        "big.i64": torch.tensor([2**40 + 7, -3], dtype=torch.int64),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
    }


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write(path, metadata):
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name, t in reference_tensors().items():
        data = tensor_bytes(t)
        header[name] = {
            "dtype": NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def check(path, metadata):
    errors = []
    tensors, got_meta = safetensors_lite.load(path, strict=True)
    if got_meta != metadata:
        errors.append(f"metadata {got_meta} != {metadata}")
    ref = reference_tensors()
    if list(tensors) != list(ref):
        errors.append(f"tensor order {list(tensors)} != {list(ref)}")
    for name, want in ref.items():
        got = tensors.get(name)
        if got is None:
            errors.append(f"{name}: missing")
        elif got.dtype != want.dtype or got.shape != want.shape:
            errors.append(f"{name}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}")
        elif not torch.equal(got, want):
            errors.append(f"{name}: values {got.flatten().tolist()} != {want.flatten().tolist()}")
    try:
        from safetensors.torch import load_file
    except ImportError:
        load_file = None
    if load_file is not None:
        for name, got in load_file(path).items():
            if not torch.equal(got, ref[name]):
                errors.append(f"{name}: safetensors.torch.load_file disagrees")
    for e in errors:
        print(f"write_safetensors_torch.py: {path}: {e}", file=sys.stderr)
    return 1 if errors else 0


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        write(path, {"format": "pt", "source": "torch"})
        return 0
    return check(path, {"format": "pt", "source": "ddpbench"})


if __name__ == "__main__":
    sys.exit(main())
