//! The store: round trips across chunk boundaries, indexes, atomic imports, format versions,
//! corruption detection, dropping traces.

use mtfdb::ingest::EventSink;
use mtfdb::model::{
    flags, Communicator, OpKind, Operation, Process, Processor, RoutineEvent, TraceHeader,
};
use mtfdb::store::{IndexDim, OpChunkInfo};
use mtfdb::{Database, Error};

/// Opens a database with sled directly (no background flusher, so dropping it releases the
/// lock). A database closed a moment ago lets go of its lock only when its flusher thread
/// stops, so this waits for it.
fn raw_sled(path: &std::path::Path) -> sled::Db {
    let open = || sled::Config::new().path(path).flush_every_ms(None).open();
    for _ in 0..250 {
        if let Ok(db) = open() {
            return db;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    open().unwrap()
}

fn header(ranks: u32) -> TraceHeader {
    TraceHeader {
        untimed: false,
        locations: Vec::new(),
        scenario: "store test".into(),
        trace_name: "t".into(),
        comments: String::new(),
        processors: vec![Processor {
            id: 0,
            name: "node0".into(),
        }],
        processes: (0..ranks)
            .map(|rank| Process {
                rank,
                name: format!("P{rank}"),
                processor: Some(0),
            })
            .collect(),
        communicators: vec![
            Communicator {
                id: 0,
                name: "C1".into(),
                members: (0..ranks).collect(),
            },
            Communicator {
                id: 7,
                name: "odd".into(),
                members: (0..ranks).filter(|r| r % 2 == 1).collect(),
            },
        ],
    }
}

/// Rank 0's i-th operation: a mix of kinds and every field, deterministic.
fn rank0_op(i: u64) -> Operation {
    let t = 1_000 + i * 100;
    let mut op = match i % 5 {
        0 => {
            let mut o = Operation::new(0, OpKind::Isend, t, t + 7);
            o.comm = Some(0);
            o.dest = Some(1 + (i % 3) as u32);
            o.send_tag = Some((i % 4) as i32);
            o.send_bytes = 8 * (i % 1000);
            o.datatype = Some(0);
            o.request = Some(i);
            o
        }
        1 => {
            let mut o = Operation::new(0, OpKind::Waitall, t, t + 50);
            o.completes = vec![i - 1, i + 1_000_000];
            o
        }
        2 => {
            let mut o = Operation::new(0, OpKind::Bcast, t, t + 20);
            o.comm = Some(0);
            o.root = Some(0);
            o.send_bytes = 4096;
            o
        }
        3 => {
            let mut o = Operation::new(0, OpKind::Testany, t, t + 1);
            o.flags = flags::NOT_COMPLETED;
            o
        }
        _ => {
            let mut o = Operation::new(0, OpKind::Other(1), t, t);
            o.comm = Some(0);
            o
        }
    };
    op.depth = 1;
    op
}

const RANK0_OPS: u64 = 150_000;

fn import_sample(db: &Database, name: &str) -> mtfdb::TraceInfo {
    db.import_events(name, |sink| {
        sink.header(&header(4))?;
        sink.string(0, "MPI_DOUBLE")?;
        sink.string(1, "MPI_Pcontrol")?;
        sink.string(2, "solve")?;
        sink.routine(&RoutineEvent {
            rank: 0,
            thread: 0,
            time: 0,
            routine: 2,
            enter: true,
        })?;
        for i in 0..RANK0_OPS {
            sink.operation(&rank0_op(i))?;
        }
        sink.routine(&RoutineEvent {
            rank: 0,
            thread: 0,
            time: 1_000 + RANK0_OPS * 100,
            routine: 2,
            enter: false,
        })?;
        let mut recv = Operation::new(3, OpKind::Recv, 5, 9);
        (recv.comm, recv.source, recv.recv_tag, recv.recv_bytes) = (Some(7), Some(1), Some(3), 12);
        sink.operation(&recv)?;
        sink.finish()
    })
    .unwrap()
}

#[test]
fn operations_round_trip_across_chunk_boundaries_column_by_column() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let info = import_sample(&db, "sample");
    assert_eq!(info.summary.operations, RANK0_OPS + 1);
    let trace = db.trace("sample").unwrap();
    // 150,000 rows of rank 0 make chunks of 65,536 + 65,536 + 18,928.
    let rows: Vec<u32> = trace
        .op_chunks()
        .iter()
        .filter(|c| c.rank == 0)
        .map(|c| c.rows)
        .collect();
    assert_eq!(rows, vec![65_536, 65_536, 18_928]);
    let stored = trace.process_operations(0).unwrap();
    assert_eq!(stored.len() as u64, RANK0_OPS);
    for (i, (_, op)) in stored.iter().enumerate() {
        let expected = rank0_op(i as u64);
        assert_eq!(op.start, expected.start, "start of row {i}");
        assert_eq!(op.end, expected.end, "end of row {i}");
        assert_eq!(op.kind, expected.kind, "kind of row {i}");
        assert_eq!(op.comm, expected.comm, "comm of row {i}");
        assert_eq!(op.dest, expected.dest, "dest of row {i}");
        assert_eq!(op.send_tag, expected.send_tag, "tag of row {i}");
        assert_eq!(op.send_bytes, expected.send_bytes, "bytes of row {i}");
        assert_eq!(op.datatype, expected.datatype, "datatype of row {i}");
        assert_eq!(op.root, expected.root, "root of row {i}");
        assert_eq!(op.request, expected.request, "request of row {i}");
        assert_eq!(op.completes, expected.completes, "completes of row {i}");
        assert_eq!(op.flags, expected.flags, "flags of row {i}");
        assert_eq!(op.depth, 1, "nesting depth of row {i} (inside solve)");
        assert_eq!(op, &expected);
    }
    // A chunk's start times read into one reused buffer: the generator's, row by row.
    let mut starts = vec![7; 3];
    let mut row = 0u64;
    for chunk in trace.op_chunks().iter().filter(|c| c.rank == 0) {
        trace
            .operation_starts_into(chunk.chunk, &mut starts)
            .unwrap();
        assert_eq!(starts.len(), chunk.rows as usize, "chunk {}", chunk.chunk);
        for (i, &t) in starts.iter().enumerate() {
            assert_eq!(
                t,
                rank0_op(row + i as u64).start,
                "row {i} of chunk {}",
                chunk.chunk
            );
        }
        row += u64::from(chunk.rows);
    }
    assert_eq!(row, RANK0_OPS);
    let rank3 = trace.process_operations(3).unwrap();
    assert_eq!(rank3.len(), 1);
    assert_eq!(rank3[0].1.source, Some(1));
    assert_eq!(trace.string(1), Some("MPI_Pcontrol"));
    assert_eq!(trace.kind_name(OpKind::Other(1)), "MPI_Pcontrol");
}

#[test]
fn indexes_select_exactly_the_matching_operations() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    import_sample(&db, "sample");
    let trace = db.trace("sample").unwrap();
    let isends = trace.index(IndexDim::Kind, OpKind::Isend.code()).unwrap();
    assert_eq!(isends.len(), RANK0_OPS / 5);
    assert_eq!(trace.summary().kind_count(OpKind::Isend), RANK0_OPS / 5);
    for (_, op) in trace.operations(&isends).unwrap() {
        assert_eq!(op.kind, OpKind::Isend);
    }
    // Peer 2: Isends with dest 2 (i % 5 == 0 and i % 3 == 1).
    let to2 = trace.index(IndexDim::Peer, 2).unwrap();
    let expected = (0..RANK0_OPS).filter(|i| i % 5 == 0 && i % 3 == 1).count() as u64;
    assert_eq!(to2.len(), expected);
    // Peer 0: Bcasts rooted at 0.
    assert_eq!(trace.index(IndexDim::Peer, 0).unwrap().len(), RANK0_OPS / 5);
    // Communicator 7 holds only rank 3's receive; communicator 0 the rest that name one.
    assert_eq!(trace.index(IndexDim::Comm, 7).unwrap().len(), 1);
    assert_eq!(
        trace.index(IndexDim::Comm, 0).unwrap().len(),
        3 * RANK0_OPS / 5
    );
    assert_eq!(trace.index(IndexDim::Process, 0).unwrap().len(), RANK0_OPS);
    assert_eq!(trace.index(IndexDim::Process, 3).unwrap().len(), 1);
    assert!(trace.index(IndexDim::Process, 2).unwrap().is_empty());
}

