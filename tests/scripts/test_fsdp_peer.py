"""The FSDP2 peer (scripts/peer/torch_reference.py --mode fsdp*, scripts/peer/fsdp_peer.py):
its arguments, its units, and its one-line skip on a PyTorch without fully_shard (Debian's
1.13, which CI runs). A run on PyTorch 2.x starts ranks and takes a minute on 2 cores, so it is
a manual command (docs/performance.md, "FSDP against PyTorch FSDP2 and DDP (CPU)"):

    /root/.cache/ddpbench/torch2/bin/python scripts/peer/torch_reference.py --mode fsdp \\
        --world-size 2 --workload mlp-small --global-batch 128 --optimizer adamw --lr 0.001

torch_reference.py is driven in this process through main() (torch is imported once); every
case here ends before a rank would start. compare_pytorch.sh runs as a process.
"""
import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEER = ROOT / "scripts" / "peer"
PYTHON = os.environ.get("DDPB_TEST_PYTHON", sys.executable)

try:
    import torch  # noqa: F401
    sys.path.insert(0, str(PEER))
    import fsdp_peer
    import torch_reference
    HAS_TORCH = True
except ImportError:
    HAS_TORCH = False

# The two presets the FSDP peer is measured on, as `ddpbench workloads --json` writes them
# (the fields torch_reference.py and fsdp_peer.py read).
PRESETS = [
    {"name": "mlp-small", "family": "mlp", "in_features": 1024, "hidden": [1024, 1024, 1024],
     "classes": 10, "default_batch": 64, "conditional_branch": False, "blocks": []},
    {"name": "gpt-tiny", "family": "gpt", "vocab": 512, "seq_len": 64, "n_embd": 128,
     "n_layer": 2, "n_head": 4, "default_batch": 8, "conditional_branch": False, "blocks": []},
]


def has_fully_shard():
    return HAS_TORCH and fsdp_peer.fully_shard_api() is not None


@unittest.skipUnless(HAS_TORCH, "this Python cannot import torch: the PyTorch peer has nothing "
                                "to run")
