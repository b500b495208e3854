"""SWE-bench Verified as a second benchmark: the official harness as this project meets it
(harness.py) and the stages that stand in for build, prove and grade (stage.py)."""
