#!/usr/bin/env bash
# Reads a load run's report.junit.xml with junitparser (a JUnit reader from PyPI, pinned) and
# checks what CI test reporters would show: the counts add up and, with --failed ID, that
# the test case of invariant ID is a failure.
#
# Usage: scripts/junit-check.sh REPORT_DIR/report.junit.xml [--failed I1] [--passed]
#   JUNIT_VENV   default target/junit-venv
set -euo pipefail
JUNITPARSER_VERSION=5.0.3
venv=${JUNIT_VENV:-target/junit-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import junitparser" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "junitparser==$JUNITPARSER_VERSION"
fi
"$venv/bin/python" - "$@" <<'PYEOF'
import sys
from junitparser import JUnitXml, Failure, Skipped

args = sys.argv[1:]
if not args:
    sys.exit("usage: junit-check.sh FILE [--failed ID] [--passed]")
path, rest = args[0], args[1:]
xml = JUnitXml.fromfile(path)
cases, failed = [], []
for suite in xml:
    for case in suite:
        cases.append(case)
        if any(isinstance(r, Failure) for r in case.result):
            failed.append(case)
print(f"{path}: {len(cases)} test cases, {len(failed)} failed")
for case in failed:
    print(f"  FAILED {case.classname} :: {case.name}")
if not cases:
    sys.exit("no test cases")
i = 0
while i < len(rest):
    if rest[i] == "--failed":
        want = rest[i + 1]
        i += 2
        if not any(c.name.split(" ")[0] == want for c in failed):
            sys.exit(f"expected the test case of {want} to be failed")
    elif rest[i] == "--passed":
        i += 1
        if failed:
            sys.exit("expected no failed test case")
    else:
        sys.exit(f"unknown option {rest[i]}")
PYEOF
