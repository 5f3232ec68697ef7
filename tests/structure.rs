//! Loop models, topology and logical traces of stored traces, through the query statements
//! and the library: `SELECT LOOPS FOR PROCESS(n)`, `SELECT GLOBAL MODEL`, `SELECT TOPOLOGY`,
//! `SELECT LOGICAL TRACE`.

mod common;

use common::{generated_db, temp_db};

use mtfdb::analysis::{process_events, structure};
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::query::Session;
use mtfdb::results::Value;

fn session_with(scenario: Scenario, ranks: u32, iterations: u32) -> (tempfile::TempDir, Session) {
    let (dir, db) = generated_db(&GenConfig::new(scenario, ranks, iterations));
    (dir, Session::new(db))
}

fn text(r: &mtfdb::results::ResultSet) -> String {
    r.rows
        .iter()
        .map(|row| row.iter().map(Value::render).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn topology_statements_name_the_family_and_dimensions() {
    for (scenario, ranks, want) in [
        (Scenario::Stencil2d, 16, "2D grid 4x4"),
        (Scenario::Lu, 16, "2D grid 4x4"),
        (Scenario::Bt, 16, "6-point stencil on a 2D torus 4x4"),
        (Scenario::Ring, 16, "ring of 16"),
        (Scenario::Alltoall, 16, "all-to-all of 16"),
    ] {
        let (_dir, mut s) = session_with(scenario, ranks, 3);
        let r = s.run("SELECT TOPOLOGY").unwrap();
        assert_eq!(r.rows[0][0].render(), want, "{scenario:?}");
        assert_eq!(r.len(), ranks as usize, "{scenario:?}: a row per rank");
        // The world communicator is the whole trace; phase 1 is the solve loop (an all-to-all
        // trace has no patterns, so no phases: one MPI_Alltoall per iteration is no pattern).
        if scenario == Scenario::Alltoall {
            let e = s.run("SELECT TOPOLOGY IN PHASE 1").unwrap_err().to_string();
            assert_eq!(e, "no phase 1: the trace has 0 (SELECT PHASES lists them)");
            continue;
        }
        let r = s.run("SELECT TOPOLOGY IN COMM(0) IN PHASE 1").unwrap();
        assert_eq!(
            r.rows[0][0].render(),
            want,
            "{scenario:?} in comm 0 and phase 1"
        );
    }
}

#[test]
fn loop_nests_count_the_iterations_and_the_global_model_covers_every_rank() {
    let iterations = 12;
    let (_dir, mut s) = session_with(Scenario::Bt, 16, iterations);
    let r = s.run("SELECT LOOPS FOR PROCESS(5)").unwrap();
    let nest = text(&r);
    assert!(
        nest.contains(&format!("for i0 in 0..{iterations}")),
        "{nest}"
    );
    let lines: Vec<&str> = nest.lines().collect();
    assert_eq!(
        lines[lines.len() - 2..],
        [
            // Per iteration `solve( copy_faces( ` 6 receives and 6 sends `) )`; 9 events
            // outside the loop (main, init, setup and its Bcast, finalize).
            format!("-- {} events, 129 bytes of model", 9 + iterations * 16).as_str(),
            "-- main loop: 12 iterations, one solve call each",
        ],
        "{nest}"
    );
    let model = text(&s.run("SELECT GLOBAL MODEL").unwrap());
    assert!(model.contains("@0-15"), "{model}");
    let e = s
        .run("SELECT LOOPS FOR PROCESS(99)")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "no process 99: the trace has ranks 0-15");

    // stencil2d's iterations repeat every 8 (a Gather every 4th, a Scatterv every 8th).
    let (_dir, mut s) = session_with(Scenario::Stencil2d, 16, 24);
    let nest = text(&s.run("SELECT LOOPS FOR PROCESS(5)").unwrap());
    assert_eq!(
        nest.lines().last().unwrap(),
        "-- main loop: 3 iterations of 8 solve calls (24 calls)",
        "{nest}"
    );
}

#[test]
fn a_logical_trace_expands_back_to_every_rank_with_the_same_neighbours() {
    let (_dir, db) = generated_db(&GenConfig::new(Scenario::Bt, 16, 4));
    let trace = db.trace("t").unwrap();
    let m = structure::matrix(&trace, None, None).unwrap();
    let t = structure::identify(&m, &structure::TopologyParams::default()).unwrap();
    let logical = structure::logical_trace(&trace, &t, 5).unwrap();
    assert!(!logical.is_empty());
    // On a torus every rank has the same neighbourhood: the logical trace of rank 5 expands
    // to every rank's own event sequence.
    let (alphabet, streams) = process_events::extract_with_calls(&trace).unwrap();
    for (rank, symbols) in &streams {
        let want: Vec<String> = symbols.iter().map(|&s| alphabet.name(s)).collect();
        let got = structure::expand_logical(&t, &logical, *rank).unwrap();
        assert_eq!(got, want, "rank {rank}");
    }
    // The statement compresses it into loops, peers as the torus's directions.
    let mut s = Session::new(db);
    let key = structure::topology_key(None, None, &structure::TopologyParams::default());
    assert!(trace
        .result::<structure::TopologyResult>(&key)
        .unwrap()
        .is_none());
    let r = s.run("SELECT LOGICAL TRACE FOR PROCESS(5)").unwrap();
    // The topology it used is the stored one SELECT TOPOLOGY reads.
    let stored = trace.result::<structure::TopologyResult>(&key).unwrap();
    assert_eq!(stored.unwrap().topology, Some(t.clone()));
    assert_eq!(r.columns, ["logical trace"]);
    assert_eq!(
        text(&r),
        "-- rank 5; topology: 6-point stencil on a 2D torus 4x4\n\
         main( init( ) setup( MPI_Bcast(0) )\n\
         for i0 in 0..4 { solve( copy_faces( R EAST R WEST R SOUTH R NORTH R SOUTH-WEST \
         R NORTH-EAST S EAST S WEST S SOUTH S NORTH S SOUTH-WEST S NORTH-EAST ) ) }\n\
         finalize( ) )\n\
         -- 73 events, 204 bytes of model"
    );
    assert_eq!(logical.len(), 73);
    let e = s
        .run("SELECT LOGICAL TRACE FOR PROCESS(16)")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "no process 16: the trace has ranks 0-15");
}

