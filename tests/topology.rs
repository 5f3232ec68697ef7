//! Topology identification on generated traces: the communication matrix of each scenario
//! (`Trace::pairs`) is identified as the topology the generator laid its ranks on, with the
//! right extents, in topology order and with shuffled ranks, and the neighbour pairs of the
//! coordinates found are exactly the pairs the generator made communicate (its ground truth,
//! in world ranks).

mod common;

use common::{import_generated, temp_db};

use mtfdb::analysis::structure;
use mtfdb::analysis::topology::{identify, CommMatrix, Failure, Family, IdentifyParams, Topology};
use mtfdb::gen::{GenConfig, GroundTruth, Scenario};
use mtfdb::model::OpKind;

/// The point-to-point matrix of a generated trace and its ground truth.
fn matrix(scenario: Scenario, ranks: u32, shuffle: bool) -> (CommMatrix, GroundTruth) {
    let (_dir, db) = temp_db();
    let config = GenConfig {
        shuffle_ranks: shuffle,
        delays: Vec::new(),
        seed: 7,
        ..GenConfig::new(scenario, ranks, 2)
    };
    let truth = import_generated(&db, &config, "t");
    let trace = db.trace("t").unwrap();
    (CommMatrix::from_trace(&trace), truth)
}

/// The neighbour pairs of `t` are exactly the pairs the generator made communicate
/// (`truth.pairs`, world ranks, so the shuffle is covered), taken unordered.
fn assert_mapping(scenario: Scenario, truth: &GroundTruth, t: &Topology) {
    let mut expected: Vec<(u32, u32)> = truth
        .pairs
        .iter()
        .map(|p| (p.sender.min(p.receiver), p.sender.max(p.receiver)))
        .collect();
    expected.sort_unstable();
    expected.dedup();
    let found: Vec<(u32, u32)> = (0..truth.ranks)
        .flat_map(|a| (a + 1..truth.ranks).map(move |b| (a, b)))
        .filter(|&(a, b)| t.adjacent(a, b))
        .collect();
    assert_eq!(found, expected, "{scenario}: neighbour pairs");
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
            assert_mapping(*scenario, &truth, &t);
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
                delays: Vec::new(),
                ..GenConfig::new(Scenario::Alltoall, ranks, 2)
            };
            import_generated(&db, &config, "t");
            let trace = db.trace("t").unwrap();
            // As in the paper (FT), collectives alone give an empty point-to-point matrix.
            let p2p = CommMatrix::from_pairs(ranks, trace.pairs());
            let u = identify(&p2p, &IdentifyParams::default()).unwrap_err();
            assert_eq!((u.reason, u.edges), (Failure::NoTraffic, 0));
            // The structure matrix counts the Alltoall instances too, which gives the
            // complete graph; the blocks each rank sends to itself (1/n of the bytes) are
            // dropped.
            let instances = trace
                .collective_instances()
                .unwrap()
                .iter()
                .filter(|c| c.kind == OpKind::Alltoall)
                .count();
            assert_eq!(instances, 2);
            let m = structure::matrix(&trace, None, None).unwrap();
            let t = identify(&m, &IdentifyParams::default()).unwrap();
            assert_eq!((t.family, t.dims.clone()), (Family::AllToAll, vec![ranks]));
            assert_eq!(t.to_string(), format!("all-to-all of {ranks}"));
            assert_eq!(t.dropped_fraction, 1.0 / f64::from(ranks));
        }
    }
}
