#!/bin/sh
# nginx-eval's output guard: TEST_NGINX_BINARY during a prove (see nginx_eval/prove.py).
#
# Test::Nginx starts nginx with the test's stdout and stderr, and that stdout is the TAP stream
# the grade is read from: a patched nginx could print "ok 1 - ..." into it. Started as a server
# (no arguments, or -c, -p, -g, -e, -s), nginx writes to a log file instead. The queries
# Test::Nginx reads with backticks (-V and -v for has_module and has_version, -t and -T for
# configuration tests) pass through untouched, and so does anything else.
# prove.py writes this script with the real binary's path in place of @REAL_NGINX@.
real=@REAL_NGINX@
server=$#
for arg in "$@"; do
    case $arg in
        -[vVtTh?] | -[tT]q | -q[tT]) exec "$real" "$@" ;;
        -[cpges]*) server=0 ;;
    esac
done
if [ "$server" -eq 0 ]; then
    exec "$real" "$@" >>"${NGINX_EVAL_NGINX_LOG:-/dev/null}" 2>&1 </dev/null
fi
exec "$real" "$@"
