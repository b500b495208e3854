"""``python3 -I -S prove/netns.py COMMAND [ARG...]``: COMMAND in a network of its own.

The program behind prove/network.py's private network: it enters a new network namespace,
brings its loopback up and execs COMMAND (same process, so the caller's process group, session
and environment token still find it). It starts before every test file, so it imports only what
it uses of the standard library and nothing from the package, so it starts quickly and runs
wherever the harness's Python runs.
"""

import ctypes
import fcntl
import os
import struct
import sys

CLONE_NEWNET = 0x40000000
AF_INET, SOCK_DGRAM = 2, 2
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1
IFREQ = "16sH14x"  # struct ifreq: the interface name, then ifr_flags in the union
# The exit status when it cannot enter the namespace (as env(1) uses 125).
CANNOT_ENTER = 125


def _refused(libc: ctypes.CDLL, call: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}")


def enter() -> None:
    """Move this process into a new network namespace and bring its loopback up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise _refused(libc, "unshare(CLONE_NEWNET)")
    fd = libc.socket(AF_INET, SOCK_DGRAM, 0)  # libc's: the socket module costs more than all this
    if fd < 0:
        raise _refused(libc, "socket")
    try:
        current = fcntl.ioctl(fd, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, current)[1]
        fcntl.ioctl(fd, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: prove/netns.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        enter()
    except OSError as e:
        print(f"no private network: {e.strerror or e}", file=sys.stderr)
        return CANNOT_ENTER
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
