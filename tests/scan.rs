//! The scan seam (src/store/scan.rs): it reads, row for row, what the store's older paths read
//! (`Trace::chunk_operations`, `Trace::messages`), with each filter (ranks, window, ids)
//! against the rows the filter's definition keeps; and the analyses and record targets that go
//! through it decode each chunk once per statement, on a generated CG trace with several
//! chunks per rank.

mod common;

use common::{generated_db, EXAMPLE_TRACE};
use mtfdb::analysis::critical_path::critical_path;
use mtfdb::analysis::waits::wait_states;
use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::model::{Message, OpId, Operation, Rank, Time};
use mtfdb::query::Session;
use mtfdb::store::scan::{Order, Projection, ScanFilter, ScanRequest};
use mtfdb::store::{DecodeCount, MessageField, OperationField, Table};
use mtfdb::{Database, Trace};
use roaring::RoaringTreemap;

/// Every operation of `trace` through the old path, with its id.
fn old_operations(trace: &Trace) -> Vec<(OpId, Operation)> {
    let mut out = Vec::new();
    for info in trace.op_chunks() {
        out.extend(trace.chunk_operations(info).unwrap());
    }
    out.sort_by_key(|(id, _)| *id);
    out
}

/// The operations a scan with `filter` keeps, whole, with their ids, in id order; and the
/// chunk numbers of its batches in the order `order` handed them out.
fn scanned_operations(
    trace: &Trace,
    filter: ScanFilter<'_>,
    order: Order,
) -> (Vec<(OpId, Operation)>, Vec<u32>) {
    let scan = trace
        .scan(&ScanRequest {
            projection: Projection::Operations(&OperationField::ALL),
            filter,
            order,
        })
        .unwrap();
    let mut out = Vec::new();
    let mut chunks = Vec::new();
    let mut iter = scan.iter();
    for batch in iter.by_ref() {
        let batch = batch.unwrap();
        chunks.push(batch.chunk());
        let ops = batch.operations().unwrap();
        let (rank, thread) = batch.location().unwrap();
        // A row's completed requests start after those of every earlier row.
        let mut list_at = vec![0; batch.rows_in_chunk() + 1];
        for row in 0..batch.rows_in_chunk() {
            list_at[row + 1] = list_at[row] + ops.completes_count(row);
        }
        for row in batch.rows() {
            let op = ops.operation(row, rank, thread, list_at[row]).unwrap();
            out.push((ops.id(row), op));
        }
    }
    assert_eq!(
        iter.stats().decoded(),
        iter.stats().planned,
        "every planned chunk is decoded once"
    );
    out.sort_by_key(|(id, _)| *id);
    (out, chunks)
}

fn messages_scanned(trace: &Trace, filter: ScanFilter<'_>) -> Vec<(u64, Message)> {
    let scan = trace
        .scan(&ScanRequest {
            projection: Projection::Messages(&MessageField::ALL),
            filter,
            order: Order::Id,
        })
        .unwrap();
    let mut out = Vec::new();
    let mut last_chunk = None;
    for batch in scan.iter() {
        let batch = batch.unwrap();
        assert!(last_chunk < Some(batch.chunk()), "batches in chunk order");
        last_chunk = Some(batch.chunk());
        let m = batch.messages().unwrap();
        out.extend(batch.rows().map(|row| (m.id(row), m.message(row))));
    }
    out
}

/// The example trace (one chunk per rank) and a CG trace with several chunks per rank.
fn traces() -> Vec<(tempfile::TempDir, Database)> {
    let (dir, db) = common::temp_db();
    db.import(EXAMPLE_TRACE, Some("t")).unwrap();
    vec![(dir, db), generated_db(&several_chunks_per_rank())]
}

/// A CG run of 4 ranks long enough that every rank's operations fill several chunks.
fn several_chunks_per_rank() -> GenConfig {
    GenConfig::new(Scenario::Cg, 4, 30_000)
}

fn overlaps(start: Time, end: Time, (from, to): (Time, Time)) -> bool {
    start <= to && end >= from
}

