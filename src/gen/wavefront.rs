//! `sweep` (Sweep3D) and `lu` (NAS LU): pipelined blocking wavefronts across a 2D grid.
//!
//! A wavefront starts at a corner and moves to the opposite one. Each rank handles
//! `blocks` blocks (k-planes) per wavefront; for each block it does `Recv from the upstream
//! x neighbour, Recv from the upstream y neighbour, compute, Send to the downstream x
//! neighbour, Send to the downstream y neighbour` (missing neighbours on the grid's edges are
//! skipped), all inside one call of the wavefront's routine. Ranks are emitted in
//! pipeline order (block b of the ranks at distance d from the corner at step d + b), so a
//! send always precedes its receive in the stream.
//!
//! * `sweep`: 4 wavefronts per iteration, from (0,0), (nx-1,0), (0,ny-1), (nx-1,ny-1), each a
//!   `sweep` call with 2 blocks; x messages [`SWEEP_X_BYTES`], y messages [`SWEEP_Y_BYTES`]
//!   of MPI_DOUBLE; then `reduce { Allreduce of 8 bytes }`.
//! * `lu`: `blts` from (0,0) then `buts` from (nx-1,ny-1), 2 blocks each; x messages
//!   [`LU_X_BYTES`], y messages [`LU_Y_BYTES`]; then `l2norm { Allreduce of 40 bytes }`.
//!
//! Tags: `2 * wavefront + axis` (axis 0 for x, 1 for y).

use super::engine::Gen;
use super::topo::Grid;
use super::Program;
use crate::error::Result;
use crate::model::{StrId, Time};

/// Sweep3D: bytes of an x-direction message (960 doubles).
pub(crate) const SWEEP_X_BYTES: u64 = 7_680;
/// Sweep3D: bytes of a y-direction message (720 doubles).
pub(crate) const SWEEP_Y_BYTES: u64 = 5_760;
/// LU: bytes of an x-direction message (150 doubles).
pub(crate) const LU_X_BYTES: u64 = 1_200;
/// LU: bytes of a y-direction message (200 doubles).
pub(crate) const LU_Y_BYTES: u64 = 1_600;
/// Blocks per wavefront in both scenarios.
pub(crate) const BLOCKS: u32 = 2;

struct Front {
    flip_x: bool,
    flip_y: bool,
    routine_name: &'static str,
    routine: StrId,
    /// The name its emissions are recorded under: the routine's, numbered from 1 when every
    /// wavefront of the scenario calls the same routine (`sweep 1` … `sweep 4`).
    pattern: String,
    /// Positions ordered by distance from the corner; `layer_start[d]..layer_start[d + 1]`
    /// are those at distance d.
    order: Vec<u32>,
    layer_start: Vec<usize>,
}

pub(crate) struct Wavefront {
    grid: Grid,
    fronts: Vec<Front>,
    bytes_x: u64,
    bytes_y: u64,
    compute: Time,
    /// Events of the rank with the fewest mesh neighbours in one wavefront (its upstream
    /// receives and downstream sends, in every block).
    front_min_events: u32,
    reduce_name: &'static str,
    /// The name the reduction's emissions are recorded under (`reduce: MPI_Allreduce`).
    reduce_pattern: String,
    reduce_bytes: u64,
    reduce: StrId,
    double: StrId,
    sent_x: Vec<Time>,
    sent_y: Vec<Time>,
}

