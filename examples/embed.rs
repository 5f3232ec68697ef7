//! Embedding mtfdb in your own tool: open a database, import a trace, list what it holds.
//!
//! Run it with `cargo run --release --example embed [TRACE.mtf]`; without an argument it imports
//! the bundled 16-process stencil trace into a temporary database.

use mtfdb::model::OpKind;
use mtfdb::{Database, IndexDim};

fn main() -> Result<(), mtfdb::Error> {
    let trace_file = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/traces/stencil2d-16.mtf"
        )
        .to_string()
    });
    let dir = std::env::temp_dir().join(format!("mtfdb-embed-{}", std::process::id()));
    let db = Database::open(&dir)?;

    let info = db.import(&trace_file, Some("wrf16"))?;
    println!(
        "imported {:?}: {} processes, {} operations, {} messages ({} bytes)",
        info.name,
        info.processes,
        info.summary.operations,
        info.summary.messages,
        info.summary.message_bytes
    );

    for t in db.traces()? {
        println!("trace {} from {}", t.name, t.source);
    }

    let trace = db.trace("wrf16")?;
    for comm in &trace.header().communicators {
        println!(
            "communicator {} (id {}) has {} members",
            comm.name,
            comm.id,
            comm.members.len()
        );
    }
    // The bitmap indexes answer "which operations …" without reading any rows.
    let isends = trace.index(IndexDim::Kind, OpKind::Isend.code())?;
    let rank5 = trace.index(IndexDim::Process, 5)?;
    let rank5_isends = &isends & &rank5;
    println!(
        "rank 5 posted {} of the trace's {} MPI_Isend calls",
        rank5_isends.len(),
        isends.len()
    );
    // Then read just those rows.
    let total: u64 = trace
        .operations(&rank5_isends)?
        .iter()
        .map(|(_, op)| op.send_bytes)
        .sum();
    println!("rank 5 sent {total} bytes with MPI_Isend");

    // Messages are matched send/receive pairs.
    let to_rank5 = trace.messages()?.iter().filter(|m| m.receiver == 5).count();
    println!("rank 5 received {to_rank5} messages");

    drop(trace);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
