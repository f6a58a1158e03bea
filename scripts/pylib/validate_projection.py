"""The projection against real links: emulated clusters (scripts/cluster/netns_cluster.sh),
each measured and projected, side by side.

For each workload and design (DDP, ZeRO's stages, FSDP's strategies: --modes), one run of 2
ranks on this host is the projection's basis. For each link rate and layout (hosts x ranks a
host), a collectives sweep across the hosts fits the
links (`ddpbench project --inter`, Note [Inter-node link from a sweep]): one rank a host (each
with its host's whole link, what Gloo's one ring needs), or with --hierarchical the
hierarchical sweep, which gives the link within a node too. The run is then
measured across the hosts and projected from the basis; the table gives both steps and the
error, and the last lines the targets and the median absolute error.

  scripts/cluster/validate_projection.sh [--bin PATH] [--rates 1gbit,200mbit]
      [--layouts 2x1,2x2] [--workloads mlp-small,gpt-tiny] [--modes ddp] [--steps 20]
      [--out FILE.json]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

from netns import Cluster, wait_all, why_not
from perf_targets import TARGETS

TOKEN = "validate-projection-token-0123456789"


def exposed_ms(summary):
    """A run's exposed communication: its phases of kind communication, median ms."""
    return sum(p["median_ms"] for p in summary["phases_median_ms"] if p["kind"] == "communication")


def run(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"validate_projection: {what} failed (exit {r.returncode}):\n{r.stdout[-2000:]}"
                 f"{r.stderr[-2000:]}")
    return r.stdout


class Validation:
    def __init__(self, args, tmp):
        self.a, self.tmp = args, pathlib.Path(tmp)
        self.port = 29460

    def train(self, workload, world, mode):
        return ["run", "--mode", mode, "--device", "cpu", "--workload", workload,
                "--world-size", str(world), "--global-batch", str(8 * world),
                "--steps", str(self.a.steps), "--warmup", "3", "--seed", "1", "--quiet",
                "--timeout", "120"]

    def basis(self, workload, mode):
        out = self.tmp / f"basis-{workload}-{mode}.json"
        run([self.a.bin, *self.train(workload, 2, mode), "--out", str(out)],
            f"the basis of {workload} {mode}")
        return out

    def on_hosts(self, c, argv_of, what):
        self.port += 1
        logs = [self.tmp / f"{c.prefix}-{self.port}-h{h}.log" for h in range(c.n)]
        procs = [c.start(h, argv_of(h, self.port), logs[h], {"DDPBENCH_STORE_TOKEN": TOKEN})
                 for h in range(c.n)]
        codes = wait_all(procs, 900)
        if any(codes):
            sys.exit(f"validate_projection: {what} failed {codes}:\n" +
                     "\n".join(log.read_text()[-1500:] for log in logs))

    def sweep(self, c, rate, per_host):
        """One rank a host; with --hierarchical and several ranks a host, the hierarchical
        sweep (Note [Hierarchical sweep]), whose two levels give both links."""
        out = self.tmp / f"sweep-{rate}-{per_host}.json"
        layout = ["-g", str(c.n)] if per_host == 1 or not self.a.hierarchical else [
            "-g", str(c.n * per_host), "--node-size", str(per_host)]
        self.on_hosts(c, lambda h, port: [
            self.a.bin, "collectives", *layout, "-b", "512K", "-e", "32M", "-f", "2",
            "-n", "8", "-w", "2", "--timeout", "300", *c.node_flags(h, port), "-J", str(out)],
            f"the sweep at {rate}")
        return out

    def measured(self, c, workload, mode, per_host, tag):
        out = self.tmp / f"measured-{tag}.json"
        world = c.n * per_host
        self.on_hosts(c, lambda h, port: [
            self.a.bin, *self.train(workload, world, mode), *c.node_flags(h, port), "--out",
            str(out)],
            f"{workload} on {tag}")
        return json.loads(out.read_text())["summary"]

    def projected(self, basis, mode, sweep, hosts, per_host, tag):
        out = self.tmp / f"projected-{tag}.json"
        hierarchical = per_host > 1 and self.a.hierarchical  # then the sweep's own node size
        node_size = [] if hierarchical else ["--node-size", str(per_host)]
        run([self.a.bin, "project", str(basis), "--devices", str(hosts * per_host), "--inter",
             str(sweep), *node_size, "--json", str(out)], f"the projection {tag}")
        points = json.loads(out.read_text())["workloads"][0]["points"]
        point = next(p for p in points if p["devices"] == hosts * per_host)
        return point["designs"][mode]

    def cases(self):
        bases = {(w, m): self.basis(w, m) for w in self.a.workloads for m in self.a.modes}
        rows = []
        for rate in self.a.rates:
            for hosts, per_host in self.a.layouts:
                with Cluster(hosts, rate=rate, node_size=per_host, tag="v") as c:
                    sweep = self.sweep(c, rate, per_host)
                    for w, m in bases:
                        tag = f"{w}-{m}-{rate}-{hosts}x{per_host}"
                        summary = self.measured(c, w, m, per_host, tag)
                        point = self.projected(bases[(w, m)], m, sweep, hosts, per_host, tag)
                        meas = summary["step_time_ms"]["median"]
                        proj = point["step_ms"]
                        rows.append({"workload": w, "mode": m, "rate": rate,
                                     "layout": f"{hosts}x{per_host}",
                                     "measured_ms": meas, "projected_ms": proj,
                                     "error": (proj - meas) / meas,
                                     "measured_exposed_ms": exposed_ms(summary),
                                     "projected_exposed_ms": point["exposed_ms"]})
                        print(f"{w:10} {m:6} {rate:>8} {hosts}x{per_host}  measured {meas:9.1f} ms "
                              f"(exposed {rows[-1]['measured_exposed_ms']:7.1f})  projected "
                              f"{proj:9.1f} ms (exposed {point['exposed_ms']:7.1f})  error "
                              f"{100 * rows[-1]['error']:+6.1f}%", flush=True)
        return rows


