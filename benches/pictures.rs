//! Pictures: drawing against computing the result they draw, in the same run.
//!
//! - The communication matrix of a 16,384-rank `stencil2d` (two iterations). Baseline: the
//!   matrix's cells with traffic (`Session::matrix_cells`, what the heatmap draws). Then the
//!   heatmap of the same statement, whole (`svg::statement_svg`: the cells again, the blocks,
//!   the document).
//! - A timeline of every operation of a 64-rank `stencil2d` of about 1M operations (`SELECT
//!   OPERATIONS`). Baseline: the statement's result set (`Session::run`). Then its picture,
//!   whole (`statement_svg`: the rows through the cursor, the messages and collectives between
//!   them, the computation between the calls (`SELECT CPU BURSTS` of the same scope) and the
//!   routine calls around them, the boxes gathered per pixel, the document). Since #42 the
//!   picture reads the CPU bursts and routine calls too, so it costs more against the same
//!   baseline than before.
//!
//! Best of three runs of each; the ratio is the picture's time over the baseline's. The
//! databases are generated under `target/` (not committed). `MTFDB_BENCH_RANKS` and
//! `MTFDB_BENCH_OPERATIONS` change the matrix's ranks and the timeline's operations.
//!
//! `cargo bench --bench pictures`.

mod common;

use mtfdb::export::svg::statement_svg;
use mtfdb::gen::{iterations_for_events, GenConfig, Scenario};
use mtfdb::Session;

fn main() {
    let ranks = common::env_list("MTFDB_BENCH_RANKS", &[16_384u32])[0];
    let operations = common::env_list("MTFDB_BENCH_OPERATIONS", &[1_000_000u64])[0];
    println!(
        "pictures against their result sets, {} cores; best of 3",
        common::cores()
    );
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>8} {:>10}",
        "picture", "rows", "result s", "picture s", "x result", "svg bytes"
    );

    let dir = common::data_dir().join(format!("pictures-matrix-{ranks}"));
    let (db, _) = common::generated_db(
        &dir,
        "stencil",
        &GenConfig::new(Scenario::Stencil2d, ranks, 2),
    );
    let mut session = Session::new(db);
    let statement = "SELECT COMMUNICATION MATRIX";
    let (cells, result) = common::best(3, || session.matrix_cells(statement).unwrap());
    let (svg, picture) = common::best(3, || statement_svg(&mut session, statement).unwrap());
    report(
        &format!("matrix heatmap, {ranks} ranks"),
        cells.cells.len(),
        result,
        picture,
        svg.len(),
    );
    drop(session);

    // A stencil2d has two routine events for every three operations.
    let iterations = iterations_for_events(Scenario::Stencil2d, 64, operations * 5 / 3)
        .unwrap()
        .max(2);
    let dir = common::data_dir().join(format!("pictures-timeline-{operations}"));
    let (db, truth) = common::generated_db(
        &dir,
        "stencil",
        &GenConfig::new(Scenario::Stencil2d, 64, iterations),
    );
    let mut session = Session::new(db);
    let statement = "SELECT OPERATIONS";
    let (rows, result) = common::best(3, || session.run(statement).unwrap().len());
    assert_eq!(rows as u64, truth.operations);
    let (svg, picture) = common::best(3, || statement_svg(&mut session, statement).unwrap());
    report(
        &format!("timeline, 64 ranks, {rows} operations"),
        rows,
        result,
        picture,
        svg.len(),
    );
}

fn report(what: &str, rows: usize, result: f64, picture: f64, bytes: usize) {
    println!(
        "{what:<44} {rows:>10} {result:>10.3} {picture:>10.3} {:>8.2} {bytes:>10}",
        picture / result
    );
}
