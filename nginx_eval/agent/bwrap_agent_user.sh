#!/bin/sh
# srt's bubblewrap (its `bwrapPath`), with the agent's own account, the grader's toolchain and a
# SWE-bench task's environment.
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
# Agent programs live outside /usr; the runtimes they need from the host's /usr (node, for Codex
# and Gemini CLI), listed in the file `runtimes` there ("HOST NAME" a line), are bound at
# runtime/NAME there, last on PATH (swe_view.write_runtimes).
#
# A SWE-bench task's environment: $NGINX_EVAL_SANDBOX_VIEW names a file of the phase's
# (swe_view.write_view), one instruction a line:
#   usr ROOT            ROOT's /usr and /etc files shown as the toolchain's are (instead of it)
#   ro HOST INSIDE      HOST read-only at INSIDE (the environment's venv)
#   workspace WS INSIDE the workspace WS also at INSIDE (/testbed), read-write, with every
#                       read-only mount srt made inside WS (.git/hooks, .bashrc, ...) made there too
#   first DIR / last DIR  DIR put first / last on PATH (after them, the runtimes above)
#   setenv NAME VALUE   a variable of the environment's
# and, where the task's tests reach the internet (swebench/services.py, stand-ins made per attempt):
#   net SCRIPT          the sandbox's network namespace made here instead of by bwrap, SCRIPT run
#                       in it by this (the host's) root first: a route that drops what is not local
#   over HOST REL       HOST read-only over the file REL of the workspace, at /testbed and at WS
#   launch ARG...       the command started by ARG... (the stand-ins' servers first, then it)
#
# The arguments go just before the `--` that ends bwrap's options, after srt's own mounts; a call
# without `--` (srt's probes of bwrap) passes through unchanged.
support=${NGINX_EVAL_SANDBOX_SUPPORT:-}
view=${NGINX_EVAL_SANDBOX_VIEW:-}
uid="" root="" ws="" testbed="" net="" launch=""
if [ -n "$support" ] && [ -f "$support/id" ]; then
    read -r uid gid < "$support/id"
fi
if [ -n "$support" ] && [ -f "$support/toolchain" ]; then
    read -r root < "$support/toolchain"
    [ -d "$root/usr" ] || root=""
fi
[ -n "$view" ] && [ -f "$view" ] || view=""
if [ -n "$view" ]; then
    while read -r what a b; do
        case $what in
            usr) root=$a;;
            workspace) ws=${a%/} testbed=$b;;
            net) net=$a;;
            launch) launch="$a $b";;
        esac
    done < "$view"
fi
if [ -z "$uid" ] && [ -z "$root" ] && [ -z "$view" ]; then
    exec bwrap "$@"
fi
nl='
'
count=$#
done="" expect="" mirrored=""
while [ "$count" -gt 0 ]; do
    arg=$1
    shift
    count=$((count - 1))
    # srt's read-only mounts inside the workspace (src dest after --ro-bind), to repeat at /testbed.
    case $expect in
        src) source=$arg expect=dest;;
        dest)
            expect=""
            case $arg in
                "$ws"/*) [ -n "$ws" ] && mirrored="$mirrored$source$nl$testbed/${arg#"$ws"/}$nl";;
            esac;;
    esac
    if [ -z "$done" ] && [ "$arg" = "--ro-bind" ]; then
        expect=src
    fi
    if [ -z "$done" ] && [ -n "$net" ] && [ "$arg" = "--unshare-net" ]; then
        continue  # the namespace is made below, set up
    fi
    if [ -z "$done" ] && [ "$arg" = "--" ]; then
        path=$PATH
        if [ -n "$root" ]; then
            set -- "$@" --ro-bind "$root/usr" /usr
            if [ -f "$support/runtimes" ]; then
                while read -r host name; do
                    set -- "$@" --ro-bind "$host" "$support/runtime/$name"
                done < "$support/runtimes"
                path=$path:$support/runtime
            fi
            for f in alternatives ld.so.cache ld.so.conf ld.so.conf.d perl "$root"/etc/python3*; do
                f=${f##*/}
                # Only over what the host has: bwrap cannot make a mount point in the read-only /etc.
                [ -e "$root/etc/$f" ] && [ -e "/etc/$f" ] && set -- "$@" --ro-bind "$root/etc/$f" "/etc/$f"
            done
        fi
        if [ -n "$uid" ]; then
            set -- "$@" --uid "$uid" --gid "$gid" \
                --ro-bind "$support/passwd" /etc/passwd --ro-bind "$support/group" /etc/group
        fi
        if [ -n "$view" ]; then
            while read -r what a b; do
                case $what in
                    ro) set -- "$@" --ro-bind "$a" "$b";;
                    first) path=$a:$path;;
                    last) path=$path:$a;;
                    setenv) set -- "$@" --setenv "$a" "$b";;
                esac
            done < "$view"
            if [ -n "$ws" ]; then
                set -- "$@" --bind "$ws" "$testbed"
                while [ -n "$mirrored" ]; do
                    source=${mirrored%%"$nl"*} mirrored=${mirrored#*"$nl"}
                    dest=${mirrored%%"$nl"*} mirrored=${mirrored#*"$nl"}
                    set -- "$@" --ro-bind "$source" "$dest"
                done
                while read -r what a b; do
                    [ "$what" = over ] && set -- "$@" --ro-bind "$a" "$testbed/$b" --ro-bind "$a" "$ws/$b"
                done < "$view"
            fi
            set -- "$@" --unsetenv NGINX_EVAL_SANDBOX_VIEW
        fi
        [ -n "$root" ] || [ -n "$view" ] && set -- "$@" --setenv PATH "$path"
        set -- "$@" --unsetenv NGINX_EVAL_SANDBOX_SUPPORT --
        # shellcheck disable=SC2086 # the launcher's words: paths without spaces
        [ -n "$launch" ] && set -- "$@" $launch
        done=1
    else
        set -- "$@" "$arg"
    fi
done
if [ -n "$net" ]; then
    user=""
    [ "$(id -u)" = 0 ] || user="--user --map-root-user"
    # shellcheck disable=SC2086
    exec unshare $user --net -- sh -e "$net" bwrap "$@"
fi
exec bwrap "$@"