def parse_args(argv):
    p = argparse.ArgumentParser(prog="validate_projection.sh", description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=str(pathlib.Path("build/ci/bench/ddpbench").resolve()))
    p.add_argument("--rates", default="1gbit,200mbit")
    p.add_argument("--layouts", default="2x1,2x2")
    p.add_argument("--workloads", default="mlp-small,gpt-tiny")
    p.add_argument("--modes", default="ddp", help="designs, such as ddp,zero1,zero2,fsdp,fsdp-grad-op")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", help="write the table as JSON here")
    p.add_argument("--hierarchical", action="store_true",
                   help="fit layouts of several ranks a host on the hierarchical sweep "
                        "(collectives --node-size) rather than on one rank a host")
    a = p.parse_args(argv)
    a.rates = a.rates.split(",")
    a.workloads = a.workloads.split(",")
    a.modes = a.modes.split(",")
    try:
        a.layouts = [tuple(int(x) for x in s.split("x")) for s in a.layouts.split(",")]
    except ValueError:
        p.error(f"--layouts: HOSTSxRANKS, such as 2x1,2x2; got {a.layouts}")
    return a


def main(argv):
    a = parse_args(argv)
    why = why_not()
    if why:
        print(f"validate_projection: cannot make network namespaces here: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = Validation(a, tmp).cases()
    errors = [abs(r["error"]) for r in rows]
    if a.out:
        pathlib.Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    for key, value in (("cpu.projection_hosts_max", max(errors)),
                       ("cpu.projection_hosts_median", statistics.median(errors))):
        t = TARGETS[key]
        print(f"{t.name}: {100 * value:.1f}% (goal {t.goal}: "
              f"{'met' if t.met(value) else 'NOT met'})")
    print(f"median absolute error of the step: {100 * statistics.median(errors):.1f}% "
          f"(largest {100 * max(errors):.1f}%, {len(rows)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
