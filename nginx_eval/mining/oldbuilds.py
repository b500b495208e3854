"""Compiler options an old nginx base needs to build with today's gcc, glibc and OpenSSL.

nginx compiles with -Werror, and a base from before the commits below fails to build on Debian 12
(gcc 12, glibc 2.36 with libxcrypt, OpenSSL 3.0) for reasons that have nothing to do with its
bug. Each entry names the nginx commit that made its option unnecessary; a base that does not
contain that commit gets the option in the task's ``--with-cc-opt``. The options only silence
a warning class or take the portable code path, so the task's bug and its fix compile the same.

Bases before nginx 982f4de9f include <sys/sysctl.h>, which today's glibc lacks: no option helps,
and the miner proposes none (BUILDABLE_FROM). Which options bases of which age needed:
docs/benchmark.md#old-bases.
"""

from collections.abc import Sequence
from pathlib import Path

from nginx_eval.core import gitcmd

# (nginx commit that made the option unnecessary, the option, which builds need it)
LEGACY_OPTIONS = (
    # "Added missing "fall through" comments" (2017-04-27): gcc 7's -Wimplicit-fallthrough
    # is part of nginx's -W.
    ("8449f750e", "-Wno-implicit-fallthrough", "all"),
    # "Silenced -Wcast-function-type warnings" (2018-05-07): gcc 8's warning, also in -W.
    ("68b50f71e", "-Wno-cast-function-type", "all"),
    # "Removed glibc crypt_r() bug workaround" (2018-05-23): the workaround writes
    # crypt_data.current_salt, a member libxcrypt's struct does not have. With the
    # configure result overridden, nginx takes its plain crypt() path (nginx's #ifndef guards
    # in ngx_auto_config.h let a -D win).
    ("1ef5c9ce6", "-DNGX_HAVE_GNU_CRYPT_R=0", "all"),
    # "Internal md5 and sha1 implementations are now always used" (2016-06-30): before it,
    # core code calls OpenSSL's MD5_Init() and friends, deprecated in OpenSSL 3.0.
    ("c60b61a29", "-Wno-deprecated-declarations", "all"),
    # "SSL: silenced warnings when building with OpenSSL 3.0" (2021-08-10).
    ("3df7efd34", "-Wno-deprecated-declarations", "ssl"),
)
# "Fixed build on Linux with x32 ABI" (2013-06-26): from it on, <sys/sysctl.h> is included only
# for the rtsig module, which configure leaves out on kernels from 2.6.18 on.
BUILDABLE_FROM = "982f4de9f"
# The first commit that builds against OpenSSL 1.1's opaque structures ("SSL: adopted session
# ticket handling for OpenSSL 1.1.0", 2016-08-22); an SSL build of an older base cannot work.
OPENSSL_11_READY = "218c8d493"
# Flags whose modules link OpenSSL.
SSL_FLAG_WORDS = ("ssl", "http_v3")


def lacks(nginx_dir: str | Path, commit: str, base: str) -> bool:
    """Whether `base` predates `commit`. A repository without `commit` (a fixture, a fork
    with another history) is not nginx's: none of these rules applies to it."""
    if gitcmd.missing_commits(nginx_dir, [commit]):
        return False
    return not gitcmd.is_ancestor(nginx_dir, commit, base)


def uses_ssl(flags: Sequence[str]) -> bool:
    return any(word in flag for flag in flags for word in SSL_FLAG_WORDS)


def legacy_cc_opt(nginx_dir: str | Path, base: str, flags: Sequence[str]) -> list[str]:
    """The options `base` needs (a list, empty for a recent base) given its configure flags."""
    ssl = uses_ssl(flags)
    options = [
        option
        for commit, option, builds in LEGACY_OPTIONS
        if (builds == "all" or ssl) and lacks(nginx_dir, commit, base)
    ]
    return list(dict.fromkeys(options))


def with_legacy_options(nginx_dir: str | Path, base: str, flags: Sequence[str]) -> list[str] | None:
    """`flags` with the options `base` needs added to its --with-cc-opt, or None when no
    option can make it build here (a base older than BUILDABLE_FROM, or an SSL build of a
    base older than OpenSSL 1.1 support)."""
    if lacks(nginx_dir, BUILDABLE_FROM, base):
        return None
    if uses_ssl(flags) and lacks(nginx_dir, OPENSSL_11_READY, base):
        return None
    options = legacy_cc_opt(nginx_dir, base, flags)
    if not options:
        return list(flags)
    # configure keeps only the last --with-cc-opt: the options join the one already there.
    given = [f[len("--with-cc-opt=") :] for f in flags if f.startswith("--with-cc-opt=")]
    flags = [f for f in flags if not f.startswith("--with-cc-opt=")]
    return flags + ["--with-cc-opt=" + " ".join(given[-1:] + options)]
