//! `alltoall`: FFT-like transposes.
//!
//! Per iteration and rank: compute 500 µs; `transpose { Alltoall on C1, [`BLOCK_BYTES`] per
//! pair, so each member sends and receives n blocks }`; `checksum { Allreduce of 16 bytes
//! on C1 }`.

use super::engine::Gen;
use super::Program;
use crate::error::Result;
use crate::model::{OpKind, StrId, Time};

/// Bytes each rank sends to each rank in an Alltoall (512 doubles).
pub(crate) const BLOCK_BYTES: u64 = 4_096;
/// Bytes of the checksum Allreduce (one double complex).
pub(crate) const CHECKSUM_BYTES: u64 = 16;
const COMPUTE: Time = 500_000;

pub(crate) struct Alltoall {
    n: u32,
    transpose: StrId,
    checksum: StrId,
    double: StrId,
}

impl Alltoall {
    pub(crate) fn new(n: u32) -> Alltoall {
        Alltoall {
            n,
            transpose: 0,
            checksum: 0,
            double: 0,
        }
    }
}

impl Program for Alltoall {
    fn topology(&self) -> String {
        format!("complete graph of {}", self.n)
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        self.transpose = g.intern("transpose")?;
        self.checksum = g.intern("checksum")?;
        self.double = g.intern("MPI_DOUBLE")?;
        Ok(())
    }

    fn iteration(&mut self, g: &mut Gen<'_>, _i: u32) -> Result<()> {
        for p in 0..self.n {
            g.compute(p, COMPUTE);
            g.enter(p, self.transpose)?;
        }
        let total = u64::from(self.n) * BLOCK_BYTES;
        g.world_collective(OpKind::Alltoall, None, self.double, &|_| (total, total))?;
        g.leave_all(self.transpose)?;
        g.world_allreduce(self.checksum, self.double, CHECKSUM_BYTES)
    }
}
