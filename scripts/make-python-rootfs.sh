#!/bin/sh
# Make the Python root filesystem of one Debian suite (docs/benchmark.md, "SWE-bench
# environments"): the packages of scripts/python-rootfs-packages.txt, made by mmdebstrap from
# Debian's archive, in which a SWE-bench task's environment is built and its tests run under
# bubblewrap (nginx_eval/swebench/envs.py). As scripts/make-toolchain.sh makes the toolchain:
#
#   sh scripts/make-python-rootfs.sh SUITE     bullseye (Python 3.9), bookworm (3.11), trixie (3.13)
#
#   $NGINX_EVAL_PYTHON_ROOTFS/python-SUITE    default /opt/nginx-eval/python-SUITE
#     root/  packages.txt  manifest.txt  manifest.sha256 (the digest)
#
# Does nothing when the root filesystem is there, made from today's package list, and its packages
# are still those of manifest.txt (the harness calls it lazily before the first environment of a
# suite; scripts/setup-debian.sh does not). NGINX_EVAL_DEBIAN_MIRROR names another mirror.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
suite=${1:?usage: make-python-rootfs.sh bullseye|bookworm|trixie}
case "$suite" in bullseye|bookworm|trixie) ;; *) echo "python-rootfs: unknown suite $suite" >&2; exit 1;; esac
base=${NGINX_EVAL_PYTHON_ROOTFS:-/opt/nginx-eval}
case "$base" in /*) ;; *) echo "python-rootfs: NGINX_EVAL_PYTHON_ROOTFS must be an absolute path" >&2; exit 1;; esac
dir="$base/python-$suite"
export LC_ALL=C

. "$here/scripts/rootfs-lib.sh"
wanted=$(package_list "$here/scripts/python-rootfs-packages.txt")

# Merged /usr (/bin, /lib... links into /usr): the agent's sandbox shows this root's /usr over the
# host's (agent/swe_view.py), where a root with its own /bin and /lib has no shell or loader.
# bookworm and trixie are merged by mmdebstrap; bullseye needs its setup hook.
merged=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh
if [ -d "$dir/root" ] && [ -L "$dir/root/bin" ] && [ -f "$dir/manifest.txt" ] \
   && [ -f "$dir/packages.txt" ] && [ "$(cat "$dir/packages.txt")" = "$wanted" ] \
   && [ "$(manifest "$dir/root")" = "$(cat "$dir/manifest.txt")" ]; then
    echo "python-rootfs: $suite present ($dir, digest $(cut -c1-12 "$dir/manifest.sha256"))"
    exit 0
fi
make_root python-rootfs "$suite" "$dir" "$wanted" --setup-hook="$merged"
