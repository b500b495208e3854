#!/bin/sh
# srt's bubblewrap (its `bwrapPath`), with the agent's own account: run as root, srt maps uid 0
# alone into the sandbox, so nginx started there cannot switch its workers to `nobody` (chown
# of its *_temp paths fails with EINVAL, and initgroups is refused). In
# $NGINX_EVAL_SANDBOX_SUPPORT (sandbox.write_support) the file `id` holds "UID GID" of an account that exists nowhere on
# the host: bwrap maps the caller to it (--uid/--gid), and the account tables there (the host's
# plus that account) are shown as /etc/passwd and /etc/group. Inside, the agent is an ordinary
# user, as a developer running nginx and its tests is. The arguments go just before the `--`
# that ends bwrap's options, after srt's own mounts; a call without `--` (srt's probes of
# bwrap) passes through unchanged.
support=${NGINX_EVAL_SANDBOX_SUPPORT:-}
if [ -z "$support" ] || [ ! -f "$support/id" ]; then
    exec bwrap "$@"
fi
read -r uid gid < "$support/id"
count=$#
done=""
while [ "$count" -gt 0 ]; do
    arg=$1
    shift
    count=$((count - 1))
    if [ -z "$done" ] && [ "$arg" = "--" ]; then
        set -- "$@" --uid "$uid" --gid "$gid" --unsetenv NGINX_EVAL_SANDBOX_SUPPORT \
            --ro-bind "$support/passwd" /etc/passwd --ro-bind "$support/group" /etc/group --
        done=1
    else
        set -- "$@" "$arg"
    fi
done
exec bwrap "$@"
