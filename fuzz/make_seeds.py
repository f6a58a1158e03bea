#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_safetensors and fuzz_store_protocol (fuzz/corpus/).

The bytes are committed; rerun this after a format change. The fuzz_suite_file seeds are
hand-written suite files (docs/suite-format.md). The fuzz_report seeds are real run
records from `ddpbench run --workload mlp-small --steps 1 --warmup 0 --global-batch 4 --out F`.
The fuzz_nanogpt_meta seeds are Python's pickle.dump of nanoGPT prepare.py-style meta dicts
(vocab_size, itos, stoi) at protocols 2 to 5, and one dict of every other kind the reader knows.
Standard library only: safetensors files are written by hand, byte-compatible with the
`safetensors` package (8-byte little-endian header length, JSON header padded with spaces to
a multiple of 8, raw little-endian data).
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def frame_handshake(token, version=1):
    return struct.pack("<IBI", 0x53504444, version, len(token)) + token


def frame_request(op, key, value):
    return struct.pack("<BI", op, len(key)) + key + struct.pack("<I", len(value)) + value


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    f32 = lambda *v: struct.pack("<%df" % len(v), *v)
    i64 = lambda *v: struct.pack("<%dq" % len(v), *v)
    write("fuzz_safetensors", "two_tensors.safetensors", safetensors([
        ("fc.weight", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)),
        ("fc.bias", "F32", [2], f32(0.5, -0.5)),
    ]))
    write("fuzz_safetensors", "dtypes_metadata.safetensors", safetensors([
        ("step", "I64", [], i64(7)),
        ("ids", "I32", [4], struct.pack("<4i", 1, 2, 3, 4)),
        ("half", "F16", [2], struct.pack("<2H", 0x3C00, 0xC000)),
        ("bf", "BF16", [1, 2], struct.pack("<2H", 0x3F80, 0x4000)),
        ("empty", "F32", [0, 3], b""),
    ], metadata={"format": "pt", "ddpbench": "seed"}))
    write("fuzz_safetensors", "empty.safetensors", safetensors([]))

    hs = frame_handshake(b"secret")
    u64 = lambda v: struct.pack("<Q", v)
    write("fuzz_store_protocol", "set_get.bin",
          hs + frame_request(1, b"key", b"value") + frame_request(2, b"key", u64(1000)))
    write("fuzz_store_protocol", "add_check_wait.bin",
          hs + frame_request(4, b"count", struct.pack("<q", 5)) + frame_request(4, b"count", struct.pack("<q", -2))
          + frame_request(5, b"count", b"") + frame_request(3, b"count", u64(0)))
    write("fuzz_store_protocol", "add_on_value.bin",
          frame_handshake(b"") + frame_request(1, b"n", b"12") + frame_request(4, b"n", struct.pack("<q", 1)))
    write("fuzz_store_protocol", "bad_version.bin", frame_handshake(b"tok", version=9))


if __name__ == "__main__":
    main()
