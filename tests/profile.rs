//! `SELECT PROFILE`: per routine (or call path) and rank, calls, inclusive, exclusive, MPI and
//! computation time. Checked to the nanosecond on a hand-made trace, against each rank's run
//! time (first event to last, read from the stored rows) on generated traces, and against
//! `otf2-print`'s Enter and Leave records on a real Score-P trace.

mod common;

use std::collections::BTreeMap;

use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::results::{ResultSet, Value};
use mtfdb::Trace;

/// A cell as an integer (ranks, times, counts).
fn int(r: &ResultSet, row: &[Value], column: &str) -> u64 {
    let i = r
        .column(column)
        .unwrap_or_else(|| panic!("no {column} in {:?}", r.columns));
    row[i].render().parse().unwrap()
}

fn text(r: &ResultSet, row: &[Value], column: &str) -> String {
    row[r.column(column).unwrap()].render()
}

/// Per (rank, routine): calls, inclusive, exclusive, MPI and computation time.
type Profile = BTreeMap<(u64, String), [u64; 5]>;

fn per_process(s: &mut Session, statement: &str) -> Profile {
    let r = s.run(statement).unwrap();
    let name = if r.column("routine").is_some() {
        "routine"
    } else {
        "call_path"
    };
    r.rows
        .iter()
        .map(|row| {
            (
                (int(&r, row, "rank"), text(&r, row, name)),
                [
                    int(&r, row, "calls"),
                    int(&r, row, "inclusive_ns"),
                    int(&r, row, "exclusive_ns"),
                    int(&r, row, "mpi_ns"),
                    int(&r, row, "computation_ns"),
                ],
            )
        })
        .collect()
}

/// Rank 0 calls `exchange` (a send) inside `main`, then a barrier; rank 1 has no routine.
const HAND_MADE: &str = "0 100 enter main\n\
    0 110 enter exchange\n\
    0 120 150 Send c=0 to=1 tag=7 b=1024 dt=MPI_BYTE\n\
    0 170 leave exchange\n\
    0 200 260 Barrier c=0\n\
    0 300 leave main\n\
    1 50 140 Recv c=0 from=0 rtag=7 rb=1024 dt=MPI_BYTE\n\
    1 180 260 Barrier c=0\n";

fn hand_made() -> (tempfile::TempDir, Session) {
    let (dir, db) = common::hand_made_db(2, "", HAND_MADE);
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    (dir, s)
}

#[test]
fn a_hand_made_trace_profiles_to_the_nanosecond() {
    let (_dir, mut s) = hand_made();
    let p = per_process(&mut s, "SELECT PROFILE PER PROCESS");
    let row = |rank: u64, name: &str| p[&(rank, name.to_string())];
    // Rank 0 runs 100 to 300: main holds it all; exchange 110-170 holds the send 120-150.
    assert_eq!(row(0, "(process)"), [1, 200, 0, 90, 0]);
    assert_eq!(row(0, "main"), [1, 200, 80, 90, 80]);
    assert_eq!(row(0, "exchange"), [1, 60, 30, 30, 30]);
    assert_eq!(row(0, "MPI_Send"), [1, 30, 30, 30, 0]);
    assert_eq!(row(0, "MPI_Barrier"), [1, 60, 60, 60, 0]);
    // Rank 1 has no routine: its MPI calls under the process, computation between them.
    assert_eq!(row(1, "(process)"), [1, 210, 40, 170, 40]);
    assert_eq!(row(1, "MPI_Recv"), [1, 90, 90, 90, 0]);
    assert_eq!(row(1, "MPI_Barrier"), [1, 80, 80, 80, 0]);
    assert_eq!(p.len(), 8, "{p:#?}");

    // Over all ranks: the same rows summed.
    let r = s.run("SELECT PROFILE").unwrap();
    let barrier = r
        .rows
        .iter()
        .find(|row| text(&r, row, "routine") == "MPI_Barrier")
        .unwrap();
    assert_eq!(int(&r, barrier, "calls"), 2);
    assert_eq!(int(&r, barrier, "exclusive_ns"), 140);
    assert_eq!(text(&r, &r.rows[0], "routine"), "(process)");
    assert_eq!(int(&r, &r.rows[0], "inclusive_ns"), 410);

    // By call path: the chain of calls from the outermost in.
    let p = per_process(&mut s, "SELECT PROFILE BY CALL PATH PER PROCESS");
    assert_eq!(
        p[&(0, "main > exchange > MPI_Send".to_string())],
        [1, 30, 30, 30, 0]
    );
    assert_eq!(
        p[&(0, "main > MPI_Barrier".to_string())],
        [1, 60, 60, 60, 0]
    );
    assert_eq!(p[&(1, "MPI_Barrier".to_string())], [1, 80, 80, 80, 0]);

    // FOR and BETWEEN TIME: rank 0 from 130 to 210 is the send's end, exchange, main,
    // and the barrier's start.
    let p = per_process(
        &mut s,
        "SELECT PROFILE PER PROCESS FOR PROCESS(0) BETWEEN TIME 130 ns AND 210 ns",
    );
    assert_eq!(p[&(0, "(process)".to_string())], [1, 80, 0, 30, 0]);
    assert_eq!(p[&(0, "main".to_string())], [1, 80, 30, 30, 30]);
    assert_eq!(p[&(0, "exchange".to_string())], [1, 40, 20, 20, 20]);
    assert_eq!(p[&(0, "MPI_Send".to_string())], [1, 20, 20, 20, 0]);
    assert_eq!(p[&(0, "MPI_Barrier".to_string())], [1, 10, 10, 10, 0]);
    assert!(p.keys().all(|k| k.0 == 0), "{p:#?}");
}

