"""The sanitizer build kind and what its reports say.

A sanitizer build is an ordinary content-addressed build (build/stage.py) whose configure flags
carry AddressSanitizer and UndefinedBehaviorSanitizer (with NGX_DEBUG_PALLOC, so that pool
allocations are separate heap blocks the sanitizer can bound); its key differs from the plain
build's because its flags do. Under it, the sanitizers write their reports to files
(``log_path``), one per process, instead of nginx's error log, and the process goes on after a
report: the strict stage's regression check runs under this build too.

A finding (grade.json ``sanitizer_findings``)::

    {"tool": "AddressSanitizer" | "LeakSanitizer" | "UndefinedBehaviorSanitizer",
     "kind": "heap-buffer-overflow" | "leak" | "signed integer overflow" | ...,
     "frame": "ngx_http_parse_foo src/http/ngx_http_parse.c:123",   # the first frame in nginx
                                        # (the function alone without line information)
     "file": "<first test file that triggered it>", "files": [every such file],
     "report": "<path of the first report, in strict/>"}

A finding counts when the reference (gold's sanitizer build for a candidate, the base's for
gold) run of the same files has no report of the same tool, kind and function (`signature`):
lines move with a patch, functions do not.
"""

import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

# -fsanitize-recover=address: without it AddressSanitizer ends the process at its first report,
# whatever halt_on_error says, and the test that sent the request fails: the regression check,
# which runs under this build too, would count a memory error a second time.
CC_OPT = (
    "-fsanitize=address,undefined -fsanitize-recover=address -fno-omit-frame-pointer "
    "-DNGX_DEBUG_PALLOC=1"
)
LD_OPT = "-fsanitize=address,undefined"
# Frames in nginx's allocators say where memory came from, not who lost it: skipped for leaks.
ALLOCATORS = {
    "ngx_alloc",
    "ngx_calloc",
    "ngx_memalign",
    "ngx_palloc",
    "ngx_pnalloc",
    "ngx_pcalloc",
    "ngx_palloc_small",
    "ngx_palloc_large",
    "ngx_palloc_block",
    "ngx_create_pool",
    "ngx_array_create",
    "ngx_array_push",
    "ngx_array_push_n",
    "ngx_list_create",
    "ngx_list_push",
    "ngx_create_temp_buf",
    "ngx_pstrdup",
    "ngx_array_init",
    "ngx_list_init",
    "ngx_hash_init",
    "ngx_slab_alloc",
    "ngx_slab_alloc_locked",
    "ngx_shm_alloc",
}

ERROR_LINE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer): ([\w-]+)")
LEAK_LINE = re.compile(r"^(Direct|Indirect) leak of")
FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) \(?([^\s()]+)\)?$")
UBSAN_LINE = re.compile(r"(\S*src/\S+?):(\d+):\d+: runtime error: ([^:]+)")


# What one report says: (tool, kind, frame: the first frame in nginx, or None).
Report = tuple[str, str, str | None]


def sanitizer_flags(flags: Iterable[str]) -> list[str]:
    """The task's configure flags with the sanitizers added (to its own --with-cc-opt and
    --with-ld-opt when it has them: configure takes only the last of each)."""
    out, cc, ld = [], CC_OPT, LD_OPT
    for flag in flags:
        if flag.startswith("--with-cc-opt="):
            cc = f"{flag.split('=', 1)[1]} {CC_OPT}"
        elif flag.startswith("--with-ld-opt="):
            ld = f"{flag.split('=', 1)[1]} {LD_OPT}"
        else:
            out.append(flag)
    return out + [f"--with-cc-opt={cc}", f"--with-ld-opt={ld}"]


def environment(log_dir: str | Path) -> dict[str, str]:
    """The sanitizers' options for a test run whose reports go to `log_dir`. Errors do not stop
    the process (a worker that dies would change what the test sees next); leaks are checked."""
    return {
        "ASAN_OPTIONS": f"log_path={log_dir}/asan:detect_leaks=1:halt_on_error=0:abort_on_error=0",
        "UBSAN_OPTIONS": f"log_path={log_dir}/ubsan:print_stacktrace=1:halt_on_error=0",
    }


def _short(path: str) -> str:
    return path[path.index("src/") :] if "src/" in path else path


def _in_nginx(location: str) -> bool:
    """Whether a frame's location is nginx's code: a source file of its tree, or the binary
    itself when there is no line information (objs/nginx+0x...)."""
    return (
        "/objs/nginx" in location or location.startswith("src/") or "/src/" in location
    ) and "libsanitizer" not in location


def _first_frame(lines: Sequence[str], skip: Collection[str] = ()) -> str | None:
    for line in lines:
        m = FRAME.search(line.strip())
        if m and m.group(1) not in skip and _in_nginx(m.group(2)):
            where = _short(m.group(2))
            return m.group(1) if "/objs/nginx" in where else f"{m.group(1)} {where}"
    return None


def parse_report(text: str) -> list[Report]:
    """[(tool, kind, frame)] of one report file."""
    found: list[Report] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = ERROR_LINE.search(line)
        if m and m.group(1) == "AddressSanitizer":
            found.append(("AddressSanitizer", m.group(2), _first_frame(lines[i + 1 :])))
        elif LEAK_LINE.match(line):
            found.append(("LeakSanitizer", "leak", _first_frame(lines[i + 1 : i + 40], ALLOCATORS)))
        u = UBSAN_LINE.search(line)
        if u:
            found.append(
                (
                    "UndefinedBehaviorSanitizer",
                    u.group(3).strip(),
                    f"{_short(u.group(1))}:{u.group(2)}",
                )
            )
    return found


def signature(tool: str, kind: str, frame: str | None) -> tuple[str, str, str]:
    """What two reports share when they are the same problem: the frame's function (or, for
    UBSan, its file), not its line."""
    where = (frame or "").split(" ")[0].split(":")[0]
    return (tool, kind, where)


def reports(log_dir: str | Path) -> list[tuple[str, str, str | None, Path]]:
    """[(tool, kind, frame, report path)] of every report file under `log_dir`."""
    out = []
    for path in sorted(Path(log_dir).glob("*san.*")):
        for tool, kind, frame in parse_report(path.read_text(errors="replace")):
            out.append((tool, kind, frame, path))
    return out
