#!/usr/bin/env python3
"""ddpbench across emulated hosts: network namespaces with their own hostnames, joined by a
bridge, links shaped with tc tbf (scripts/cluster/netns_cluster.sh).

  tests/scripts/multihost_test.py BUILD_DIR CASE     (exit 77: skipped, no namespaces here)

CASE is one of: ddp, collectives, faults, mpi, projection, suite. Every case makes its own cluster under a
prefix of its own, removes it on any exit, and fails if a process is left on any host.
"""
import json
import os
import pathlib
import signal
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
from netns import CLUSTER, Cluster, wait_all, why_not  # noqa: E402
TOKEN = "multihost-test-token-0123456789"
PORT = 29410


def read(path):
    return pathlib.Path(path).read_text(errors="replace")


def same_params(a, b):
    sys.path.insert(0, str(ROOT / "scripts" / "peer"))
    import safetensors_lite
    x, _ = safetensors_lite.load(str(a))
    y, _ = safetensors_lite.load(str(b))
    assert sorted(x) == sorted(y), (sorted(x), sorted(y))
    bad = [k for k in x if not bool((x[k] == y[k]).all())]
    assert not bad, f"parameters differ: {bad}"


class Case:
    def __init__(self, build, tmp):
        self.bin = str(pathlib.Path(build).resolve() / "bench" / "ddpbench")
        self.tmp = pathlib.Path(tmp)

    def train_flags(self, world, extra=(), quiet=True):
        return ["run", "--mode", "ddp", "--device", "cpu", "--workload", "mlp-small",
                "--world-size", str(world), "--global-batch", "16", "--warmup", "0",
                "--seed", "5", *(["--quiet"] if quiet else []), *extra]

    def on_hosts(self, c, argv_of, limit_s, env=None, hosts=None):
        """Starts argv_of(node) on each host (all by default); returns (codes, logs)."""
        hosts = range(c.n) if hosts is None else hosts
        logs = [self.tmp / f"{c.prefix}-h{h}-{time.monotonic_ns()}.log" for h in hosts]
        procs = [c.start(h, argv_of(h), log, env) for h, log in zip(hosts, logs)]
        return wait_all(procs, limit_s), [read(log) for log in logs]

    def node_flags(self, c, node, port=PORT):
        return c.node_flags(node, port)

    # --- ddp: multi-host equals one host, bit for bit ---------------------------------------
    def ddp(self):
        for hosts, per_host in ((2, 1), (2, 2)):
            world = hosts * per_host
            own = self.tmp / f"own{world}.safetensors"
            subprocess.run([self.bin, *self.train_flags(world, ["--save-params", str(own),
                                                                  "--timeout", "60", "--steps", "3"])],
                           check=True, capture_output=True)
            with Cluster(hosts, node_size=per_host) as c:
                out = self.tmp / f"mh{world}.json"
                params = self.tmp / f"mh{world}.safetensors"
                codes, logs = self.on_hosts(c, lambda h: [
                    self.bin, *self.train_flags(world, ["--timeout", "60", "--verbose", "--steps", "3"]),
                    *self.node_flags(c, h), "--out", str(out), "--save-params", str(params)],
                    120, env={"DDPBENCH_STORE_TOKEN": TOKEN})
                assert codes == [0] * hosts, (codes, logs)
                same_params(own, params)
                record = json.loads(read(out))
                names = [h["name"] for h in record["hosts"]]
                assert names == [f"{c.prefix}h{i}" for i in range(hosts)], record["hosts"]
                assert [r["node"] for r in record["ranks"]] == [
                    r // per_host for r in range(world)], record["ranks"]
                # Each rank's process group listens on its own host's address.
                for h in range(hosts):
                    assert f"binds its process group to {c.addresses[h]}" in logs[h], logs[h]
            print(f"PASS: {hosts} hosts x {per_host} ranks equal one host's {world} ranks")

    # --- collectives across hosts at the shaped rate ------------------------------------------
    def collectives(self):
        with Cluster(2, rate="200mbit") as c:
            out = self.tmp / "coll.json"
            codes, logs = self.on_hosts(c, lambda h: [
                self.bin, "collectives", "-g", "2", "-b", "4M", "-e", "8M", "-n", "4", "-w", "1",
                "--timeout", "60", *self.node_flags(c, h), "-J", str(out)],
                120, env={"DDPBENCH_STORE_TOKEN": TOKEN})
            assert codes == [0, 0], (codes, logs)
            busbw = json.loads(read(out))["ops"][0]["avg_busbw_GBps"]
            rate = 200e6 / 8 / 1e9
            # tbf holds about 95% of its rate here; the link, not the CPU, sets the pace.
            assert 0.80 * rate <= busbw <= 1.05 * rate, (busbw, rate)
            print(f"PASS: allreduce busbw {busbw * 8e3:.0f} Mbit/s on a 200 Mbit/s link")
        # Note [Hierarchical sweep]: 2 hosts of 2 ranks; between nodes two rings share a link.
        with Cluster(2, rate="200mbit", node_size=2) as c:
            out = self.tmp / "levels.json"
            codes, logs = self.on_hosts(c, lambda h: [
                self.bin, "collectives", "-g", "4", "--node-size", "2", "-b", "4M", "-e", "8M",
                "-n", "3", "-w", "1", "--timeout", "60", *self.node_flags(c, h), "-J", str(out)],
                180, env={"DDPBENCH_STORE_TOKEN": TOKEN})
            assert codes == [0, 0], (codes, logs)
            levels = {l["level"]: l for l in json.loads(read(out))["levels"]}
            assert (levels["intra"]["ranks"], levels["intra"]["groups"]) == (2, 2), levels
            assert (levels["inter"]["ranks"], levels["inter"]["groups"]) == (2, 2), levels
            inter = levels["inter"]["ops"][0]["avg_busbw_GBps"]
            intra = levels["intra"]["ops"][0]["avg_busbw_GBps"]
            rate = 200e6 / 8 / 1e9
            assert 0.35 * rate <= inter <= 0.55 * rate, (inter, rate)
            assert intra > 4 * rate, (intra, rate)  # loopback within a host
            assert "between nodes allreduce" in logs[0], logs[0]
            print(f"PASS: between nodes {inter * 8e3:.0f} Mbit/s a ring (two share the link), "
                  f"within {intra * 8e3:.0f} Mbit/s")

    # --- mpirun across hosts, through the cluster's launch agent -----------------------------
    def mpi(self):
        if not shutil.which("mpirun"):
            print("SKIPPED: no mpirun (apt install openmpi-bin)")
            sys.exit(77)
        own = self.tmp / "own2.safetensors"
        subprocess.run([self.bin, *self.train_flags(2, ["--save-params", str(own), "--timeout",
                                                         "60", "--steps", "3"])],
                       check=True, capture_output=True)
        with Cluster(2) as c:
            hostfile = self.tmp / "hostfile"
            hostfile.write_text("".join(f"{a} slots=1\n" for a in c.addresses))
            for backend in ("gloo", "mpi"):
                params = self.tmp / f"mpirun-{backend}.safetensors"
                env = {"DDPBENCH_BIN": self.bin, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                       "OMPI_MCA_plm_rsh_agent": f"{CLUSTER} rsh"}
                run_flags = ["--device", "cpu", "--workload", "mlp-small", "--global-batch", "16",
                             "--warmup", "0", "--seed", "5", "--quiet", "--timeout", "60",
                             "--steps", "3"]
                codes, logs = self.on_hosts(c, lambda h: [
                    str(ROOT / "scripts" / "cluster" / "mpirun_ddp.sh"), str(hostfile), "2",
                    "--backend", backend, *run_flags, "--save-params", str(params)],
                    120, env=env, hosts=[0])
                assert codes == [0], logs
                same_params(own, params)
                print(f"PASS: mpirun across 2 hosts, {backend} backend, equals one host's run")

    # --- the projection's validation script, small: it runs and reports every case ----------
    def projection(self):
        table = self.tmp / "table.json"
        out = subprocess.run(
            [str(ROOT / "scripts" / "cluster" / "validate_projection.sh"), "--bin", self.bin,
             "--rates", "1gbit", "--layouts", "2x2", "--workloads", "mlp-small", "--steps", "5",
             "--out", str(table)], capture_output=True, text=True, timeout=280)
        assert out.returncode == 0, out.stdout + out.stderr
        rows = json.loads(read(table))
        assert [(r["workload"], r["rate"], r["layout"]) for r in rows] == [
            ("mlp-small", "1gbit", "2x2")], rows
        assert rows[0]["measured_ms"] > 0 and rows[0]["projected_ms"] > 0, rows
        assert out.stdout.splitlines()[-1].startswith("median absolute error of the step: "), out
        print(out.stdout)

    # --- suite --hosts: runs spread by slot, a two-level fit, a node that cannot start ------
    def suite(self):
        spec = {"quick": True, "workloads": ["mlp-small"], "modes": ["single", "ddp"],
                "world_sizes": [1, 2, 4], "steps": 3, "warmup": 1, "timeout_s": 60,
                "bucket_sweep_mb": [], "bucket_autotune": False, "overlap_off": False,
                "comm_hooks": []}
        suite_file = self.tmp / "suite.json"
        suite_file.write_text(json.dumps(spec))
        with Cluster(2, rate="1gbit", node_size=2) as c:
            hosts = self.tmp / "hosts"
            hosts.write_text(c.cluster("hosts"))
            launch = f"{CLUSTER} rsh {{host}}"
            out = self.tmp / "suite-out"
            codes, logs = self.on_hosts(c, lambda h: [
                self.bin, "suite", str(suite_file), "--out", str(out), "--hosts", str(hosts),
                "--launch", launch], 400, hosts=[0])
            assert codes == [0], logs
            suite = json.loads(read(out / "suite.json"))
            names = [f"{c.prefix}h{i}" for i in range(2)]
            assert [h["name"] for h in suite["hosts"]] == names, suite["hosts"]
            runs = {r["id"]: r for r in suite["runs"]}
            # Note [Runs across hosts]: 2 ranks fill the first host's 2 slots; 4 take both.
            for world, spans in ((2, names[:1]), (4, names)):
                run = runs[f"mlp-small/ddp/w{world}"]
                assert run["status"] == "ok" and run["correctness"]["passed"], run
                record = json.loads(read(out / run["record"]))
                assert [h["name"] for h in record.get("hosts", [{"name": names[0]}])] == spans, \
                    record.get("hosts")
            assert (out / "logs" / "mlp-small_ddp_w4-node1.log").exists()
            sweep = suite["collectives"][0]
            assert (sweep["status"], sweep["nnodes"], sweep["node_size"]) == ("ok", 2, 2), sweep
            two = suite["comm_fit"]["two_level"]
            assert two["node_size"] == 2, two
            assert two["between_nodes"]["bandwidth_GBps"] < two["within_node"]["bandwidth_GBps"], two
            checked = {r["run"]: r["error"] for r in suite["projection"]["validation"]["runs"]}
            assert set(checked) == {"mlp-small/ddp/w2", "mlp-small/ddp/w4"}, checked
            print(f"PASS: a suite across 2 hosts of 2 slots; projection errors {checked}")

            # A node whose launch command fails: the run fails naming that node's host.
            spec.update({"modes": ["ddp"], "world_sizes": [4], "timeout_s": 8})
            suite_file.write_text(json.dumps(spec))
            out = self.tmp / "suite-bad"
            codes, logs = self.on_hosts(c, lambda h: [
                self.bin, "suite", str(suite_file), "--out", str(out), "--hosts", str(hosts),
                "--launch", "false {host}"], 200, hosts=[0])
            assert codes == [1], (codes, logs)
            run = {r["id"]: r for r in json.loads(read(out / "suite.json"))["runs"]}[
                "mlp-small/ddp/w4"]
            assert run["status"] == "failed", run
            assert "never arrived" in run["error"] and f"node 1 on host {names[1]}" in run["error"], \
                run["error"]
            print(f"PASS: a node that cannot start: {run['error'][:200]}")

    # --- faults: each detected within --timeout, named, nothing left behind -------------------
    def faults(self):
        timeout = 8
        flags = lambda c, h, port, steps="3": [  # noqa: E731
            self.bin, *self.train_flags(2, ["--timeout", str(timeout), "--steps", steps], quiet=False),
            *self.node_flags(c, h, port)]
        env = {"DDPBENCH_STORE_TOKEN": TOKEN}
        with Cluster(2) as c:
            # A host that never arrives.
            start = time.monotonic()
            codes, logs = self.on_hosts(c, lambda h: flags(c, h, PORT), 3 * timeout, env, [0])
            took = time.monotonic() - start
            assert codes[0] != 0 and took < 2.5 * timeout, (codes, took, logs)
            assert "node 1" in logs[0] and "never arrived" in logs[0], logs[0]
            print(f"PASS: a host that never arrives is named in {took:.1f} s")

            # A wrong token from another host.
            procs = [c.start(0, flags(c, 0, PORT + 1), self.tmp / "tok0.log", env),
                     c.start(1, flags(c, 1, PORT + 1), self.tmp / "tok1.log",
                             {"DDPBENCH_STORE_TOKEN": "another-job-token-0123456789"})]
            codes = wait_all(procs, 3 * timeout)
            assert codes[1] != 0 and codes[0] != 0, codes
            assert "token" in read(self.tmp / "tok1.log"), read(self.tmp / "tok1.log")
            print("PASS: a wrong token from another host is refused")

            # A rank that hangs on the other host: node 0's launcher reads its dump, shipped
            # through the store into node 0's own folder (Note [Flight dumps across hosts]).
            # With two ranks a host, node 0's launcher stops rank 0 as its other rank fails:
            # rank 0 still collects, in its SIGTERM hook.
            for per_host, port in ((1, PORT + 4), (2, PORT + 5)):
                world, hung = 2 * per_host, per_host  # the first rank of host 1
                dirs = [self.tmp / f"flight{per_host}-h{h}" for h in range(2)]
                procs = [c.start(h, [
                    self.bin, *self.train_flags(world, ["--timeout", str(timeout), "--steps", "3"],
                                                quiet=False),
                    *self.node_flags(c, h, port), "--inject-fault", f"hang@rank={hung},step=3",
                    "--flight-dir", str(dirs[h])], self.tmp / f"hang{per_host}-{h}.log", env)
                    for h in range(2)]
                codes = wait_all(procs, 4 * timeout)
                log = read(self.tmp / f"hang{per_host}-0.log")
                assert codes[0] != 0, (codes, log)
                assert (dirs[0] / f"rank{hung}.json").exists(), (list(dirs[0].iterdir()), log)
                said = f"rank {hung} on host {c.prefix}h1 is behind"
                assert said in log, log
                print(f"PASS: {per_host} a host: node 0 names the rank behind on the other host: "
                      f"'{said}'")

            # A host killed mid-run, and a link taken down mid-run.
            for what, port in (("killed", PORT + 2), ("cut off", PORT + 3)):
                procs = [c.start(h, flags(c, h, port, steps="400"), self.tmp / f"{port}-{h}.log",
                                 env) for h in range(2)]
                self.wait_for_steps(self.tmp / f"{port}-0.log")
                start = time.monotonic()
                if what == "killed":
                    c.kill_host(1)
                else:
                    c.link(1, "down")
                codes = wait_all(procs[:1], 3 * timeout)
                took = time.monotonic() - start  # node 0's own verdict
                codes += wait_all(procs[1:], 3 * timeout)
                log = read(self.tmp / f"{port}-0.log")
                if what == "cut off":
                    c.link(1, "up")
                assert codes[0] != 0 and took < timeout + 4, (codes, took, log)
                assert "rank 1" in log, log
                if what == "cut off":  # Note [Unreachable hosts]: the probe names the host
                    said = f"host {c.prefix}h1 ({c.addresses[1]}: rank 1) does not answer"
                    assert said in log, log
                print(f"PASS: a host {what} mid-run: node 0 failed in {took:.1f} s naming rank 1")
                print("\n".join(l for l in log.splitlines() if "step " not in l))
        self.stopped_rank(timeout, env)

    def stopped_rank(self, timeout, env):
        """Issue 48, P9: a rank SIGSTOPped on host 1. Both launchers end, its own too (it never
        returned), within the collective timeout and the launcher's grace."""
        flags = [self.bin, *self.train_flags(2, ["--timeout", str(timeout), "--steps", "400"],
                                             quiet=False)]
        with Cluster(2) as c:
            port = PORT + 6
            procs = [c.start(h, [*flags, *self.node_flags(c, h, port)],
                             self.tmp / f"stop-{h}.log", env) for h in range(2)]
            self.wait_for_steps(self.tmp / "stop-1.log")
            rank = c.ranks(1)
            assert len(rank) == 1, (rank, c.pids(1))
            os.kill(rank[0], signal.SIGSTOP)
            start = time.monotonic()
            codes = wait_all(procs, 4 * timeout)
            took = time.monotonic() - start
            logs = [read(self.tmp / f"stop-{h}.log") for h in range(2)]
            assert codes[0] != 0 and codes[1] != 0, (codes, logs)
            assert "rank 1" in logs[0], logs[0]
            print(f"PASS: a rank SIGSTOPped on host 1: both launchers ended within {took:.1f} s")

    def wait_for_steps(self, log, limit_s=60):
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if log.exists() and "step " in read(log):
                time.sleep(1.0)
                return
            time.sleep(0.2)
        raise AssertionError(f"no step began: {read(log) if log.exists() else 'no log'}")


def main():
    build, case = sys.argv[1], sys.argv[2]
    why = why_not()
    if why:
        print(f"SKIPPED: cannot make network namespaces here: {why}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        getattr(Case(build, tmp), case)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
