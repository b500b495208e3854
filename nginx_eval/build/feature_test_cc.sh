#!/bin/sh
# The `cc` that nginx's ./auto/configure runs (build/stage.py puts it first on configure's PATH
# only; make never sees it).
#
# configure compiles and links about a hundred small test programs, one after another, and runs
# some of them: about 3.6 of its 4.4 s go to the compiler, ccache cannot cache a link, and the
# same tests come back in every build group. This keeps the executable of each test that built,
# keyed by the compiler and the system's packages (NGINX_EVAL_CC_ID), the command line and the
# test's source, and copies it back when the same test comes again, with the compiler's messages.
# configure still runs the programs it runs. A test that failed is never kept: once a missing
# library is installed, its test runs again (and installing it changes NGINX_EVAL_CC_ID anyway).
real=${NGINX_EVAL_REAL_CC:-}
store=${NGINX_EVAL_FEATURE_TESTS:-}
[ -n "$real" ] || { echo "feature_test_cc: NGINX_EVAL_REAL_CC is not set" >&2; exit 127; }

out= src= prev=
for arg; do
    [ "$prev" = -o ] && out=$arg
    case $arg in *.c) src=$arg ;; esac
    prev=$arg
done
# Anything but "compile and link one source file to -o FILE" (cc -v, cc -E ...) passes through.
if [ -z "$store" ] || [ -z "$out" ] || [ ! -f "$src" ]; then
    exec "$real" "$@"
fi

key=$({ printf '%s\n' "${NGINX_EVAL_CC_ID:-}" "$@"; cat "$src"; } | sha256sum) || exec "$real" "$@"
key=$store/${key%% *}
if [ -f "$key" ] && [ -f "$key.err" ]; then
    cp "$key" "$out" && { cat "$key.err" >&2; exit 0; }
fi

"$real" "$@" 2>"$out.err.$$"
status=$?
cat "$out.err.$$" >&2
# A patched tree's configure reads the store and never writes it (build/toolchain.py).
if [ "$status" -eq 0 ] && [ -f "$out" ] && [ -z "${NGINX_EVAL_FEATURE_TESTS_READONLY:-}" ] \
        && mkdir -p "$store"; then
    # Published by rename, messages first: configures running side by side share the store.
    cp "$out.err.$$" "$key.err.$$" && mv -f "$key.err.$$" "$key.err"
    cp "$out" "$key.$$" && mv -f "$key.$$" "$key"
fi
rm -f "$out.err.$$"
exit "$status"
