//! What the reference library's `otf2-print` says an OTF2 archive holds, computed from its
//! text output: the oracle of the OTF2 reader's tests on real archives (`tests/otf2_real.rs`,
//! `tests/eztrace.rs`). Nothing here uses mtfdb.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use mtfdb::Trace;

/// Whether `otf2-print` (Debian's otf2-tools) runs; says so when it does not.
pub fn available() -> bool {
    let ok = Command::new("otf2-print")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: otf2-print (Debian's otf2-tools) is not installed");
    }
    ok
}

/// Whether the official OTF2 library's Python writer (`pip install otf2`) is installed; says
/// so when it is not. The tests' archives are written with it.
pub fn writer_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import _otf2"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: the otf2 Python package (pip install otf2) is not installed");
    }
    ok
}

/// Runs the Python writer script `script` (a path under the repository) with `args`, and
/// returns its standard output; fails the test with the script's error if it fails.
pub fn write_with(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `otf2-print ARGS ANCHOR`'s standard output (its warnings go to standard error).
pub fn run(args: &[&str], anchor: &Path) -> String {
    let out = Command::new("otf2-print")
        .args(args)
        .arg(anchor)
        .output()
        .unwrap();
    assert!(out.status.success(), "otf2-print {anchor:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `<id>` references of a definition line's field, in order: `Members: "a" <3>, "b" <7>`.
pub fn refs(text: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>').map(|c| open + c) else {
            break;
        };
        if let Ok(id) = rest[open + 1..close].parse() {
            ids.push(id);
        }
        rest = &rest[close + 1..];
    }
    ids
}

/// The number after `key` on `line` (`Length: 64`).
fn number_after(line: &str, key: &str) -> u64 {
    line.split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// What `otf2-print` says an archive holds.
#[derive(Debug, Default)]
pub struct Oracle {
    /// (sender, receiver) world ranks -> (send records, bytes), from `MPI_SEND`/`MPI_ISEND`.
    pub sends: BTreeMap<(u32, u32), (u64, u64)>,
    /// (sender, receiver) world ranks -> receive records, from `MPI_RECV`/`MPI_IRECV`.
    pub receives: BTreeMap<(u32, u32), u64>,
    /// MPI region name -> number of entries (regions of the MPI paradigm, or named `MPI_…`
    /// as tracers that preload MPI, EZTrace, write them with the USER paradigm).
    pub calls: BTreeMap<String, u64>,
    /// Collective instances: for each communicator, its `MPI_COLLECTIVE_END` records divided
    /// by its number of members.
    pub collective_instances: u64,
    /// Locations in all.
    pub locations: usize,
    /// World ranks (members of the MPI locations group).
    pub ranks: usize,
}

impl Oracle {
    /// Every send record in all.
    pub fn send_records(&self) -> u64 {
        self.sends.values().map(|s| s.0).sum()
    }

    /// Every receive record in all.
    pub fn receive_records(&self) -> u64 {
        self.receives.values().sum()
    }
}

/// Whether a definition line says paradigm MPI.
fn mpi_paradigm(line: &str) -> bool {
    line.contains("Paradigm: MPI,") || line.contains("Paradigm: \"MPI\"")
}

/// Reads `anchor` with `otf2-print` (definitions, then events).
pub fn oracle(anchor: &Path) -> Oracle {
    let defs = run(&["-G"], anchor);
    let mut o = Oracle::default();
    // World rank of each MPI location: its position in the MPI COMM_LOCATIONS group with the
    // smallest id (Score-P's and EZTrace's MPI_COMM_WORLD).
    let mut world: Option<(u64, Vec<u64>)> = None;
    let mut mpi_regions: BTreeMap<u64, String> = BTreeMap::new();
    // Members of each MPI group a communicator can name (COMM_GROUP, COMM_SELF).
    let mut group_size: BTreeMap<u64, u64> = BTreeMap::new();
    let mut comm_group: BTreeMap<u64, u64> = BTreeMap::new();
    for line in defs.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("LOCATION") => o.locations += 1,
            Some("GROUP") => {
                let id: u64 = f.next().unwrap().parse().unwrap();
                if !mpi_paradigm(line) {
                    continue;
                }
                let members = line.split("Member").nth(1).unwrap_or("");
                if line.contains("Type: COMM_LOCATIONS,") {
                    let ids = refs(members.split_once(':').map_or("", |m| m.1));
                    if !ids.is_empty() && world.as_ref().is_none_or(|(w, _)| id < *w) {
                        world = Some((id, ids));
                    }
                } else if line.contains("Type: COMM_SELF,") {
                    group_size.insert(id, 1);
                } else if line.contains("Type: COMM_GROUP,") {
                    // "… Flags: NONE, 8 Members: …" or "1 Member: …"; "0 Members" has none.
                    let before = line.split(" Member").next().unwrap();
                    let n: u64 = before
                        .rsplit(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    group_size.insert(id, n);
                }
            }
            Some("COMM") => {
                let id: u64 = f.next().unwrap().parse().unwrap();
                if let Some(group) = line.split("Group:").nth(1) {
                    if let Some(&g) = refs(group.split(',').next().unwrap()).first() {
                        comm_group.insert(id, g);
                    }
                }
            }
            Some("REGION") => {
                let id: u64 = f.next().unwrap().parse().unwrap();
                let name = line.split('"').nth(1).unwrap().to_string();
                let user = line.contains("Paradigm: USER,") || line.contains("Paradigm: UNKNOWN,");
                if mpi_paradigm(line) || (user && name.starts_with("MPI_")) {
                    mpi_regions.insert(id, name);
                }
            }
            _ => {}
        }
    }
    let rank_of: BTreeMap<u64, u32> = world
        .map(|(_, ids)| {
            ids.into_iter()
                .enumerate()
                .map(|(r, l)| (l, r as u32))
                .collect()
        })
        .unwrap_or_default();
    o.ranks = rank_of.len();
    let mut collective_ends: BTreeMap<u64, u64> = BTreeMap::new();
    // The regions each location is in: a send or receive request recorded inside a call of
    // another kind (MPI_Start, MPI_Startall) is an operation of its own.
    let mut open: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let started = |o: &mut Oracle, open: &BTreeMap<u64, Vec<String>>, location, call: &str| {
        let inside = open
            .get(&location)
            .and_then(|s| s.last())
            .map_or(String::new(), |n| n.to_ascii_lowercase());
        let sends = inside.starts_with("mpi_") && inside.contains("send");
        let receives = inside.ends_with("recv") || inside.starts_with("mpi_sendrecv");
        let own = if call == "MPI_Irecv" { receives } else { sends };
        if !own {
            *o.calls.entry(call.to_string()).or_default() += 1;
        }
    };
    let events = run(&[], anchor);
    for line in events.lines() {
        let mut f = line.split_whitespace();
        let Some(kind) = f.next() else { continue };
        match kind {
            "MPI_SEND" | "MPI_ISEND" => {
                let location: u64 = f.next().unwrap().parse().unwrap();
                let receiver = line.split("Receiver:").nth(1).unwrap();
                let receiver_location = refs(receiver.split(')').next().unwrap())[0];
                let pair = (rank_of[&location], rank_of[&receiver_location]);
                let call = if kind == "MPI_SEND" {
                    "MPI_Send"
                } else {
                    "MPI_Isend"
                };
                started(&mut o, &open, location, call);
                let e = o.sends.entry(pair).or_default();
                e.0 += 1;
                e.1 += number_after(line, "Length: ");
            }
            "MPI_RECV" | "MPI_IRECV" => {
                let location: u64 = f.next().unwrap().parse().unwrap();
                let sender = line.split("Sender:").nth(1).unwrap();
                // A wildcard receive never resolved names no sender location.
                if let Some(&sender_location) = refs(sender.split(')').next().unwrap()).first() {
                    let pair = (rank_of[&sender_location], rank_of[&location]);
                    *o.receives.entry(pair).or_default() += 1;
                }
            }
            "MPI_IRECV_REQUEST" => {
                let location: u64 = f.next().unwrap().parse().unwrap();
                started(&mut o, &open, location, "MPI_Irecv");
            }
            "MPI_COLLECTIVE_END" => {
                let comm = refs(line.split("Communicator:").nth(1).unwrap())[0];
                *collective_ends.entry(comm).or_default() += 1;
            }
            "ENTER" => {
                let location: u64 = f.next().unwrap().parse().unwrap();
                let region = *refs(line.split("Region:").nth(1).unwrap()).last().unwrap();
                let name = mpi_regions.get(&region).cloned().unwrap_or_default();
                if !name.is_empty() {
                    *o.calls.entry(name.clone()).or_default() += 1;
                }
                open.entry(location).or_default().push(name);
            }
            "LEAVE" => {
                let location: u64 = f.next().unwrap().parse().unwrap();
                open.entry(location).or_default().pop();
            }
            _ => {}
        }
    }
    o.collective_instances = collective_ends
        .iter()
        .map(|(comm, ends)| {
            let members = comm_group
                .get(comm)
                .and_then(|g| group_size.get(g))
                .copied()
                .filter(|&n| n > 0)
                .unwrap_or(1);
            ends / members
        })
        .sum();
    o
}

/// A trace's sends, matched or not: (sender, receiver) world ranks -> (sends, bytes).
pub fn sends_of(trace: &Trace) -> BTreeMap<(u32, u32), (u64, u64)> {
    let mut sends: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
    for rank in 0..trace.header().processes.len() as u32 {
        for (_, op) in trace.process_operations(rank).unwrap() {
            if let (true, Some(dest)) = (op.kind.is_send(), op.dest) {
                let e = sends.entry((op.rank, dest)).or_default();
                e.0 += 1;
                e.1 += op.send_bytes;
            }
        }
    }
    sends
}

/// A trace's MPI calls by name (an MPI call kept by name because its records are missing is
/// counted under its name, as `otf2-print` counts its region).
pub fn calls_of(trace: &Trace) -> BTreeMap<String, u64> {
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for (kind, n) in &trace.summary().by_kind {
        *calls.entry(trace.kind_name(*kind)).or_default() += n;
    }
    calls
}

/// Checks `trace` against `expected`: every send per pair with its bytes, the MPI calls by
/// name, the collective instances, the ranks and locations; matched messages per pair equal
/// the sends where the archive records a receive for every send, and never exceed the
/// receive records.
pub fn assert_equals(trace: &Trace, expected: &Oracle, label: &str) {
    assert_eq!(sends_of(trace), expected.sends, "{label}: sends per pair");
    let matched: BTreeMap<(u32, u32), (u64, u64)> = trace
        .pairs()
        .iter()
        .map(|p| ((p.sender, p.receiver), (p.messages, p.bytes)))
        .collect();
    let complete = expected
        .sends
        .iter()
        .all(|(pair, s)| expected.receives.get(pair) == Some(&s.0))
        && expected.receives.len() == expected.sends.len();
    if complete {
        assert_eq!(matched, expected.sends, "{label}: messages per pair");
    } else {
        let messages: u64 = matched.values().map(|m| m.0).sum();
        assert!(
            messages <= expected.receive_records(),
            "{label}: {messages} messages matched from {} receive records",
            expected.receive_records()
        );
    }
    assert_eq!(
        calls_of(trace),
        expected.calls,
        "{label}: MPI calls by name"
    );
    assert_eq!(
        trace.summary().collective_instances,
        expected.collective_instances,
        "{label}: collective instances"
    );
    let header = trace.header();
    if expected.ranks > 0 {
        assert_eq!(header.processes.len(), expected.ranks, "{label}: ranks");
    }
    assert_eq!(
        header.processes.len() + header.locations.len(),
        expected.locations,
        "{label}: every location is a rank's main thread or listed"
    );
}

/// One call as `otf2-print` shows it: its location, region (by its canonical name, as mtfdb
/// names routines), Enter and Leave timestamps (ticks), and per counter the value the call
/// keeps, computed from the METRIC records at its Enter and Leave (a METRIC record belongs to
/// the Enter or Leave of its location at its timestamp): for an accumulated counter its value
/// at the Leave minus its value at the Enter, for an absolute or relative one its value at the
/// Leave; `None` where those samples are missing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CounterCall {
    pub location: u64,
    pub enter: u64,
    pub leave: u64,
    pub region: String,
    pub values: BTreeMap<String, Option<i64>>,
}

