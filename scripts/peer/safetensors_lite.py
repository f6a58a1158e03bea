"""A small reader and writer for the safetensors format, in pure Python (struct + json + torch).

The `safetensors` package is not installed here, so the replay scripts use this module. It
follows the same layout as workloads/safetensors.h:

    [8 bytes]  N, the header length, unsigned little-endian
    [N bytes]  JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
                      "__metadata__": {...}}   padded with spaces to a multiple of 8 bytes
    [data]     raw little-endian, row-major tensor bytes; offsets relative to the data start

Supported dtypes: F32, F16, BF16, I32, I64. Tensors keep their stored dtype; callers convert.
"""
import json
import struct

import torch

DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I32": torch.int32,
    "I64": torch.int64,
}
_NAMES = {v: k for k, v in DTYPES.items()}


class SafetensorsError(ValueError):
    pass


def load(path, strict=False):
    """Returns (tensors, metadata): an insertion-ordered {name: tensor} in header order.

    strict: also what ddpbench's writer guarantees (workloads/safetensors.h): the data starts
    8-byte aligned, and the tensors lie back to back in header order and cover the data."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SafetensorsError(f"{path}: {len(raw)} bytes is too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise SafetensorsError(f"{path}: header length {n} runs past the file size {len(raw)}")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n :]
    metadata = header.pop("__metadata__", {}) or {}
    if strict and (8 + n) % 8 != 0:
        raise SafetensorsError(f"{path}: data start {8 + n} is not 8-byte aligned")
    tensors = {}
    expected_begin = 0
    for name, info in header.items():
        dtype_name = info["dtype"]
        if dtype_name not in DTYPES:
            raise SafetensorsError(f"{path}: tensor '{name}' has unsupported dtype {dtype_name}")
        dtype = DTYPES[dtype_name]
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - begin != numel * itemsize or end > len(data) or begin < 0:
            raise SafetensorsError(
                f"{path}: tensor '{name}' {dtype_name}{shape} has data_offsets [{begin}, {end}] "
                f"but needs {numel * itemsize} bytes within a {len(data)}-byte data section")
        if strict and begin != expected_begin:
            raise SafetensorsError(f"{path}: tensor '{name}' data_offsets [{begin}, {end}] are not "
                                   f"contiguous in header order (expected begin {expected_begin})")
        expected_begin = end
        if numel == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
        else:
            # bytearray: frombuffer on read-only memory warns, and we want an owning copy anyway.
            buf = bytearray(data[begin:end])
            tensors[name] = torch.frombuffer(buf, dtype=dtype).reshape(shape)
    if strict and expected_begin != len(data):
        raise SafetensorsError(f"{path}: the data section is {len(data)} bytes, the tensors "
                               f"cover {expected_begin}")
    return tensors, metadata


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16: write the bits
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save(path, tensors, metadata=None):
    """Writes {name: tensor} in the given order (data contiguous in that order)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if t.dtype not in _NAMES:
            raise SafetensorsError(f"{path}: tensor '{name}' has unsupported dtype {t.dtype}")
        b = _tensor_bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
