//! The matcher on small hand-written streams: every value asserted exactly.

use mtfdb::ingest::matcher::{MatchLog, MatchStats, Matcher};
use mtfdb::model::{
    flags, Anomaly, CollectiveInstance, Communicator, Message, OpId, OpKind, Operation, Rank,
    RequestLink, Time, TraceHeader,
};

const WORLD: u32 = 0;

fn header(n: u32, extra: &[(u32, &[Rank])]) -> TraceHeader {
    let mut header = TraceHeader::world(n, "MPI_COMM_WORLD");
    for (id, members) in extra {
        header.communicators.push(Communicator {
            id: *id,
            name: format!("C{id}"),
            members: members.to_vec(),
        });
    }
    header
}

/// Feeds operations with dense ids from 0 and collects what the matcher emits.
struct Run {
    matcher: Matcher,
    log: MatchLog,
    next: OpId,
}

impl Run {
    fn new(header: &TraceHeader) -> Run {
        Run {
            matcher: Matcher::new(header),
            log: MatchLog::default(),
            next: 0,
        }
    }

    fn op(&mut self, op: Operation) -> OpId {
        let id = self.next;
        self.next += 1;
        self.matcher.operation(id, &op, &mut self.log).unwrap();
        id
    }

    /// Every rank finalizes.
    fn finalize_all(&mut self, n: u32) {
        for r in 0..n {
            self.op(Operation::new(r, OpKind::Finalize, 1_000_000, 1_000_001));
        }
    }

    fn finish(self) -> (MatchLog, MatchStats) {
        let mut log = self.log;
        let stats = self.matcher.finish(&mut log).unwrap();
        (log, stats)
    }
}

fn send(rank: Rank, dest: Rank, tag: i32, bytes: u64, start: Time, end: Time) -> Operation {
    let mut op = Operation::new(rank, OpKind::Send, start, end);
    op.comm = Some(WORLD);
    op.dest = Some(dest);
    op.send_tag = Some(tag);
    op.send_bytes = bytes;
    op
}

fn recv(rank: Rank, source: Rank, tag: i32, bytes: u64, start: Time, end: Time) -> Operation {
    let mut op = Operation::new(rank, OpKind::Recv, start, end);
    op.comm = Some(WORLD);
    op.source = Some(source);
    op.recv_tag = Some(tag);
    op.recv_bytes = bytes;
    op
}

fn isend(rank: Rank, dest: Rank, tag: i32, req: u64, start: Time) -> Operation {
    let mut op = send(rank, dest, tag, 4, start, start + 1);
    op.kind = OpKind::Isend;
    op.request = Some(req);
    op
}

fn irecv(rank: Rank, source: Rank, tag: i32, req: u64, start: Time) -> Operation {
    let mut op = recv(rank, source, tag, 4, start, start + 1);
    op.kind = OpKind::Irecv;
    op.request = Some(req);
    op
}

fn completion(rank: Rank, kind: OpKind, reqs: &[u64], start: Time) -> Operation {
    let mut op = Operation::new(rank, kind, start, start + 1);
    op.completes = reqs.to_vec();
    op
}

fn coll(rank: Rank, kind: OpKind, comm: u32, root: Option<Rank>, start: Time) -> Operation {
    let mut op = Operation::new(rank, kind, start, start + 10);
    op.comm = Some(comm);
    op.root = root;
    op
}

#[allow(clippy::too_many_arguments)]
fn msg(
    sender: Rank,
    receiver: Rank,
    tag: i32,
    bytes: u64,
    send_time: Time,
    recv_time: Time,
    send_op: OpId,
    recv_op: OpId,
) -> Message {
    Message {
        sender,
        receiver,
        comm: WORLD,
        tag,
        bytes,
        send_time,
        recv_time,
        send_op,
        recv_op,
    }
}

fn link(request_op: OpId, completion_op: OpId) -> RequestLink {
    RequestLink {
        request_op,
        completion_op,
    }
}

#[test]
fn blocking_pair_gives_one_message_with_send_start_and_receive_end() {
    let mut run = Run::new(&header(2, &[]));
    let s = run.op(send(0, 1, 7, 100, 10, 20));
    let r = run.op(recv(1, 0, 7, 100, 5, 30));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(log.messages, vec![msg(0, 1, 7, 100, 10, 30, s, r)]);
    assert!(log.anomalies.is_empty());
    assert_eq!(stats.messages, 1);
    assert_eq!(stats.message_bytes, 100);
    assert_eq!(stats.peak_in_flight, 1);
}