#[test]
fn a_failed_import_leaves_nothing_and_keeps_earlier_traces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path).unwrap();
    import_sample(&db, "first");
    let err = db
        .import_events("broken", |sink| {
            sink.header(&header(4))?;
            sink.string(0, "MPI_DOUBLE")?;
            sink.string(1, "MPI_Pcontrol")?;
            for i in 0..100_000 {
                sink.operation(&rank0_op(i))?;
            }
            Err(Error::Usage("input ended half-way".into()))
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "input ended half-way");
    let names: Vec<String> = db.traces().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["first".to_string()]);
    assert!(matches!(db.trace("broken"), Err(Error::NoSuchTrace { .. })));
    drop(db);
    let db = Database::open(&path).unwrap();
    assert_eq!(
        db.trace("first").unwrap().summary().operations,
        RANK0_OPS + 1
    );
    // The name is free again.
    import_sample(&db, "broken");
}

#[test]
fn many_traces_drop_and_duplicate_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    import_sample(&db, "a");
    import_sample(&db, "b");
    let err = db.import_events("a", |s| s.finish()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a trace named \"a\" already exists (drop it first, or import under another --name)"
    );
    db.drop_trace("a").unwrap();
    let names: Vec<String> = db.traces().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["b".to_string()]);
    let err = db.drop_trace("a").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no trace named \"a\" in the database (it holds: b)"
    );
    assert_eq!(
        db.trace("b").unwrap().process_operations(0).unwrap().len() as u64,
        RANK0_OPS
    );
}

