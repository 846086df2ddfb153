"""The pass/fail tally of the client tests: check(condition, what) prints one line and records
it, report() prints the counts and gives the exit status. Python 3 standard library only."""

PASSED = []
FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    (PASSED if condition else FAILURES).append(what)
    return condition


def report(suffix=""):
    print(f"{len(PASSED)} passed, {len(FAILURES)} failed{suffix}")
    return 1 if FAILURES else 0
