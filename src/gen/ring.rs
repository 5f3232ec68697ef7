//! `ring`: blocking Send/Recv around a ring plus an Allreduce.
//!
//! Per iteration and rank: compute 100 µs; `exchange { even positions: Send right, Recv
//! left; odd positions: Recv left, Send right }` (deadlock-free for any n >= 2) with
//! [`RING_BYTES`] of MPI_DOUBLE and tag 0; then `reduce { Allreduce of 8 bytes on C1 }`.

use super::engine::Gen;
use super::Program;
use crate::error::Result;
use crate::model::{StrId, Time};

/// Bytes of a ring message (1,024 doubles).
pub(crate) const RING_BYTES: u64 = 8_192;
/// Bytes of the Allreduce.
pub(crate) const REDUCE_BYTES: u64 = 8;
const COMPUTE: Time = 100_000;

pub(crate) struct Ring {
    n: u32,
    sent: Vec<Time>,
    exchange: StrId,
    reduce: StrId,
    double: StrId,
}

impl Ring {
    pub(crate) fn new(n: u32) -> Ring {
        Ring {
            n,
            sent: vec![0; n as usize],
            exchange: 0,
            reduce: 0,
            double: 0,
        }
    }

    fn right(&self, p: u32) -> u32 {
        (p + 1) % self.n
    }

    fn left(&self, p: u32) -> u32 {
        (p + self.n - 1) % self.n
    }
}

impl Program for Ring {
    fn topology(&self) -> String {
        format!("ring of {}", self.n)
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        self.exchange = g.intern("exchange")?;
        self.reduce = g.intern("reduce")?;
        self.double = g.intern("MPI_DOUBLE")?;
        Ok(())
    }

    fn iteration(&mut self, g: &mut Gen<'_>, _i: u32) -> Result<()> {
        let n = self.n;
        // Even positions send first.
        for p in (0..n).step_by(2) {
            g.compute(p, COMPUTE);
            g.enter(p, self.exchange)?;
            self.sent[p as usize] = g.send(p, self.right(p), 0, RING_BYTES, self.double)?;
        }
        // Odd positions receive from their (even) left neighbour, then send.
        for p in (1..n).step_by(2) {
            g.compute(p, COMPUTE);
            g.enter(p, self.exchange)?;
            let left = self.left(p);
            g.recv(
                p,
                left,
                0,
                RING_BYTES,
                self.double,
                self.sent[left as usize],
            )?;
            self.sent[p as usize] = g.send(p, self.right(p), 0, RING_BYTES, self.double)?;
            g.leave(p, self.exchange)?;
        }
        // Even positions receive last.
        for p in (0..n).step_by(2) {
            let left = self.left(p);
            g.recv(
                p,
                left,
                0,
                RING_BYTES,
                self.double,
                self.sent[left as usize],
            )?;
            g.leave(p, self.exchange)?;
        }
        g.world_allreduce(self.reduce, self.double, REDUCE_BYTES)
    }
}
