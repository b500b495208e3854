"""The task miner behind scripts/mine_tasks.py: it reads the histories of nginx and nginx-tests
(local git directories, offline) and proposes candidate tasks. Not a stage of the pipeline;
the candidates file it writes is validated by ``doit run <name>:validate``.

- ``topics``: topic words, and the nginx area of a test file's name or a commit's subject.
- ``suite_history``: reading the nginx-tests history (test signals, TODO guards, what a test uses).
- ``nginx_history``: reading the nginx history (code commits, release windows, what a commit adds).
- ``scoring``: scoring commits against a test signal, and pairing each fix with its best test.
- ``stubs``: writing the proposals as task stubs (a candidates file).
- ``testsuite``: what an nginx-tests file needs (configure flags, Perl modules, daemons) and which
  Debian package provides it; the doctor (checks/doctor.py) reads test files with it too.
- ``sweep``: the other way in (scripts/sweep_suite.py): one test tree run whole against nginx at
  two commits and stops between, each assertion that turned passing bisected to its commit.
"""
