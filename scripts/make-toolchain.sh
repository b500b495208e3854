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

wanted=$(sed -e 's/#.*//' "$here/scripts/toolchain-packages.txt" | tr -s ' \t\n' '\n' | sed '/^$/d' | sort -u)

# manifest ROOT: name=version of every package installed in ROOT, sorted.
manifest() {
    dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${db:Status-Status} ${Package}=${Version}\n' \
        | awk '$1 == "installed" { print $2 }' | sort
}

if [ -d "$dir/root" ] && [ -f "$dir/manifest.txt" ] && [ -f "$dir/packages.txt" ] \
   && [ "$(cat "$dir/packages.txt")" = "$wanted" ] \
   && grep -q "^$account:" "$dir/root/etc/passwd" \
   && [ "$(manifest "$dir/root")" = "$(cat "$dir/manifest.txt")" ]; then
    echo "toolchain: $suite root filesystem present ($dir, digest $(cut -c1-12 "$dir/manifest.sha256"))"
    exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
    echo "toolchain: mmdebstrap is missing (Debian/Ubuntu: apt-get install mmdebstrap;" \
         "Fedora: dnf install mmdebstrap)" >&2
    exit 1
fi

if [ -n "${NGINX_EVAL_DEBIAN_MIRROR:-}" ]; then
    set -- "deb $NGINX_EVAL_DEBIAN_MIRROR $suite main" \
           "deb $NGINX_EVAL_DEBIAN_MIRROR $suite-updates main" \
           "deb ${NGINX_EVAL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} $suite-security main"
else
    set --
fi

$sudo mkdir -p "$dir"
new="$dir/root.new"
$sudo rm -rf "$new"
log=$(mktemp)
echo "toolchain: making the $suite root filesystem in $dir (mmdebstrap, a few minutes)"
start=$(date +%s)
if ! $sudo mmdebstrap --variant=apt --mode=root --format=directory \
        --include="$(echo $wanted | tr ' ' ',')" \
        --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
        --customize-hook="echo '$account:x:1000:1000:nginx-eval:/tmp:/bin/sh' >>\"\$1/etc/passwd\"" \
        --customize-hook="echo '$account:x:1000:' >>\"\$1/etc/group\"" \
        "$suite" "$new" "$@" >"$log" 2>&1; then
    tail -n 30 "$log"
    echo "toolchain: mmdebstrap failed (its output above, all of it in $log)" >&2
    exit 1
fi
rm -f "$log"
manifest "$new" | $sudo tee "$dir/manifest.txt.new" >/dev/null
echo "$wanted" | $sudo tee "$dir/packages.txt.new" >/dev/null
sha256sum "$dir/manifest.txt.new" | cut -d' ' -f1 | $sudo tee "$dir/manifest.sha256.new" >/dev/null
if [ -d "$dir/root" ]; then
    $sudo rm -rf "$dir/root.old"
    $sudo mv "$dir/root" "$dir/root.old"
fi
$sudo mv "$new" "$dir/root"
for f in manifest.txt packages.txt manifest.sha256; do $sudo mv "$dir/$f.new" "$dir/$f"; done
$sudo rm -rf "$dir/root.old"
echo "toolchain: made in $(($(date +%s) - start)) s, $(du -sh "$dir/root" | cut -f1)," \
     "$(wc -l <"$dir/manifest.txt") packages, digest $(cut -c1-12 "$dir/manifest.sha256")"
