"""ddpbench's workload presets, as the PyTorch side reads them: `ddpbench workloads --json`
(workloads/family.h, preset_json), so that no preset, default batch or head count is kept a
second time in Python.

The table comes from, in this order: a file named by --workloads-json or
$DDPBENCH_WORKLOADS_JSON (the suite writes one into its results folder); or the output of
`BIN workloads --json` for --ddpbench BIN or $DDPBENCH_BIN; or that of the repository's
build/ci/bench/ddpbench.
"""
import json
import os
import subprocess

REPO_BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "ci",
                          "bench", "ddpbench")


class TableError(Exception):
    pass


def _index(presets, where):
    if not isinstance(presets, list) or not all(isinstance(p, dict) and "name" in p
                                                for p in presets):
        raise TableError(f"{where} is not ddpbench's workload table (ddpbench workloads --json)")
    return {p["name"]: p for p in presets}


def load(path=None, ddpbench=None):
    """{name: preset}."""
    path = path or os.environ.get("DDPBENCH_WORKLOADS_JSON")
    if path:
        try:
            with open(path) as f:
                return _index(json.load(f), path)
        except (OSError, ValueError) as e:
            raise TableError(f"cannot read the workload table {path}: {e}") from e
    exe = ddpbench or os.environ.get("DDPBENCH_BIN") or REPO_BUILD
    try:
        out = subprocess.run([exe, "workloads", "--json"], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise TableError(f"no workload table: `{exe} workloads --json` failed ({e}); pass "
                         "--workloads-json FILE or --ddpbench BIN") from e
    return _index(json.loads(out), f"the output of {exe} workloads --json")


def widths(preset):
    """An MLP's layer widths: in_features, hidden..., classes."""
    return [preset["in_features"]] + list(preset["hidden"]) + [preset["classes"]]
