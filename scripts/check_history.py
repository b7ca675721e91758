#!/usr/bin/env python3
"""An independent checker of S1 and S4 on a history, for cross-checking.

Written from the two properties' definitions alone (scenarios/README.md,
`sim/src/scenario/names.rs`'s one-line texts), not from the project's
checkers, so that a bug in those shows up as a disagreement:

  S1 (lease-exclusion): no two clients believe they hold the lock at the
     same true instant.
  S4 (fenced-writes): storage never accepts a write from a holder older
     than one it already accepted.

A history is what `sim replay --history` and `sim chaos --history` print:
one JSON object per line (other lines are skipped), in the order recorded,
each with `at` (true time since the run began, {"secs", "nanos"}), a
`process` ("controller", "storage", {"client": N}, ...) and an `op`.

Belief. A client believes it holds from its `acquire-ok` until the first
of: the deadline it knows (`valid_until` of the grant, moved by each
`renewed`, and by `deadline` when its clock changed), its `lost`, its
`release-invoke` or its `guard-dropped`. A hold that is never ended
otherwise ends at its deadline. Two beliefs of different clients that share
an instant of positive length violate S1. Shared holds (a read-write lock's
readers) and semaphore permits are not exclusive: S1 does not apply to
those workloads (the project checks them with F1 and F2).

Age. A holder is older than another when its grant (`acquire-ok`) came
first. Storage's answers (`write-ok` recorded by the process "storage",
`accepted: true`) are read in order; an accepted write from a hold granted
before the hold of an earlier accepted write violates S4.

Usage:
  check_history.py [--workload KIND] HISTORY...   (a path, a .gz path, or -)
Prints one JSON object per history:
  {"history": PATH, "lease-exclusion": true|false|null, "fenced-writes": true|false,
   "witness": {...}}
where true means violated and null not applicable. Exit status 0.
"""

import argparse
import gzip
import json
import sys

EXCLUSIVE_WORKLOADS = {"plain", "fair"}


def seconds(at):
    """A recorded instant, in integer nanoseconds (exact comparisons)."""
    return at["secs"] * 1_000_000_000 + at["nanos"]


def client_of(process):
    if isinstance(process, dict) and "client" in process:
        return process["client"]
    return None


def read(path):
    if path == "-":
        lines = sys.stdin
    elif path.endswith(".gz"):
        lines = gzip.open(path, "rt", encoding="utf-8")
    else:
        lines = open(path, encoding="utf-8")
    entries = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            entries.append(json.loads(line))
    return entries


def beliefs(entries):
    """Each hold's belief: (lock, client, token, start, end, shared), in ns.

    A history that records several locks names each grant's lock (`lock`);
    one that does not holds one lock."""
    holds = {}  # token -> dict
    for entry in entries:
        client = client_of(entry["process"])
        if client is None:
            continue
        op, at = entry["op"], seconds(entry["at"])
        token = entry.get("token")
        if op == "acquire-ok":
            holds[token] = {
                "lock": entry.get("lock", ""),
                "client": client,
                "token": token,
                "start": at,
                "deadline": seconds(entry["valid_until"]),
                "ended": None,
                "shared": bool(entry.get("shared", False)),
            }
        elif token in holds:
            hold = holds[token]
            if op in ("renewed", "deadline") and hold["ended"] is None:
                hold["deadline"] = seconds(entry["valid_until"])
            elif op in ("lost", "release-invoke", "guard-dropped") and hold["ended"] is None:
                hold["ended"] = at
    result = []
    for hold in holds.values():
        end = hold["deadline"] if hold["ended"] is None else min(hold["ended"], hold["deadline"])
        result.append(
            (hold["lock"], hold["client"], hold["token"], hold["start"], end, hold["shared"])
        )
    return result


def lease_exclusion(entries):
    """The first overlap of two clients' exclusive beliefs in one lock, or None."""
    by_lock = {}
    for lock, client, token, start, end, shared in beliefs(entries):
        if not shared and end > start:
            by_lock.setdefault(lock, []).append((start, end, client, token))
    for lock in sorted(by_lock):
        # Sweep by start: keep the belief that reaches furthest; a later
        # belief of another client that starts before that end overlaps it.
        furthest = None
        for start, end, client, token in sorted(by_lock[lock]):
            if furthest is not None and start < furthest[1] and client != furthest[2]:
                return {
                    "lock": lock,
                    "clients": [furthest[2], client],
                    "tokens": [furthest[3], token],
                    "from_ns": start,
                    "to_ns": min(end, furthest[1]),
                }
            if furthest is None or end > furthest[1]:
                furthest = (start, end, client, token)
    return None


def fenced_writes(entries):
    """The first write accepted from a holder older than an accepted one."""
    granted = {}
    for entry in entries:
        if entry["op"] == "acquire-ok" and entry.get("token") not in granted:
            granted[entry["token"]] = seconds(entry["at"])
    newest = None  # (grant instant, token) of the youngest accepted holder
    for entry in entries:
        if entry["op"] != "write-ok" or entry["process"] != "storage" or not entry.get("accepted"):
            continue
        token = entry["token"]
        grant = granted.get(token)
        if grant is None:
            continue
        if newest is not None and grant < newest[0]:
            return {
                "accepted_at_ns": seconds(entry["at"]),
                "older": token,
                "after": newest[1],
            }
        if newest is None or grant > newest[0]:
            newest = (grant, token)
    return None


def check(path, workload):
    entries = read(path)
    s1 = lease_exclusion(entries) if workload in EXCLUSIVE_WORKLOADS else None
    s4 = fenced_writes(entries)
    return {
        "history": path,
        "lease-exclusion": (s1 is not None) if workload in EXCLUSIVE_WORKLOADS else None,
        "fenced-writes": s4 is not None,
        "witness": {"lease-exclusion": s1, "fenced-writes": s4},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workload",
        default="plain",
        choices=["plain", "fair", "read-write", "semaphore"],
        help="the scenario's [clients.workload] kind (default plain)",
    )
    parser.add_argument("histories", nargs="+")
    args = parser.parse_args()
    for path in args.histories:
        print(json.dumps(check(path, args.workload), sort_keys=True))


if __name__ == "__main__":
    main()
