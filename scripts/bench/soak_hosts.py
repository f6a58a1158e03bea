#!/usr/bin/env python3
"""The soak's DDP part across two emulated hosts (scripts/bench/soak.sh, part 3; issue 48).

    scripts/bench/soak_hosts.py BUILD_DIR STEPS     (exit 77: no network namespaces here)

DDP on 4 ranks, 2 on each of two hosts (network namespaces joined by a bridge,
scripts/cluster/netns_cluster.sh), for STEPS steps of embed-tiny, while scripts/pylib/soak.py
abuses the store on host 0 from host 1 for 90% of the run. Each rank's resident memory, open
descriptors and threads early in the run and after the attack, against soak.py's bounds. Exit 1
when a bound broke or the run failed.
"""
import json
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
import soak  # noqa: E402
from netns import Cluster, why_not  # noqa: E402

PORT = 29470
TOKEN = "soak-across-hosts-token-0123456789"


def last_step(log):
    """The last step a node's log reports ("[rank 0]     step  300/20000 ...")."""
    found = re.findall(r"step +(\d+)/", log.read_text(errors="replace")) if log.exists() else []
    return int(found[-1]) if found else 0


def soak_across(binary, steps, tmp):
    with Cluster(2, tag="s") as c:
        flags = [binary, "run", "--mode", "ddp", "--world-size", "4", "--workload", "embed-tiny",
                 "--global-batch", "32", "--steps", str(steps), "--warmup", "5", "--timeout", "60"]
        env = {"DDPBENCH_STORE_TOKEN": TOKEN}
        logs = [tmp / f"node{h}.log" for h in range(2)]
        nodes = [c.start(h, [*flags, *c.node_flags(h, PORT)], logs[h], env) for h in range(2)]
        ranks = []
        for _ in range(300):
            ranks = c.ranks(0) + c.ranks(1)
            if len(ranks) == 4 and last_step(logs[0]) > 20:
                break
            time.sleep(0.2)
        if len(ranks) != 4:
            print(f"soak across hosts: found {len(ranks)} of the 4 ranks")
            return False
        time.sleep(5)  # past start-up: the allocator's caches are warm
        attacker = c.start(1, [sys.executable, str(ROOT / "scripts/pylib/soak.py"), "attack",
                               str(PORT), "100000", c.addresses[0]], tmp / "attack.log")
        start = soak.sample(ranks)
        t0, end = time.monotonic(), None
        while nodes[0].poll() is None or nodes[1].poll() is None:
            if attacker and last_step(logs[0]) >= steps * 9 // 10:
                attacker.terminate()
                attacker.wait()
                attacker = None
                time.sleep(1)
                end = soak.sample(ranks)
            time.sleep(1)
        if attacker:
            attacker.terminate()
            attacker.wait()
        codes = [n.returncode for n in nodes]
        print(f"exit {codes} after {time.monotonic() - t0:.0f} s; attack: "
              f"{(tmp / 'attack.log').read_text().strip() or '(no summary)'}")
        if end is None or len(end) != 4:
            print("soak across hosts: the run ended before the sample after the attack; "
                  "give more steps")
            return False
        ok = soak.bounds(start, end, 0, 0, steps)
        if codes != [0, 0]:
            print("soak across hosts: the run failed:",
                  *(l.read_text(errors="replace").splitlines()[-2:] for l in logs))
        return ok and codes == [0, 0]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    why = why_not()
    if why:
        print(f"SKIPPED: cannot make network namespaces here: {why}")
        return 77
    binary = str(pathlib.Path(argv[0]).resolve() / "bench" / "ddpbench")
    with tempfile.TemporaryDirectory() as tmp:
        return 0 if soak_across(binary, int(argv[1]), pathlib.Path(tmp)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
