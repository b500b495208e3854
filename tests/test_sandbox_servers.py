"""What an agent can do inside its sandbox (issue 36), run through srt exactly as a phase runs
(sandbox.srt_settings, write_support, phase_environment, wrap): start servers on the sandbox's
loopback and reach them with plain clients, while the host's loopback stays refused and on the
record; run as an ordinary user; and (with local mirrors) start a real nginx, the harness's
build of a task's base, with and without a `user` directive.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from local_http import serve
from nginx_mirrors import base_build, needs_mirrors, range_task
from test_sandbox import needs_srt

from nginx_eval.agent import sandbox

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

pytestmark = needs_srt


def run_phase(tmp_path, command, endpoint="api.anthropic.com:443", programs=()):
    """`command` in a sandbox as an agent phase runs it: (exit code, stdout, the phase's stderr,
    the refused connections)."""
    # srt puts its bridges' sockets in TMPDIR: a short path, as the agent stage's, since a
    # socket's path is cut at 108 bytes (pytest-xdist's tmp_path can be longer).
    tmp = Path(tempfile.mkdtemp(prefix="nginx-eval-test-"))
    ws, logs = tmp_path / "ws", tmp_path / "logs"
    for d in (ws, logs):
        d.mkdir(exist_ok=True)
    box = {"endpoint": endpoint, "allow_hosts": [], "binds": []}
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))
    support = sandbox.write_support(tmp_path / "cache" / "sandbox-support")
    settings = logs / "srt.json"
    settings.write_text(
        json.dumps(
            sandbox.srt_settings(
                box,
                workspace=ws,
                writable=[logs, tmp],
                hidden=[tmp_path / "cache"],
                environ=env,
                programs=programs,
                support=support,
            )
        )
    )
    env = sandbox.phase_environment(env, tmp, support)
    argv = sandbox.wrap(
        command,
        settings_file=settings,
        stderr_file=logs / "stderr",
        environ=env,
        support=support,
        endpoint=endpoint,
    )
    with sandbox.TimestampedLog(logs / "srt.log") as log:
        out = subprocess.run(
            argv, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=log.fd, text=True, timeout=300
        )
    shutil.rmtree(tmp, ignore_errors=True)
    log = (logs / "srt.log").read_text()
    assert (logs / "stderr").exists(), f"srt did not start the command: {log[-3000:]}"
    return (
        out.returncode,
        out.stdout,
        (logs / "stderr").read_text(),
        sandbox.blocked_connections(log),
    )


SERVERS_AND_CLIENTS = r"""
python3 -m http.server --bind 127.0.0.1 18080 --directory site >/dev/null 2>&1 &
python3 -m http.server --bind ::1 18081 --directory site >/dev/null 2>&1 &
mkdir -p site && echo "agent's own server" > site/index.html
for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/18080 && exec 4<>/dev/tcp/::1/18081) \
    2>/dev/null && break; sleep 0.05; done
echo "curl 127.0.0.1: $(curl -s http://127.0.0.1:18080/)"
echo "curl localhost: $(curl -s http://localhost:18080/)"
echo "curl ::1: $(curl -s 'http://[::1]:18081/')"
echo "wget: $(wget -qO- http://localhost:18080/)"
echo "python: $(python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:18080/").read().decode().strip())')"
echo "perl: $(perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new("127.0.0.1:18080") or die "$@";
    print $s "GET / HTTP/1.0\r\n\r\n"; my @r = <$s>; print $r[-1]')"
echo "host port: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:OTHER/fix.diff)"
echo "host port by name: $(curl -s -o /dev/null -w '%{http_code}' http://localhost:OTHER/x)"
echo "model: $(curl -s http://127.0.0.1:MODEL/v1/models)"
"""


def test_servers_the_agent_starts_are_reached_by_plain_clients_and_the_host_is_refused(tmp_path):
    model, other = serve(), serve()
    command = SERVERS_AND_CLIENTS.replace("OTHER", str(other.server_address[1])).replace(
        "MODEL", str(model.server_address[1])
    )
    code, out, err, blocked = run_phase(
        tmp_path, command, endpoint=f"127.0.0.1:{model.server_address[1]}"
    )
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    for client in ("curl 127.0.0.1", "curl localhost", "curl ::1", "wget", "python", "perl"):
        assert lines.get(client) == "agent's own server", (client, out, err)
    # The host's loopback: refused by srt's proxy and on the record; the server saw nothing.
    assert lines["host port"] == "403" and lines["host port by name"] == "403"
    assert other.paths == []
    assert {(b["host"], b["port"]) for b in blocked} == {
        ("127.0.0.1", other.server_address[1]),
        ("localhost", other.server_address[1]),
    }
    # The model endpoint on the host's loopback still answers, through srt's proxy.
    assert lines["model"] == "host server /v1/models" and model.paths == ["/v1/models"]
    assert code == 0
    model.shutdown()
    other.shutdown()


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the agent's account is made for a harness run as "
    "root; an unprivileged caller keeps its own uid",
)
def test_the_agent_is_an_ordinary_user_inside_and_its_files_belong_to_the_harness(tmp_path):
    code, out, err, _ = run_phase(
        tmp_path,
        "id -u; id -un; getent passwd nobody | cut -d: -f3; "
        "mkdir -m 700 private && touch private/made && "
        "ls -ld private | cut -c1-10; env | grep -c "
        f"^{sandbox.SUPPORT_VAR}= || true",
    )
    uid, name, nobody, mode, support_var = out.split()
    assert code == 0, err
    assert int(uid) >= sandbox.FIRST_AGENT_ID and name == sandbox.AGENT_USER
    assert nobody == "65534" and mode == "drwx------"
    assert support_var == "0"  # the wrapper's variable does not reach the agent
    made = tmp_path / "ws" / "private" / "made"
    assert made.stat().st_uid == 0 and made.stat().st_gid == 0


NGINX_IN_THE_SANDBOX = r"""
set -u
conf() {
    mkdir -p "$TMPDIR/$1/logs"
    {
        printf '%s\nevents {}\nhttp { server { listen 127.0.0.1:%s;\n' "$2" "$3"
        printf '    location / { return 200 "%s\\n"; } } }\n' "$1"
    } > "$TMPDIR/$1/nginx.conf"
}
for case in plain:18090: user:18091:'user nobody;'; do
    name=${case%%:*}; rest=${case#*:}; port=${rest%%:*}; directive=${rest#*:}
    conf "$name" "$directive" "$port"
    NGINX -p "$TMPDIR/$name" -c nginx.conf && echo "started $name"
    sleep 0.3
    echo "answer $name: $(curl -s http://127.0.0.1:$port/)"
    ls -d "$TMPDIR/$name/client_body_temp" >/dev/null && echo "temp $name"
    NGINX -p "$TMPDIR/$name" -c nginx.conf -s stop && echo "stopped $name"
done
"""


@needs_mirrors("nginx/nginx")
def test_a_real_nginx_starts_serves_and_stops_inside_with_and_without_a_user_directive(
    tmp_path, real_nginx_cache
):
    # The harness's build of the range task's base, which test_real_nginx.py's runs share.
    binary = str(base_build(real_nginx_cache, range_task()))
    code, out, err, blocked = run_phase(
        tmp_path, NGINX_IN_THE_SANDBOX.replace("NGINX", binary), programs=[binary]
    )
    for name in ("plain", "user"):
        assert f"started {name}" in out and f"answer {name}: {name}" in out, (out, err)
        assert f"temp {name}" in out and f"stopped {name}" in out, (out, err)
    assert "[emerg]" not in err and blocked == []