/// The values of a METRIC line, by counter name: `("PAPI_TOT_CYC" <0>; UINT64; 98850), …`
/// (an unsigned value past 2^63 wraps, as mtfdb keeps 64-bit signed values; a DOUBLE is
/// rounded).
fn metric_values(line: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for part in line.split('(').skip(1) {
        let name = part.split('"').nth(1).unwrap().to_string();
        let mut fields = part.split(';').skip(1).map(str::trim);
        let kind = fields.next().unwrap();
        let text = fields.next().unwrap().trim_end_matches([')', ',', ' ']);
        let value = match kind {
            "DOUBLE" | "FLOAT" => text.parse::<f64>().unwrap().round() as i64,
            k if k.starts_with("UINT") => text.parse::<u64>().unwrap() as i64,
            _ => text.parse::<i64>().unwrap(),
        };
        out.insert(name, value);
    }
    out
}

/// The counters `otf2-print -G` defines (METRIC_MEMBER), in id order: name and mode.
pub fn metric_members(anchor: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in run(&["-G"], anchor).lines() {
        if !line.starts_with("METRIC_MEMBER") {
            continue;
        }
        let name = line.split("Name: \"").nth(1).unwrap();
        let mode = line.split("Mode: ").nth(1).unwrap();
        out.push((
            name.split('"').next().unwrap().to_string(),
            mode.split(',').next().unwrap().to_string(),
        ));
    }
    out
}