#[test]
fn wildcard_any_source_receive_matches_the_resolved_sender() {
    let mut run = Run::new(&header(3, &[]));
    let s2 = run.op(send(2, 0, 5, 8, 1, 2));
    let s1 = run.op(send(1, 0, 5, 16, 1, 2));
    // Rank 0 posted ANY_SOURCE; the status says the message came from rank 1.
    let mut r = recv(0, 1, 5, 16, 3, 4);
    r.flags = flags::ANY_SOURCE | flags::ANY_TAG;
    let r = run.op(r);
    let r2 = run.op(recv(0, 2, 5, 8, 5, 6));
    run.finalize_all(3);
    let (log, _) = run.finish();
    assert_eq!(
        log.messages,
        vec![msg(1, 0, 5, 16, 1, 4, s1, r), msg(2, 0, 5, 8, 1, 6, s2, r2)]
    );
    assert!(log.anomalies.is_empty());
}

#[test]
fn two_senders_same_tag_interleaved_match_within_their_pair_in_order() {
    let mut run = Run::new(&header(3, &[]));
    let a1 = run.op(send(0, 1, 9, 1, 10, 11));
    let b1 = run.op(send(2, 1, 9, 2, 10, 11));
    let rb1 = run.op(recv(1, 2, 9, 2, 12, 13));
    let a2 = run.op(send(0, 1, 9, 3, 20, 21));
    let ra1 = run.op(recv(1, 0, 9, 1, 14, 15));
    let b2 = run.op(send(2, 1, 9, 4, 20, 21));
    let ra2 = run.op(recv(1, 0, 9, 3, 22, 23));
    let rb2 = run.op(recv(1, 2, 9, 4, 24, 25));
    run.finalize_all(3);
    let (log, stats) = run.finish();
    assert_eq!(
        log.messages,
        vec![
            msg(2, 1, 9, 2, 10, 13, b1, rb1),
            msg(0, 1, 9, 1, 10, 15, a1, ra1),
            msg(0, 1, 9, 3, 20, 23, a2, ra2),
            msg(2, 1, 9, 4, 20, 25, b2, rb2),
        ]
    );
    assert_eq!(stats.message_bytes, 10);
}

#[test]
fn non_overtaking_when_receives_come_first_in_the_stream() {
    let mut run = Run::new(&header(2, &[]));
    let r1 = run.op(recv(1, 0, 4, 10, 0, 50));
    let r2 = run.op(recv(1, 0, 4, 20, 51, 60));
    assert_eq!(run.matcher.in_flight(), 2);
    let s1 = run.op(send(0, 1, 4, 10, 5, 6));
    let s2 = run.op(send(0, 1, 4, 20, 7, 8));
    assert_eq!(run.matcher.in_flight(), 0);
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.messages,
        vec![
            msg(0, 1, 4, 10, 5, 50, s1, r1),
            msg(0, 1, 4, 20, 7, 60, s2, r2)
        ]
    );
    assert_eq!(stats.peak_in_flight, 2);
}

#[test]
fn different_tags_do_not_cross_match() {
    let mut run = Run::new(&header(2, &[]));
    let s1 = run.op(send(0, 1, 1, 8, 0, 1));
    let s2 = run.op(send(0, 1, 2, 8, 2, 3));
    let r2 = run.op(recv(1, 0, 2, 8, 0, 4));
    let r1 = run.op(recv(1, 0, 1, 8, 5, 6));
    let r3 = run.op(recv(1, 0, 3, 8, 7, 8));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.messages,
        vec![msg(0, 1, 2, 8, 2, 4, s2, r2), msg(0, 1, 1, 8, 0, 6, s1, r1)]
    );
    assert_eq!(
        log.anomalies,
        vec![Anomaly::UnmatchedReceive {
            op: r3,
            rank: 1,
            source: 0,
            comm: WORLD,
            tag: 3
        }]
    );
    assert_eq!(stats.unmatched_receives, 1);
}

