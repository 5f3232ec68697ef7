//! Topologies over logical positions: 2D grids and tori, the BT/SP 6-point stencil and the
//! NPB CG partner scheme.

/// A 2D arrangement of `nx * ny` positions, row-major: position `y * nx + x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    /// Columns (x extent).
    pub nx: u32,
    /// Rows (y extent).
    pub ny: u32,
}

impl Grid {
    /// The most square factorization of `n`: `ny` is the largest divisor of `n` not above
    /// its square root and `nx = n / ny`, so `nx >= ny` (16 gives 4x4, 12 gives 4x3, a prime
    /// p gives px1).
    pub(crate) fn most_square(n: u32) -> Grid {
        let mut ny = 1;
        let mut d = 1u32;
        while u64::from(d) * u64::from(d) <= u64::from(n) {
            if n.is_multiple_of(d) {
                ny = d;
            }
            d += 1;
        }
        Grid {
            nx: n / ny.max(1),
            ny,
        }
    }

    /// `(x, y)` of a position.
    pub(crate) fn xy(&self, p: u32) -> (u32, u32) {
        (p % self.nx, p / self.nx)
    }

    /// The position at `(x, y)`.
    pub(crate) fn at(&self, x: u32, y: u32) -> u32 {
        y * self.nx + x
    }

    /// The mesh neighbours of `p` (no wrap-around) in the order east (+x), west (-x),
    /// south (+y), north (-y).
    pub(crate) fn mesh_neighbours(&self, p: u32) -> [Option<u32>; 4] {
        let (x, y) = self.xy(p);
        [
            (x + 1 < self.nx).then(|| self.at(x + 1, y)),
            (x > 0).then(|| self.at(x - 1, y)),
            (y + 1 < self.ny).then(|| self.at(x, y + 1)),
            (y > 0).then(|| self.at(x, y - 1)),
        ]
    }

    /// The fewest mesh neighbours any position has (a corner's: 2 on a grid of at least
    /// 2x2, 1 on a line of at least 2, 0 on a single position).
    pub(crate) fn fewest_mesh_neighbours(&self) -> u32 {
        (0..self.nx * self.ny)
            .map(|p| self.mesh_neighbours(p).iter().flatten().count() as u32)
            .min()
            .unwrap_or(0)
    }

    /// Human-readable shape (`4x4 grid`).
    pub(crate) fn describe(&self, what: &str) -> String {
        format!("{}x{} {}", self.nx, self.ny, what)
    }
}

/// The BT/SP 6-point stencil on a `side x side` torus, row-major: the neighbours at
/// (Δrow, Δcol) = (0,+1) east, (0,-1) west, (+1,0) south, (-1,0) north, (+1,-1) south-west,
/// (-1,+1) north-east, modulo the side. Direction `d` and `d ^ 1` are opposite.
pub(crate) fn bt_neighbours(side: u32, p: u32) -> [u32; 6] {
    let (row, col) = (p / side, p % side);
    let wrap = |r: i64, c: i64| -> u32 {
        let s = i64::from(side);
        (r.rem_euclid(s) * s + c.rem_euclid(s)) as u32
    };
    let (r, c) = (i64::from(row), i64::from(col));
    [
        wrap(r, c + 1),
        wrap(r, c - 1),
        wrap(r + 1, c),
        wrap(r - 1, c),
        wrap(r + 1, c - 1),
        wrap(r - 1, c + 1),
    ]
}

/// The NPB CG process grid for `n = 2^m` ranks: `nprows = 2^floor(m/2)` rows and
/// `npcols = 2^ceil(m/2)` columns (`npcols` is `nprows` or twice it), row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CgGrid {
    /// Rows.
    pub nprows: u32,
    /// Columns (a power of two).
    pub npcols: u32,
}

impl CgGrid {
    /// The grid for `n`, a power of two.
    pub(crate) fn new(n: u32) -> CgGrid {
        let m = n.trailing_zeros();
        CgGrid {
            nprows: 1 << (m / 2),
            npcols: 1 << m.div_ceil(2),
        }
    }

    /// `log2(npcols)`: the number of row-reduction partners.
    pub(crate) fn row_steps(&self) -> u32 {
        self.npcols.trailing_zeros()
    }

    /// The k-th row partner: `p XOR 2^k` (always in `p`'s row).
    pub(crate) fn row_partner(&self, p: u32, k: u32) -> u32 {
        p ^ (1 << k)
    }

