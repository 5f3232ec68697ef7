//! `mtfdb report`'s top waits (every kind, longest first), their causes (the delay costs)
//! and the units of its tables, on a real trace and on a generated one with a delay.

mod common;

use mtfdb::analysis::replay::network::NetworkModel;
use mtfdb::gen::{Delay, GenConfig, Scenario};
use mtfdb::model::{OpKind, Time};
use mtfdb::Session;

/// The cells of each row of the `n`-th table after `marker` in `html`, as text.
fn table_after(html: &str, marker: &str) -> Vec<Vec<String>> {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} absent"));
    let rest = &html[at..];
    let table = &rest[rest.find("<tbody>").unwrap()..rest.find("</tbody>").unwrap()];
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..];
                    text[..text.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

fn report_of(session: &mut Session, trace: &str) -> String {
    session.use_trace(trace).unwrap();
    mtfdb::export::report::report(session).unwrap()
}

/// CASITA's Jacobi (2 ranks): its longest wait is rank 1's at a barrier, 235 ms, which the
/// report once left out for listing late senders only. Computed here from the Barrier calls
/// themselves: a member waits from its entry until the last member's entry (Scalasca's Wait at
/// Barrier). The top waits list it first, with its unit, beside the delay cost that explains it.
#[test]
fn the_jacobi_barrier_wait_leads_the_top_waits_with_its_unit() {
    let anchor = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/traces/otf2/casita/2_jacobi_blame_cpu_015/traces.otf2");
    if !anchor.exists() {
        eprintln!("skipped: {} is absent", anchor.display());
        return;
    }
    let (_dir, db) = common::temp_db();
    db.import(&anchor, Some("jacobi")).unwrap();
    let trace = db.trace("jacobi").unwrap();
    // The longest barrier wait, from the barriers' entries and ends.
    let barriers: Vec<Vec<(Time, Time)>> = (0..2)
        .map(|r| {
            trace
                .process_operations(r)
                .unwrap()
                .into_iter()
                .filter(|(_, o)| o.kind == OpKind::Barrier)
                .map(|(_, o)| (o.start, o.end))
                .collect()
        })
        .collect();
    assert_eq!(barriers[0].len(), barriers[1].len());
    let (mut longest, mut who) = (0, 0);
    for k in 0..barriers[0].len() {
        let last = barriers[0][k].0.max(barriers[1][k].0);
        for (r, b) in barriers.iter().enumerate() {
            let wait = last.min(b[k].1).saturating_sub(b[k].0);
            if wait > longest {
                (longest, who) = (wait, r);
            }
        }
    }
    assert!(longest > 200_000_000, "{longest}");
    let mut session = Session::new(db);
    let html = report_of(&mut session, "jacobi");
    let top = table_after(&html, "The longest waits");
    assert_eq!(top[0][0], who.to_string(), "{top:?}");
    assert_eq!(top[0][1], "MPI_Barrier");
    assert_eq!(top[0][2], "wait at barrier");
    assert_eq!(top[0][4], mtfdb::units::duration(longest as f64), "{top:?}");
    assert!(top[0][4].ends_with(" ms"), "{top:?}");
    // Every kind together (its late senders, 46 us at most, come below these), sorted by the
    // exact waits the cells keep.
    let kinds: std::collections::BTreeSet<&str> = top.iter().map(|r| r[2].as_str()).collect();
    assert!(
        kinds.contains("wait at barrier") && kinds.contains("wait at NxN"),
        "{kinds:?}"
    );
    let at = html.find("The longest waits").unwrap();
    let at = at + html[at..].find("<tbody>").unwrap();
    let exact: Vec<f64> = html[at..html[at..].find("</tbody>").unwrap() + at]
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cell = row.split("<td").nth(5).unwrap();
            let v = &cell[cell.find("data-v=\"").unwrap() + 8..];
            v[..v.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(exact[0], longest as f64);
    assert!(exact.windows(2).all(|w| w[0] >= w[1]), "{exact:?}");
    // Its cause: a delay of the other rank, with its units.
    let causes = table_after(&html, "Their causes");
    assert_eq!(causes[0][0], (1 - who).to_string(), "{causes:?}");
    assert!(causes[0][3].ends_with("ms"), "{causes:?}");
    // No bare nanosecond count in the summary: its run time and bytes have units.
    let summary = table_after(&html, "<h2>Summary</h2>");
    let value = |what: &str| summary.iter().find(|r| r[0] == what).unwrap()[1].clone();
    assert!(value("run time").ends_with(" s") || value("run time").ends_with(" ms"));
    assert_eq!(value("message bytes"), mtfdb::units::bytes(32_752_000));
    // The calls table's summed durations read with units, exact in data-v.
    let calls = table_after(&html, "<h2>Calls</h2>");
    assert!(calls.iter().all(|r| r[2].ends_with('s')), "{calls:?}");
}

/// A generated ring with one delay (rank 3 computes 5 ms longer in iteration 2, on the
/// network model): the report's costliest cause is rank 3's computation, and its longest
/// waits are the waits it caused (5 ms, less jitter).
#[test]
fn the_top_cause_in_the_report_names_the_delayed_rank() {
    let config = GenConfig {
        delays: vec![Delay {
            rank: 3,
            iteration: 2,
            duration: 5_000_000,
        }],
        network: Some(NetworkModel::default()),
        ..GenConfig::new(Scenario::Ring, 8, 4)
    };
    let (_dir, db) = common::generated_db(&config);
    let mut session = Session::new(db);
    let html = report_of(&mut session, "t");
    let causes = table_after(&html, "Their causes");
    assert_eq!(causes[0][0], "3", "{causes:?}");
    assert_eq!(causes[0][1], "computation");
    assert_eq!(causes[0][2], "main/solve");
    let top = table_after(&html, "The longest waits");
    assert!(top[0][4].ends_with(" ms"), "{top:?}");
    assert!(html.contains("SELECT DELAY COSTS</code>"));
}