/// Each rank's first event and last, read from its stored operations and routine calls.
fn run_times(trace: &Trace) -> Vec<(u64, u64)> {
    let ranks = trace.header().processes.len();
    let mut spans = vec![(u64::MAX, 0u64); ranks];
    for (rank, span) in spans.iter_mut().enumerate() {
        for (_, op) in trace.process_operations(rank as u32).unwrap() {
            span.0 = span.0.min(op.start);
            span.1 = span.1.max(op.end);
        }
    }
    for c in trace.routine_calls().unwrap() {
        let span = &mut spans[c.rank as usize];
        span.0 = span.0.min(c.start);
        span.1 = span.1.max(c.end);
    }
    spans
}

/// Per rank: exclusive times sum to the run time, the process's inclusive time is it, and
/// the process's MPI time is the sum of the rank's MPI call durations.
fn assert_totals(s: &mut Session, trace: &Trace, what: &str) {
    let spans = run_times(trace);
    for by in ["", " BY CALL PATH"] {
        let p = per_process(s, &format!("SELECT PROFILE{by} PER PROCESS"));
        for (rank, &(first, last)) in spans.iter().enumerate() {
            let rank = rank as u64;
            let rows: Vec<&[u64; 5]> = p
                .iter()
                .filter(|((r, _), _)| *r == rank)
                .map(|(_, v)| v)
                .collect();
            let exclusive: u64 = rows.iter().map(|v| v[2]).sum();
            assert_eq!(exclusive, last - first, "{what}{by}: rank {rank}");
            let root = p[&(rank, "(process)".to_string())];
            assert_eq!(root[1], last - first, "{what}{by}: rank {rank}");
            let mpi: u64 = trace
                .process_operations(rank as u32)
                .unwrap()
                .iter()
                .map(|(_, op)| op.end - op.start)
                .sum();
            assert_eq!(root[3], mpi, "{what}{by}: rank {rank}");
            // Exclusive is computation or MPI, never both.
            let split: u64 = rows.iter().map(|v| v[4]).sum::<u64>()
                + p.iter()
                    .filter(|((r, _), _)| *r == rank)
                    .filter(|(_, v)| v[4] == 0 && v[1] == v[3])
                    .map(|(_, v)| v[2])
                    .sum::<u64>();
            assert_eq!(split, last - first, "{what}{by}: rank {rank}");
        }
    }
}

#[test]
fn profile_totals_equal_each_ranks_run_time_on_generated_traces() {
    for scenario in [Scenario::Stencil2d, Scenario::Cg, Scenario::Sweep] {
        let config = common::delayed_run(scenario);
        let (_dir, db) = common::generated_db(&config);
        let trace = db.trace("t").unwrap();
        assert!(trace.summary().routine_calls > 0, "{scenario}");
        let mut s = Session::new(db);
        s.run("USE TRACE t").unwrap();
        assert_totals(&mut s, &trace, &scenario.to_string());
        // `solve` holds every iteration: 12 calls on every rank.
        let p = per_process(&mut s, "SELECT PROFILE PER PROCESS");
        for rank in 0..16u64 {
            assert_eq!(p[&(rank, "solve".to_string())][0], 12, "{scenario}");
        }
    }
    // No routine calls at all: MPI calls under the process.
    let config = GenConfig::new(Scenario::Ring, 8, 5);
    let (_dir, db) = common::generated_db(&config);
    let trace = db.trace("t").unwrap();
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    assert_totals(&mut s, &trace, "ring");
}

