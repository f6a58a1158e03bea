#!/usr/bin/env python3
"""One line for the GPU check's projection step: the projected 2-rank DDP step time (from
`ddpbench project --json`) against the measured 2-rank run record."""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "pylib"))
import run_record  # noqa: E402


def main(projection_path, measured_path):
    with open(projection_path) as f:
        projection = json.load(f)
    measured = run_record.load(measured_path)
    points = projection["workloads"][0]["points"]
    predicted = next(p for p in points if p["devices"] == 2)["ddp"]["step_ms"]
    got = run_record.step_ms_median(measured)
    print(f"predicted {predicted:.3f} ms, measured {got:.3f} ms, "
          f"error {100 * (predicted / got - 1):+.1f}%")


if __name__ == "__main__":
    main(*sys.argv[1:3])