/// Every call of the archive with the values it keeps of each counter (see [`CounterCall`]),
/// sorted. Counters with LAST or NEXT timing are not computed here (their samples must be
/// summed first).
pub fn counter_calls(anchor: &Path) -> Vec<CounterCall> {
    let members = metric_members(anchor);
    for (name, mode) in &members {
        assert!(
            mode.ends_with("_START") || mode.ends_with("_POINT"),
            "{name}: {mode} is not computed by this oracle"
        );
    }
    let mut canonical: BTreeMap<u64, String> = BTreeMap::new();
    for line in run(&["-G"], anchor).lines() {
        let mut f = line.split_whitespace();
        if f.next() == Some("REGION") {
            let id = f.next().unwrap().parse().unwrap();
            let name = match line.split("(Aka. \"").nth(1) {
                Some(aka) => aka,
                None => line.split("Name: \"").nth(1).unwrap(),
            };
            canonical.insert(id, name.split('"').next().unwrap().to_string());
        }
    }
    // Per location, per counter: its last sample (time, value).
    let mut last: BTreeMap<u64, BTreeMap<String, (u64, i64)>> = BTreeMap::new();
    // Per location, its open calls: (enter time, region, each counter's sample at entry).
    type OpenCall = (u64, String, BTreeMap<String, Option<i64>>);
    let mut open: BTreeMap<u64, Vec<OpenCall>> = BTreeMap::new();
    let mut calls = Vec::new();
    for line in run(&[], anchor).lines() {
        let mut f = line.split_whitespace();
        let Some(kind @ ("METRIC" | "ENTER" | "LEAVE")) = f.next() else {
            continue;
        };
        let location: u64 = f.next().unwrap().parse().unwrap();
        let time: u64 = f.next().unwrap().parse().unwrap();
        let samples = last.entry(location).or_default();
        if kind == "METRIC" {
            for (name, v) in metric_values(line) {
                samples.insert(name, (time, v));
            }
            continue;
        }
        // The samples at this event's time, per counter.
        let at: BTreeMap<String, Option<i64>> = members
            .iter()
            .map(|(name, _)| {
                let v = samples.get(name).filter(|(t, _)| *t == time).map(|s| s.1);
                (name.clone(), v)
            })
            .collect();
        if kind == "ENTER" {
            let id = *refs(line.split("Region:").nth(1).unwrap()).last().unwrap();
            open.entry(location)
                .or_default()
                .push((time, canonical[&id].clone(), at));
            continue;
        }
        let (enter, region, at_enter) = open.get_mut(&location).unwrap().pop().unwrap();
        let values = members
            .iter()
            .map(|(name, mode)| {
                let at_leave = at[name];
                let v = if mode.starts_with("ACCUMULATED") {
                    at_leave.zip(at_enter[name]).map(|(l, e)| l.wrapping_sub(e))
                } else {
                    at_leave
                };
                (name.clone(), v)
            })
            .collect();
        calls.push(CounterCall {
            location,
            enter,
            leave: time,
            region,
            values,
        });
    }
    calls.sort();
    calls
}
