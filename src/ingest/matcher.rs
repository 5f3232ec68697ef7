//! Message, request and collective matching (interface placeholder until the matcher lands).
use crate::error::Result;
use crate::model::*;

/// Receives what the matcher finds.
pub trait MatchSink {
    /// A matched message.
    fn message(&mut self, m: &Message) -> Result<()>;
    /// A request link.
    fn request_link(&mut self, l: &RequestLink) -> Result<()>;
    /// A collective instance.
    fn collective(&mut self, c: &CollectiveInstance) -> Result<()>;
    /// An anomaly.
    fn anomaly(&mut self, a: &Anomaly) -> Result<()>;
}

/// The matcher.
pub struct Matcher;

impl Matcher {
    /// New.
    pub fn new(_h: &TraceHeader) -> Matcher {
        Matcher
    }
    /// One op.
    pub fn operation(&mut self, _id: OpId, _op: &Operation, _out: &mut impl MatchSink) -> Result<()> {
        Ok(())
    }
    /// Finish.
    pub fn finish(self, _out: &mut impl MatchSink) -> Result<()> {
        Ok(())
    }
}
