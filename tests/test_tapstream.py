"""prove/tap.py on what real `prove -v` prints (conftest.prove_v runs it on small .t files)."""

from nginx_eval.prove.tap import assertion_id, file_problem, needs_reference, parse_tap

OK = {"exit_code": 0, "timed_out": False}


def test_numbers_descriptions_and_todo(prove_v):
    out, _ = prove_v(
        "a.t",
        """plan(tests => 4);
ok(1, 'first'); ok(1); TODO: { local $TODO = 'not yet'; ok(0, 'body'); ok(1, 'early'); }
""",
    )
    fr = parse_tap("a.t", out)
    # `not ok # TODO` fails here although prove counts it as passing; `ok # TODO` passes.
    assert fr.results == {
        "a.t:1 first": True,
        "a.t:2": True,
        "a.t:3 body": False,
        "a.t:4 early": True,
    }
    assert fr.complete and not fr.tampered and file_problem(fr, OK) is None
    assert assertion_id("a.t", 7, "- x y ") == "a.t:7 x y"


def test_partial_skip_is_kept_by_number_with_its_reason(prove_v):
    out, code = prove_v(
        "auth.t",
        """plan(tests => 3);
ok(1, 'first');
SKIP: { skip 'FCGI not installed', 1; ok(1, 'fastcgi auth open'); }
ok(1, 'last');
""",
    )
    assert code == 0
    fr = parse_tap("auth.t", out)
    assert fr.skipped == {2: "FCGI not installed"}
    assert "auth.t:2 fastcgi auth open" not in fr.results and not fr.ran(
        "auth.t:2 fastcgi auth open"
    )
    assert fr.complete and file_problem(fr, OK) is None


def test_whole_file_skip_as_prove_prints_it(prove_v):
    out, code = prove_v("fcgi.t", "plan(skip_all => 'FCGI not installed');\n")
    assert "fcgi.t .. skipped: FCGI not installed" in out and code == 0
    fr = parse_tap("fcgi.t", out)
    assert fr.skip_all == "FCGI not installed"
    problem = file_problem(fr, OK)
    assert problem.kind == "not_started" and "FCGI not installed" in problem.text


def test_bail_out_as_prove_prints_it(prove_v):
    out, _ = prove_v("b.t", "plan(tests => 2); ok(1, 'a'); BAIL_OUT('no binary found');\n")
    assert "Bailout called" in out
    fr = parse_tap("b.t", out)
    assert fr.bailed_out == "no binary found"
    assert file_problem(fr, {"exit_code": 255}).kind == "died"


def test_died_before_and_after_the_plan(prove_v):
    out, _ = prove_v("d.t", 'die "Can\'t start nginx"; plan(tests => 2);\n')
    fr = parse_tap("d.t", out)
    assert fr.planned is None and file_problem(fr, {"exit_code": 1}).kind == "not_started"
    out, _ = prove_v("m.t", "plan(tests => 3); ok(1, 'a'); die 'connection refused';\n")
    fr = parse_tap("m.t", out)
    assert fr.planned == 3 and not fr.complete
    problem = file_problem(fr, {"exit_code": 1})
    assert problem.kind == "died" and "after 1 of 3" in problem.text


def test_tap_from_a_child_process_is_tampering(prove_v):
    # What a patched nginx started with the test's stdout can do: print the line it wants.
    out, _ = prove_v(
        "s.t",
        """plan(tests => 2);
ok(0, 'desc one');
system('echo "ok 1 - desc one"');
ok(1, 'two');
""",
    )
    assert "ok 1 - desc one" in out.splitlines()
    fr = parse_tap("s.t", out)
    assert fr.tampered and "printed twice" in fr.tampered[0]
    assert file_problem(fr, OK).kind == "tampered"


def test_spoofed_lines_ahead_of_the_real_ones_are_tampering(prove_v):
    # The spoofer prints first: the test's own lines then come out of sequence.
    out, _ = prove_v(
        "e.t",
        """system('printf "1..2\\nok 1 - a\\nok 2 - b\\n"');
plan(tests => 2); ok(0, 'a'); ok(0, 'b');
""",
    )
    fr = parse_tap("e.t", out)
    assert any("second plan" in t for t in fr.tampered)
    assert any("printed twice" in t for t in fr.tampered)


def test_numbers_past_the_plan_and_out_of_sequence_are_tampering(prove_v):
    out, _ = prove_v(
        "p.t",
        """plan(tests => 1);
ok(1, 'only');
system('echo "ok 2 - extra"');
""",
    )
    assert any("past the plan" in t for t in parse_tap("p.t", out).tampered)
    out, _ = prove_v(
        "q.t",
        """plan(tests => 3);
system('echo "ok 2 - jump"');
ok(1, 'a'); ok(1, 'b'); ok(1, 'c');
""",
    )
    assert any("out of sequence" in t for t in parse_tap("q.t", out).tampered)


def test_a_killed_prove_asks_the_base_and_a_missing_file_is_the_environment(prove_v):
    out, _ = prove_v("k.t", "plan(tests => 1); ok(1, 'a');\n")
    fr = parse_tap("k.t", out)
    # Killed by a signal: whose fault it is, the base build's run of the file decides.
    problem = file_problem(fr, {"exit_code": -11, "timed_out": False})
    assert (problem.kind, problem.text) == ("killed", "prove was killed by signal 11")
    assert needs_reference(fr, {"exit_code": -11, "timed_out": False}, ["k.t:1 a"])
    assert file_problem(parse_tap("x.t", ""), {"missing": True}).kind == "env"
    # At the time limit what was printed counts: no problem, the rest simply fails.
    out, _ = prove_v("t.t", "plan(tests => 3); ok(1, 'a'); kill 'KILL', $$;\n")
    fr = parse_tap("t.t", out)
    assert fr.results == {"t.t:1 a": True} and not fr.complete
    assert file_problem(fr, {"exit_code": None, "timed_out": True}) is None


def test_a_test_file_killed_by_a_signal_died_even_after_its_last_assertion(prove_v):
    # Another process could have written the whole stream before killing the file: prove fails
    # such a file ("Non-zero wait status"), and so does the grade.
    out, code = prove_v("w.t", "plan(tests => 2); ok(1, 'a'); ok(1, 'b'); kill 'KILL', $$;\n")
    assert code != 0 and "Wstat: 9" in out
    fr = parse_tap("w.t", out)
    assert fr.complete and fr.signal == 9
    problem = file_problem(fr, OK | {"exit_code": code})
    assert (problem.kind, problem.text) == ("died", "killed by signal 9 after 2 of 2 assertions")
    assert needs_reference(fr, {"exit_code": code, "timed_out": False}, ["w.t:1 a"])
    out, _ = prove_v("d.t", "ok(1, 'a'); kill 'KILL', $$;\n")
    problem = file_problem(parse_tap("d.t", out), OK | {"exit_code": 1})
    assert problem.text == "killed by signal 9 after 1 assertions, before its plan"