impl Wavefront {
    fn new(
        n: u32,
        corners: &[(bool, bool, &'static str)],
        bytes: (u64, u64),
        compute: Time,
        reduce: (&'static str, u64),
    ) -> Wavefront {
        let grid = Grid::most_square(n);
        let shared_name = corners.len() > 1 && corners.iter().all(|c| c.2 == corners[0].2);
        let fronts = corners
            .iter()
            .enumerate()
            .map(|(f, &(flip_x, flip_y, routine_name))| {
                let dist = |p: u32| {
                    let (dx, dy) = local(grid, flip_x, flip_y, p);
                    dx + dy
                };
                let mut order: Vec<u32> = (0..n).collect();
                order.sort_by_key(|&p| (dist(p), p));
                let layers = (grid.nx + grid.ny - 1) as usize;
                let mut layer_start = vec![0usize; layers + 1];
                for &p in &order {
                    layer_start[dist(p) as usize + 1] += 1;
                }
                for d in 0..layers {
                    layer_start[d + 1] += layer_start[d];
                }
                Front {
                    flip_x,
                    flip_y,
                    routine_name,
                    routine: 0,
                    pattern: if shared_name {
                        format!("{routine_name} {}", f + 1)
                    } else {
                        routine_name.to_string()
                    },
                    order,
                    layer_start,
                }
            })
            .collect();
        Wavefront {
            grid,
            fronts,
            bytes_x: bytes.0,
            bytes_y: bytes.1,
            compute,
            front_min_events: grid.fewest_mesh_neighbours() * BLOCKS,
            reduce_name: reduce.0,
            reduce_pattern: format!("{}: MPI_Allreduce", reduce.0),
            reduce_bytes: reduce.1,
            reduce: 0,
            double: 0,
            sent_x: vec![0; n as usize],
            sent_y: vec![0; n as usize],
        }
    }

    pub(crate) fn sweep(n: u32) -> Wavefront {
        Wavefront::new(
            n,
            &[
                (false, false, "sweep"),
                (true, false, "sweep"),
                (false, true, "sweep"),
                (true, true, "sweep"),
            ],
            (SWEEP_X_BYTES, SWEEP_Y_BYTES),
            50_000,
            ("reduce", 8),
        )
    }

    pub(crate) fn lu(n: u32) -> Wavefront {
        Wavefront::new(
            n,
            &[(false, false, "blts"), (true, true, "buts")],
            (LU_X_BYTES, LU_Y_BYTES),
            40_000,
            ("l2norm", 40),
        )
    }

    /// One block of position `p` in wavefront `f`.
    fn block(&mut self, g: &mut Gen<'_>, f: usize, p: u32, block: u32) -> Result<()> {
        let grid = self.grid;
        let front = &self.fronts[f];
        let (flip_x, flip_y, routine) = (front.flip_x, front.flip_y, front.routine);
        let (dx, dy) = local(grid, flip_x, flip_y, p);
        let at = |dx: u32, dy: u32| {
            let x = if flip_x { grid.nx - 1 - dx } else { dx };
            let y = if flip_y { grid.ny - 1 - dy } else { dy };
            grid.at(x, y)
        };
        let (tag_x, tag_y) = (2 * f as i32, 2 * f as i32 + 1);
        if block == 0 {
            g.enter(p, routine)?;
        }
        if dx > 0 {
            let up = at(dx - 1, dy);
            let sent = self.sent_x[up as usize];
            g.recv(p, up, tag_x, self.bytes_x, self.double, sent)?;
        }
        if dy > 0 {
            let up = at(dx, dy - 1);
            let sent = self.sent_y[up as usize];
            g.recv(p, up, tag_y, self.bytes_y, self.double, sent)?;
        }
        g.compute(p, self.compute);
        if dx + 1 < grid.nx {
            let down = at(dx + 1, dy);
            self.sent_x[p as usize] = g.send(p, down, tag_x, self.bytes_x, self.double)?;
        }
        if dy + 1 < grid.ny {
            let down = at(dx, dy + 1);
            self.sent_y[p as usize] = g.send(p, down, tag_y, self.bytes_y, self.double)?;
        }
        if block + 1 == BLOCKS {
            g.leave(p, routine)?;
        }
        Ok(())
    }
}

/// Coordinates of `p` measured from the wavefront's starting corner.
fn local(grid: Grid, flip_x: bool, flip_y: bool, p: u32) -> (u32, u32) {
    let (x, y) = grid.xy(p);
    (
        if flip_x { grid.nx - 1 - x } else { x },
        if flip_y { grid.ny - 1 - y } else { y },
    )
}

impl Program for Wavefront {
    fn topology(&self) -> String {
        self.grid.describe("grid")
    }

    fn prepare(&mut self, g: &mut Gen<'_>) -> Result<()> {
        for f in &mut self.fronts {
            f.routine = g.intern(f.routine_name)?;
        }
        self.reduce = g.intern(self.reduce_name)?;
        self.double = g.intern("MPI_DOUBLE")?;
        Ok(())
    }

    fn iteration(&mut self, g: &mut Gen<'_>, _i: u32) -> Result<()> {
        let n = g.ranks();
        for f in 0..self.fronts.len() {
            g.pattern(&self.fronts[f].pattern, n, self.front_min_events);
            let layers = self.fronts[f].layer_start.len() - 1;
            for step in 0..layers + BLOCKS as usize - 1 {
                for block in 0..BLOCKS {
                    let Some(d) = step.checked_sub(block as usize) else {
                        continue;
                    };
                    if d >= layers {
                        continue;
                    }
                    let (a, b) = (
                        self.fronts[f].layer_start[d],
                        self.fronts[f].layer_start[d + 1],
                    );
                    for k in a..b {
                        let p = self.fronts[f].order[k];
                        self.block(g, f, p, block)?;
                    }
                }
            }
        }
        g.pattern(&self.reduce_pattern, n, 1);
        g.world_allreduce(self.reduce, self.double, self.reduce_bytes)
    }
}