#[test]
fn different_communicators_do_not_cross_match() {
    let mut run = Run::new(&header(2, &[(1, &[0, 1])]));
    let mut s = send(0, 1, 1, 8, 0, 1);
    s.comm = Some(1);
    let s = run.op(s);
    let r = run.op(recv(1, 0, 1, 8, 0, 2));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert!(log.messages.is_empty());
    assert_eq!(
        log.anomalies,
        vec![
            Anomaly::UnmatchedSend {
                op: s,
                rank: 0,
                dest: 1,
                comm: 1,
                tag: 1
            },
            Anomaly::UnmatchedReceive {
                op: r,
                rank: 1,
                source: 0,
                comm: WORLD,
                tag: 1
            },
        ]
    );
    assert_eq!((stats.unmatched_sends, stats.unmatched_receives), (1, 1));
}

#[test]
fn isend_irecv_waitall_link_every_request() {
    let mut run = Run::new(&header(2, &[]));
    let s_a = run.op(isend(0, 1, 1, 100, 0));
    let s_b = run.op(isend(0, 1, 2, 101, 1));
    let r_b = run.op(irecv(1, 0, 2, 100, 0));
    let r_a = run.op(irecv(1, 0, 1, 101, 1));
    // Both ranks use request ids 100 and 101: requests are per rank. Four requests are open,
    // and both matched messages wait for their receives' completion (the receive time), each
    // receive being tracked until then.
    assert_eq!(run.matcher.in_flight(), 8);
    let w1 = run.op(completion(1, OpKind::Waitall, &[100, 101], 5));
    let w0 = run.op(completion(0, OpKind::Waitall, &[101, 100], 5));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.links,
        vec![link(r_b, w1), link(r_a, w1), link(s_b, w0), link(s_a, w0)]
    );
    assert_eq!(
        log.messages,
        vec![
            // Received when rank 1's Waitall ended, not when its Irecvs were posted.
            msg(0, 1, 2, 4, 1, 6, s_b, r_b),
            msg(0, 1, 1, 4, 0, 6, s_a, r_a)
        ]
    );
    assert!(log.anomalies.is_empty());
    assert_eq!(stats.request_links, 4);
    assert_eq!(stats.wait_before_start, 0);
}

#[test]
fn waitany_waitsome_and_unsuccessful_tests() {
    let mut run = Run::new(&header(2, &[]));
    let a = run.op(irecv(0, 1, 1, 1, 0));
    let b = run.op(irecv(0, 1, 2, 2, 1));
    let c = run.op(irecv(0, 1, 3, 3, 2));
    // A Test that found nothing completes nothing, even if the tracer listed the request.
    let mut test = completion(0, OpKind::Test, &[1], 3);
    test.flags = flags::NOT_COMPLETED;
    run.op(test);
    let mut testany = completion(0, OpKind::Testany, &[], 4);
    testany.flags = flags::NOT_COMPLETED;
    run.op(testany);
    // Three receives wait for their sends, three requests are open, three non-blocking
    // receives are tracked until they complete.
    assert_eq!(run.matcher.in_flight(), 9);
    let wany = run.op(completion(0, OpKind::Waitany, &[2], 5));
    let wsome = run.op(completion(0, OpKind::Waitsome, &[3, 1], 6));
    // The receives still wait for their sends, each with the time it completed.
    assert_eq!(run.matcher.in_flight(), 6);
    // A successful Test of a re-used request id links to the new request.
    let d = run.op(irecv(0, 1, 4, 1, 7));
    let test_ok = run.op(completion(0, OpKind::Test, &[1], 8));
    for (tag, t) in [(1, 10), (2, 11), (3, 12), (4, 13)] {
        run.op(send(1, 0, tag, 4, t, t + 1));
    }
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.links,
        vec![
            link(b, wany),
            link(c, wsome),
            link(a, wsome),
            link(d, test_ok)
        ]
    );
    assert_eq!(log.messages.len(), 4);
    assert!(log.anomalies.is_empty());
    assert_eq!(stats.request_links, 4);
}

#[test]
fn send_never_received_is_an_anomaly_with_its_op_id() {
    let mut run = Run::new(&header(2, &[]));
    run.op(send(0, 1, 1, 8, 0, 1));
    run.op(recv(1, 0, 1, 8, 0, 2));
    let lost = run.op(send(0, 1, 1, 8, 3, 4));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(log.messages.len(), 1);
    assert_eq!(
        log.anomalies,
        vec![Anomaly::UnmatchedSend {
            op: lost,
            rank: 0,
            dest: 1,
            comm: WORLD,
            tag: 1
        }]
    );
    assert_eq!(stats.unmatched_sends, 1);
    assert_eq!(stats.unmatched_receives, 0);
}

