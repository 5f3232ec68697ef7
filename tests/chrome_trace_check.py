#!/usr/bin/env python3
"""An independent checker of the Chrome Trace Event format, for tests/chrome_export.rs.

Perfetto's own trace processor cannot run here (its Python package downloads the binary when
it starts, and the machines are offline), so this script checks a JSON trace against the
format's rules as the "Trace Event Format" document states them, written without reading
mtfdb's export:

- the file is a JSON object with a `traceEvents` array (the JSON object format);
- every event has a known phase `ph`, a `pid` and a `tid`; every event but metadata has a
  numeric `ts` (microseconds) and a `name`;
- complete events (`X`) have a numeric `dur` of zero or more;
- metadata events (`M`) are one of the format's names, with the `args` their name needs;
- flow events (`s`, `t`, `f`) have an `id` and a `cat`; each flow (category, id) has one
  start and one end, its events in time order (start no later than any step, steps in
  order, the end no earlier than the last); an `f` with `bp: "e"` binds to the slice that
  encloses it, any other flow event to the slice that encloses it too (`s`, `t`) or, for an
  `f` without `bp`, to the next slice: every flow event here must be bound to a slice of its
  own thread.

Prints one line per fault and a closing `N passed, N failed` line (checks of rules); exits 1
on any fault. Usage: chrome_trace_check.py FILE.json
"""

import bisect
import json
import sys

PHASES = set("BEXiIsCbnetfMPONDcR") | {"(", ")"}
METADATA = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}


def check(path):
    faults = []
    checks = 0

    def rule(ok, message):
        nonlocal checks
        checks += 1
        if not ok:
            faults.append(message)

    with open(path, encoding="utf-8") as f:
        root = json.load(f)
    rule(isinstance(root, dict), "the root is not an object")
    events = root.get("traceEvents") if isinstance(root, dict) else None
    rule(isinstance(events, list), "no traceEvents array")
    if not isinstance(events, list):
        return faults, checks
    slices = {}  # (pid, tid) -> [(start, end)]
    flows = {}  # (cat, id) -> [(ph, ts, pid, tid, bp)]
    number = (int, float)
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            rule(False, f"{where} is not an object")
            continue
        ph = e.get("ph")
        rule(ph in PHASES, f"{where}: unknown phase {ph!r}")
        rule(isinstance(e.get("pid"), int), f"{where}: no integer pid")
        rule(isinstance(e.get("tid"), int), f"{where}: no integer tid")
        rule(isinstance(e.get("name"), str), f"{where}: no name")
        if ph == "M":
            key = METADATA.get(e.get("name"))
            rule(key is not None, f"{where}: unknown metadata {e.get('name')!r}")
            args = e.get("args")
            rule(isinstance(args, dict) and key in args, f"{where}: metadata without args.{key}")
            continue
        ts = e.get("ts")
        rule(isinstance(ts, number) and not isinstance(ts, bool), f"{where}: no numeric ts")
        if not isinstance(ts, number):
            continue
        if ph == "X":
            dur = e.get("dur")
            ok = isinstance(dur, number) and dur >= 0
            rule(ok, f"{where}: a complete event without a dur of zero or more")
            if ok:
                slices.setdefault((e["pid"], e["tid"]), []).append((ts, ts + dur))
        elif ph in ("s", "t", "f"):
            rule("id" in e, f"{where}: a flow event without an id")
            rule(isinstance(e.get("cat"), str), f"{where}: a flow event without a cat")
            bp = e.get("bp")
            rule(bp in (None, "e"), f"{where}: bp {bp!r} is not e")
            key = (e.get("cat"), json.dumps(e.get("id")))
            flows.setdefault(key, []).append((ph, ts, e["pid"], e["tid"], bp))
    for key in slices:
        slices[key].sort()
    starts = {key: [s for s, _ in v] for key, v in slices.items()}
    # The latest end among the slices starting at or before each one: a slice is open at ts
    # when one starting at or before ts ends at or after it.
    reach = {}
    for key, v in slices.items():
        m, out = float("-inf"), []
        for _, end in v:
            m = max(m, end)
            out.append(m)
        reach[key] = out

    def encloses(pid, tid, ts):
        """Whether a slice of (pid, tid) is open at ts."""
        i = bisect.bisect_right(starts.get((pid, tid), []), ts)
        return i > 0 and reach[(pid, tid)][i - 1] >= ts

    def follows(pid, tid, ts):
        """Whether a slice of (pid, tid) starts at or after ts."""
        i = bisect.bisect_left(starts.get((pid, tid), []), ts)
        return i < len(starts.get((pid, tid), []))

    flows_checked = 0
    for (cat, fid), evs in flows.items():
        name = f"flow {cat} {fid}"
        s = [e for e in evs if e[0] == "s"]
        t = sorted((e for e in evs if e[0] == "t"), key=lambda e: e[1])
        f = [e for e in evs if e[0] == "f"]
        rule(len(s) == 1 and len(f) == 1, f"{name}: {len(s)} starts and {len(f)} ends")
        if len(s) != 1 or len(f) != 1:
            continue
        flows_checked += 1
        times = [s[0][1]] + [e[1] for e in t] + [f[0][1]]
        rule(
            all(a <= b for a, b in zip(times, times[1:])),
            f"{name}: ends before it starts ({times[0]} to {times[-1]} us)",
        )
        for ph, ts, pid, tid, bp in evs:
            if ph == "f" and bp != "e":
                rule(follows(pid, tid, ts), f"{name}: its end binds to no slice")
            else:
                rule(encloses(pid, tid, ts), f"{name}: its {ph} at {ts} is in no slice")
    print(f"{len(events)} events, {sum(len(v) for v in slices.values())} slices, "
          f"{flows_checked} flows")
    return faults, checks


def main():
    if len(sys.argv) != 2:
        print("usage: chrome_trace_check.py FILE.json", file=sys.stderr)
        return 2
    faults, checks = check(sys.argv[1])
    for fault in faults[:50]:
        print(fault)
    if len(faults) > 50:
        print(f"... and {len(faults) - 50} more")
    print(f"{checks - len(faults)} passed, {len(faults)} failed")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