/// Messages per sender and receiver, as the trace stores them.
fn stored_pairs(trace: &mtfdb::Trace) -> std::collections::BTreeMap<(u32, u32), u64> {
    trace
        .pairs()
        .iter()
        .map(|p| ((p.sender, p.receiver), p.messages))
        .collect()
}

/// The model is executable: the messages its projections send, rank by rank, are the stored
/// communication matrix (messages per sender → receiver).
#[test]
fn the_global_model_gives_the_stored_communication_matrix() {
    use mtfdb::analysis::process_events::EventKey;
    use std::collections::BTreeMap;
    // alltoall has no point-to-point messages: its model must send none either.
    for scenario in Scenario::ALL {
        let (_dir, db) = generated_db(&GenConfig::new(scenario, 16, 10));
        let trace = db.trace("t").unwrap();
        let model = structure::global_model(&trace, &structure::LoopParams::default()).unwrap();
        let mut from_model: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for rank in 0..16 {
            for s in model.project(rank) {
                if let EventKey::Send(q) = model.alphabet.key(s) {
                    *from_model.entry((rank, q)).or_default() += 1;
                }
            }
        }
        assert_eq!(from_model, stored_pairs(&trace), "{scenario:?}");
    }
}

#[test]
fn loop_models_and_topologies_are_stored_with_the_trace() {
    let (_dir, db) = generated_db(&GenConfig::new(Scenario::Ring, 8, 5));
    let mut s = Session::new(db);
    let first = text(&s.run("SELECT TOPOLOGY").unwrap());
    let loops = text(&s.run("SELECT GLOBAL MODEL").unwrap());
    let trace = s.database().trace("t").unwrap();
    let stored = trace
        .result::<structure::TopologyResult>(&structure::topology_key(
            None,
            None,
            &structure::TopologyParams::default(),
        ))
        .unwrap()
        .unwrap();
    assert_eq!(stored.description, "ring of 8");
    assert_eq!(stored.topology.as_ref().unwrap().coordinates.len(), 8);
    let stored_model = trace
        .result::<structure::GlobalModelResult>("global-model/max_body=64,calls")
        .unwrap()
        .unwrap();
    assert_eq!(loops, stored_model.text.trim_end());
    // One process's nest is stored apart, and only once asked for.
    assert!(trace
        .result::<structure::LoopsResult>("loops/max_body=64,calls")
        .unwrap()
        .is_none());
    s.run("SELECT LOOPS FOR PROCESS(3)").unwrap();
    let stored_loops = structure::loops(&trace, &structure::LoopParams::default(), false).unwrap();
    assert_eq!(stored_loops.processes.len(), 8);
    assert_eq!(
        stored_loops.processes[3].main_loop,
        Some(structure::MainLoop {
            count: 5,
            routine: Some("solve".into()),
            calls_per_iteration: 1
        })
    );
    // Read back, the same; REFRESH PATTERNS drops them and they are computed again.
    assert_eq!(text(&s.run("SELECT TOPOLOGY").unwrap()), first);
    s.run("REFRESH PATTERNS").unwrap();
    assert!(trace
        .result::<structure::TopologyResult>(&structure::topology_key(
            None,
            None,
            &structure::TopologyParams::default()
        ))
        .unwrap()
        .is_none());
    assert_eq!(text(&s.run("SELECT TOPOLOGY").unwrap()), first);
}

