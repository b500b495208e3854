"""``python3 -I -S prove/namespaces.py COMMAND [ARG...]``: COMMAND in a network and a process
namespace of its own.

The program behind prove/network.py's private network, in front of every test file when the
host's toolchain runs it (the pinned toolchain's bwrap makes the same namespaces: core/rootfs.py).
It enters new network, mount and PID namespaces, brings the loopback up, and forks COMMAND as
the PID namespace's first process, with a /proc of that namespace; it waits for it and exits as
it did (a signal's death is passed on as the same signal).

Why processes too: the test files run the patch's build, which the agent wrote. Beside the
machine's other processes, one of them could signal every process it may (`kill(-1, SIGKILL)`,
`pkill prove`): the harness, and the proves of other units running at once, whose files would
then be graded as killed. In a namespace of its own it sees and reaches only its own test file's
processes; COMMAND (prove) is the namespace's init, which a signal from inside does not end, and
whatever is left inside when it exits is killed by the kernel.

The child stays in the caller's process group and session and carries its environment token,
so the harness's time limit and cleanup (core/procs.py) find it as before. A signal from outside
reaches the namespace's init only when it is SIGKILL (or COMMAND handles it): at a time limit the
harness stops the test file's processes first, then prove if need be, with SIGKILL.

It starts before every test file, so it imports only what it uses of the standard library and
nothing from the package, so it starts quickly and runs wherever the harness's Python runs.
"""

# The C module: the signal module imports enum, which takes longer than all of this program.
import _signal  # type: ignore[import-not-found]  # no stub: a private module
import ctypes
import fcntl
import os
import struct
import sys

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
AF_INET, SOCK_DGRAM = 2, 2
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1
IFREQ = "16sH14x"  # struct ifreq: the interface name, then ifr_flags in the union
# The exit status when it cannot enter the namespaces (as env(1) uses 125), or COMMAND cannot
# be started (as the shell uses 127).
CANNOT_ENTER, CANNOT_START = 125, 127


def _refused(libc: ctypes.CDLL, call: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}")


def enter(libc: ctypes.CDLL) -> None:
    """Move this process into new network and mount namespaces, bring the loopback up, and make
    the next child it forks the first process of a new PID namespace."""
    if libc.unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID) != 0:
        raise _refused(libc, "unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID)")
    # The /proc mounted below must not show on the host's /proc.
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise _refused(libc, "mount(/, MS_REC | MS_PRIVATE)")
    fd = libc.socket(AF_INET, SOCK_DGRAM, 0)  # libc's: the socket module costs more than all this
    if fd < 0:
        raise _refused(libc, "socket")
    try:
        current = fcntl.ioctl(fd, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, current)[1]
        fcntl.ioctl(fd, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
    finally:
        os.close(fd)


def _start(libc: ctypes.CDLL, argv: list[str]) -> None:
    """In the child, the PID namespace's first process: its own /proc, then COMMAND."""
    try:
        if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
            raise _refused(libc, "mount(/proc)")
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"{argv[0]}: {e.strerror or e}", file=sys.stderr)
    os._exit(CANNOT_START)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: prove/namespaces.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        enter(libc)
    except OSError as e:
        print(f"no private network: {e.strerror or e}", file=sys.stderr)
        return CANNOT_ENTER
    pid = os.fork()
    if pid == 0:
        _start(libc, argv)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        if -code not in (_signal.SIGKILL, _signal.SIGSTOP):  # which no handler can change
            _signal.signal(-code, _signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