class FsdpPeerArguments(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.table = os.path.join(cls.tmp.name, "workloads.json")
        with open(cls.table, "w") as f:
            json.dump(PRESETS, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def main(self, *args):
        """torch_reference.main's exit status and what it wrote to stderr."""
        err = io.StringIO()
        saved = os.environ.pop("RANK", None)
        try:
            with contextlib.redirect_stderr(err):
                try:
                    rc = torch_reference.main(["--workloads-json", self.table, *args])
                except SystemExit as e:  # argparse's error
                    rc = e.code
        finally:
            if saved is not None:
                os.environ["RANK"] = saved
        return rc, err.getvalue()

    def assert_refused(self, args, words):
        rc, err = self.main(*args)
        self.assertEqual(rc, 2, err)
        self.assertIn(words, err)

    def test_fsdp_options_need_an_fsdp_mode(self):
        self.assert_refused(["--workload", "mlp-small", "--mode", "ddp", "--world-size", "2",
                             "--fsdp-wrap", "model"], "--fsdp-wrap is an FSDP option")
        self.assert_refused(["--workload", "mlp-small", "--no-forward-prefetch"],
                            "--no-forward-prefetch is an FSDP option")

    def test_sharding_strategy_must_agree_with_the_mode(self):
        self.assert_refused(["--workload", "mlp-small", "--mode", "fsdp-no-shard",
                             "--world-size", "2", "--sharding-strategy", "shard_grad_op"],
                            "is --mode fsdp-grad-op, not --mode fsdp-no-shard")
        self.assert_refused(["--workload", "mlp-small", "--mode", "fsdp", "--world-size", "2",
                             "--sharding-strategy", "ring"], "--sharding-strategy ring: expected")

    def test_what_fsdp2_cannot_do_is_refused(self):
        gpt = ["--workload", "gpt-tiny", "--world-size", "2"]
        self.assert_refused(gpt + ["--mode", "fsdp", "--no-backward-prefetch"],
                            "FSDP2 always prefetches one unit in backward")
        self.assert_refused(gpt + ["--mode", "fsdp", "--zero"], "FSDP shards the optimizer itself")
        self.assert_refused(gpt + ["--mode", "fsdp", "--shard-group-size", "2"],
                            "--shard-group-size goes with --mode fsdp-hybrid")
        self.assert_refused(["--workload", "gpt-tiny", "--mode", "fsdp-hybrid", "--world-size",
                             "4", "--shard-group-size", "3"], "does not divide --world-size 4")
        # The batch must split over the ranks, as in ddp.
        self.assert_refused(["--workload", "mlp-small", "--mode", "fsdp", "--world-size", "3",
                             "--global-batch", "64"], "does not divide into --world-size 3")

    @unittest.skipIf(has_fully_shard(), "this PyTorch has fully_shard: nothing is skipped")
    def test_a_pytorch_without_fully_shard_skips_in_one_line(self):
        for mode in ("fsdp", "fsdp-grad-op", "fsdp-no-shard", "fsdp-hybrid"):
            with self.subTest(mode=mode):
                out = os.path.join(self.tmp.name, f"{mode}.json")
                rc, err = self.main("--workload", "mlp-small", "--mode", mode, "--world-size",
                                    "2", "--global-batch", "128", "--optimizer", "adamw",
                                    "--out", out)
                self.assertEqual(rc, fsdp_peer.SKIPPED, err)
                lines = err.strip().splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertTrue(lines[0].startswith(f"torch_reference: skipped: --mode {mode} "),
                                lines[0])
                self.assertIn("fully_shard", lines[0])
                self.assertFalse(os.path.exists(out))  # no rank started, no record
        # The negative control: a mode every PyTorch has is not skipped (it fails on the
        # batch, before any rank starts).
        rc, err = self.main("--workload", "mlp-small", "--mode", "ddp", "--world-size", "2",
                            "--global-batch", "127")
        self.assertEqual(rc, 2, err)
        self.assertNotIn("skipped", err)

    def test_units_are_ddpbenchs_blocks(self):
        mlp, gpt = (fsdp_peer.block_names(p) for p in PRESETS)
        self.assertEqual(mlp, [["layers.0"], ["layers.1"], ["layers.2"], ["layers.3"]])
        self.assertEqual(gpt, [["h.0"], ["h.1"]])

    def test_gloo_reduce_scatter_is_priced_as_an_allreduce(self):
        t = torch.zeros(1000)  # 4000 bytes over 2 ranks

        def bus(op, gloo):
            c = fsdp_peer.WireCounter.__new__(fsdp_peer.WireCounter)
            c.gloo, c.counts = gloo, {}
            with unittest.mock.patch.object(fsdp_peer.dist, "get_world_size", return_value=2):
                c._wrap(lambda *a, **kw: None, op)(t, t)
            return c.take()["bus_bytes"]

        self.assertEqual(bus("all_gather", gloo=True), 2000)
        self.assertEqual(bus("all_reduce", gloo=True), 4000)
        self.assertEqual(bus("reduce_scatter", gloo=True), 4000)
        self.assertEqual(bus("reduce_scatter", gloo=False), 2000)  # NCCL's ring


@unittest.skipUnless(HAS_TORCH, "this Python cannot import torch")
class CompareScriptFsdpRow(unittest.TestCase):
    """compare_pytorch.sh drops the fsdp row in one line where the PyTorch side has no FSDP2."""

    def compare(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            fake = pathlib.Path(tmp) / "ddpbench"  # never runs a step: the checks come first
            fake.write_text("#!/bin/sh\necho '[]'\n")
            fake.chmod(0o755)
            return subprocess.run([str(PEER / "compare_pytorch.sh"), "--bin", str(fake),
                                   "--python", PYTHON, "--pairs", "1", *args],
                                  capture_output=True, text=True, timeout=60)

    @unittest.skipIf(has_fully_shard(), "this PyTorch has fully_shard: the row runs")
    def test_fsdp_alone_is_skipped_not_failed(self):
        r = self.compare("--configs", "fsdp")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("compare_pytorch: fsdp skipped: --mode fsdp runs PyTorch's FSDP2",
                      r.stderr)

    def test_an_unknown_configuration_is_still_refused(self):
        r = self.compare("--configs", "fsdp2")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--configs: 'fsdp2' is not one of", r.stderr)


if __name__ == "__main__":
    unittest.main()
