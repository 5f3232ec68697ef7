//! Topology identification on generated traces: the communication matrix of each scenario
//! (`Trace::pairs`) is identified as the topology the generator laid its ranks on, with the
//! right extents, in topology order and with shuffled ranks, where every pair the generator
//! made communicate (through the ground truth's permutation) is adjacent in the coordinates
//! found.

mod common;

use common::import_generated;

use mtfdb::analysis::topology::{identify, CommMatrix, Failure, Family, IdentifyParams, Topology};
use mtfdb::gen::{GenConfig, GroundTruth, Scenario};
use mtfdb::model::OpKind;
use mtfdb::Database;

fn temp_db() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// The point-to-point matrix of a generated trace and its ground truth.
fn matrix(scenario: Scenario, ranks: u32, shuffle: bool) -> (CommMatrix, GroundTruth) {
    let (_dir, db) = temp_db();
    let config = GenConfig {
        shuffle_ranks: shuffle,
        seed: 7,
        ..GenConfig::new(scenario, ranks, 2)
    };
    let truth = import_generated(&db, &config, "t");
    let trace = db.trace("t").unwrap();
    (CommMatrix::from_trace(&trace), truth)
}

/// The most square `nx x ny` grid of the generators (`ny` the largest divisor up to √n).
fn most_square(n: u32) -> (u32, u32) {
    let ny = (1..=n)
        .filter(|d| d * d <= n && n.is_multiple_of(*d))
        .max()
        .unwrap();
    (n / ny, ny)
}

/// The generator's logical neighbour pairs (positions, not ranks).
fn logical_edges(scenario: Scenario, n: u32) -> Vec<(u32, u32)> {
    let mut edges = Vec::new();
    match scenario {
        Scenario::Stencil2d | Scenario::Lu | Scenario::Sweep => {
            let (nx, ny) = most_square(n);
            for y in 0..ny {
                for x in 0..nx {
                    let p = y * nx + x;
                    if x + 1 < nx {
                        edges.push((p, p + 1));
                    }
                    if y + 1 < ny {
                        edges.push((p, p + nx));
                    }
                }
            }
        }
        Scenario::Ring => edges.extend((0..n).map(|p| (p, (p + 1) % n))),
        Scenario::Bt => {
            let side = (1..=n).find(|s| s * s == n).unwrap() as i64;
            for p in 0..n as i64 {
                let (r, c) = (p / side, p % side);
                for (dr, dc) in [(0, 1), (1, 0), (1, -1)] {
                    let q = (r + dr).rem_euclid(side) * side + (c + dc).rem_euclid(side);
                    edges.push((p as u32, q as u32));
                }
            }
        }
        Scenario::Cg => {
            let m = n.trailing_zeros();
            let (rows, cols) = (1u32 << (m / 2), 1u32 << m.div_ceil(2));
            for p in 0..n {
                for k in 0..cols.trailing_zeros() {
                    edges.push((p, p ^ (1 << k)));
                }
                let t = if rows == cols {
                    (p % cols) * cols + p / cols
                } else {
                    let (j, half) = (p / 2, p % 2);
                    2 * ((j % rows) * rows + j / rows) + half
                };
                if t != p {
                    edges.push((p, t));
                }
            }
        }
        Scenario::Alltoall => unreachable!("not checked here"),
    }
    edges
}

/// Every communicating pair of the trace and every logical edge (mapped to world ranks by
/// the ground truth's permutation) is adjacent in `t`, and `t` has exactly that many
/// neighbour pairs.
fn assert_mapping(scenario: Scenario, m: &CommMatrix, truth: &GroundTruth, t: &Topology) {
    let n = m.ranks();
    let perm = &truth.permutation;
    let mut expected: Vec<(u32, u32)> = logical_edges(scenario, n)
        .into_iter()
        .map(|(a, b)| {
            let (x, y) = (perm[a as usize], perm[b as usize]);
            (x.min(y), x.max(y))
        })
        .collect();
    expected.sort_unstable();
    expected.dedup();
    for &(a, b) in &expected {
        assert!(
            t.adjacent(a, b),
            "{scenario}: ranks {a} and {b} are neighbours"
        );
    }
    let found = (0..n)
        .flat_map(|a| (0..a).map(move |b| (b, a)))
        .filter(|&(a, b)| t.adjacent(a, b))
        .count();
    assert_eq!(found, expected.len(), "{scenario}: neighbour pairs");
}