#[test]
fn leftovers_are_reported_in_op_id_order() {
    let mut run = Run::new(&header(3, &[]));
    let a = run.op(recv(2, 0, 1, 8, 0, 1));
    let b = run.op(send(0, 1, 5, 8, 0, 1));
    let c = run.op(recv(1, 2, 2, 8, 0, 1));
    let d = run.op(send(0, 2, 6, 8, 2, 3));
    run.finalize_all(3);
    let (log, _) = run.finish();
    let ops: Vec<OpId> = log
        .anomalies
        .iter()
        .map(|a| match a {
            Anomaly::UnmatchedSend { op, .. } | Anomaly::UnmatchedReceive { op, .. } => *op,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(ops, vec![a, b, c, d]);
}

#[test]
fn self_send_is_a_normal_message() {
    let mut run = Run::new(&header(1, &[]));
    let s = run.op(isend(0, 0, 3, 9, 0));
    let r = run.op(recv(0, 0, 3, 4, 1, 2));
    let w = run.op(completion(0, OpKind::Wait, &[9], 3));
    run.finalize_all(1);
    let (log, stats) = run.finish();
    assert_eq!(log.messages, vec![msg(0, 0, 3, 4, 0, 2, s, r)]);
    assert_eq!(log.links, vec![link(s, w)]);
    assert!(log.anomalies.is_empty());
    assert_eq!(stats.messages, 1);
}

#[test]
fn sendrecv_exchange_gives_two_messages() {
    let mut run = Run::new(&header(2, &[]));
    let sr = |rank: Rank, peer: Rank, bytes: u64, start: Time| {
        let mut op = send(rank, peer, 0, bytes, start, start + 10);
        op.kind = OpKind::Sendrecv;
        op.source = Some(peer);
        op.recv_tag = Some(0);
        op.recv_bytes = 8;
        op
    };
    let x = run.op(sr(0, 1, 8, 100));
    assert_eq!(run.matcher.in_flight(), 2);
    let y = run.op(sr(1, 0, 8, 101));
    assert_eq!(run.matcher.in_flight(), 0);
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.messages,
        vec![
            msg(1, 0, 0, 8, 101, 110, y, x),
            msg(0, 1, 0, 8, 100, 111, x, y)
        ]
    );
    assert_eq!(stats.messages, 2);
    assert!(log.anomalies.is_empty());
}

#[test]
fn collective_on_sub_communicator_completes_with_its_members_only() {
    let mut run = Run::new(&header(4, &[(5, &[3, 1])]));
    let a = run.op(coll(3, OpKind::Allreduce, 5, None, 0));
    // Ranks 0 and 2 are not members; a world collective by rank 0 is a separate series.
    let w0 = run.op(coll(0, OpKind::Allreduce, WORLD, None, 1));
    assert!(run.log.collectives.is_empty());
    let b = run.op(coll(1, OpKind::Allreduce, 5, None, 2));
    assert_eq!(
        run.log.collectives,
        vec![CollectiveInstance {
            kind: OpKind::Allreduce,
            comm: 5,
            root: None,
            ops: vec![a, b],
            start: 0,
            end: 12,
            send_bytes: 0,
            recv_bytes: 0,
        }]
    );
    assert_eq!(run.matcher.in_flight(), 1);
    run.finalize_all(4);
    let (log, stats) = run.finish();
    assert_eq!(log.collectives.len(), 2);
    assert_eq!(log.collectives[1].ops, vec![w0]);
    assert_eq!(
        log.anomalies,
        vec![Anomaly::IncompleteCollective {
            kind: OpKind::Allreduce,
            comm: WORLD,
            present: 1,
            expected: 4
        }]
    );
    assert_eq!(
        (stats.collectives_complete, stats.collectives_partial),
        (1, 1)
    );
}

#[test]
fn non_member_collective_call_is_counted_and_ignored() {
    let mut run = Run::new(&header(3, &[(5, &[0, 1])]));
    run.op(coll(2, OpKind::Barrier, 5, None, 0));
    let a = run.op(coll(0, OpKind::Barrier, 5, None, 0));
    let b = run.op(coll(1, OpKind::Barrier, 5, None, 0));
    run.finalize_all(3);
    let (log, stats) = run.finish();
    assert_eq!(log.collectives.len(), 1);
    assert_eq!(log.collectives[0].ops, vec![a, b]);
    assert_eq!(stats.unmatchable_collectives, 1);
    assert!(log.anomalies.is_empty());
}

#[test]
fn rooted_collective_instance_fields() {
    let mut run = Run::new(&header(3, &[]));
    let mk = |rank: Rank, start: Time, end: Time, send: u64, recv: u64| {
        let mut op = coll(rank, OpKind::Gather, WORLD, Some(2), start);
        op.end = end;
        op.send_bytes = send;
        op.recv_bytes = recv;
        op
    };
    let a = run.op(mk(1, 50, 60, 8, 0));
    let b = run.op(mk(2, 40, 90, 8, 24));
    let c = run.op(mk(0, 45, 55, 8, 0));
    run.finalize_all(3);
    let (log, stats) = run.finish();
    assert_eq!(
        log.collectives,
        vec![CollectiveInstance {
            kind: OpKind::Gather,
            comm: WORLD,
            root: Some(2),
            ops: vec![a, b, c],
            start: 40,
            end: 90,
            send_bytes: 24,
            recv_bytes: 24,
        }]
    );
    assert_eq!(stats.root_mismatches, 0);
    assert!(log.anomalies.is_empty());
}

#[test]
fn root_mismatch_keeps_the_first_root_and_is_counted() {
    let mut run = Run::new(&header(2, &[]));
    run.op(coll(0, OpKind::Bcast, WORLD, Some(0), 0));
    run.op(coll(1, OpKind::Bcast, WORLD, Some(1), 0));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(log.collectives.len(), 1);
    assert_eq!(log.collectives[0].root, Some(0));
    assert_eq!(stats.root_mismatches, 1);
    assert_eq!(
        log.anomalies,
        vec![Anomaly::RootMismatch {
            op: 1,
            rank: 1,
            kind: OpKind::Bcast,
            comm: WORLD
        }]
    );
}

#[test]
fn repeated_collectives_form_successive_instances_and_kinds_stay_apart() {
    let mut run = Run::new(&header(2, &[]));
    // Rank 0 calls Bcast twice before rank 1 calls it once; Ibcast is its own series.
    let a0 = run.op(coll(0, OpKind::Bcast, WORLD, Some(0), 0));
    let a1 = run.op(coll(0, OpKind::Bcast, WORLD, Some(0), 20));
    let mut ib = coll(0, OpKind::Ibcast, WORLD, Some(0), 40);
    ib.request = Some(1);
    let i0 = run.op(ib);
    // Two Bcast instances, one Ibcast instance and one request are held.
    assert_eq!(run.matcher.in_flight(), 4);
    let b0 = run.op(coll(1, OpKind::Bcast, WORLD, Some(0), 5));
    let b1 = run.op(coll(1, OpKind::Bcast, WORLD, Some(0), 25));
    let mut ib = coll(1, OpKind::Ibcast, WORLD, Some(0), 45);
    ib.request = Some(1);
    let i1 = run.op(ib);
    let w0 = run.op(completion(0, OpKind::Wait, &[1], 50));
    let w1 = run.op(completion(1, OpKind::Wait, &[1], 55));
    assert_eq!(run.matcher.in_flight(), 0);
    run.finalize_all(2);
    let (log, stats) = run.finish();
    let got: Vec<(OpKind, Vec<OpId>)> = log
        .collectives
        .iter()
        .map(|c| (c.kind, c.ops.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (OpKind::Bcast, vec![a0, b0]),
            (OpKind::Bcast, vec![a1, b1]),
            (OpKind::Ibcast, vec![i0, i1]),
        ]
    );
    assert_eq!(log.links, vec![link(i0, w0), link(i1, w1)]);
    assert_eq!(stats.collectives_complete, 3);
    assert_eq!(stats.peak_in_flight, 4);
}

#[test]
fn partial_collective_is_emitted_at_finish_with_an_anomaly() {
    let mut run = Run::new(&header(3, &[]));
    let mut mk = |rank: Rank, start: Time| {
        let mut op = coll(rank, OpKind::Reduce, WORLD, Some(0), start);
        op.send_bytes = 4;
        op.recv_bytes = if rank == 0 { 4 } else { 0 };
        run.op(op)
    };
    let a = mk(2, 7);
    let b = mk(0, 3);
    let (log, stats) = run.finish();
    assert_eq!(
        log.collectives,
        vec![CollectiveInstance {
            kind: OpKind::Reduce,
            comm: WORLD,
            root: Some(0),
            ops: vec![a, b],
            start: 3,
            end: 17,
            send_bytes: 8,
            recv_bytes: 4,
        }]
    );
    assert_eq!(
        log.anomalies,
        vec![
            Anomaly::IncompleteCollective {
                kind: OpKind::Reduce,
                comm: WORLD,
                present: 2,
                expected: 3
            },
            Anomaly::MissingFinalize { rank: 0 },
            Anomaly::MissingFinalize { rank: 1 },
            Anomaly::MissingFinalize { rank: 2 },
        ]
    );
    assert_eq!(stats.collectives_partial, 1);
    assert_eq!(stats.collectives_complete, 0);
    assert_eq!(stats.missing_finalize, 3);
}

#[test]
fn missing_finalize_only_for_ranks_that_neither_finalized_nor_aborted() {
    let mut run = Run::new(&header(4, &[]));
    run.op(Operation::new(0, OpKind::Finalize, 0, 1));
    run.op(Operation::new(2, OpKind::Abort, 0, 1));
    let (log, stats) = run.finish();
    assert_eq!(
        log.anomalies,
        vec![
            Anomaly::MissingFinalize { rank: 1 },
            Anomaly::MissingFinalize { rank: 3 }
        ]
    );
    assert_eq!(stats.missing_finalize, 2);
}

#[test]
fn unknown_and_never_completed_requests() {
    let mut run = Run::new(&header(2, &[]));
    let open = run.op(isend(0, 1, 1, 42, 0));
    run.op(recv(1, 0, 1, 4, 0, 5));
    // Rank 1 waits on rank 0's request id: requests are per rank, so it is unknown there.
    let bad = run.op(completion(1, OpKind::Wait, &[42], 6));
    let twice = run.op(completion(1, OpKind::Waitall, &[7, 7], 7));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert!(log.links.is_empty());
    assert_eq!(
        log.anomalies,
        vec![
            Anomaly::UnknownRequest {
                op: bad,
                rank: 1,
                request: 42
            },
            Anomaly::UnknownRequest {
                op: twice,
                rank: 1,
                request: 7
            },
            Anomaly::UnknownRequest {
                op: twice,
                rank: 1,
                request: 7
            },
            Anomaly::RequestNeverCompleted {
                op: open,
                rank: 0,
                request: 42
            },
        ]
    );
    assert_eq!(stats.unknown_requests, 3);
    assert_eq!(stats.requests_never_completed, 1);
}

#[test]
fn completing_a_request_twice_makes_the_second_unknown() {
    let mut run = Run::new(&header(1, &[]));
    let s = run.op(isend(0, 0, 1, 5, 0));
    let w = run.op(completion(0, OpKind::Wait, &[5], 1));
    let again = run.op(completion(0, OpKind::Wait, &[5], 2));
    run.op(recv(0, 0, 1, 4, 3, 4));
    run.finalize_all(1);
    let (log, stats) = run.finish();
    assert_eq!(log.links, vec![link(s, w)]);
    assert_eq!(
        log.anomalies,
        vec![Anomaly::UnknownRequest {
            op: again,
            rank: 0,
            request: 5
        }]
    );
    assert_eq!(stats.unknown_requests, 1);
}

#[test]
fn a_receive_whose_length_differs_from_its_send_is_an_anomaly_and_keeps_the_send_s() {
    let mut run = Run::new(&header(2, &[]));
    let s = run.op(send(0, 1, 3, 4096, 10, 20));
    let r = run.op(recv(1, 0, 3, 77, 12, 30));
    // A length of 0 is a length the tracer did not record: no anomaly.
    run.op(send(0, 1, 3, 64, 40, 41));
    run.op(recv(1, 0, 3, 0, 42, 43));
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert_eq!(
        log.anomalies,
        vec![Anomaly::LengthMismatch {
            send_op: s,
            recv_op: r,
            sent: 4096,
            received: 77
        }]
    );
    assert_eq!(log.messages[0].bytes, 4096);
    assert_eq!(stats.message_bytes, 4096 + 64);
}

#[test]
fn long_ping_pong_stays_bounded_and_drains_to_zero() {
    let n = 10_000u64;
    let mut run = Run::new(&header(2, &[]));
    // Rank 1 posts its Irecv for iteration i before rank 0's send of iteration i is seen.
    for i in 0..n {
        let t = i * 100;
        let mut posted = irecv(1, 0, 0, 1, t);
        posted.recv_bytes = 64;
        run.op(posted);
        run.op(send(0, 1, 0, 64, t + 1, t + 2));
        run.op(completion(1, OpKind::Wait, &[1], t + 3));
        run.op(isend(1, 0, 1, 2, t + 4));
        run.op(recv(0, 1, 1, 4, t + 5, t + 6));
        run.op(completion(1, OpKind::Wait, &[2], t + 7));
    }
    assert_eq!(run.matcher.in_flight(), 0);
    run.finalize_all(2);
    let (log, stats) = run.finish();
    assert!(log.anomalies.is_empty());
    assert_eq!(stats.messages, 2 * n);
    assert_eq!(stats.request_links, 2 * n);
    assert_eq!(stats.message_bytes, 68 * n);
    // At most an Irecv (waiting, tracked until completed) and its request, or an Isend and its
    // request, are held at once.
    assert_eq!(stats.peak_in_flight, 3);
    assert_eq!(stats.operations, 6 * n + 2);
}

mod interleavings {
    //! However the ranks' streams interleave, the matcher pairs the same sends and receives,
    //! links every request and completes every collective.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// One step of the plan: a message (src, dst, tag, nonblocking) or a world barrier.
    #[derive(Debug, Clone)]
    enum Step {
        Msg(Rank, Rank, i32, bool),
        Barrier,
    }

    fn step(n: u32) -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (0..n, 0..n, 0..3i32, any::<bool>()).prop_map(|(s, d, t, nb)| Step::Msg(s, d, t, nb)),
            1 => Just(Step::Barrier),
        ]
    }

    /// A planned operation: (op, plan step, is the send side).
    type Planned = (Operation, usize, bool);

    fn programs(n: u32, plan: &[Step]) -> Vec<Vec<Planned>> {
        let mut progs: Vec<Vec<Planned>> = vec![Vec::new(); n as usize];
        for (j, s) in plan.iter().enumerate() {
            let t = j as Time * 10;
            match *s {
                Step::Msg(src, dst, tag, nb) => {
                    let mut snd = send(src, dst, tag, j as u64, t, t + 1);
                    if nb {
                        snd.kind = OpKind::Isend;
                        snd.request = Some(1);
                    }
                    progs[src as usize].push((snd, j, true));
                    if nb {
                        let w = completion(src, OpKind::Wait, &[1], t + 2);
                        progs[src as usize].push((w, j, false));
                    }
                    let mut rcv = recv(dst, src, tag, j as u64, t + 3, t + 4);
                    if nb {
                        rcv.kind = OpKind::Irecv;
                        rcv.request = Some(2);
                    }
                    progs[dst as usize].push((rcv, j, false));
                    if nb {
                        let w = completion(dst, OpKind::Waitany, &[2], t + 5);
                        progs[dst as usize].push((w, j, false));
                    }
                }
                Step::Barrier => {
                    for r in 0..n {
                        progs[r as usize].push((
                            coll(r, OpKind::Barrier, WORLD, None, t),
                            j,
                            false,
                        ));
                    }
                }
            }
        }
        progs
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn any_interleaving_gives_the_planned_matching(
            plan in prop::collection::vec(step(4), 0..60),
            choices in prop::collection::vec(any::<u32>(), 0..400),
        ) {
            let n = 4;
            let progs = programs(n, &plan);
            let mut run = Run::new(&header(n, &[]));
            let mut cursor = vec![0usize; n as usize];
            let mut send_of = vec![None; plan.len()];
            let mut recv_of = vec![None; plan.len()];
            let mut choice = choices.iter();
            loop {
                let live: Vec<usize> = (0..n as usize).filter(|&r| cursor[r] < progs[r].len()).collect();
                if live.is_empty() {
                    break;
                }
                let r = live[*choice.next().unwrap_or(&0) as usize % live.len()];
                let (op, j, is_send) = progs[r][cursor[r]].clone();
                cursor[r] += 1;
                let p2p = op.kind.is_send() || op.kind.is_receive();
                let id = run.op(op);
                if p2p {
                    if is_send { send_of[j] = Some(id) } else { recv_of[j] = Some(id) }
                }
            }
            prop_assert_eq!(run.matcher.in_flight(), 0);
            run.finalize_all(n);
            let (log, stats) = run.finish();
            prop_assert!(log.anomalies.is_empty(), "{:?}", log.anomalies);
            let got: BTreeSet<(OpId, OpId, u64)> =
                log.messages.iter().map(|m| (m.send_op, m.recv_op, m.bytes)).collect();
            let want: BTreeSet<(OpId, OpId, u64)> = (0..plan.len())
                .filter_map(|j| Some((send_of[j]?, recv_of[j]?, j as u64)))
                .collect();
            prop_assert_eq!(got, want);
            let nonblocking = plan.iter().filter(|s| matches!(s, Step::Msg(_, _, _, true))).count();
            let barriers = plan.iter().filter(|s| matches!(s, Step::Barrier)).count();
            prop_assert_eq!(stats.request_links, 2 * nonblocking as u64);
            prop_assert_eq!(stats.collectives_complete, barriers as u64);
            prop_assert!(log.collectives.iter().all(|c| c.ops.len() == n as usize));
        }
    }
}

