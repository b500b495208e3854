#!/bin/sh
# srt's bubblewrap (its `bwrapPath`), with the agent's own account and the grader's toolchain.
#
# The account: run as root, srt maps uid 0 alone into the sandbox, so nginx started there cannot
# switch its workers to `nobody` (chown of its *_temp paths fails with EINVAL, and initgroups is
# refused). In $NGINX_EVAL_SANDBOX_SUPPORT (sandbox.write_support) the file `id` holds "UID GID"
# of an account that exists nowhere on the host: bwrap maps the caller to it (--uid/--gid), and
# the account tables there (the host's plus that account) are shown as /etc/passwd and
# /etc/group. Inside, the agent is an ordinary user, as a developer running nginx and its tests is.
#
# The toolchain: when the file `toolchain` there names the pinned toolchain's root filesystem
# (core/rootfs.py), its /usr is shown over the host's, with the /etc files that choose programs
# and libraries in it (alternatives, the dynamic linker's cache and configuration), so that the
# compiler, headers, libraries, make and Perl the agent builds and tests with are the grader's.
#
# The arguments go just before the `--` that ends bwrap's options, after srt's own mounts; a call
# without `--` (srt's probes of bwrap) passes through unchanged.
support=${NGINX_EVAL_SANDBOX_SUPPORT:-}
uid="" root=""
if [ -n "$support" ] && [ -f "$support/id" ]; then
    read -r uid gid < "$support/id"
fi
if [ -n "$support" ] && [ -f "$support/toolchain" ]; then
    read -r root < "$support/toolchain"
    [ -d "$root/usr" ] || root=""
fi
if [ -z "$uid" ] && [ -z "$root" ]; then
    exec bwrap "$@"
fi
count=$#
done=""
while [ "$count" -gt 0 ]; do
    arg=$1
    shift
    count=$((count - 1))
    if [ -z "$done" ] && [ "$arg" = "--" ]; then
        if [ -n "$root" ]; then
            set -- "$@" --ro-bind "$root/usr" /usr
            for f in alternatives ld.so.cache ld.so.conf ld.so.conf.d perl; do
                [ -e "$root/etc/$f" ] && set -- "$@" --ro-bind "$root/etc/$f" "/etc/$f"
            done
        fi
        if [ -n "$uid" ]; then
            set -- "$@" --uid "$uid" --gid "$gid" \
                --ro-bind "$support/passwd" /etc/passwd --ro-bind "$support/group" /etc/group
        fi
        set -- "$@" --unsetenv NGINX_EVAL_SANDBOX_SUPPORT --
        done=1
    else
        set -- "$@" "$arg"
    fi
done
exec bwrap "$@"