#[test]
fn generated_traces_are_identified_with_their_topology_and_extents() {
    let cases: Vec<(Scenario, u32, Family, Vec<u32>, &str)> = vec![
        (
            Scenario::Bt,
            16,
            Family::Stencil6Torus,
            vec![4, 4],
            "6-point stencil on a 2D torus 4x4",
        ),
        (
            Scenario::Bt,
            64,
            Family::Stencil6Torus,
            vec![8, 8],
            "6-point stencil on a 2D torus 8x8",
        ),
        (
            Scenario::Bt,
            144,
            Family::Stencil6Torus,
            vec![12, 12],
            "6-point stencil on a 2D torus 12x12",
        ),
        (Scenario::Lu, 16, Family::Grid, vec![4, 4], "2D grid 4x4"),
        (Scenario::Lu, 64, Family::Grid, vec![8, 8], "2D grid 8x8"),
        (
            Scenario::Lu,
            144,
            Family::Grid,
            vec![12, 12],
            "2D grid 12x12",
        ),
        (
            Scenario::Stencil2d,
            16,
            Family::Grid,
            vec![4, 4],
            "2D grid 4x4",
        ),
        (
            Scenario::Stencil2d,
            64,
            Family::Grid,
            vec![8, 8],
            "2D grid 8x8",
        ),
        (
            Scenario::Stencil2d,
            144,
            Family::Grid,
            vec![12, 12],
            "2D grid 12x12",
        ),
        (
            Scenario::Stencil2d,
            12,
            Family::Grid,
            vec![3, 4],
            "2D grid 3x4",
        ),
        (Scenario::Sweep, 16, Family::Grid, vec![4, 4], "2D grid 4x4"),
        (Scenario::Sweep, 64, Family::Grid, vec![8, 8], "2D grid 8x8"),
        (Scenario::Ring, 16, Family::Ring, vec![16], "ring of 16"),
        (Scenario::Ring, 64, Family::Ring, vec![64], "ring of 64"),
        (Scenario::Ring, 144, Family::Ring, vec![144], "ring of 144"),
        (
            Scenario::Cg,
            16,
            Family::Cg,
            vec![4, 4],
            "NAS CG pattern on a 4x4 process grid",
        ),
        (
            Scenario::Cg,
            64,
            Family::Cg,
            vec![8, 8],
            "NAS CG pattern on a 8x8 process grid",
        ),
        (
            Scenario::Cg,
            128,
            Family::Cg,
            vec![8, 16],
            "NAS CG pattern on a 8x16 process grid",
        ),
    ];
    for shuffle in [false, true] {
        for (scenario, ranks, family, dims, text) in &cases {
            let (m, truth) = matrix(*scenario, *ranks, shuffle);
            if shuffle {
                assert_ne!(truth.permutation, (0..*ranks).collect::<Vec<u32>>());
            }
            let t = identify(&m, &IdentifyParams::default())
                .unwrap_or_else(|u| panic!("{scenario} {ranks}: {u}"));
            assert_eq!((t.family, &t.dims), (*family, dims), "{scenario} {ranks}");
            assert_eq!(t.to_string(), *text);
            assert_eq!(t.dropped_fraction, 0.0, "{scenario} {ranks}");
            assert_eq!(t.coordinates.len() as u32, *ranks);
            assert_mapping(*scenario, &m, &truth, &t);
        }
    }
}

#[test]
fn alltoall_has_no_point_to_point_matrix_and_is_identified_from_its_collectives() {
    for ranks in [16u32, 64, 144] {
        for shuffle in [false, true] {
            let (_dir, db) = temp_db();
            let config = GenConfig {
                shuffle_ranks: shuffle,
                ..GenConfig::new(Scenario::Alltoall, ranks, 2)
            };
            import_generated(&db, &config, "t");
            let trace = db.trace("t").unwrap();
            // As in the paper (FT), collectives alone give an empty point-to-point matrix.
            let p2p = CommMatrix::from_pairs(ranks, trace.pairs());
            let u = identify(&p2p, &IdentifyParams::default()).unwrap_err();
            assert_eq!((u.reason, u.edges), (Failure::NoTraffic, 0));
            // Counting the Alltoall instances gives the complete graph; the blocks each rank
            // sends to itself (1/n of the bytes) are dropped.
            let mut m = CommMatrix::new(ranks);
            let members = &trace.header().communicators[0].members;
            let mut instances = 0;
            for c in trace.collective_instances().unwrap() {
                if c.kind == OpKind::Alltoall {
                    instances += 1;
                    m.add_alltoall(members, c.send_bytes);
                }
            }
            assert_eq!(instances, 2);
            let t = identify(&m, &IdentifyParams::default()).unwrap();
            assert_eq!((t.family, t.dims.clone()), (Family::AllToAll, vec![ranks]));
            assert_eq!(t.to_string(), format!("all-to-all of {ranks}"));
            assert_eq!(t.dropped_fraction, 1.0 / f64::from(ranks));
            assert!((0..ranks).all(|a| (0..ranks).all(|b| t.adjacent(a, b) == (a != b))));
        }
    }
}