#[test]
fn what_a_rank_with_missing_data_left_waiting_is_reported_for_that_reason() {
    // Ranks 0-3; rank 3's data is missing (declared at any time before the end); rank 2's
    // receive from 1 is a genuine unmatched receive.
    let mut run = Run::new(&header(4, &[(7, &[0, 3]), (8, &[0, 1, 2])]));
    let to3 = run.op(send(0, 3, 1, 8, 0, 1));
    let from3 = run.op(recv(1, 3, 2, 8, 0, 1));
    let genuine = run.op(recv(2, 1, 9, 8, 0, 1));
    let req = run.op(irecv(3, 0, 4, 5, 0)); // rank 3's request, open at the cut
    let b0 = run.op(coll(0, OpKind::Barrier, WORLD, None, 2));
    run.op(coll(1, OpKind::Barrier, WORLD, None, 2));
    run.op(coll(2, OpKind::Barrier, WORLD, None, 2));
    let on7 = run.op(coll(0, OpKind::Bcast, 7, Some(0), 3));
    // Communicator 8 lacks rank 2, whose data is there: a genuine incomplete instance.
    run.op(coll(0, OpKind::Allreduce, 8, None, 4));
    run.op(coll(1, OpKind::Allreduce, 8, None, 4));
    for r in 0..3 {
        run.op(Operation::new(r, OpKind::Finalize, 10, 11));
    }
    run.matcher.rank_missing(3);
    run.matcher.rank_missing(3); // declaring it twice changes nothing
    let (log, stats) = run.finish();
    let peer = |op, rank, comm| Anomaly::PeerDataMissing {
        op,
        rank,
        peer: 3,
        comm,
    };
    assert_eq!(
        log.anomalies,
        vec![
            peer(to3, 0, WORLD),
            peer(from3, 1, WORLD),
            Anomaly::UnmatchedReceive {
                op: genuine,
                rank: 2,
                source: 1,
                comm: WORLD,
                tag: 9
            },
            // Rank 3's own receive: its sender's data is all there, so it is genuine.
            Anomaly::UnmatchedReceive {
                op: req,
                rank: 3,
                source: 0,
                comm: WORLD,
                tag: 4
            },
            // The barrier on the world and the broadcast on 7, which only rank 3 missed.
            peer(b0, 0, WORLD),
            peer(on7, 0, 7),
            Anomaly::IncompleteCollective {
                kind: OpKind::Allreduce,
                comm: 8,
                present: 2,
                expected: 3
            },
        ]
    );
    // Rank 3's own open request and its missing MPI_Finalize are not reported.
    assert_eq!(
        (
            stats.peer_data_missing,
            stats.unmatched_sends,
            stats.unmatched_receives,
            stats.requests_never_completed,
            stats.missing_finalize,
            stats.collectives_partial
        ),
        (4, 0, 2, 0, 0, 3)
    );
    assert_eq!(
        log.collectives.len(),
        3,
        "partial instances are still emitted"
    );
}
