//! `mtfdb report` on a generated CG trace of 256 ranks and 2,000 iterations (8.6 M operations,
//! more than any chunk cache held): it finishes with every section answered. How long it takes
//! is measured by `cargo bench --bench waits` and written in docs/benchmarks.md, not here.

mod common;

use std::process::Command;

use mtfdb::gen::{GenConfig, Scenario};

#[test]
fn the_report_of_a_256_rank_2000_iteration_cg_run_finishes_with_every_section() {
    let (dir, db) = common::temp_db();
    let truth = common::import_generated(&db, &GenConfig::new(Scenario::Cg, 256, 2000), "cg");
    assert!(
        truth.operations > 8_000_000,
        "{} operations",
        truth.operations
    );
    drop(db);
    let html = dir.path().join("report.html");
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_mtfdb"))
        .arg("--db")
        .arg(dir.path().join("db"))
        .args(["report", "cg", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    let printed = common::succeeded(out);
    eprintln!("mtfdb report: {:.1} s", started.elapsed().as_secs_f64());
    assert!(printed.contains("wrote the report of \"cg\""), "{printed}");
    let page = std::fs::read_to_string(&html).unwrap();
    for section in [
        "Calls",
        "Communication matrix",
        "Phases and patterns",
        "Patterns",
        "Topology",
        "Wait states",
        "Top waits and their causes",
    ] {
        assert!(page.contains(&format!("<h2>{section}</h2>")), "{section}");
    }
    assert!(
        !page.contains("Not available"),
        "a section failed: {}",
        page.lines()
            .find(|l| l.contains("Not available"))
            .unwrap_or_default()
    );
}
