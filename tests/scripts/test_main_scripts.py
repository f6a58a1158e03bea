"""The two commands' shared build and their last lines: scripts/test.sh and scripts/bench.sh
build one Release directory (scripts/lib/main_build.sh) and leave ./ddpbench pointing at its
binary; scripts/test.sh prints its verdict on every exit and a failing sanitizer pass does not
hide the next one. The scripts run for real in a scratch copy of scripts/, with cmake, ctest
and the test binaries replaced by small stand-ins on PATH or in the build folders.
"""
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def write_exe(path, body):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


class ScratchCheckout:
    """A copy of scripts/test.sh and scripts/lib/ with set-up and format check as stand-ins,
    and stand-in cmake/ctest/nvidia-smi first on PATH."""

    def __init__(self, tmp, format_rc=0):
        self.root = pathlib.Path(tmp) / "checkout"
        (self.root / "scripts").mkdir(parents=True)
        shutil.copy(ROOT / "scripts" / "test.sh", self.root / "scripts" / "test.sh")
        shutil.copytree(ROOT / "scripts" / "lib", self.root / "scripts" / "lib")
        write_exe(self.root / "scripts" / "setup.sh", "exit 0")
        write_exe(self.root / "scripts" / "check_format.sh", f"exit {format_rc}")
        self.bin = pathlib.Path(tmp) / "bin"
        write_exe(self.bin / "cmake", "exit 0")
        write_exe(self.bin / "nvidia-smi", "exit 1")

    def run(self, *args, **env):
        full_env = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", JOBS="2", **env)
        return subprocess.run(["bash", str(self.root / "scripts" / "test.sh"), *args],
                              cwd=self.root, env=full_env, capture_output=True, text=True,
                              timeout=120)


class MainBuild(unittest.TestCase):
    def test_link_points_at_the_build_binary_relatively(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            write_exe(root / "build" / "ci" / "bench" / "ddpbench", "echo hello")
            subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/lib/main_build.sh" && '
                            f'main_build_link "{root}" "$(main_build_dir "{root}")"'],
                           check=True, env=dict(os.environ, BUILD_DIR=""))
            link = root / "ddpbench"
            self.assertTrue(link.is_symlink())
            self.assertEqual(os.readlink(link), "build/ci/bench/ddpbench")
            out = subprocess.run([str(link)], capture_output=True, text=True, check=True)
            self.assertEqual(out.stdout.strip(), "hello")

    def test_build_dir_follows_BUILD_DIR(self):
        out = subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/lib/main_build.sh" && '
                              'main_build_dir /r'], capture_output=True, text=True, check=True,
                             env=dict(os.environ, BUILD_DIR="/elsewhere"))
        self.assertEqual(out.stdout.strip(), "/elsewhere")

    def test_both_commands_configure_and_link_the_same_build(self):
        for script in ("test.sh", "bench.sh"):
            text = (ROOT / "scripts" / script).read_text()
            self.assertIn("main_build_configure", text, script)
            self.assertIn("main_build_link", text, script)
            self.assertNotIn("build/release", text, script)
            self.assertNotIn("-DCMAKE_BUILD_TYPE", text.split("sanitizer_flags")[0], script)

    def test_readme_names_the_binary_path(self):
        readme = (ROOT / "README.md").read_text()
        first_screen = "\n".join(readme.splitlines()[:40])
        self.assertIn("./ddpbench", first_screen)
        self.assertIn("/ddpbench", (ROOT / ".gitignore").read_text().splitlines())


class TestShVerdict(unittest.TestCase):
    def test_a_failed_step_still_prints_the_verdict(self):
        with tempfile.TemporaryDirectory() as tmp:
            checkout = ScratchCheckout(tmp, format_rc=3)
            out = checkout.run()
            self.assertNotEqual(out.returncode, 0)
            last = out.stdout.strip().splitlines()[-1]
            self.assertEqual(last, "scripts/test.sh: FAILED in the format check (exit 3); "
                             "main tests not run; sanitizer passes not run")

    def sanitizer_builds(self, tmp, asan_rc):
        """Stand-in test binaries in the ASan and TSan folders: one ASan binary exits asan_rc."""
        asan, tsan = pathlib.Path(tmp) / "asan", pathlib.Path(tmp) / "tsan"
        for name in ("test_process_group", "test_dp_primitives", "test_core", "test_ddp",
                     "test_store", "test_flight_recorder", "test_safetensors", "test_sampler",
                     "test_dataset", "test_dataloader", "test_report_render", "test_compare",
                     "test_stream_sanitizer", "test_fsdp"):
            rc = asan_rc if name == "test_core" else 0
            write_exe(asan / "tests" / name, f'echo "{name} ran"; exit {rc}')
        for rel in ("impl_dp/test_dp_primitives", "test_stream", "data/test_dataloader",
                    "comm/test_store", "comm/test_process_group", "test_stream_sanitizer",
                    "impl_fsdp/test_fsdp"):
            write_exe(tsan / "tests" / rel, f'echo "tsan {rel} ran"')
        return dict(ASAN_BUILD_DIR=str(asan), TSAN_BUILD_DIR=str(tsan))

    def test_a_failed_sanitizer_binary_hides_neither_tsan_nor_the_verdict(self):
        with tempfile.TemporaryDirectory() as tmp:
            checkout = ScratchCheckout(tmp)
            out = checkout.run("--sanitize", **self.sanitizer_builds(tmp, asan_rc=1))
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn("test_core --gtest_brief=1 (ASan+UBSan): FAILED", out.stdout)
            self.assertIn("tsan/tests/comm/test_store --gtest_filter='StoreTest/HashStore.*:"
                          "StoreTest/TCPStore.*' --gtest_brief=1 (TSan): passed",
                          out.stdout)  # TSan ran after the failure
            last = out.stdout.strip().splitlines()[-1]
            self.assertTrue(last.startswith("scripts/test.sh: FAILED: ASan+UBSan; "), last)
            self.assertIn("ASan+UBSan: FAILED (the logs above); TSan: 7 passed", last)

    def test_passing_sanitizers_pass(self):  # the negative control of the test above
        with tempfile.TemporaryDirectory() as tmp:
            checkout = ScratchCheckout(tmp)
            out = checkout.run("--sanitize", **self.sanitizer_builds(tmp, asan_rc=0))
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            last = out.stdout.strip().splitlines()[-1]
            self.assertEqual(last, "scripts/test.sh: passed; main tests not run (--sanitize); "
                             "ASan+UBSan: 14 unit test binaries passed; TSan: 7 passed")


if __name__ == "__main__":
    unittest.main()
