//! The MTF text format, version 1: a compact, line-oriented carrier of the MTF metamodel.
//!
//! The grammar, with a complete example, is `grammar/mtf.ebnf`. In short:
//!
//! ```text
//! MTF 1
//! scenario "ring, 4 processes"          # declarations first
//! trace ring4
//! processor 0 node01
//! process 0 P0 on 0                     # rank, name, [on processor]
//! communicator 0 MPI_COMM_WORLD 0-3     # id, name, members (world ranks, in comm-rank order)
//! 0 100 enter main                      # rank[.thread] time enter|leave routine
//! 0 110 130 Isend c=0 to=1 tag=7 b=1024 dt=MPI_BYTE req=1
//! 0 131 190 Recv c=0 from=*3 rtag=7 rb=1024 dt=MPI_BYTE
//! 0 191 200 Wait done=1
//! 0 200 leave main
//! ```
//!
//! An operation line is `rank[.thread] start end call field…` with times in integer
//! nanoseconds. Fields: `c=` communicator, `to=` destination, `from=` source (`*` marks
//! `MPI_ANY_SOURCE`, optionally followed by the actual source), `tag=` send tag, `rtag=`
//! receive tag (`*` marks `MPI_ANY_TAG`), `b=` bytes sent, `rb=` bytes received, `dt=`
//! datatype, `root=` root, `req=` request created, `done=` requests completed (comma
//! separated), `flag=0` a Test/Iprobe that completed nothing, `rec=0` a call recorded
//! without its MPI records, `cap=1` a receive whose `rb=` is its buffer's capacity (a shorter
//! message is legal).
//!
//! What a foreign source found travels too: `string NAME` declares the string table in id
//! order, `location NAME KIND key=value…` a location that is not an MPI rank's main thread,
//! and `anomaly CLASS key=value…` an anomaly the source recorded, naming operations by their
//! position `rank[.thread]:index` ([`crate::ingest::EventSink::anomaly_at`]).
//!
//! [`parse_file`] / [`parse_reader`] stream a file into an [`crate::ingest::EventSink`],
//! validating it with [`crate::ingest::validate::Validator`]; [`MtfWriter`] is an
//! `EventSink` that writes the format, so that writing and parsing again is exact.

mod names;
mod parser;
mod writer;

pub use parser::{parse_file, parse_reader, parse_reader_with, ParseOptions, ParseStats};
pub use writer::MtfWriter;

/// The version of the format this module reads and writes.
pub const VERSION: u32 = 1;
