"""Reliability checks: GTP fuzzing, the kill test, soak runs, rules against GNU Go, regression files."""
