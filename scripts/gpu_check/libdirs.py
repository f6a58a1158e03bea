#!/usr/bin/env python3
"""Where pip's wheels keep CUDA's shared libraries, for scripts/gpu_check.sh (libraries).

    libdirs.py          each nvidia.* subpackage's lib/ (nvidia.cudnn, nvidia.nccl,
                        nvidia.cublas, nvidia.cuda_runtime, nvidia.cu13, ...), then torch/lib
    libdirs.py --site   the site-packages folders (the last resort: a walk)

One folder a line, those that exist. Found with importlib's specs and pkgutil's listing of
the nvidia namespace package, importing neither torch (seconds) nor any nvidia package, so
gpu_check.sh looks for a missing soname in a few folders instead of walking site-packages.
"""
import importlib.util
import os
import pkgutil
import site
import sys


def _locations(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _subpackages(root):
    """The subpackages pkgutil lists (an __init__.py each) and the namespace ones it does not
    (a bare folder, as some wheels install them)."""
    names = {m.name for m in pkgutil.iter_modules([root]) if m.ispkg}
    try:
        names |= {e.name for e in os.scandir(root) if e.is_dir() and e.name.isidentifier()}
    except OSError:
        pass
    return sorted(names)


def package_lib_dirs():
    """nvidia/<subpackage>/lib for every subpackage of the nvidia namespace, then torch/lib."""
    dirs = []
    for root in _locations("nvidia"):
        dirs += [os.path.join(root, name, "lib") for name in _subpackages(root)]
    dirs += [os.path.join(root, "lib") for root in _locations("torch")]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def site_dirs():
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def main(argv):
    for d in site_dirs() if "--site" in argv else package_lib_dirs():
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
