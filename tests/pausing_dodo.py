"""dodo.py with a pause, for kill -9 tests (test_faults.py).

The first time the harness is about to write a file whose path matches the regular expression in
NGINX_EVAL_TEST_PAUSE_AT, this creates the file NGINX_EVAL_TEST_PAUSE_MARKER and sleeps: the test
waits for the marker and kills doit at a known point in the middle of a stage. Every stage writes
its outputs through nginx_eval.core.jsonio, so one hook reaches them all.
"""

import os
import re
import time
from pathlib import Path

from nginx_eval.cli import load_dodo
from nginx_eval.core import jsonio

PAUSE_AT = re.compile(os.environ["NGINX_EVAL_TEST_PAUSE_AT"])
MARKER = os.environ["NGINX_EVAL_TEST_PAUSE_MARKER"]
write_bytes = jsonio.write_bytes


def pausing_write_bytes(path, data, **options):
    if PAUSE_AT.search(str(path)) and not os.path.exists(MARKER):
        Path(MARKER).write_text(f"{path}\n")
        time.sleep(600)
    return write_bytes(path, data, **options)


jsonio.write_bytes = pausing_write_bytes
globals().update(load_dodo(Path(__file__).resolve().parent.parent))
