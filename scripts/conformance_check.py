#!/usr/bin/env python3
"""Counts the official conformance suite's results and fails on what Sluice must not have.

Usage: conformance_check.py RESULTS_DIR LABEL [COUNTS_FILE]
Prints SUCCESS / WARNING / SKIPPED / FAILURE / INFO counts for the run (and for the `tasks-*`
extension scenarios apart), lists every non-passing check, and exits 1 when any scenario
outside `tasks-*` has a FAILURE or a WARNING, or when no scenario ran at all. With COUNTS_FILE,
writes the counts there, and to COUNTS_FILE.stdio the counts without the scenarios only an HTTP
transport can pass (`server-sse-polling`: a server ending its SSE stream mid-call, SEP-1699; over stdio
there is no stream to end), for comparing a stdio leg with an HTTP one.
"""
import collections
import glob
import json
import os
import re
import sys

results, label = sys.argv[1], sys.argv[2]
HTTP_ONLY = {"server-sse-polling"}
# A result directory is `server-<scenario>-<timestamp>`, the timestamp like 2026-12-01T22-03-20-475Z.
# Strip exactly that: splitting on "-20" would cut at any hour, minute or second that is 20.
STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


def scenario_of(directory):
    name = os.path.basename(directory)[len("server-"):]
    stripped = STAMP.sub("", name)
    if stripped == name:
        sys.exit(f"conformance_check.py: result directory {directory!r} has no timestamp to strip; "
                 "the suite changed how it names them, update STAMP")
    return stripped


# The case that used to go wrong: a scenario whose name and whose time are full of "-20".
assert scenario_of("r/server-server-sse-polling-2026-12-02T20-20-20-200Z") == "server-sse-polling"


core, tasks, transport_free = collections.Counter(), collections.Counter(), collections.Counter()
bad = []
files = sorted(glob.glob(os.path.join(results, "server-*", "checks.json")))
for path in files:
    scenario = scenario_of(os.path.dirname(path))
    is_tasks = scenario.startswith("tasks-")
    for check in json.load(open(path)):
        status = check.get("status", "?")
        (tasks if is_tasks else core)[status] += 1
        if not is_tasks and scenario not in HTTP_ONLY:
            transport_free[status] += 1
        if status not in ("SUCCESS", "INFO") and not is_tasks:
            bad.append(f"  {scenario}: {check.get('id')} {status}: {(check.get('errorMessage') or '')[:300]}")
fmt = lambda c: " ".join(f"{k}={c.get(k, 0)}" for k in ("SUCCESS", "WARNING", "SKIPPED", "FAILURE", "INFO"))
summary = f"scenarios={len(files)} outside tasks-*: {fmt(core)}"
print(f"conformance [{label}] {summary}")
if len(sys.argv) > 3:  # where to write the counts, for comparing two legs
    open(sys.argv[3], "w").write(summary + "\n")
    open(sys.argv[3] + ".stdio", "w").write(f"without {sorted(HTTP_ONLY)}: {fmt(transport_free)}\n")
if sum(tasks.values()):
    print(f"conformance [{label}] tasks-* extension (not scored): {fmt(tasks)}")
for line in bad:
    print(line)
failed = not files or core.get("FAILURE", 0) or core.get("WARNING", 0)
sys.exit(1 if failed else 0)
