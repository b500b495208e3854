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

# Node.js and npm, from Debian when missing: needed only to install the agent programs below.
if ! command -v npm >/dev/null; then
    echo "setup: installing Node.js and npm"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi

# What follows (the toolchain, each npm package, the Python packages) waits on the network and
# the disk, each on its own: all run at once, each into a log of its own that is printed whole
# when it ends (a fresh machine's setup takes about as long as its longest part, not their sum).
logs=$(mktemp -d)
pids=""
# in_background NAME COMMAND...: COMMAND in the background, its output in $logs/NAME.
in_background() {
    name=$1; shift
    ( "$@" ) >"$logs/$name" 2>&1 &
    pids="$pids $name:$!"
}
# The pinned toolchain: the Debian 12 root filesystem every build and prove runs in
# (docs/toolchain.md). NGINX_EVAL_TOOLCHAIN=host skips it (builds and proves then use this
# machine's own compiler, libraries and Perl, and every record says so).
in_background toolchain $sudo env NGINX_EVAL_TOOLCHAIN="${NGINX_EVAL_TOOLCHAIN:-}" \
    NGINX_EVAL_DEBIAN_MIRROR="${NGINX_EVAL_DEBIAN_MIRROR:-}" sh "$here/scripts/make-toolchain.sh"

# npm_install_pinned PREFIX PACKAGE@VERSION LOG: the package at exactly that version, in a
# prefix of its own (not npm's global directory), npm's output in LOG.
npm_install_pinned() {
    $sudo mkdir -p "$1"
    $sudo npm install --prefix "$1" --no-fund --no-audit --save-exact "$2" >"$3" 2>&1
}

# Claude Code, the agent the modes run, pinned, in a directory of its own (not npm's global one).
# Tests find it there (tests/claude_cli.py reads these two lines). Node is needed only to
# install it: the package carries a native binary that node_modules/.bin/claude links to.
CLAUDE_CODE_VERSION=2.1.330
NGINX_EVAL_CLAUDE_PREFIX=${NGINX_EVAL_CLAUDE_PREFIX:-/opt/nginx-eval/claude-code}

# Each agent program a phase may name (modes.toml's `program`, nginx_eval/agent/programs/) is
# pinned in a prefix of its own (tests/claude_cli.py and tests/agent_clis.py read these lines).
# npm_install_program NAME VERSION PREFIX PACKAGE EXECUTABLE
npm_install_program() {
    program="$3/node_modules/.bin/$5"
    if "$program" --version 2>/dev/null | grep -Eq "(^| )$2( |\$)"; then
        echo "setup: $1 $2 present ($program)"
        return
    fi
    echo "setup: installing $1 $2 into $3"
    log=$(mktemp)
    if npm_install_pinned "$3" "$4@$2" "$log"; then
        # An npm that holds back install scripts leaves a stub where a native binary goes.
        if [ -f "$3/node_modules/$4/install.cjs" ]; then
            "$program" --version >/dev/null 2>&1 \
                || (cd "$3/node_modules/$4" && $sudo node install.cjs) >>"$log" 2>&1 || true
        fi
    fi
    if "$program" --version 2>/dev/null | grep -Eq "(^| )$2( |\$)"; then
        echo "setup: $1 $("$program" --version) at $program"
    else
        tail -n 15 "$log"
        echo "setup: warning: $1 not installed; the tests that run it install it from npm" \
             "themselves, or are skipped where npm cannot be reached" >&2
    fi
}
in_background claude npm_install_program "Claude Code" "$CLAUDE_CODE_VERSION" \
    "$NGINX_EVAL_CLAUDE_PREFIX" @anthropic-ai/claude-code claude

CODEX_VERSION=0.169.0
NGINX_EVAL_CODEX_PREFIX=${NGINX_EVAL_CODEX_PREFIX:-/opt/nginx-eval/codex}
in_background codex npm_install_program "Codex CLI" "$CODEX_VERSION" "$NGINX_EVAL_CODEX_PREFIX" \
    @openai/codex codex
GEMINI_CLI_VERSION=0.61.0
NGINX_EVAL_GEMINI_PREFIX=${NGINX_EVAL_GEMINI_PREFIX:-/opt/nginx-eval/gemini-cli}
in_background gemini npm_install_program "Gemini CLI" "$GEMINI_CLI_VERSION" \
    "$NGINX_EVAL_GEMINI_PREFIX" @google/gemini-cli gemini

