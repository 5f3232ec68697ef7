//! Export to the MTF text format, through [`MtfWriter`]: the header (with the trace's
//! locations and its string table, so that names keep their ids), one line per operation and routine enter/leave in export order, then an
//! `anomaly` line for each anomaly the source recorded. What matching derives (messages,
//! links, instances, its anomalies) is left out: the import finds it again.

use std::io::Write;
use std::path::Path;

use super::{routine_event, Writer};
use crate::error::Result;
use crate::ingest::mtf_text::MtfWriter;
use crate::ingest::EventSink;
use crate::model::{
    Anomaly, CollectiveInstance, Message, OpPosition, Operation, RoutineCall, TraceHeader,
};

/// The MTF text [`Writer`].
pub(crate) struct TextWriter<W: Write> {
    out: MtfWriter<W>,
}

impl<W: Write> TextWriter<W> {
    pub(crate) fn new(out: W, name: &Path) -> TextWriter<W> {
        TextWriter {
            out: MtfWriter::with_name(out, name),
        }
    }
}

impl<W: Write> Writer for TextWriter<W> {
    fn header(&mut self, header: &TraceHeader, strings: &[String]) -> Result<()> {
        self.out.header(header)?;
        self.out.strings(strings)
    }

    fn operation(&mut self, op: &Operation, _at: OpPosition) -> Result<()> {
        self.out.operation(op)
    }

    fn routine(&mut self, call: &RoutineCall, enter: bool) -> Result<()> {
        self.out.routine(&routine_event(call, enter))
    }

    fn message(&mut self, _: &Message, _: OpPosition, _: OpPosition) -> Result<()> {
        Ok(())
    }

    fn request_link(&mut self, _: OpPosition, _: OpPosition) -> Result<()> {
        Ok(())
    }

    fn collective(&mut self, _: &CollectiveInstance, _: &[OpPosition]) -> Result<()> {
        Ok(())
    }

    fn anomaly(&mut self, a: &Anomaly, at: &[OpPosition], derived: bool) -> Result<()> {
        match (derived, at.is_empty()) {
            (true, _) => Ok(()),
            (false, true) => self.out.anomaly(a),
            (false, false) => self.out.anomaly_at(a, at),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.out.finish()
    }
}