#[test]
fn a_database_of_another_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Database::open(&path).unwrap());
    set_manifest_version(&path, 999);
    let err = Database::open(&path).err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "database {}: was written with storage format version 999, but this mtfdb reads version {}; \
             re-import its traces with a matching mtfdb",
            path.display(),
            mtfdb::store::FORMAT_VERSION
        )
    );
}

/// Sets the format version the manifest of the database at `path` records (its checksum
/// line made again), as another build would have written it.
fn set_manifest_version(path: &std::path::Path, version: u32) {
    let file = path.join("MANIFEST");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_str(text.lines().next().unwrap()).unwrap();
    manifest["format_version"] = version.into();
    let body = manifest.to_string();
    let crc = crc32fast::hash(body.as_bytes());
    std::fs::write(&file, format!("{body}\ncrc32 {crc:08x}\n")).unwrap();
}

/// The format version the manifest of the database at `path` records.
fn recorded_version(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path.join("MANIFEST")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    manifest["format_version"].as_u64().unwrap()
}

/// Formats 6 and 7 are upgraded on their first open with write access (their views and
/// stored results moved out of sled: `store::legacy`'s own test); 5 and older are refused.
#[test]
fn a_database_of_format_version_7_is_upgraded_and_an_older_one_refused() {
    let current = mtfdb::store::FORMAT_VERSION;
    assert_eq!(
        current, 8,
        "this test's older version is the one before this build's"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Database::open(&path).unwrap();
        import_sample(&db, "a");
    }
    set_manifest_version(&path, 7);
    {
        let db = Database::open(&path).unwrap();
        let trace = db.trace("a").unwrap();
        assert_eq!(trace.summary().operations, RANK0_OPS + 1);
        assert_eq!(trace.process_operations(0).unwrap().len() as u64, RANK0_OPS);
    }
    assert_eq!(recorded_version(&path), u64::from(current));
    // A version this build does not read is refused, and left as it was.
    set_manifest_version(&path, 5);
    let err = Database::open(&path).err().expect("refused").to_string();
    assert!(err.contains("storage format version 5"), "{err}");
    assert_eq!(recorded_version(&path), 5);
}

#[test]
fn many_handles_open_a_database_at_once_and_each_sees_the_others_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let first = Database::open(&path).unwrap();
    let second = Database::open(&path).unwrap();
    import_sample(&first, "a");
    assert_eq!(second.trace_names().unwrap(), vec!["a"]);
    let reader = second.trace("a").unwrap();
    // Dropped by the other handle: the open trace still reads whole.
    first.drop_trace("a").unwrap();
    assert_eq!(
        reader.process_operations(0).unwrap().len() as u64,
        RANK0_OPS
    );
    assert!(second.trace_names().unwrap().is_empty());
}

