"""Small real repositories that stand in for nginx and nginx-tests in the hermetic test suite.

``acme/tiny`` is a C program laid out like nginx: ``./auto/configure [flags]`` writes ``Makefile``
and ``objs/Makefile``; ``make`` builds ``objs/nginx``; ``objs/nginx -V`` prints the flags. History:

    c_add_bug   add() subtracts                    (base of task tiny-add)
    c_add_fix   add() fixed                        (fix of tiny-add)
    c_mul_bug   mul() off by one, plus a new file  (base of task tiny-mul)
    c_mul_fix   mul() fixed                        (fix of tiny-mul)
    c_later     an unrelated later change

``acme/tiny-tests`` holds Test::More ``.t`` files that run $ENV{TEST_NGINX_BINARY}, like
nginx-tests, in one commit dated TESTS_DATE, before every commit of acme/tiny (made now): the tests
tree as of any base commit (suite/stage.py) is that commit. add_later_test adds a test dated after
the bases.
``objs/nginx -p DIR -c FILE`` is the "server": it prints a line and exits 0, and server.t and
server_die.t start it with the test's stdout inherited, as Test::Nginx starts nginx. When FILE
(relative to DIR) says ``listen [127.0.0.1:]PORT;`` it also serves HTTP on 127.0.0.1:PORT in the
background, as nginx does, answering ``tiny: 2 + 3 = <add(2, 3)>``, and writes DIR/nginx.pid;
``objs/nginx -p DIR -s stop`` stops it.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
}

CONFIGURE = r"""#!/bin/sh
# A miniature of nginx's auto/configure: records the flags, writes the Makefiles.
set -e
cc_opt= ld_opt=
for opt in "$@"; do
    case "$opt" in
        --with-cc-opt=*) cc_opt=${opt#--with-cc-opt=} ;;
        --with-ld-opt=*) ld_opt=${opt#--with-ld-opt=} ;;
        --with-*|--without-*|--prefix=*) ;;
        *) echo "configure: invalid option $opt" >&2; exit 1 ;;
    esac