/// Per location of an OTF2 trace: its first Enter or Leave to its last, and each region's
/// exclusive time, from `otf2-print`'s records (ticks turned into ns as the format's clock
/// properties say).
fn otf2_oracle(anchor: &std::path::Path) -> Option<BTreeMap<(u64, String), u64>> {
    let script = r#"
import re, subprocess, sys
defs = subprocess.run(["otf2-print", "-G", sys.argv[1]], capture_output=True, text=True).stdout
m = re.search(r"Ticks per Seconds: (\d+), Global Offset: (\d+)", defs)
tps, offset = int(m.group(1)), int(m.group(2))
# A region by its canonical name (the "Aka." one), as the import names routines.
canonical = {}
for d in re.finditer(r'REGION\s+(\d+)\s+Name: ".*?" <\d+> \(Aka\. "(.*?)" <\d+>\)', defs):
    canonical[d.group(1)] = d.group(2)
ns = lambda t: (t - offset) * 10**9 // tps
out = subprocess.run(["otf2-print", sys.argv[1]], capture_output=True, text=True).stdout
stacks, exclusive, span = {}, {}, {}
for line in out.splitlines():
    m = re.match(r'(ENTER|LEAVE)\s+(\d+)\s+(\d+)\s+Region: ".*" <(\d+)>', line)
    if not m:
        continue
    kind, loc, t, region = m.group(1), int(m.group(2)), ns(int(m.group(3))), canonical[m.group(4)]
    stack = stacks.setdefault(loc, [])
    first, last = span.get(loc, (t, t))
    span[loc] = (min(first, t), max(last, t))
    if stack:
        top, since = stack[-1]
        exclusive[(loc, top)] = exclusive.get((loc, top), 0) + t - since
    if kind == "ENTER":
        stack.append([region, t])
    else:
        stack.pop()
    if stack:
        stack[-1][1] = t
for (loc, region), v in sorted(exclusive.items()):
    print(loc, v, region, sep="\t")
for loc, (first, last) in sorted(span.items()):
    print(loc, last - first, "(run)", sep="\t")
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, anchor.to_str().unwrap()])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("skipped: otf2-print failed: {}", common::text(&out.stderr));
        return None;
    }
    Some(
        common::text(&out.stdout)
            .lines()
            .map(|line| {
                let mut f = line.splitn(3, '\t');
                let loc = f.next().unwrap().parse().unwrap();
                let v = f.next().unwrap().parse().unwrap();
                ((loc, f.next().unwrap().to_string()), v)
            })
            .collect(),
    )
}

#[test]
fn a_real_score_p_trace_profiles_as_otf2_print_records_it() {
    let anchor = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/traces/otf2/ping-pong/traces.otf2");
    if !anchor.exists() {
        eprintln!("skipped: {} is absent", anchor.display());
        return;
    }
    let Some(oracle) = otf2_oracle(&anchor) else {
        return;
    };
    let (_dir, db) = common::temp_db();
    db.import(&anchor, Some("t")).unwrap();
    let trace = db.trace("t").unwrap();
    assert!(trace.summary().routine_calls > 0);
    let mut s = Session::new(db);
    s.run("USE TRACE t").unwrap();
    assert_totals(&mut s, &trace, "ping-pong");
    let p = per_process(&mut s, "SELECT PROFILE PER PROCESS");
    // Locations 0 and 1 are ranks 0 and 1, each one thread.
    for ((loc, region), &want) in &oracle {
        if region == "(run)" {
            assert_eq!(p[&(*loc, "(process)".to_string())][1], want, "rank {loc}");
            continue;
        }
        let got = p
            .get(&(*loc, region.clone()))
            .unwrap_or_else(|| panic!("rank {loc}: no {region} in {p:#?}"));
        assert_eq!(got[2], want, "rank {loc}: {region}'s exclusive time");
    }
    // Every profile row other than the process is a region otf2-print saw.
    for ((rank, name), v) in &p {
        if name != "(process)" {
            assert!(oracle.contains_key(&(*rank, name.clone())), "{name}: {v:?}");
        }
    }
}

#[test]
fn profile_statements_explain_and_refuse_clearly() {
    let (_dir, mut s) = hand_made();
    let plan = s
        .run("EXPLAIN SELECT PROFILE BY CALL PATH FOR PROCESS(1)")
        .unwrap();
    let step = plan.column("plan").unwrap();
    let steps: Vec<String> = plan.rows.iter().map(|r| r[step].render()).collect();
    assert!(
        steps
            .iter()
            .any(|t| t.contains("call path") && t.contains("FOR PROCESS(1)")),
        "{steps:?}"
    );
    let e = s
        .run("SELECT PROFILE FOR PROCESS(7)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("process 7 is not in trace"), "{e}");
    let e = s.run("SELECT PROFILE BY PHASE").unwrap_err().to_string();
    assert!(e.contains("ROUTINE or CALL PATH"), "{e}");
}
