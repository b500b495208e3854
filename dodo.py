"""doit entry point: `doit run nginx:raw run=NAME` (see nginx_eval/pipeline.py for the task names)."""

import os

from nginx_eval.cli import load_dodo

globals().update(load_dodo(os.path.dirname(os.path.abspath(__file__))))
