"""What the GPU check learns from the machine's own tools, as functions of their text:
Open MPI's version (ompi_info against the bundle's MANIFEST.txt), compute-sanitizer's
options, and nccl-tests' sizes. check.py runs the tools; tests/scripts/test_gpu_check.py
feeds these functions text whose answers are known.
"""
import re

# `ompi_info --version` prints "Open MPI v4.1.4"; `ompi_info --parsable`, "ompi:version:full:4.1.4".
_OMPI_INFO = re.compile(r"^(?:Open MPI v|ompi:version:full:)(\d+\.\d+\.\d+\S*)", re.M)
# scripts/gpu_bundle.sh writes "open mpi:  4.1.4 (...)", or "open mpi:  none (...)".
_MANIFEST_MPI = re.compile(r"^open mpi:\s*(\S+)", re.M)

# Racecheck looks at our kernels only (their names hold the namespace "ddpb"), not cuBLAS's or
# cuDNN's; the option's name depends on the sanitizer's version, so --help decides.
KERNEL_FILTER_FLAGS = ("--kernel-name", "--kernel-regex")
KERNEL_FILTER = "kns=ddpb"
# cuBLAS and cuDNN probe the driver with calls that may fail by design (an engine that is not
# supported here): memcheck would call each such return an error.
MEMCHECK_OPTIONS = ("--report-api-errors", "no")
_REJECTED = re.compile(r"\b(unrecogni[sz]ed|unknown|invalid)\b.*\boption\b|\boption\b.*\b(unrecogni[sz]ed|unknown)\b",
                       re.I)

# `ddpbench collectives -c` checks every result of every iteration on the host: at a size of
# hundreds of MiB that is the tool's time, not the collective's, and it outlasts the step.
CHECKED_TOP = "64M"
CHECKED_TOP_MAX_BYTES = 64 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def ompi_version(text):
    """The Open MPI version ompi_info printed; None when it names none."""
    m = _OMPI_INFO.search(text or "")
    return m.group(1) if m else None


def bundle_mpi_version(manifest_text):
    """The Open MPI version of the bundle's libmpi as MANIFEST.txt records it; "none" when the
    bundle carries no libmpi; None when the manifest has no such line (an older bundle)."""
    m = _MANIFEST_MPI.search(manifest_text or "")
    return m.group(1) if m else None


def mpi_refusal(mpirun, ompi_info, system_version, bundle_version, bundled):
    """Why the collectives-mpi step must not run here ("" when it may). The bundle carries
    Debian's libmpi but not Open MPI's launcher: the machine's mpirun starts our ranks, and
    its daemons must speak the protocol of the libmpi our ranks load, so the versions must be
    equal. A local build loads the machine's own libmpi."""
    if not mpirun:
        return "no mpirun on PATH (install Open MPI to check the MPI backend)"
    if not bundled:
        return ""
    if bundle_version is None:
        return "the bundle's MANIFEST.txt does not record its Open MPI version (an older gpu_bundle.sh)"
    if bundle_version == "none":
        return "the bundle carries no Open MPI (no libmpi)"
    if not ompi_info:
        return f"no ompi_info on PATH to tell the version of {mpirun} (the bundle's is {bundle_version})"
    if system_version is None:
        return f"ompi_info names no Open MPI version (the bundle's is {bundle_version})"
    if system_version != bundle_version:
        return f"mpirun's Open MPI is {system_version}, the bundle's libmpi is {bundle_version}"
    return ""


def without_dirs(path_list, prefix):
    """A PATH-like list without the folders under `prefix` (the bundle's lib/ kept off mpirun)."""
    if not prefix:
        return path_list
    prefix = prefix.rstrip("/")
    keep = [d for d in (path_list or "").split(":")
            if d and d.rstrip("/") != prefix and not d.startswith(prefix + "/")]
    return ":".join(keep)


def racecheck_filter(help_text):
    """The kernel-name filter racecheck takes, from `compute-sanitizer --help` alone: [] when
    the help names neither option (racecheck then instruments every kernel)."""
    for flag in KERNEL_FILTER_FLAGS:
        if re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text or ""):
            return [flag, KERNEL_FILTER]
    return []


def rejected_option(output):
    """The line where compute-sanitizer refuses one of its options ("" when none): nothing
    was checked, and nothing failed."""
    for line in (output or "").splitlines():
        if _REJECTED.search(line):
            return line.strip()
    return ""


def size_bytes(text):
    """nccl-tests' size notation: 64M is 64 MiB, 1K 1 KiB; a plain number is bytes."""
    m = re.fullmatch(r"(\d+)([KMG]?)", str(text).strip().upper())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2)]