#[test]
fn a_file_or_foreign_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hello").unwrap();
    let err = Database::open(&file).err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "database {}: is a file, not an mtfdb database (a database is a directory)",
            file.display()
        )
    );
    let foreign = dir.path().join("foreign");
    {
        let raw = raw_sled(&foreign);
        raw.insert("users", "x").unwrap();
        raw.flush().unwrap();
    }
    let err = Database::open(&foreign).err().expect("refused");
    assert!(
        err.to_string()
            .ends_with("is a sled database but not an mtfdb one (no format version)"),
        "{err}"
    );
}

#[test]
fn a_damaged_chunk_is_reported_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    import_sample(&Database::open(&path).unwrap(), "sample");
    let segment = path.join("segments/0.seg");
    let mut bytes = std::fs::read(&segment).unwrap();
    let original = bytes.clone();
    // Flip one bit in every 4 KiB page's middle until process 0's operations fail: the
    // error must name the trace, the file and the offset.
    let mut reported = None;
    for at in (2048..bytes.len() - 4096).step_by(4096) {
        bytes[at] ^= 0x10;
        std::fs::write(&segment, &bytes).unwrap();
        let db = Database::open(&path).unwrap();
        let trace = db.trace("sample").unwrap();
        match trace.process_operations(0) {
            Ok(ops) => assert_eq!(ops.len() as u64, RANK0_OPS, "flip at {at}"),
            Err(err) => {
                reported = Some((at, err.to_string()));
                break;
            }
        }
        bytes.copy_from_slice(&original);
    }
    let (at, message) = reported.expect("some flip hits an operation chunk");
    assert!(
        message.starts_with(&format!(
            "corrupt database: trace \"sample\": segment file {}: the ",
            segment.display()
        )) && message.contains("fail their checksum"),
        "flip at {at}: {message}"
    );
}

#[test]
fn the_store_api_round_trips_chunks_indexes_and_anomalies_through_a_segment() {
    use mtfdb::model::Anomaly;
    use mtfdb::store::tables::OperationRows;
    use mtfdb::store::{Store, Table, TraceMeta};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    let chunk_of = |chunk: u32| {
        let mut rows = OperationRows::with_capacity(1000);
        for i in 0..1000u64 {
            let op = rank0_op(u64::from(chunk) * 1000 + i);
            rows.push(&op, op.depth);
        }
        rows.into_columns()
    };
    let mut writer = store.begin_import("t").unwrap();
    // A second import cannot take the same name while the first runs.
    assert!(matches!(
        store.begin_import("t"),
        Err(Error::TraceExists(name)) if name == "t"
    ));
    let anomalies = vec![Anomaly::LeaveWithoutEnter {
        rank: 1,
        thread: 0,
        time: 5,
        routine: 2,
    }];
    // Operation chunks are stored two to a pack, each placed by its directory entry; the
    // index postings are per pack.
    let mut op_chunks = Vec::new();
    for pack in (0..5u32).rev() {
        let mut bytes = Vec::new();
        let mut peers = roaring::RoaringTreemap::new();
        for chunk in [2 * pack, 2 * pack + 1] {
            let encoded = chunk_of(chunk).encode();
            op_chunks.push(OpChunkInfo {
                chunk,
                rows: 3,
                pack,
                offset: bytes.len() as u32,
                len: encoded.len() as u32,
                ..OpChunkInfo::default()
            });
            bytes.extend_from_slice(&encoded);
            peers.extend(u64::from(chunk) << 16..(u64::from(chunk) << 16) + 3);
        }
        writer.put_op_pack(pack, &bytes, pack % 2 == 0).unwrap();
        writer
            .put_postings(
                IndexDim::Peer,
                pack,
                &mut [(4, peers), (9, [1u64].into_iter().collect())],
            )
            .unwrap();
    }
    op_chunks.sort_by_key(|c| c.chunk);
    writer.put_anomalies(0, &anomalies).unwrap();
    writer
        .commit(&TraceMeta {
            name: "t".into(),
            anomaly_chunks: 1,
            op_chunks,
            ..TraceMeta::default()
        })
        .unwrap();
    let reader = store.reader("t").unwrap();
    for chunk in 0..10 {
        assert_eq!(
            reader.chunk(Table::Operations, chunk).unwrap(),
            chunk_of(chunk),
            "chunk {chunk}"
        );
    }
    assert_eq!(reader.index(IndexDim::Peer, 4).unwrap().len(), 30);
    assert_eq!(
        reader
            .index_in_chunks(IndexDim::Peer, 4, &[2, 7, 11])
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        vec![
            2 << 16,
            (2 << 16) + 1,
            (2 << 16) + 2,
            7 << 16,
            (7 << 16) + 1,
            (7 << 16) + 2
        ]
    );
    assert!(reader.index(IndexDim::Peer, 5).unwrap().is_empty());
    assert_eq!(reader.anomalies().unwrap(), anomalies);
    // An import dropped without commit leaves no file behind and frees its name.
    let before = std::fs::read_dir(dir.path().join("db/segments"))
        .unwrap()
        .count();
    let mut second = store.begin_import("u").unwrap();
    second.put_op_pack(0, &chunk_of(0).encode(), false).unwrap();
    drop(second);
    let after = std::fs::read_dir(dir.path().join("db/segments"))
        .unwrap()
        .count();
    assert_eq!((before, after), (1, 1));
    let names: Vec<String> = store
        .ready_traces()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["t".to_string()]);
}

