# Sourced by scripts/make-toolchain.sh and scripts/make-python-rootfs.sh: what making a pinned
# Debian root filesystem takes, the same for both. The caller sets `sudo` ("" as root).

# Every installed package of the root filesystem $1 as name=version, sorted: its manifest.
manifest() {
    dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${db:Status-Status} ${Package}=${Version}\n' \
        | awk '$1 == "installed" { print $2 }' | sort
}

# The package list of $1 (a packages file: names, comments after #), sorted.
package_list() {
    sed -e 's/#.*//' "$1" | tr -s ' \t\n' '\n' | sed '/^$/d' | sort -u
}

# make_root LABEL SUITE DIR WANTED [mmdebstrap option ...]: makes DIR/root.new with mmdebstrap
# (the packages WANTED, the options given: hooks), writes its manifest, package list and digest,
# and swaps it in for DIR/root. NGINX_EVAL_DEBIAN_MIRROR names another mirror. Exits on failure
# with mmdebstrap's last lines.
make_root() {
    label=$1 suite=$2 dir=$3 wanted=$4
    shift 4
    if ! command -v mmdebstrap >/dev/null; then
        echo "$label: mmdebstrap is missing (Debian/Ubuntu: apt-get install mmdebstrap;" \
             "Fedora: dnf install mmdebstrap)" >&2
        exit 1
    fi
    $sudo mkdir -p "$dir"
    new="$dir/root.new"
    $sudo rm -rf "$new"
    log=$(mktemp)
    echo "$label: making the $suite root filesystem in $dir (mmdebstrap, a few minutes)"
    start=$(date +%s)
    if [ -n "${NGINX_EVAL_DEBIAN_MIRROR:-}" ]; then
        set -- "$@" "$suite" "$new" \
            "deb $NGINX_EVAL_DEBIAN_MIRROR $suite main" \
            "deb $NGINX_EVAL_DEBIAN_MIRROR $suite-updates main" \
            "deb ${NGINX_EVAL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} $suite-security main"
    else
        set -- "$@" "$suite" "$new"
    fi
    if ! $sudo mmdebstrap --variant=apt --mode=root --format=directory \
            --include="$(echo $wanted | tr ' ' ',')" \
            --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
            "$@" >"$log" 2>&1; then
        tail -n 30 "$log"
        echo "$label: mmdebstrap failed (its output above, all of it in $log)" >&2
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
    echo "$label: $suite made in $(($(date +%s) - start)) s, $(du -sh "$dir/root" | cut -f1)," \
         "$(wc -l <"$dir/manifest.txt") packages, digest $(cut -c1-12 "$dir/manifest.sha256")"
}
