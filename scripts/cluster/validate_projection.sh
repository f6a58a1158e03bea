#!/usr/bin/env bash
# The projection checked on real links: emulated clusters (netns_cluster.sh) at several link
# rates and layouts, each run measured across the hosts and projected from one host's run plus
# a collectives sweep across them. The last line is the median absolute error of the step.
# Needs root (network namespaces). Options: scripts/pylib/validate_projection.py --help.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/../pylib/validate_projection.py" "$@"