/// Imports the generator's stencil2d of `ranks` ranks with at least `operations` operations
/// through the library (no file), then reads every operation back chunk by chunk and checks
/// each rank's operations, times and bytes against the generator's ground truth.
fn import_and_read_back(ranks: u32, operations: u64) -> mtfdb::TraceInfo {
    use mtfdb::gen::{generate, GenConfig, Scenario};
    let mut iterations = 1;
    let truth = loop {
        let config = GenConfig::new(Scenario::Stencil2d, ranks, iterations);
        let mut count = CountingSink::default();
        let truth = generate(&config, &mut count).unwrap();
        if truth.operations >= operations {
            break (config, truth);
        }
        let per_iteration = (truth.operations / u64::from(iterations)).max(1);
        iterations = (operations.div_ceil(per_iteration) as u32).max(iterations + 1);
    };
    let (config, truth) = truth;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    let info = db
        .import_events("big", |sink| generate(&config, sink).map(|_| ()))
        .unwrap();
    assert_eq!(info.summary.operations, truth.operations);
    let trace = db.trace("big").unwrap();
    let mut ops = vec![0u64; ranks as usize];
    let mut sent = vec![0u64; ranks as usize];
    let mut last_start = vec![0u64; ranks as usize];
    let mut ids = std::collections::HashSet::new();
    for chunk in trace.op_chunks() {
        let rows = trace.chunk_operations(chunk).unwrap();
        assert_eq!(rows.len() as u32, chunk.rows, "chunk {}", chunk.chunk);
        for (id, op) in rows {
            let r = op.rank as usize;
            assert_eq!(op.rank, chunk.rank);
            assert!(op.start >= last_start[r], "rank {r} goes back in time");
            last_start[r] = op.start;
            ops[r] += 1;
            if op.kind.is_send() {
                sent[r] += op.send_bytes;
            }
            assert!(ids.insert(id), "operation id {id} read twice");
        }
    }
    for t in &truth.per_rank {
        let r = t.rank as usize;
        assert_eq!(
            (ops[r], sent[r]),
            (t.operations, t.p2p_sent_bytes),
            "rank {r}"
        );
    }
    info
}

/// Counts what a source emits, to size a generated trace without storing it.
#[derive(Default)]
struct CountingSink {
    operations: u64,
}

impl EventSink for CountingSink {
    fn header(&mut self, _: &TraceHeader) -> mtfdb::Result<()> {
        Ok(())
    }
    fn string(&mut self, _: u32, _: &str) -> mtfdb::Result<()> {
        Ok(())
    }
    fn operation(&mut self, _: &Operation) -> mtfdb::Result<()> {
        self.operations += 1;
        Ok(())
    }
    fn routine(&mut self, _: &RoutineEvent) -> mtfdb::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> mtfdb::Result<()> {
        Ok(())
    }
}

/// Many ranks with few rows each: their rows are parked and packed, and every operation
/// still reads back exactly once, in order, with its bytes.
#[test]
fn many_small_ranks_are_packed_and_read_back_exactly() {
    import_and_read_back(3_000, 600_000);
}

/// The scale: 16,384 ranks and 20M operations.
#[test]
fn sixteen_thousand_ranks_and_twenty_million_operations_import_and_read_back() {
    let info = import_and_read_back(16_384, 20_000_000);
    assert!(info.summary.operations >= 20_000_000);
}
