"""Reading Google Benchmark's JSON output (--benchmark_out_format=json)."""
import json
import sys

UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def load(path, tool):
    """The document, after failing (exit with `tool`'s name) on any benchmark that errored."""
    with open(path) as f:
        doc = json.load(f)
    for b in doc["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"{tool}: {b['name']} failed: {b.get('error_message', '?')}")
    return doc


def seconds(b, clock="cpu_time"):
    return b[clock] * UNIT_S[b["time_unit"]]


def context_line(doc, name):
    ctx = doc["context"]
    return f"{name} on {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs"
