//! `cg`: the NAS CG exchange pattern on an `nprows x npcols` grid (n a power of two).
//!
//! Per iteration and rank: compute 300 µs; `conj_grad { for each k < log2(npcols): Irecv
//! from and Send to the row partner p XOR 2^k (tag k, [`row_bytes`]), Wait; then, off the
//! diagonal, Irecv from and Send to the transpose partner (tag 100, [`transpose_bytes`]),
//! Wait; then an Allreduce of 8 bytes on the rank's row communicator }`, then `norm {
//! Allreduce of 16 bytes on C1 }`. Row communicators are declared in the header as ids
//! 1..=nprows, named `C2`, `C3`, …, with the row's world ranks in column order.

use super::engine::{Collective, Gen};
use super::topo::CgGrid;
use super::Program;
use crate::error::Result;
use crate::model::{Communicator, OpKind, Rank, RequestId, StrId, Time};

/// Rows of the NPB class A matrix.
const NA: u64 = 14_000;
/// Tag of the transpose exchange.
pub(crate) const TRANSPOSE_TAG: i32 = 100;
const COMPUTE: Time = 300_000;

/// Bytes of a row-reduction message: the rank's slice of the vector (`NA / nprows` doubles).
pub(crate) fn row_bytes(n: u32) -> u64 {
    8 * (NA / u64::from(CgGrid::new(n).nprows))
}

/// Bytes of a transpose message (`NA / npcols` doubles).
pub(crate) fn transpose_bytes(n: u32) -> u64 {
    8 * (NA / u64::from(CgGrid::new(n).npcols))
}

pub(crate) struct Cg {
    n: u32,
    grid: CgGrid,
    requests: Vec<RequestId>,
    sent: Vec<Time>,
    rows: Vec<Vec<u32>>,
    conj_grad: StrId,
    norm: StrId,
    double: StrId,
}

impl Cg {
    pub(crate) fn new(n: u32) -> Cg {
        let grid = CgGrid::new(n);
        let rows = (0..grid.nprows)
            .map(|r| (r * grid.npcols..(r + 1) * grid.npcols).collect())
            .collect();
        Cg {
            n,
            grid,
            requests: vec![0; n as usize],
            sent: vec![0; n as usize],
            rows,
            conj_grad: 0,
            norm: 0,
            double: 0,
        }
    }

    /// Irecv from and Send to `partner(p)` for every p that has one, then the Waits.
    fn exchange(
        &mut self,
        g: &mut Gen<'_>,
        tag: i32,
        bytes: u64,
        partner: impl Fn(u32) -> Option<u32>,
    ) -> Result<()> {
        for p in 0..self.n {
            if let Some(q) = partner(p) {
                self.requests[p as usize] = g.irecv(p, q, tag, bytes, self.double)?;
                self.sent[p as usize] = g.send(p, q, tag, bytes, self.double)?;
            }
        }
        for p in 0..self.n {
            if let Some(q) = partner(p) {
                let ready = Gen::arrival(self.sent[q as usize], bytes);
                g.wait(p, &[self.requests[p as usize]], ready)?;
            }
        }
        Ok(())
    }
}

impl Program for Cg {
    fn topology(&self) -> String {
        format!("{}x{} process grid", self.grid.nprows, self.grid.npcols)
    }

    fn communicators(&self, perm: &[Rank]) -> Vec<Communicator> {
        self.rows
            .iter()
            .enumerate()
            .map(|(r, members)| Communicator {
                id: 1 + r as u32,
                name: format!("C{}", 2 + r),
                members: members.iter().map(|&p| perm[p as usize]).collect(),
            })
            .collect()
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        self.conj_grad = g.intern("conj_grad")?;
        self.norm = g.intern("norm")?;
        self.double = g.intern("MPI_DOUBLE")?;
        Ok(())
    }

    fn iteration(&mut self, g: &mut Gen<'_>, _i: u32) -> Result<()> {
        let grid = self.grid;
        for p in 0..self.n {
            g.compute(p, COMPUTE);
            g.enter(p, self.conj_grad)?;
        }
        let row = row_bytes(self.n);
        for k in 0..grid.row_steps() {
            self.exchange(g, k as i32, row, |p| Some(grid.row_partner(p, k)))?;
        }
        let transpose = transpose_bytes(self.n);
        self.exchange(g, TRANSPOSE_TAG, transpose, |p| grid.transpose_partner(p))?;
        for (r, members) in self.rows.iter().enumerate() {
            g.collective(&Collective {
                kind: OpKind::Allreduce,
                comm: 1 + r as u32,
                members,
                root: None,
                datatype: self.double,
                sizes: &|_| (8, 8),
            })?;
        }
        g.leave_all(self.conj_grad)?;
        g.world_allreduce(self.norm, self.double, 16)
    }
}
