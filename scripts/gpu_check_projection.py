#!/usr/bin/env python3
"""One line for the GPU check's projection step: the projected 2-rank DDP step time (from
`ddpbench project --json`) against the measured 2-rank run record."""
import json
import sys


def main(projection_path, measured_path):
    with open(projection_path) as f:
        projection = json.load(f)
    with open(measured_path) as f:
        measured = json.load(f)
    points = projection["workloads"][0]["points"]
    predicted = next(p for p in points if p["devices"] == 2)["ddp"]["step_ms"]
    got = measured["summary"]["step_time_ms"]["median"]
    print(f"predicted {predicted:.3f} ms, measured {got:.3f} ms, "
          f"error {100 * (predicted / got - 1):+.1f}%")


if __name__ == "__main__":
    main(*sys.argv[1:3])