# Anthropic's sandbox runtime (srt), which every agent phase runs in (nginx_eval/sandbox.py),
# pinned, in a prefix of its own: outside every path an agent may write, so that no agent can
# change the sandbox the next agent runs in. It declares Node >= 22.12 but runs on Debian 12's
# Node 20 (the test suite drives it there); npm's engine warning is expected.
SANDBOX_RUNTIME_VERSION=0.0.83
NGINX_EVAL_SRT_PREFIX=${NGINX_EVAL_SRT_PREFIX:-/opt/nginx-eval/sandbox-runtime}
srt="$NGINX_EVAL_SRT_PREFIX/node_modules/.bin/srt"
install_srt() {
    if "$srt" --version 2>/dev/null | grep -qx "$SANDBOX_RUNTIME_VERSION"; then
        echo "setup: sandbox runtime $SANDBOX_RUNTIME_VERSION present ($srt)"
    else
        echo "setup: installing the sandbox runtime $SANDBOX_RUNTIME_VERSION into $NGINX_EVAL_SRT_PREFIX"
        log=$(mktemp)
        if ! npm_install_pinned "$NGINX_EVAL_SRT_PREFIX" \
               "@anthropic-ai/sandbox-runtime@$SANDBOX_RUNTIME_VERSION" "$log" \
           || ! "$srt" --version >/dev/null 2>&1; then
            tail -n 15 "$log"; echo "setup: the sandbox runtime did not install" >&2; exit 1
        fi
        echo "setup: sandbox runtime $("$srt" --version) at $srt"
    fi
}
in_background srt install_srt

# uv (from PyPI) installs the same versions as pip, in 15 s instead of 108 s into an empty
# environment (docs/performance.md): on a fresh machine the Python packages were the longest part
# of the setup. pip installs them where uv cannot run.
install_python() {
    python=$(python3 -c 'import sys; print(sys.executable)')
    log=$(mktemp)
    if python3 -m pip install -q --disable-pip-version-check uv >"$log" 2>&1 \
       && python3 -m uv pip install -q --system --python "$python" -e "$here[test]" >>"$log" 2>&1
    then
        grep -v "Running pip as the 'root' user" "$log" || true
    else
        cat "$log"
        echo "setup: uv did not install the Python packages; pip does"
        python3 -m pip install -q --disable-pip-version-check -e "$here[test]" 2>&1 \
            | grep -v "Running pip as the 'root' user" || true
    fi
    rm -f "$log"
    # harbor's ATIF validator (the test extra's harbor, pyproject.toml) on a Python it does not
    # declare: the same pinned version, without its dependencies (the validator needs pydantic alone).
    if [ "$(python3 -c 'import sys; print(sys.version_info < (3, 12))')" = True ]; then
        python3 -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python \
            "harbor==0.25.0" 2>&1 | grep -v "Running pip as the 'root' user" || true
    fi
    # swebench 5.0.2 beside the 4.1.0 the extras pin (its specifications): the tests compare
    # their imitation of the official harness's run report with 5.0.2's own
    # (tests/swebench_fixture.py: SWEBENCH5_DIR), imported from this directory alone.
    swebench5=/opt/nginx-eval/swebench-5.0.2
    if [ ! -f "$swebench5/swebench/harness/reporting.py" ]; then
        python3 -m pip install -q --disable-pip-version-check --no-deps --target "$swebench5" \
            "swebench==5.0.2" 2>&1 | grep -v "Running pip as the 'root' user" || true
    fi
}
in_background python install_python

# Each part's output in a fixed order; the toolchain, the sandbox runtime and the Python packages
# are required (their failure fails the setup), the agent programs are not.
failed=""
for entry in $pids; do
    name=${entry%%:*}
    if ! wait "${entry#*:}"; then
        failed="$failed $name"
    fi
    cat "$logs/$name"
done
rm -rf "$logs"
if [ -n "$failed" ]; then
    echo "setup: failed:$failed" >&2
    exit 1
fi
python3 -c "import doit, jinja2, tap, matplotlib, scipy, statsmodels, genai_prices" \
    && echo "setup: Python packages ready"
