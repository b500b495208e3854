#!/bin/sh
# Set up a fresh Debian/Ubuntu machine for nginx-eval: system packages, then the harness itself.
# Run as root (or with sudo available). Safe to run again.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
packages=$(sed -e 's/#.*//' "$here/scripts/debian-packages.txt" | tr -s ' \n' ' ')
wanted=$(echo $packages | wc -w)
have=$(dpkg-query -W -f='${db:Status-Status}\n' $packages 2>/dev/null | grep -c '^installed$' || true)
if [ "$have" -eq "$wanted" ]; then
    echo "setup: all $wanted Debian packages present"
else
    log=$(mktemp)
    echo "setup: installing Debian packages ($have of $wanted present)"
    if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           $sudo apt-get install -y -qq --no-install-recommends $packages; } >"$log" 2>&1; then
        tail -n 30 "$log"; echo "setup: apt-get failed" >&2; exit 1
    fi
fi
python3 -m pip install -q --disable-pip-version-check -e "$here[test]" 2>&1 \
    | grep -v "Running pip as the 'root' user" || true
python3 -c "import doit, git, jinja2, tap, matplotlib, scipy, statsmodels" \
    && echo "setup: Python packages ready"
