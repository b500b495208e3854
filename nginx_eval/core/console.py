"""Lines that task actions print to the run's stdout.

doit runs tasks in threads (cli: par_type "thread"), and its reporter writes ".  <task>" lines to
the same stdout. ``print(text)`` makes two writes, the text and then the newline, so a reporter
line could land between them: "site: …/index.html.  site:fake/t1" and a lone newline, and a task
that ran reads as one that did not. ``say`` writes the whole line at once.
"""

import sys


def say(*lines: object) -> None:
    """Each of `lines` on stdout, all in one write."""
    if lines:
        sys.stdout.write("".join(f"{line}\n" for line in lines))


def say_to_the_run(*lines: str) -> None:
    """`say`, on the process's own stdout: while doit runs tasks in threads, sys.stdout is the
    capture of whichever task of verbosity < 2 started last, and a line written there from
    another task is lost."""
    out = sys.__stdout__
    if lines and out is not None:  # None: started without a stdout
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()