#[test]
fn an_operation_scan_reads_what_the_chunk_reads_read_with_every_filter() {
    for (_dir, db) in traces() {
        let trace = db.trace("t").unwrap();
        let all = old_operations(&trace);
        assert!(all.len() > 1000);
        let (scanned, chunks) = scanned_operations(&trace, ScanFilter::default(), Order::Id);
        assert_eq!(scanned, all);
        assert!(chunks.windows(2).all(|w| w[0] < w[1]), "chunk (id) order");

        // Ranks: only those ranks' chunks.
        let ranks: [Rank; 2] = [1, 3];
        let filter = ScanFilter {
            ranks: Some(&ranks),
            ..ScanFilter::default()
        };
        let want: Vec<_> = all
            .iter()
            .filter(|(_, o)| ranks.contains(&o.rank))
            .cloned()
            .collect();
        assert!(!want.is_empty());
        assert_eq!(scanned_operations(&trace, filter, Order::Id).0, want);

        // A window in the middle of the run: operations overlapping it.
        let first = all.iter().map(|(_, o)| o.start).min().unwrap();
        let last = all.iter().map(|(_, o)| o.end).max().unwrap();
        let window = (first + (last - first) / 3, first + (last - first) / 3 * 2);
        let filter = ScanFilter {
            window: Some(window),
            ..ScanFilter::default()
        };
        let want: Vec<_> = all
            .iter()
            .filter(|(_, o)| overlaps(o.start, o.end, window))
            .cloned()
            .collect();
        assert!(!want.is_empty() && want.len() < all.len());
        assert_eq!(scanned_operations(&trace, filter, Order::Id).0, want);

        // Ids: every seventh operation, and with a rank filter ANDed.
        let ids: RoaringTreemap = all.iter().map(|(id, _)| *id).step_by(7).collect();
        let want: Vec<_> = all.iter().step_by(7).cloned().collect();
        let filter = ScanFilter {
            ids: Some(&ids),
            ..ScanFilter::default()
        };
        assert_eq!(scanned_operations(&trace, filter, Order::Id).0, want);
        let filter = ScanFilter {
            ids: Some(&ids),
            ranks: Some(&ranks),
            window: Some(window),
        };
        let want: Vec<_> = want
            .into_iter()
            .filter(|(_, o)| ranks.contains(&o.rank) && overlaps(o.start, o.end, window))
            .collect();
        assert_eq!(scanned_operations(&trace, filter, Order::Id).0, want);

        // Location order: each location's chunks in row order, locations by rank.
        let (_, chunks) = scanned_operations(&trace, ScanFilter::default(), Order::Location);
        let place = |chunk: u32| {
            let c = trace.op_chunks().iter().find(|c| c.chunk == chunk).unwrap();
            (c.rank, c.thread, c.first_row)
        };
        let places: Vec<_> = chunks.iter().map(|&c| place(c)).collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}");
        assert_eq!(chunks.len(), trace.op_chunks().len());
    }
}

#[test]
fn a_message_scan_reads_what_the_message_reads_read_with_every_filter() {
    for (_dir, db) in traces() {
        let trace = db.trace("t").unwrap();
        let all: Vec<(u64, Message)> = (0..).zip(trace.messages().unwrap()).collect();
        assert!(all.len() > 100);
        assert_eq!(messages_scanned(&trace, ScanFilter::default()), all);

        let ranks: [Rank; 1] = [2];
        let filter = ScanFilter {
            ranks: Some(&ranks),
            ..ScanFilter::default()
        };
        let want: Vec<_> = all
            .iter()
            .filter(|(_, m)| m.sender == 2 || m.receiver == 2)
            .cloned()
            .collect();
        assert!(!want.is_empty() && want.len() < all.len());
        assert_eq!(messages_scanned(&trace, filter), want);

        let first = all.iter().map(|(_, m)| m.send_time).min().unwrap();
        let last = all.iter().map(|(_, m)| m.recv_time).max().unwrap();
        let window = (
            first + (last - first) / 2,
            first + (last - first) / 2 + 1_000_000,
        );
        let ids: RoaringTreemap = (0..all.len() as u64).step_by(3).collect();
        let filter = ScanFilter {
            window: Some(window),
            ids: Some(&ids),
            ..ScanFilter::default()
        };
        let want: Vec<_> = all
            .iter()
            .step_by(3)
            .filter(|(_, m)| overlaps(m.send_time, m.recv_time, window))
            .cloned()
            .collect();
        assert!(!want.is_empty());
        assert_eq!(messages_scanned(&trace, filter), want);
    }
}

