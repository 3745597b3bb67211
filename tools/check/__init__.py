"""Reliability checks: GTP fuzzing, the kill test, soak runs, rules against GNU Go, regression files, and dead
stones and scores of finished games against a referee engine."""
