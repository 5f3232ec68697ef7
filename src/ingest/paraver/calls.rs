//! What the numbers of a Paraver trace mean for MPI: which event types are MPI calls, which
//! carry a collective's arguments, which are user functions, and the names of their values
//! when the `.pcf` does not give them.

use crate::model::OpKind;

/// Extrae's MPI call event types: point-to-point, collective, other, one-sided, I/O. A
/// non-zero value opens the call it names on its thread, 0 closes it.
pub(crate) const MPI_CALL_TYPES: std::ops::RangeInclusive<u64> = 50_000_001..=50_000_005;

/// Extrae's event carrying a collective's send size (bytes), written with the call's opening.
pub(crate) const GLOBAL_OP_SEND_SIZE: u64 = 50_100_001;
/// A collective's receive size (bytes).
pub(crate) const GLOBAL_OP_RECV_SIZE: u64 = 50_100_002;
/// Written (value 1) only by a rooted collective's root.
pub(crate) const GLOBAL_OP_IS_ROOT: u64 = 50_100_003;
/// The communicator of a collective (an id of the header's communicator lines).
pub(crate) const GLOBAL_OP_COMM: u64 = 50_100_004;

/// Extrae's (and its predecessor MPItrace's) user-function event type: a non-zero value
/// enters the function it names, 0 leaves the innermost one.
pub(crate) const USER_FUNCTION: u64 = 60_000_019;

/// Whether an event type is one whose values are MPI calls.
#[inline]
pub(crate) fn is_mpi_call_type(ty: u64) -> bool {
    MPI_CALL_TYPES.contains(&ty)
}

/// Whether an event type carries a collective's arguments.
#[inline]
pub(crate) fn is_collective_argument(ty: u64) -> bool {
    (GLOBAL_OP_SEND_SIZE..=GLOBAL_OP_COMM).contains(&ty)
}

/// The MPI call Extrae's value `value` names, for the calls mtfdb classifies (and the two
/// every program calls). Extrae has numbered its MPI call values the same way since
/// MPItrace (its `MPIVal` enumeration); a `.pcf` that names a value takes precedence.
pub(crate) fn extrae_call_name(value: i64) -> Option<&'static str> {
    Some(match value {
        1 => "MPI_Send",
        2 => "MPI_Recv",
        3 => "MPI_Isend",
        4 => "MPI_Irecv",
        5 => "MPI_Wait",
        6 => "MPI_Waitall",
        7 => "MPI_Bcast",
        8 => "MPI_Barrier",
        9 => "MPI_Reduce",
        10 => "MPI_Allreduce",
        11 => "MPI_Alltoall",
        12 => "MPI_Alltoallv",
        13 => "MPI_Gather",
        14 => "MPI_Gatherv",
        15 => "MPI_Scatter",
        16 => "MPI_Scatterv",
        17 => "MPI_Allgather",
        18 => "MPI_Allgatherv",
        19 => "MPI_Comm_rank",
        20 => "MPI_Comm_size",
        21 => "MPI_Comm_create",
        22 => "MPI_Comm_dup",
        23 => "MPI_Comm_split",
        25 => "MPI_Comm_free",
        30 => "MPI_Scan",
        31 => "MPI_Init",
        32 => "MPI_Finalize",
        33 => "MPI_Bsend",
        34 => "MPI_Ssend",
        35 => "MPI_Rsend",
        36 => "MPI_Ibsend",
        37 => "MPI_Issend",
        38 => "MPI_Irsend",
        39 => "MPI_Test",
        40 => "MPI_Cancel",
        41 => "MPI_Sendrecv",
        42 => "MPI_Sendrecv_replace",
        59 => "MPI_Waitany",
        60 => "MPI_Waitsome",
        61 => "MPI_Probe",
        62 => "MPI_Iprobe",
        80 => "MPI_Reduce_scatter",
        100 => "MPI_Abort",
        115 => "MPI_Request_free",
        125 => "MPI_Testall",
        126 => "MPI_Testany",
        128 => "MPI_Testsome",
        154 => "MPI_Ireduce",
        155 => "MPI_Iallreduce",
        156 => "MPI_Ibarrier",
        157 => "MPI_Ibcast",
        158 => "MPI_Ialltoall",
        159 => "MPI_Ialltoallv",
        160 => "MPI_Iallgather",
        161 => "MPI_Iallgatherv",
        162 => "MPI_Igather",
        163 => "MPI_Igatherv",
        164 => "MPI_Iscatter",
        165 => "MPI_Iscatterv",
        166 => "MPI_Ireduce_scatter",
        167 => "MPI_Iscan",
        168 => "MPI_Reduce_scatter_block",
        169 => "MPI_Ireduce_scatter_block",
        170 => "MPI_Alltoallw",
        171 => "MPI_Ialltoallw",
        214 => "MPI_Exscan",
        215 => "MPI_Iexscan",
        _ => return None,
    })
}

/// The collective an old-style global-operation record (`4:`) names by its operation id
/// (Dimemas's numbering of MPI collectives).
pub(crate) fn global_op_kind(id: u64) -> Option<OpKind> {
    use OpKind::*;
    Some(match id {
        0 => Barrier,
        1 => Bcast,
        2 => Gather,
        3 => Gatherv,
        4 => Scatter,
        5 => Scatterv,
        6 => Allgather,
        7 => Allgatherv,
        8 => Alltoall,
        9 => Alltoallv,
        10 => Reduce,
        11 => Allreduce,
        12 => ReduceScatter,
        13 => ReduceScatterBlock,
        14 => Scan,
        15 => Alltoallw,
        16 => Ibarrier,
        17 => Ibcast,
        18 => Igather,
        19 => Igatherv,
        20 => Iscatter,
        21 => Iscatterv,
        22 => Iallgather,
        23 => Iallgatherv,
        24 => Ialltoall,
        25 => Ialltoallv,
        26 => Ireduce,
        27 => Iallreduce,
        28 => IreduceScatter,
        29 => IreduceScatterBlock,
        30 => Iscan,
        31 => Ialltoallw,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fallback_name_is_an_mpi_call_and_the_classified_ones_have_their_kind() {
        for value in 0..300 {
            if let Some(name) = extrae_call_name(value) {
                assert!(name.starts_with("MPI_"), "{value}: {name}");
                if !matches!(name, "MPI_Comm_rank" | "MPI_Comm_size") {
                    assert!(OpKind::from_mpi_name(name).is_some(), "{name}");
                }
            }
        }
        assert_eq!(global_op_kind(10), Some(OpKind::Reduce));
        assert_eq!(global_op_kind(11), Some(OpKind::Allreduce));
        assert_eq!(global_op_kind(32), None);
    }
}