done
mkdir -p objs/src/core
# Like nginx's feature tests: build a program with `cc`, run it, remove it.
printf 'int main(void) { return 0; }\n' > objs/autotest.c
cc -o objs/autotest objs/autotest.c && objs/autotest
rm -f objs/autotest objs/autotest.c
printf '#define NGX_CONFIGURE "%s"\n' "$*" > objs/ngx_auto_config.h
cat > objs/Makefile <<EOF
CC = cc
CFLAGS = -O0 -Wall -Werror -I src/core -I objs $cc_opt
LDFLAGS = $ld_opt
EOF
cat >> objs/Makefile <<'EOF'
OBJS = $(patsubst src/%.c,objs/src/%.o,$(wildcard src/core/*.c))

objs/nginx: $(OBJS)
	$(CC) -o objs/nginx $(OBJS) $(LDFLAGS)

objs/src/core/%.o: src/core/%.c src/core/calc.h objs/ngx_auto_config.h
	$(CC) $(CFLAGS) -c -o $@ $<
EOF
cat > Makefile <<'EOF'
default: build
build:
	$(MAKE) -f objs/Makefile
EOF
echo "configured with: $*"
"""

MAIN_C = r"""#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "calc.h"
#include "ngx_auto_config.h"

static const char *option(int argc, char **argv, const char *name, const char *none)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    }
    return none;
}

/* With "listen PORT;" in the configuration: serve HTTP on 127.0.0.1:PORT in a child, as a
 * daemonized nginx does. 0 when there is nothing to serve or the child runs, 1 on failure. */
static int listen_from_config(const char *prefix, const char *conf)
{
    char path[4096], line[512], pidfile[4096], answer[128];
    int port = 0, fd, one = 1;
    struct sockaddr_in addr;
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", conf[0] == '/' ? "" : prefix, conf);
    if ((f = fopen(path, "r")) == NULL) return 0;
    while (fgets(line, sizeof(line), f)) {
        /* "listen PORT;" or "listen 127.0.0.1:PORT;", anywhere on the line */
        char *at = strstr(line, "listen "), *colon;
        if (at == NULL) continue;
        at += 7;
        colon = strchr(at, ':');
        if (sscanf(colon && colon < strchr(at, ';') ? colon + 1 : at, "%d", &port) == 1) break;
    }
    fclose(f);
    if (port <= 0) return 0;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0 || listen(fd, 16) != 0) {
        perror("tiny: bind");
        return 1;
    }
    pid_t pid = fork();
    if (pid > 0) {
        snprintf(pidfile, sizeof(pidfile), "%s/nginx.pid", prefix);
        if ((f = fopen(pidfile, "w")) != NULL) { fprintf(f, "%d\n", (int) pid); fclose(f); }
        return 0;
    }
    setsid();
    int n = snprintf(answer, sizeof(answer), "HTTP/1.0 200 OK\r\n\r\ntiny: 2 + 3 = %d\n",
                     calc_add(2, 3));
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        if (read(c, line, sizeof(line)) > 0 && write(c, answer, n) < 0) perror("tiny: write");
        close(c);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-V") == 0) {
        printf("tiny version: 1.0\nconfigure arguments: %s\n", NGX_CONFIGURE);
        return 0;
    }
    if (argc >= 2 && strcmp(option(argc, argv, "-s", ""), "stop") == 0) {
        char pidfile[4096];
        int pid = 0;
        FILE *f;
        snprintf(pidfile, sizeof(pidfile), "%s/nginx.pid", option(argc, argv, "-p", "."));
        if ((f = fopen(pidfile, "r")) == NULL || fscanf(f, "%d", &pid) != 1) return 1;
        fclose(f);
        return kill(pid, SIGTERM) == 0 ? 0 : 1;
    }
    if (argc >= 2 && (strcmp(argv[1], "-p") == 0 || strcmp(argv[1], "-c") == 0)) {
        if (listen_from_config(option(argc, argv, "-p", "."),
                               option(argc, argv, "-c", "nginx.conf")) != 0) return 1;
        /* Started as a server, the way Test::Nginx starts nginx: talks on its stdout. */
        printf("tiny: serving\n");
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: nginx add|mul A B\n");
        return 2;
    }
    int a = atoi(argv[2]), b = atoi(argv[3]);
    if (strcmp(argv[1], "add") == 0) printf("%d\n", calc_add(a, b));
    else if (strcmp(argv[1], "mul") == 0) printf("%d\n", calc_mul(a, b));
    else return 2;
    return 0;
}
"""

CALC_H = "int calc_add(int a, int b);\nint calc_mul(int a, int b);\n"

CALC_C = """#include "calc.h"

int calc_add(int a, int b)
{
    return %s;
}

int calc_mul(int a, int b)
{
    return %s;
}
"""

TEST_HEAD = """#!/usr/bin/perl
use strict;
use warnings;
use Test::More;

my $bin = $ENV{TEST_NGINX_BINARY} or plan(skip_all => 'TEST_NGINX_BINARY is not set');
sub run { my $out = `$bin @_`; chomp $out; return $out; }
"""

TESTS = {
    "calc_add.t": TEST_HEAD
    + """
plan(tests => 3);
is(run('add', 2, 3), '5', 'add two numbers');
is(run('add', 0, 0), '0', 'add zeros');
is(run('mul', 2, 3), '6', 'mul still works');
""",
    "calc_mul.t": TEST_HEAD
    + """
plan(tests => 3);
is(run('mul', 2, 3), '6', 'multiply');
is(run('mul', 1, 0), '0', 'multiply by zero');
TODO: {
local $TODO = 'not yet';
is(run('mul', 3, 3), '9', 'square');
}
""",
    "version.t": TEST_HEAD
    + """
plan(tests => 1);
like(`$bin -V 2>&1`, qr/configure arguments/, 'version output');
""",
    "skip.t": TEST_HEAD
    + """
plan(skip_all => 'Foo::Bar not installed');
""",
    # Start the "server" with the test's stdout, as Test::Nginx does. try_run skips the whole
    # file when it does not start; `$t->run()->plan(N)` dies before the plan.
    "server.t": TEST_HEAD
    + """
system($bin, '-p', '/tmp/', '-c', 'nginx.conf') == 0 or plan(skip_all => 'cannot start nginx');
plan(tests => 2);
is(run('add', 2, 3), '5', 'add after start');
is(run('mul', 2, 3), '6', 'mul after start');
""",
    "server_die.t": TEST_HEAD
    + """
