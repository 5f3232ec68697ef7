//! `stencil2d`: the WRF trace of the MTF thesis (Table 3.8), a halo exchange on a 2D mesh.
//!
//! Per iteration and rank: compute 2 ms; `exchange { Irecv from each mesh neighbour (east,
//! west, south, north order), Isend to each, a Wait per Irecv, then a Wait per Isend }`; then
//! `io { Bcast; Gather every 4th iteration; Scatterv every 8th }`, all rooted at rank 0 on C1.
//! East-west halos are [`EW_BYTES`], north-south halos [`NS_BYTES`] of MPI_FLOAT. The tag of
//! a message is its direction of travel (0 east, 1 west, 2 south, 3 north).

use super::engine::{bcast_sizes, Gen, BYTES_PER_NS};
use super::topo::Grid;
use super::Program;
use crate::error::Result;
use crate::model::{OpKind, RequestId, StrId, Time};

/// Bytes of an east-west halo message (15,360 floats).
pub(crate) const EW_BYTES: u64 = 61_440;
/// Bytes of a north-south halo message (20,480 floats).
pub(crate) const NS_BYTES: u64 = 81_920;
/// Bytes of the per-iteration Bcast.
pub(crate) const BCAST_BYTES: u64 = 1_024;
/// Bytes each member contributes to a Gather.
pub(crate) const GATHER_BYTES: u64 = 4_096;
/// The io round holds a Gather every this many iterations…
const GATHER_EVERY: u32 = 4;
/// …and a Scatterv every this many (a multiple of [`GATHER_EVERY`]).
const SCATTERV_EVERY: u32 = 8;
/// Compute time per iteration (ns).
const COMPUTE: Time = 2_000_000;

/// Bytes rank `local` of C1 receives in a Scatterv: 256, 320, 384 or 448 floats.
pub(crate) fn scatterv_bytes(local: u32) -> u64 {
    4 * (256 + 64 * u64::from(local % 4))
}

fn halo_bytes(direction: usize) -> u64 {
    if direction < 2 {
        EW_BYTES
    } else {
        NS_BYTES
    }
}

pub(crate) struct Stencil2d {
    grid: Grid,
    neighbours: Vec<[Option<u32>; 4]>,
    recv_requests: Vec<[RequestId; 4]>,
    send_requests: Vec<[RequestId; 4]>,
    posted: Vec<[Time; 4]>,
    /// Events of the rank with the fewest mesh neighbours in one halo exchange (an Irecv
    /// and an Isend per neighbour).
    halo_min_events: u32,
    exchange: StrId,
    io: StrId,
    float: StrId,
}

impl Stencil2d {
    pub(crate) fn new(n: u32) -> Stencil2d {
        let grid = Grid::most_square(n);
        Stencil2d {
            grid,
            neighbours: (0..n).map(|p| grid.mesh_neighbours(p)).collect(),
            recv_requests: vec![[0; 4]; n as usize],
            send_requests: vec![[0; 4]; n as usize],
            posted: vec![[0; 4]; n as usize],
            halo_min_events: 2 * grid.fewest_mesh_neighbours(),
            exchange: 0,
            io: 0,
            float: 0,
        }
    }
}

impl Program for Stencil2d {
    fn topology(&self) -> String {
        self.grid.describe("grid")
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        self.exchange = g.intern("exchange")?;
        self.io = g.intern("io")?;
        self.float = g.intern("MPI_FLOAT")?;
        Ok(())
    }

    fn period(&self) -> u32 {
        SCATTERV_EVERY
    }

    fn iteration(&mut self, g: &mut Gen<'_>, i: u32) -> Result<()> {
        let n = g.ranks();
        for p in 0..n {
            let pi = p as usize;
            g.compute(p, COMPUTE);
            g.enter(p, self.exchange)?;
            for d in 0..4 {
                if let Some(q) = self.neighbours[pi][d] {
                    let tag = (d ^ 1) as i32;
                    self.recv_requests[pi][d] = g.irecv(p, q, tag, halo_bytes(d), self.float)?;
                }
            }
            for d in 0..4 {
                if let Some(q) = self.neighbours[pi][d] {
                    let (req, at) = g.isend(p, q, d as i32, halo_bytes(d), self.float)?;
                    self.send_requests[pi][d] = req;
                    self.posted[pi][d] = at;
                }
            }
        }
        for p in 0..n {
            let pi = p as usize;
            for d in 0..4 {
                if let Some(q) = self.neighbours[pi][d] {
                    let sent = self.posted[q as usize][d ^ 1];
                    let ready = Gen::arrival(sent, halo_bytes(d));
                    g.wait(p, &[self.recv_requests[pi][d]], ready)?;
                }
            }
            for d in 0..4 {
                if self.neighbours[pi][d].is_some() {
                    let ready = self.posted[pi][d] + halo_bytes(d) / BYTES_PER_NS;
                    g.wait(p, &[self.send_requests[pi][d]], ready)?;
                }
            }
            g.leave(p, self.exchange)?;
        }

        g.pattern("halo exchange", n, self.halo_min_events);
        g.enter_all(self.io)?;
        let members = n as usize;
        g.world_collective(OpKind::Bcast, Some(0), self.float, &|local| {
            bcast_sizes(local, 0, members, BCAST_BYTES)
        })?;
        let gather = i % GATHER_EVERY == GATHER_EVERY - 1;
        let scatterv = i % SCATTERV_EVERY == SCATTERV_EVERY - 1;
        if gather {
            let total = u64::from(n) * GATHER_BYTES;
            g.world_collective(OpKind::Gather, Some(0), self.float, &|local| {
                (GATHER_BYTES, if local == 0 { total } else { 0 })
            })?;
        }
        if scatterv {
            let total: u64 = (0..n).map(scatterv_bytes).sum();
            g.world_collective(OpKind::Scatterv, Some(0), self.float, &|local| {
                (if local == 0 { total } else { 0 }, scatterv_bytes(local))
            })?;
        }
        let io = match (gather, scatterv) {
            (_, true) => ("io: MPI_Bcast MPI_Gather MPI_Scatterv", 3),
            (true, false) => ("io: MPI_Bcast MPI_Gather", 2),
            _ => ("io: MPI_Bcast", 1),
        };
        g.pattern(io.0, n, io.1);
        g.leave_all(self.io)
    }
}
