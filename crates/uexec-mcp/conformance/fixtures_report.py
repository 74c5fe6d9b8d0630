#!/usr/bin/env python3
"""The verdict of fixtures.sh: the suite's tasks-* scenarios against conformance_fixtures.

Usage: fixtures_report.py RESULTS_DIR EXPECTED_FAILURES_TXT [--timed-out=A,B] SCENARIO...

RESULTS_DIR holds one `server-<scenario>-<timestamp>/checks.json` per scenario run (the
suite's `-o`); the checks are named and collapsed as compare.py does for official.sh (whose
reading of results and of the expected list this reuses). Prints a table, one row a scenario,
and exits 1 when
  1. a check failed that the file does not list,
  2. a listed check did not fail (it passes now: remove its line), or
  3. a scenario given left no results (it crashed or timed out), or
  4. a scenario was named in --timed-out (fixtures.sh stopped it at its time limit).
Skipped checks (the suite's own "pending") and warnings are counted, never fatal.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import SEVERITY, load_expected, load_results  # noqa: E402


def main():
    results_dir, expected_path, scenarios = sys.argv[1], sys.argv[2], sys.argv[3:]
    timed_out = []
    if scenarios and scenarios[0].startswith("--timed-out="):
        timed_out = [s for s in scenarios.pop(0).partition("=")[2].split(",") if s]
    expected, problems = load_expected(expected_path)
    problems += [f"{scenario} timed out" for scenario in timed_out]
    verdicts, ran, _ = load_results(results_dir)

    rows = []
    totals = {"passed": 0, "expected": 0, "unexpected": 0, "warned": 0, "skipped": 0}
    for scenario in scenarios:
        mine = {k: v for k, v in verdicts.items() if k.partition(":")[0] == scenario}
        count = {key: 0 for key in totals}
        for key, (status, message) in sorted(mine.items()):
            if SEVERITY.get(status, 0) == 0:
                count["passed"] += 1
            elif status == "FAILURE" and key in expected:
                count["expected"] += 1
            elif status == "FAILURE":
                count["unexpected"] += 1
                problems.append(f"UNEXPECTED FAILURE {key}: {message}")
            elif status == "WARNING":
                count["warned"] += 1
                print(f"warning (SHOULD) {key}: {message}")
            else:
                count["skipped"] += 1
                print(f"skipped {key}: {message or '(no reason given)'}")
        if scenario not in ran:
            verdict = "NO RESULTS"
            problems.append(f"{scenario} left no results (crashed or timed out)")
        elif count["unexpected"] or scenario in timed_out:
            verdict = "FAIL"
        elif not mine or count["skipped"] == len(mine):
            verdict = "skipped"
        else:
            verdict = "ok"
        rows.append((scenario, count, verdict))
        for key in totals:
            totals[key] += count[key]

    for key in sorted(expected):
        if verdicts.get(key, ("ABSENT",))[0] != "FAILURE":
            status = verdicts.get(key, ("ABSENT (not run)",))[0]
            problems.append(
                f"LISTED BUT {status} {key} (listed as: {expected[key]}): remove the line"
            )

    width = max(len(s) for s in scenarios + ["scenario"])
    header = ("passed", "expected", "unexpected", "warned", "skipped")
    print(f"\n{'scenario':<{width}}  " + "  ".join(f"{h:>10}" for h in header) + "  verdict")
    for scenario, count, verdict in rows:
        cells = "  ".join(f"{count[key]:>10}" for key in totals)
        print(f"{scenario:<{width}}  {cells}  {verdict}")
    cells = "  ".join(f"{totals[key]:>10}" for key in totals)
    print(f"{'total':<{width}}  {cells}")
    for problem in problems:
        print(problem)
    # The closing line CI reads: failures are the ones the list does not explain.
    print(f"fixtures: {totals['passed']} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