system($bin, '-p', '/tmp/', '-c', 'nginx.conf') == 0 or die "Can't start nginx";
plan(tests => 2);
is(run('add', 2, 3), '5', 'add after start');
is(run('mul', 2, 3), '6', 'mul after start');
""",
    # What the harness lets leak into a test's environment.
    "env.t": TEST_HEAD
    + """
plan(tests => 3);
is(run('add', 2, 3), '5', 'add two numbers');
ok(!defined $ENV{TEST_NGINX_UNSAFE}, 'no inherited TEST_NGINX_UNSAFE');
my @users = ($ENV{TEST_NGINX_GLOBALS} // '') =~ /\buser\b/g;
ok(@users <= 1, 'at most one user directive');
""",
    "hang.t": TEST_HEAD
    + """
plan(tests => 2);
ok(1, 'before the hang');
sleep 3600;
ok(1, 'after the hang');
""",
    "flaky.t": TEST_HEAD
    + """
plan(tests => 2);
is(run('add', 2, 3), '5', 'add two numbers');
# Passes on every other run of the same binary: a counter file per binary decides, locked, as
# the runs of a base and its fix may overlap (so each side's count is the same in any order).
use Digest::MD5 qw(md5_hex);
use Fcntl qw(:flock);
my $counter = ($ENV{FLAKY_COUNTER} || '/tmp/nginx-eval-flaky') . '.' . md5_hex($bin);
open my $fh, '+>>', $counter or die "$counter: $!";
flock($fh, LOCK_EX) or die "$counter: $!";
seek($fh, 0, 0);
my $n = <$fh> || 0;
truncate($fh, 0);
print $fh $n + 1;
close $fh;
ok($n % 2 == 0, 'coin');
""",
}


def git(cwd, *args):
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(os.environ, **ENV),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def gold_diff(mirrors, task):
    """The diff of `task`'s fix in the acme+tiny of `mirrors`, as a predictions file carries it
    (binary, full index, its last newline kept)."""
    return subprocess.run(
        ["git", "diff", "--binary", "--full-index", task["base_commit"], task["fix_commit"]],
        cwd=Path(mirrors) / "acme+tiny",
        env=dict(os.environ, **ENV),
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit(repo, message, date=None):
    """Commit everything; date: its author and committer date (git's formats), else now."""
    git(repo, "add", "-A")
    dated = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    subprocess.run(
        ["git", "commit", "-q", "-m", message],
        cwd=repo,
        check=True,
        env=dict(os.environ, **ENV, **dated),
        capture_output=True,
    )
    return git(repo, "rev-parse", "HEAD")


def write(path, text, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def make_upstream(path):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write(path / "auto" / "configure", CONFIGURE, 0o755)
    write(path / ".gitignore", "/objs/\n/Makefile\n")
    write(path / "src" / "core" / "nginx.c", MAIN_C)
    write(path / "src" / "core" / "calc.h", CALC_H)
    write(path / "src" / "core" / "calc.c", CALC_C % ("a - b", "a * b"))
    write(path / "README", "tiny\n")
    c = {"c_add_bug": commit(path, "tiny: add and mul")}
    write(path / "src" / "core" / "calc.c", CALC_C % ("a + b", "a * b"))
    c["c_add_fix"] = commit(path, "Fixed add")
    write(path / "src" / "core" / "calc.c", CALC_C % ("a + b", "a * b + (a > 1)"))
    write(path / "src" / "core" / "util.c", "int calc_unused(void) { return 0; }\n")
    c["c_mul_bug"] = commit(path, "Reworked mul")
    write(path / "src" / "core" / "calc.c", CALC_C % ("a + b", "a * b"))
    c["c_mul_fix"] = commit(path, "Fixed mul")
    write(path / "README", "tiny, a calculator\n")
    c["c_later"] = commit(path, "Later change")
    return c


TESTS_DATE = "2020-01-01T00:00:00+0000"
LATER_TEST = (
    TEST_HEAD
    + """
plan(tests => 1);
is(run('add', -2, -3), '-5', 'add negatives');
"""
)


def make_tests_repo(path):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write(path / "lib" / "README", "test library would live here\n")
    for name, text in TESTS.items():
        write(path / name, text, 0o755)
    return {"t_head": commit(path, "Tests", date=TESTS_DATE)}


def add_later_test(path, date):
    """A commit of the tests repository at `path` dated `date` that adds calc_neg.t ("add
    negatives" fails on tiny-add's base): a test that landed after the base commit, as nginx-tests
    adds a fix's test; the tests tree as of the base must not hold it. Its id."""
    write(path / "calc_neg.t", LATER_TEST, 0o755)
    return commit(path, "Tests: add negatives", date=date)


FAKE_AGENT = r'''#!/usr/bin/env python3
"""A scripted agent: fixes calc.c the way a good agent would, or misbehaves on request.

FAKE_AGENT picks the behaviour; FAKE_AGENT_<instance id, - as _> overrides it for one task, so one
run can hold one hostile task among normal ones. FAKE_AGENT_GATE (also per task): once the call
is logged, touch <gate>.waiting, then wait until <gate> exists before doing anything else.
"""
import os, re, shutil, signal, subprocess, sys, time
def setting(name, default=None):
    own = name + "_" + re.sub(r"[^A-Za-z0-9]", "_", os.environ.get("NGINX_EVAL_INSTANCE", ""))
    return os.environ.get(own, os.environ.get(name, default))
behaviour = setting("FAKE_AGENT", "fix")
with open(os.path.join(os.environ.get("FAKE_AGENT_LOG", "/dev/null")), "a") as log:
    log.write(os.environ.get("NGINX_EVAL_INSTANCE", "?") + "\n")
gate = setting("FAKE_AGENT_GATE")
if gate:
    open(gate + ".waiting", "w").close()
    while not os.path.exists(gate):
        time.sleep(0.05)
ws = os.getcwd()
def sh(*commands):
    for command in commands:
        subprocess.run(command, shell=True, check=True, cwd=ws, stdout=subprocess.DEVNULL)
calc = os.path.join(ws, "src/core/calc.c")
FIXING = ("fix", "fix-and-noise", "commit", "branches", "rewrite", "bigfile", "binary", "outside",
          "nonzero")
if behaviour in FIXING:
    text = open(calc).read()
    text = text.replace("a - b", "a + b").replace("a * b + (a > 1)", "a * b")
    open(calc, "w").write(text)
    if behaviour == "fix-and-noise":
        open(os.path.join(ws, "NOTES.txt"), "w").write("scratch\n")
if behaviour == "commit":
    sh("git commit -q -a -m 'Fixed it'")
elif behaviour == "branches":
    sh("git checkout -q -b agent/attempt", "git commit -q -a -m wip", "git branch agent/spare",
       "git tag v9.9.9-agent", "git tag -a -m annotated agent-annotated")
elif behaviour == "rewrite":
    # Commit, amend, move everything to a new root commit and drop the old history.
    sh("git commit -q -a -m first", "git commit -q --amend -m amended",
       "git checkout -q --orphan rewritten", "git commit -q -m 'new root'", "git branch -D main",
       "git reflog expire --expire=now --all", "git gc -q --prune=now")
elif behaviour == "bigfile":
    # Sparse: 100 MB by size (what the harness looks at) without writing 100 MB to disk.
    with open(os.path.join(ws, "core.dump"), "wb") as f:
        f.truncate(100 << 20)
elif behaviour == "binary":
    open(os.path.join(ws, "src/core/table.bin"), "wb").write(bytes(range(256)) * 4)
elif behaviour == "outside":
    open(os.path.join(ws, "..", "escape.txt"), "w").write("outside the tree\n")
    os.symlink("../escape.txt", os.path.join(ws, "escape-link"))
elif behaviour == "delete-workspace":
    shutil.rmtree(ws)
elif behaviour == "fork-ignore-term":
    # Children in sessions of their own, ignoring SIGTERM as their parent does; one daemonized
    # with a double fork so that it is nobody's child.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen(["setsid", "sh", "-c", "trap '' TERM; sleep 3600 & sleep 3600"])
    subprocess.Popen(["sleep", "3600"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(3600)
        os._exit(0)
    time.sleep(3600)
elif behaviour == "break":
    open(calc, "a").write("int broken(void) { return }\n")
elif behaviour == "hang":
    time.sleep(3600)
elif behaviour == "fail":
    sys.exit(3)
elif behaviour == "api-error":
    # What Claude Code prints when the API keeps failing: an infra error (agent/claude_code.py).
    print('{"type": "result", "is_error": true, "api_error_status": 500, "num_turns": 1, '
          '"terminal_reason": "api_error", "total_cost_usd": 0.01, '
          '"result": "API Error: 500 Internal server error"}')
    sys.exit(1)
print('{"type": "result", "is_error": false, "num_turns": 3, "total_cost_usd": 0.25, '
      '"usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 50, '
      '"cache_creation_input_tokens": 10}}')
if behaviour == "nonzero":
    sys.exit(3)
'''


def task(iid, base, fix, test_commit, files, f2p, p2p, flags=()):
    return {
        "instance_id": iid,
        "repo": "acme/tiny",
        "test_repo": "acme/tiny-tests",
        "base_commit": base,
        "fix_commit": fix,
        "test_commit": test_commit,
        "test_files": files,
        "configure_flags": list(flags),
        "fail_to_pass": f2p,
        "pass_to_pass": p2p,
        "problem_statement": f"{iid}: the calculator prints wrong results.",
        "perl_modules": [],
        "test_timeout": 20,
    }


# The two repositories as this process first made them, copied for each project: a project's
# repositories are its own to change, and a copy costs a fraction of the git commands.
_MIRRORS = {}


def copy_of_mirrors(mirrors):
    """acme+tiny and acme+tiny-tests in `mirrors`; returns their commits (see the docstring)."""
    if not _MIRRORS:
        template = Path(tempfile.mkdtemp(prefix="tiny-mirrors-"))
        atexit.register(shutil.rmtree, template, True)
        commits = make_upstream(template / "acme+tiny")
        commits.update(make_tests_repo(template / "acme+tiny-tests"))
        _MIRRORS.update(template=template, commits=commits)
    shutil.copytree(_MIRRORS["template"], mirrors, symlinks=True)
    return dict(_MIRRORS["commits"])


def make_fixture(base_dir):
    """Repositories, a project root with tasks/tiny.json and modes.toml, and the environment."""
    base_dir = Path(base_dir)
    mirrors = base_dir / "mirrors"
    commits = copy_of_mirrors(mirrors)
    root = base_dir / "project"
    (root / "tasks").mkdir(parents=True)
    agent = base_dir / "fake_agent.py"
    write(agent, FAKE_AGENT, 0o755)
    t = commits["t_head"]
    tasks = [
        task(
            "tiny-add",
            commits["c_add_bug"],
            commits["c_add_fix"],
            t,
            ["calc_add.t"],
            ["calc_add.t:1 add two numbers"],
            ["calc_add.t:2 add zeros", "calc_add.t:3 mul still works"],
        ),
        task(
            "tiny-mul",
            commits["c_mul_bug"],
            commits["c_mul_fix"],
            t,
            ["calc_mul.t", "version.t"],
            ["calc_mul.t:1 multiply", "calc_mul.t:3 square"],
            ["calc_mul.t:2 multiply by zero", "version.t:1 version output"],
            flags=["--with-debug"],
        ),
    ]
    write(root / "tasks" / "tiny.json", json.dumps({"name": "tiny", "tasks": tasks}, indent=2))
    write(
        root / "modes.toml",
        textwrap.dedent(f"""\
        [modes.fake]
        description = "scripted agent"
        model = "fake-1"
        # The scripted agent writes its call log outside the workspace; the tests of isolation
        # (test_sandbox.py, test_isolation.py) turn it on themselves.
        isolation = "none"
        [[modes.fake.phases]]
        name = "solve"
        prompt = "prompt_raw.md.j2"
        timeout = 20
        command = "{agent} {{prompt}}"
        """),
    )
    env = dict(os.environ)
    for var in list(env):
        if var.startswith("NGINX_EVAL_") or var.startswith("FAKE_AGENT"):
            del env[var]
    env.update(
        {
            "NGINX_EVAL_ROOT": str(root),
            "NGINX_EVAL_CACHE": str(base_dir / "cache"),
            "NGINX_EVAL_REPO_URL": str(mirrors) + "/{owner}+{name}",
            "FAKE_AGENT_LOG": str(base_dir / "agent-calls.log"),
            "FLAKY_COUNTER": str(base_dir / "flaky-counter"),
            # The toolchain the test session runs with (conftest.py: the host's unless told).
            "NGINX_EVAL_TOOLCHAIN": os.environ.get("NGINX_EVAL_TOOLCHAIN", "host"),
        }
    )
    return {
        "root": root,
        "env": env,
        "commits": commits,
        "mirrors": mirrors,
        "agent": agent,
        "base": base_dir,
        "tasks": tasks,
    }
