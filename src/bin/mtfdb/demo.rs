//! `mtfdb demo`: the bundled example, imported into a fresh database, and the MTF paper's
//! example queries (its Figure 4) with the per-process statistics table, then the trace's
//! structure: a process's loop nest and the logical trace on the topology found.

use std::io::IsTerminal;
use std::path::PathBuf;

use mtfdb::query::Session;
use mtfdb::{Database, Error};

use crate::{emit, OutputFormat};

/// The bundled example: a 16-process stencil trace whose world communicator is `C1`.
const EXAMPLE: &str = include_str!("../../../examples/traces/stencil2d-16.mtf");

/// The five example queries of the MTF paper (Figure 4), the Table 6 statistics, then a
/// loop nest (P1) and the logical trace (P2).
pub const QUERIES: [(&str, &str); 8] = [
    (
        "retrieve all messages in communicator C1",
        "SELECT ALL MESSAGES IN COMM(C1) LIMIT 10",
    ),
    (
        "retrieve all messages between process 1 and process 2",
        "SELECT ALL MESSAGES BETWEEN PROCESS(1,2) IN COMM(C1) LIMIT 10",
    ),
    (
        "retrieve all point-to-point operations between process 1 and process 2",
        "SELECT POINT_TO_POINT_OPERATIONS BETWEEN PROCESS(1,2) IN COMM(C1) LIMIT 10",
    ),
    (
        "retrieve all collective operations among all processes in communicator C1",
        "SELECT COLLECTIVE_OPERATIONS AMONG ALL PROCESSES IN COMM(C1) LIMIT 10",
    ),
    (
        "retrieve all broadcasts that process 1 performed",
        "SELECT BROADCAST FOR PROCESS(1) IN COMM(C1) LIMIT 10",
    ),
    (
        "operation counts and bytes per process (the paper's Table 6)",
        "SELECT STATISTICS FOR ALL PROCESSES",
    ),
    (
        "process 5's events as nested loops, and its main loop in solve calls",
        "SELECT LOOPS FOR PROCESS(5)",
    ),
    (
        "the topology found, and one process's loops with its peers as directions",
        "SELECT LOGICAL TRACE",
    ),
];

/// Runs the demo; `db` is where to put the database (default: a new temporary directory).
pub fn run(db: Option<PathBuf>) -> Result<(), Error> {
    let dir = match db {
        Some(p) => p,
        None => std::env::temp_dir().join(format!("mtfdb-demo-{}", std::process::id())),
    };
    // A file of its own (created exclusively, removed when dropped): a fixed name in the
    // shared temporary folder could be a link someone else put there.
    let mut file = tempfile::Builder::new()
        .prefix("mtfdb-demo-")
        .suffix(".mtf")
        .tempfile()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    std::io::Write::write_all(&mut file, EXAMPLE.as_bytes())
        .map_err(|e| Error::io(file.path(), e))?;
    let database = Database::open(&dir)?;
    if database.trace("wrf16").is_err() {
        database.import(file.path(), Some("wrf16"))?;
    }
    drop(file);
    emit!(
        "database {} holds the example trace wrf16 (16 processes, world communicator C1)\n\n",
        dir.display()
    )?;
    let mut session = Session::new(database);
    session.set_cancel_flag(crate::cancel_flag());
    session.use_trace("wrf16")?;
    for (what, query) in QUERIES {
        emit!("-- {what}\n{query};\n")?;
        let result = session.run(query)?;
        emit!("{}\n", OutputFormat::Table.render(&result))?;
    }
    if std::io::stdin().is_terminal() {
        emit("Now try your own queries (.help lists examples, .quit leaves).\n")?;
        return crate::repl::run_session(session, false);
    }
    Ok(())
}
