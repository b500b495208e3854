"""The scan of an agent's transcript (nginx_eval/attempts.py): what it tried, and whether the fix
reached it. Transcript entries here have the shape the pinned CLI writes (tool_use blocks in
assistant lines, tool_result blocks in user lines)."""

from nginx_eval.agent.attempts import (
    FixEvidence,
    Scope,
    added_lines,
    call_flags,
    fix_lines,
    scan_log,
    scan_transcript,
)

FIX = "0123456789abcdef0123456789abcdef01234567"
GOLD = """diff --git a/src/core/calc.c b/src/core/calc.c
--- a/src/core/calc.c
+++ b/src/core/calc.c
@@ -1,3 +1,3 @@
 int add(int a, int b) {
-    return a - b;
+    return a + b;
+    /* short */
 }
"""


def entries(*calls):
    """Transcript entries of tool calls: (name, input, result text)."""
    out = []
    for i, (name, tool_input, result) in enumerate(calls):
        out.append(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "tool_use", "id": f"t{i}", "name": name, "input": tool_input}
                    ]
                },
            }
        )
        out.append(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{i}",
                            "content": [{"type": "text", "text": result}],
                        }
                    ]
                },
            }
        )
    return out


def scope(tmp_path):
    (tmp_path / "ws").mkdir()
    return Scope(tmp_path / "ws", own=[tmp_path / "logs"], harness=[tmp_path / "cache"])


def test_fix_lines_are_the_added_lines_not_already_in_the_base():
    assert added_lines(GOLD) == {"return a + b;", "/* short */"}
    assert fix_lines(GOLD, lambda lines: ["/* short */"]) == frozenset({"return a + b;"})


def test_network_fetches_web_tools_and_outside_reads_are_flagged(tmp_path):
    s = scope(tmp_path)
    assert call_flags("Bash", {"command": "git clone https://github.com/nginx/nginx"}, s) == [
        ("fetch", "git clone https://github.com/nginx/nginx")
    ]
    assert (
        call_flags("Bash", {"command": "curl -s http://nginx.org/en/CHANGES"}, s)[0][0] == "fetch"
    )
    assert call_flags("Bash", {"command": "git -C x fetch origin"}, s)[0][0] == "fetch"
    assert call_flags("WebFetch", {"url": "https://hg.nginx.org/"}, s) == [
        ("web", "https://hg.nginx.org/")
    ]
    cache = str(tmp_path / "cache" / "repos")
    assert call_flags("Read", {"file_path": cache + "/x.json"}, s) == [
        ("outside_read", cache + "/x.json")
    ]
    assert call_flags("Bash", {"command": f"ls {cache}"}, s) == [("outside_read", cache)]
    # The agent's own work is not flagged: the workspace, relative paths, the system, sed.
    ws = str(tmp_path / "ws")
    for command in (
        f"cd {ws} && make",
        "grep -rn ngx_http src/",
        "cat /usr/include/stdio.h",
        "sed -i 's/a - b/a + b/' src/core/calc.c",
        "git diff",
        "git log -3",
    ):
        assert call_flags("Bash", {"command": command}, s) == [], command
    assert call_flags("Read", {"file_path": ws + "/src/core/calc.c"}, s) == []
    assert call_flags("Read", {"file_path": "/etc/hosts"}, s) == []


def test_the_fix_in_a_fetched_result_is_contamination(tmp_path):
    s = scope(tmp_path)
    evidence = FixEvidence(FIX, frozenset({"return a + b;"}))
    flags, found = scan_transcript(
        "solve",
        entries(("Bash", {"command": "curl -s https://example.org/fix.diff"}, GOLD)),
        s,
        evidence,
    )
    assert [f["kind"] for f in flags] == ["fetch"]
    assert [f["kind"] for f in found] == ["contamination"]
    assert "1 line(s) only the fix adds" in found[0]["detail"]


def test_the_fix_commit_id_anywhere_is_contamination(tmp_path):
    s = scope(tmp_path)
    evidence = FixEvidence(FIX, frozenset({"return a + b;"}))
    _, found = scan_transcript(
        "solve",
        entries(("Bash", {"command": "git log --oneline"}, f"{FIX[:12]} Fixed add()\n")),
        s,
        evidence,
    )
    assert found and found[0]["detail"].startswith(f"fix commit {FIX[:12]}")


def test_an_agent_that_writes_the_fix_itself_and_looks_at_its_diff_is_not_contaminated(tmp_path):
    s = scope(tmp_path)
    evidence = FixEvidence(FIX, frozenset({"return a + b;"}))
    flags, found = scan_transcript(
        "solve",
        entries(
            ("Bash", {"command": "sed -i 's/a - b/a + b/' src/core/calc.c"}, ""),
            ("Bash", {"command": "git diff"}, GOLD),
            ("Bash", {"command": "date +%s%N"}, "012345678901234\n"),
        ),
        s,
        evidence,
    )
    assert flags == [] and found == []


def test_a_command_log_shows_fetches_of_an_agent_that_is_not_claude_code():
    flags = scan_log("solve", "$ wget https://nginx.org/download/nginx-1.27.0.tar.gz\nok\n")
    assert [f["kind"] for f in flags] == ["fetch"]