    /// The transpose partner, `None` on the diagonal. With a square grid `(row, col)` pairs
    /// with `(col, row)`; with `npcols = 2 * nprows`, positions `2j` and `2j+1` form the
    /// super-position `j` of an `nprows x nprows` grid, which is transposed the same way.
    pub(crate) fn transpose_partner(&self, p: u32) -> Option<u32> {
        let t = if self.nprows == self.npcols {
            let (row, col) = (p / self.npcols, p % self.npcols);
            col * self.npcols + row
        } else {
            let (j, half) = (p / 2, p % 2);
            let (srow, scol) = (j / self.nprows, j % self.nprows);
            2 * (scol * self.nprows + srow) + half
        };
        (t != p).then_some(t)
    }

    /// The row of position `p`.
    #[cfg(test)]
    pub(crate) fn row(&self, p: u32) -> u32 {
        p / self.npcols
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen_most_square_factorization() {
        let shape = |n| {
            let g = Grid::most_square(n);
            (g.nx, g.ny)
        };
        assert_eq!(shape(16), (4, 4));
        assert_eq!(shape(12), (4, 3));
        assert_eq!(shape(6), (3, 2));
        assert_eq!(shape(7), (7, 1));
        assert_eq!(shape(1), (1, 1));
        assert_eq!(shape(64), (8, 8));
        assert_eq!(shape(32), (8, 4));
    }

    #[test]
    fn gen_mesh_neighbours_of_a_4x4_grid() {
        let g = Grid::most_square(16);
        assert_eq!(g.mesh_neighbours(0), [Some(1), None, Some(4), None]);
        assert_eq!(g.mesh_neighbours(5), [Some(6), Some(4), Some(9), Some(1)]);
        assert_eq!(g.mesh_neighbours(15), [None, Some(14), None, Some(11)]);
        let degrees: Vec<usize> = (0..16)
            .map(|p| g.mesh_neighbours(p).iter().flatten().count())
            .collect();
        assert_eq!(degrees.iter().filter(|&&d| d == 2).count(), 4);
        assert_eq!(degrees.iter().filter(|&&d| d == 3).count(), 8);
        assert_eq!(degrees.iter().filter(|&&d| d == 4).count(), 4);
        assert_eq!(g.fewest_mesh_neighbours(), 2);
        let fewest = |n| Grid::most_square(n).fewest_mesh_neighbours();
        assert_eq!((fewest(1), fewest(2), fewest(7), fewest(6)), (0, 1, 1, 2));
    }

    #[test]
    fn gen_bt_neighbours_match_the_paper() {
        // Table 5 of the logicalization paper: rank 0 of 16 has E=1, W=3, S=4, N=12, SW=7, NE=13.
        assert_eq!(bt_neighbours(4, 0), [1, 3, 4, 12, 7, 13]);
        for p in 0..16 {
            for (d, &q) in bt_neighbours(4, p).iter().enumerate() {
                assert_eq!(bt_neighbours(4, q)[d ^ 1], p, "opposite directions");
            }
        }
    }

    #[test]
    fn gen_cg_partners() {
        let g = CgGrid::new(16);
        assert_eq!((g.nprows, g.npcols, g.row_steps()), (4, 4, 2));
        assert_eq!(g.transpose_partner(0), None);
        assert_eq!(g.transpose_partner(1), Some(4));
        assert_eq!(g.transpose_partner(6), Some(9));
        let g8 = CgGrid::new(8);
        assert_eq!((g8.nprows, g8.npcols), (2, 4));
        let t: Vec<Option<u32>> = (0..8).map(|p| g8.transpose_partner(p)).collect();
        assert_eq!(
            t,
            [None, None, Some(4), Some(5), Some(2), Some(3), None, None]
        );
        for n in [1u32, 2, 4, 8, 32, 64, 128] {
            let g = CgGrid::new(n);
            assert_eq!(g.nprows * g.npcols, n);
            for p in 0..n {
                if let Some(t) = g.transpose_partner(p) {
                    assert_eq!(g.transpose_partner(t), Some(p));
                    assert_ne!(g.row(t), g.row(p));
                }
                for k in 0..g.row_steps() {
                    assert_eq!(g.row(g.row_partner(p, k)), g.row(p));
                }
            }
        }
    }
}