/// An OTF2 archive written by the official library: its routine regions (`main`) take part
/// in the loop model as they do for generated traces. Rank 0 posts an Irecv and an Isend
/// per round, rank 1 an Irecv and an Isend the other way, 20 rounds each.
#[test]
fn an_otf2_ping_pong_is_one_loop_of_its_rounds_inside_main() {
    let (_dir, db) = temp_db();
    let archive =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otf2/pingpong-isend");
    db.import(&archive, Some("pp")).unwrap();
    let mut s = Session::new(db);
    assert_eq!(
        text(&s.run("SELECT LOOPS FOR PROCESS(0)").unwrap()),
        "main(\nfor i0 in 0..20 { R1 S1 }\n)\n-- 42 events, 34 bytes of model\n\
         -- main loop: 20 iterations"
    );
    assert_eq!(
        text(&s.run("SELECT GLOBAL MODEL").unwrap()),
        "main( @0-1\nfor i0 in 0..20 @0-1 {\n  R1 S1 @0\n  R0 S0 @1\n}\n) @0-1"
    );
}

/// The global model of many ranks merges the classes of ranks that do the same relative to
/// themselves (a grid's interior, its four edges and four corners) and stays exact: every
/// rank projects its own events, the sends of all projections are the stored matrix, and
/// the model's text has as many lines at 16,384 ranks as at 1,024.
#[test]
fn the_global_model_of_a_16384_rank_grid_is_its_nine_kinds_of_rank_and_exact() {
    use mtfdb::analysis::loops::expand;
    use mtfdb::analysis::process_events::EventKey;
    use std::collections::BTreeMap;
    let mut lines = Vec::new();
    for ranks in [1024, 16384] {
        let (_dir, db) = generated_db(&GenConfig::new(Scenario::Stencil2d, ranks, 3));
        let trace = db.trace("t").unwrap();
        let (alphabet, nests) =
            structure::loop_nests(&trace, &structure::LoopParams::default()).unwrap();
        let model = structure::merge_nests(&alphabet, &nests);
        assert_eq!(model.classes, 9, "{ranks} ranks");
        // The classes talk to each other, so every loop is every rank's.
        let all: Vec<u32> = (0..ranks).collect();
        for item in &model.model.items {
            if let mtfdb::analysis::loops::GlobalItem::Loop { ranks, .. } = item {
                assert_eq!(ranks, &all);
            }
        }
        let mut sent: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (rank, nest) in &nests {
            let projected = model.project(*rank);
            assert_eq!(projected, expand(nest), "rank {rank} of {ranks}");
            for s in projected {
                if let EventKey::Send(q) = alphabet.key(s) {
                    *sent.entry((*rank, q)).or_default() += 1;
                }
            }
        }
        assert_eq!(sent, stored_pairs(&trace), "{ranks} ranks");
        let text = model.render();
        // The interior's events, relative to each rank, on one line; its ranks, and the left
        // edge's, as regular series.
        if ranks == 16384 {
            for line in [
                "R(r+1) R(r-1) R(r+128) R(r-128) S(r+1) S(r-1) S(r+128) S(r-128) @129-254,257-382,...,16129-16254\n",
                "R(r+1) R(r+128) R(r-128) S(r+1) S(r+128) S(r-128) @128,256,...,16128\n",
            ] {
                assert!(text.contains(line), "{line} in {text}");
            }
        }
        // Corner 0 names its peers.
        let side = (ranks as f64).sqrt() as u32;
        assert!(text.contains(&format!("S1 S{side} @0\n")), "{text}");
        lines.push(text.lines().count());
    }
    assert_eq!(lines[0], lines[1]);
}

/// Every real trace in `../shared/traces` (four formats, with wildcard receives, several
/// communicators and routines): the global model, whatever classes its ranks fall into,
/// projects every rank's events exactly. Skipped with a message when the traces are absent.
#[test]
fn the_global_model_of_every_real_trace_projects_each_rank_exactly() {
    use mtfdb::analysis::loops::expand;
    let Some(files) = common::real_traces() else {
        return;
    };
    for file in files {
        let (_dir, db) = temp_db();
        db.import(&file, Some("t")).unwrap();
        let trace = db.trace("t").unwrap();
        let (alphabet, nests) =
            structure::loop_nests(&trace, &structure::LoopParams::default()).unwrap();
        let model = structure::merge_nests(&alphabet, &nests);
        assert!(
            (1..=nests.len()).contains(&model.classes),
            "{file:?}: {} classes",
            model.classes
        );
        for (rank, nest) in &nests {
            assert_eq!(model.project(*rank), expand(nest), "{file:?} rank {rank}");
        }
        let text = model.render();
        assert!(text.contains('@'), "{file:?}: {text}");
    }
}
