#!/usr/bin/env python3
"""Compare a run of the official MCP conformance suite with expected-failures.txt.

Usage: compare.py RESULTS_DIR EXPECTED_FAILURES_TXT SUITE_LOG

RESULTS_DIR holds the suite's `-o` output: one `server-<scenario>-<timestamp>/checks.json`
per scenario. SUITE_LOG is the suite's output: it says how many scenarios it ran and which of
them the requirement set runs without scoring (extensions, pending ones). A check is named `<scenario>:<check-id>`, as the suite's own baselines name it.
An id can occur several times in one scenario (a loop, one probe per method): its
occurrences collapse to one verdict, the most severe first (FAILURE, WARNING, SKIPPED, the
rest passed), as the suite collapses them.

The run fails (exit 1) when
  1. a check failed that the file does not list (a regression, or a gap to explain), or
  2. a listed check did not fail (it passed, warned, was skipped or is gone): the list must
     stay true, so a fix removes its line, or
  3. fewer scenarios left results than the suite said it ran (one crashed unreported).
Warnings (a SHOULD not met) and skipped checks are printed, never fatal: the suite itself
counts them as neither passed nor failed.
"""

import glob
import json
import os
import re
import sys

SEVERITY = {"FAILURE": 3, "WARNING": 2, "SKIPPED": 1}
DIR_RE = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")
RAN_RE = re.compile(r"^Running requirements \S+ \((?P<count>\d+) scenarios\)")
NOT_SCORED_RE = re.compile(r"^\s+\S+ (?P<scenario>\S+) \((?P<reason>[a-z-]+)\)$")


def read_suite_log(path):
    """(scenarios the suite said it ran, or None; {scenario: why it is not scored})."""
    ran = None
    not_scored = {}
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            match = RAN_RE.match(line)
            if match and ran is None:
                ran = int(match.group("count"))
            match = NOT_SCORED_RE.match(line)
            if match:
                not_scored[match.group("scenario")] = match.group("reason")
    return ran, not_scored


def load_expected(path):
    """`scenario:check-id  reason` lines; blank lines and `#` comments ignored."""
    expected = {}
    problems = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            key, _, reason = text.partition(" ")
            if ":" not in key or not reason.strip():
                problems.append(f"{path}:{number}: want `scenario:check-id  reason`, got {text!r}")
            elif key in expected:
                problems.append(f"{path}:{number}: {key} is listed twice")
            else:
                expected[key] = reason.strip()
    return expected, problems


def load_results(results_dir):
    """{scenario:check-id: (status, message)} with repeated ids collapsed, and the scenarios."""
    verdicts = {}
    scenarios = set()
    occurrences = {}
    for checks_file in sorted(glob.glob(os.path.join(results_dir, "server-*", "checks.json"))):
        match = DIR_RE.match(os.path.basename(os.path.dirname(checks_file)))
        if not match:
            continue
        scenario = match.group("scenario")
        scenarios.add(scenario)
        with open(checks_file, encoding="utf-8") as handle:
            checks = json.load(handle)
        for check in checks:
            key = f"{scenario}:{check['id']}"
            status = check.get("status", "")
            message = check.get("errorMessage") or (check.get("details") or {}).get("note") or ""
            occurrences[status] = occurrences.get(status, 0) + 1
            old = verdicts.get(key)
            if old is None or SEVERITY.get(status, 0) > SEVERITY.get(old[0], 0):
                verdicts[key] = (status, message)
    return verdicts, scenarios, occurrences


def main():
    results_dir, expected_path, suite_log = sys.argv[1], sys.argv[2], sys.argv[3]
    scenarios_run, not_scored = read_suite_log(suite_log)
    expected, problems = load_expected(expected_path)
    verdicts, scenarios, occurrences = load_results(results_dir)

    passed = sorted(k for k, (s, _) in verdicts.items() if SEVERITY.get(s, 0) == 0)
    failed = sorted(k for k, (s, _) in verdicts.items() if s == "FAILURE")
    warned = sorted(k for k, (s, _) in verdicts.items() if s == "WARNING")
    skipped = sorted(k for k, (s, _) in verdicts.items() if s == "SKIPPED")
    as_expected = [k for k in failed if k in expected]
    unexpected = [k for k in failed if k not in expected]
    stale = sorted(k for k in expected if verdicts.get(k, ("ABSENT",))[0] != "FAILURE")

    if scenarios_run is None:
        problems.append(f"{suite_log} does not say how many scenarios the suite ran")
    elif len(scenarios) < scenarios_run:
        problems.append(
            f"the suite ran {scenarios_run} scenarios but only {len(scenarios)} left results"
        )
    for key in unexpected:
        problems.append(f"UNEXPECTED FAILURE {key}: {verdicts[key][1]}")
    for key in stale:
        status = verdicts.get(key, ("ABSENT (not run)",))[0]
        problems.append(
            f"LISTED BUT {status} {key} (listed as: {expected[key]}): remove the line if uexec "
            "now passes it"
        )

    for key in warned:
        print(f"warning (SHOULD) {key}: {verdicts[key][1]}")
    for key in skipped:
        print(f"skipped {key}: {verdicts[key][1] or '(no reason given)'}")
    for problem in problems:
        print(problem)
    print(
        f"\n{len(scenarios)} scenarios, {len(verdicts)} distinct checks: {len(passed)} passed, "
        f"{len(as_expected)} failed as expected, {len(unexpected)} unexpected failures, "
        f"{len(stale)} listed but not failing; {len(warned)} warnings, {len(skipped)} skipped"
    )
    print(
        "as the suite counts them (every occurrence): "
        + ", ".join(f"{n} {s}" for s, n in sorted(occurrences.items()))
    )
    scored = {k for k in verdicts if k.partition(":")[0] not in not_scored}
    print(
        f"scored by the requirement set: {sum(k in scored for k in passed)} passed, "
        f"{sum(k in scored for k in as_expected)} failed as expected; not scored "
        f"({', '.join(sorted(set(not_scored.values())))}): "
        f"{sum(k not in scored for k in passed)} passed, "
        f"{sum(k not in scored for k in as_expected)} failed as expected"
    )
    # The plain closing line CI reads: failures are the ones the list does not explain.
    print(f"official: {len(passed)} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
