#!/bin/sh
# Make the pinned toolchain (docs/toolchain.md): a Debian 12 (bookworm) root filesystem with the
# packages of scripts/toolchain-packages.txt, made by mmdebstrap from Debian's archive, in which
# every configure, make, sanitizer build and prove runs under bubblewrap.
#
#   $NGINX_EVAL_TOOLCHAIN            default /opt/nginx-eval/toolchain
#     root/                          the root filesystem
#     packages.txt                   the package list it was made from (comments removed, sorted)
#     manifest.txt                   every installed package as name=version, sorted (C locale)
#     manifest.sha256                the toolchain's digest: sha256 of manifest.txt
#
# Besides the packages, the root filesystem has one account, nginx-eval (uid and gid 1000, home
# /tmp), that commands run as inside (nginx_eval/core/rootfs.py): an ordinary user, as nginx-tests
# expect (as root, nginx's workers switch to `nobody` and fail on the tests' private directories).
#
# Does nothing when the root filesystem is there, made from today's package list, and its packages
# are still those of manifest.txt; otherwise makes it afresh beside the old one and swaps it in.
# NGINX_EVAL_DEBIAN_MIRROR (default: Debian's own, http://deb.debian.org/debian, with its updates
# and security archives) names another mirror. Needs root (or sudo), mmdebstrap and apt.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
suite=bookworm
dir=${NGINX_EVAL_TOOLCHAIN:-/opt/nginx-eval/toolchain}
if [ "$dir" = host ]; then
    echo "toolchain: NGINX_EVAL_TOOLCHAIN=host: builds and proves use this machine's own tools"
    exit 0
fi
case "$dir" in /*) ;; *) echo "toolchain: NGINX_EVAL_TOOLCHAIN must be an absolute path" >&2; exit 1;; esac
export LC_ALL=C
account=nginx-eval

. "$here/scripts/rootfs-lib.sh"
wanted=$(package_list "$here/scripts/toolchain-packages.txt")

# ccache's compiler links: Debian's trigger makes gcc's, but not cc's when cc's alternative comes
# after it, and nginx's Makefile calls cc: without the link no build in the toolchain is cached.
# The links are no package's files, so adding them changes neither the manifest nor the digest.
ccache_links() {
    $sudo chroot "$1" /usr/sbin/update-ccache-symlinks
}

if [ -d "$dir/root" ] && [ -f "$dir/manifest.txt" ] && [ -f "$dir/packages.txt" ] \
   && [ "$(cat "$dir/packages.txt")" = "$wanted" ] \
   && grep -q "^$account:" "$dir/root/etc/passwd" \
   && [ "$(manifest "$dir/root")" = "$(cat "$dir/manifest.txt")" ]; then
    [ -e "$dir/root/usr/lib/ccache/cc" ] || ccache_links "$dir/root"
    echo "toolchain: $suite root filesystem present ($dir, digest $(cut -c1-12 "$dir/manifest.sha256"))"
    exit 0
fi

make_root toolchain "$suite" "$dir" "$wanted" \
    --customize-hook="echo '$account:x:1000:1000:nginx-eval:/tmp:/bin/sh' >>\"\$1/etc/passwd\"" \
    --customize-hook="echo '$account:x:1000:' >>\"\$1/etc/group\"" \
    --customize-hook='chroot "$1" /usr/sbin/update-ccache-symlinks'
