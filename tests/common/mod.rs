//! Helpers shared by the integration tests.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use mtfdb::gen::{generate, GenConfig, GroundTruth};
use mtfdb::Database;

/// Imports the trace `config` generates as `name`, straight from the generator, and returns
/// what the generator says the trace holds.
pub fn import_generated(db: &Database, config: &GenConfig, name: &str) -> GroundTruth {
    let mut truth = None;
    db.import_events(name, |sink| {
        truth = Some(generate(config, sink)?);
        Ok(())
    })
    .unwrap();
    truth.unwrap()
}

/// A database in a fresh temporary directory (kept while the `TempDir` lives).
pub fn temp_db() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// A fresh database holding the trace `config` generates, as `t`.
pub fn generated_db(config: &GenConfig) -> (tempfile::TempDir, Database) {
    let (dir, db) = temp_db();
    import_generated(&db, config, "t");
    (dir, db)
}

pub mod oracle;
