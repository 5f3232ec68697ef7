//! Helpers shared by the integration tests.

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
