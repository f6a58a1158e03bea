#!/usr/bin/env python3
"""Why ctest skipped what it skipped: reads BUILD/Testing/Temporary/LastTest.log, prints each
skipped test with its reason, and writes a one-line summary grouped by reason to the file
given second (for scripts/test.sh's verdict line).

  scripts/ctest_skips.py BUILD_DIR SUMMARY_FILE
"""
import collections
import pathlib
import re
import sys


def skips(log_text):
    """(test, reason) for every test whose output says it was skipped, and why."""
    out = []
    for block in re.split(r"^\d+/\d+ Testing: ", log_text, flags=re.M)[1:]:
        name = block.split("\n", 1)[0].strip()
        if "[  SKIPPED ]" not in block and "SKIPPED:" not in block:
            continue
        # gtest: "file:line: Skipped" then the reason; scripts: "SKIPPED: reason".
        reason = re.search(r": Skipped\n(.+)", block) or re.search(r"SKIPPED: (.+)", block)
        out.append((name, reason.group(1).strip() if reason else "no reason given"))
    return out


def main():
    build, summary_file = pathlib.Path(sys.argv[1]), sys.argv[2]
    log = build / "Testing" / "Temporary" / "LastTest.log"
    found = skips(log.read_text(errors="replace")) if log.exists() else []
    if found:
        print(f"Skipped tests, and why ({len(found)}):")
        for name, reason in found:
            print(f"  {name}: {reason}")
    # "no CUDA device: cudaGetDeviceCount failed ..." -> "no CUDA device"
    groups = collections.Counter(reason.split(":")[0] for _, reason in found)
    text = ", ".join(f"{n} skipped: {why}" for why, n in groups.most_common())
    pathlib.Path(summary_file).write_text(text or "none skipped")


if __name__ == "__main__":
    main()