#[test]
fn par_fold_decodes_each_chunk_once_and_sees_every_row() {
    let (_dir, db) = generated_db(&several_chunks_per_rank());
    let trace = db.trace("t").unwrap();
    db.count_decodes();
    let scan = trace
        .scan(&ScanRequest {
            projection: Projection::Operations(&[OperationField::Start]),
            filter: ScanFilter::default(),
            order: Order::Id,
        })
        .unwrap();
    let (rows, mut chunks) = scan
        .par_fold(
            || (0u64, Vec::new()),
            |(n, mut chunks), batch| {
                chunks.push(batch.chunk());
                Ok((n + batch.kept() as u64, chunks))
            },
            |a, b| (a.0 + b.0, [a.1, b.1].concat()),
        )
        .unwrap();
    assert_eq!(rows, trace.summary().operations);
    chunks.sort_unstable();
    let all: Vec<u32> = trace.op_chunks().iter().map(|c| c.chunk).collect();
    assert_eq!(chunks, all);
    assert_eq!(scan.stats().decoded(), all.len() as u64);
    assert_eq!(read_once(&db, Table::Operations), all);
}

/// The chunks of `table` read since counting began, each asserted read exactly once.
fn read_once(db: &Database, table: Table) -> Vec<u32> {
    let counts: Vec<DecodeCount> = db
        .decodes()
        .into_iter()
        .filter(|c| c.table == table)
        .collect();
    let twice: Vec<&DecodeCount> = counts.iter().filter(|c| c.reads > 1).collect();
    assert!(twice.is_empty(), "chunks read more than once: {twice:?}");
    counts.iter().map(|c| c.chunk).collect()
}

#[test]
fn waits_critical_path_and_record_targets_decode_each_chunk_once_per_statement() {
    let (_dir, db) = generated_db(&several_chunks_per_rank());
    let trace = db.trace("t").unwrap();
    let ranks = trace.header().processes.len();
    let op_chunks: Vec<u32> = trace.op_chunks().iter().map(|c| c.chunk).collect();
    assert!(
        op_chunks.len() >= 2 * ranks,
        "{} chunks for {ranks} ranks: several per rank",
        op_chunks.len()
    );
    let message_chunks: Vec<u32> = (0..trace.message_chunk_count()).collect();
    assert!(message_chunks.len() > 1);
    assert!(trace.request_link_chunk_count() > 1, "several link chunks");

    db.count_decodes();
    let waits = wait_states(&trace).unwrap();
    assert!(!waits.waits.is_empty());
    assert_eq!(read_once(&db, Table::Operations), op_chunks);
    assert_eq!(read_once(&db, Table::Messages), message_chunks);

    db.count_decodes();
    let path = critical_path(&trace).unwrap();
    assert!(!path.segments.is_empty());
    assert_eq!(read_once(&db, Table::Operations), op_chunks);
    assert_eq!(read_once(&db, Table::Messages), message_chunks);

    // Every request-link chunk names operations of every chunk; each is decoded once.
    let mut session = Session::new(db);
    session.use_trace("t").unwrap();
    session.database().count_decodes();
    let requests = session.run("SELECT REQUESTS").unwrap();
    assert_eq!(requests.rows.len() as u64, trace.summary().request_links);
    let db = session.database();
    assert_eq!(read_once(db, Table::Operations), op_chunks);
    let links: Vec<u32> = (0..trace.request_link_chunk_count()).collect();
    assert_eq!(read_once(db, Table::Links), links);

    session.database().count_decodes();
    let instances = session.run("SELECT COLLECTIVE INSTANCES").unwrap();
    assert_eq!(
        instances.rows.len() as u64,
        trace.summary().collective_instances
    );
    read_once(session.database(), Table::Operations);
}
