//! `bt`: the NAS BT/SP `copy_faces` exchange, a 6-point stencil on a 2D torus.
//!
//! Per iteration and rank: compute 1 ms; `copy_faces { Irecv from each of the 6 neighbours,
//! Isend to each, one Waitall over the 12 requests }` with [`BT_BYTES`] of MPI_DOUBLE per
//! message. Directions (Δrow, Δcol): 0 east (0,+1), 1 west (0,-1), 2 south (+1,0), 3 north
//! (-1,0), 4 south-west (+1,-1), 5 north-east (-1,+1); the tag of a message is its direction
//! of travel. On a 2x2 torus opposite directions reach the same rank (3 distinct partners,
//! two messages each per iteration); from 3x3 on every rank has 6 distinct partners.

use super::engine::{Gen, BYTES_PER_NS};
use super::topo::bt_neighbours;
use super::Program;
use crate::error::Result;
use crate::model::{RequestId, StrId, Time};

/// Bytes of a face message (480 doubles, as in the logicalization paper's Table 5).
pub(crate) const BT_BYTES: u64 = 3_840;
const COMPUTE: Time = 1_000_000;

pub(crate) struct Bt {
    side: u32,
    neighbours: Vec<[u32; 6]>,
    requests: Vec<[RequestId; 12]>,
    posted: Vec<[Time; 6]>,
    copy_faces: StrId,
    double: StrId,
}

impl Bt {
    pub(crate) fn new(side: u32) -> Bt {
        let n = side * side;
        Bt {
            side,
            neighbours: (0..n).map(|p| bt_neighbours(side, p)).collect(),
            requests: vec![[0; 12]; n as usize],
            posted: vec![[0; 6]; n as usize],
            copy_faces: 0,
            double: 0,
        }
    }
}

impl Program for Bt {
    fn topology(&self) -> String {
        format!("{}x{} torus", self.side, self.side)
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        self.copy_faces = g.intern("copy_faces")?;
        self.double = g.intern("MPI_DOUBLE")?;
        Ok(())
    }

    fn iteration(&mut self, g: &mut Gen<'_>, _i: u32) -> Result<()> {
        let n = g.ranks();
        for p in 0..n {
            let pi = p as usize;
            g.compute(p, COMPUTE);
            g.enter(p, self.copy_faces)?;
            for d in 0..6 {
                let q = self.neighbours[pi][d];
                self.requests[pi][d] = g.irecv(p, q, (d ^ 1) as i32, BT_BYTES, self.double)?;
            }
            for d in 0..6 {
                let q = self.neighbours[pi][d];
                let (req, at) = g.isend(p, q, d as i32, BT_BYTES, self.double)?;
                self.requests[pi][6 + d] = req;
                self.posted[pi][d] = at;
            }
        }
        for p in 0..n {
            let pi = p as usize;
            let mut ready = 0;
            for d in 0..6 {
                let q = self.neighbours[pi][d] as usize;
                ready = ready.max(Gen::arrival(self.posted[q][d ^ 1], BT_BYTES));
                ready = ready.max(self.posted[pi][d] + BT_BYTES / BYTES_PER_NS);
            }
            g.wait(p, &self.requests[pi], ready)?;
            g.leave(p, self.copy_faces)?;
        }
        g.pattern("copy_faces", n, 12);
        Ok(())
    }
}
