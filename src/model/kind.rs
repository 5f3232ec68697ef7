//! Operation kinds: every MPI operation class of the MTF metamodel, plus the gaps
//! DESIGN.md lists (Allreduce, Alltoall(v), Sendrecv, Wait/Test variants, Probe,
//! communicator creation, non-blocking collectives) and `Other(name)`.

use serde::{Deserialize, Serialize};

use super::StrId;

/// The broad class of an operation, as the metamodel's class hierarchy groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpClass {
    /// `Initialize` / `Finalize` / `MPI_Abort`.
    Environment,
    /// `PointToPointOperation`: sends, receives and `MPI_Sendrecv`.
    PointToPoint,
    /// `WaitOperation` and `TestOperation` (every variant).
    Completion,
    /// `ProbeOperation`.
    Probe,
    /// `CollectiveOperation` (blocking and non-blocking).
    Collective,
    /// Communicator creation and release.
    Communicator,
    /// Any other MPI call (`Other(name)`).
    Other,
}

macro_rules! op_kinds {
    ($( $variant:ident = $code:literal, $mpi:literal, $class:ident; )*) => {
        /// The kind of an MPI operation. `Other` carries the interned name of any MPI
        /// call the metamodel has no class for.
        ///
        /// ```
        /// use mtfdb::model::{OpKind, OpClass};
        /// let k = OpKind::from_mpi_name("MPI_Isend").unwrap();
        /// assert_eq!(k, OpKind::Isend);
        /// assert_eq!(k.class(), OpClass::PointToPoint);
        /// assert!(k.is_send() && k.is_nonblocking());
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum OpKind {
            $( #[doc = $mpi] $variant, )*
            /// Any other MPI call; the id names it in the trace's string table.
            Other(StrId),
        }

        impl OpKind {
            /// Every kind with a fixed code (all but `Other`), in code order.
            pub const ALL: &'static [OpKind] = &[ $( OpKind::$variant, )* ];

            /// The MPI function name (`MPI_Isend`); `None` for `Other`, whose name is in the string table.
            pub fn mpi_name(self) -> Option<&'static str> {
                match self { $( OpKind::$variant => Some($mpi), )* OpKind::Other(_) => None }
            }

            /// The metamodel class this kind belongs to.
            pub fn class(self) -> OpClass {
                match self { $( OpKind::$variant => OpClass::$class, )* OpKind::Other(_) => OpClass::Other }
            }

            /// A compact, stable code for storage: fixed kinds below [`OTHER_CODE_BASE`],
            /// `Other(id)` as `OTHER_CODE_BASE + id`.
            pub fn code(self) -> u32 {
                match self { $( OpKind::$variant => $code, )* OpKind::Other(id) => OTHER_CODE_BASE + id }
            }

            /// The inverse of [`OpKind::code`].
            pub fn from_code(code: u32) -> Option<OpKind> {
                match code {
                    $( $code => Some(OpKind::$variant), )*
                    c if c >= OTHER_CODE_BASE => Some(OpKind::Other(c - OTHER_CODE_BASE)),
                    _ => None,
                }
            }

            /// The kind for an MPI function name, case-insensitive, with or without the
            /// `MPI_` prefix (`MPI_Isend`, `isend`). Unknown names give `None`.
            pub fn from_mpi_name(name: &str) -> Option<OpKind> {
                let bare = name.strip_prefix("MPI_").or_else(|| name.strip_prefix("mpi_")).unwrap_or(name);
                $( if bare.eq_ignore_ascii_case(&$mpi[4..]) { return Some(OpKind::$variant); } )*
                None
            }
        }
    };
}

/// Codes at or above this value encode `OpKind::Other(code - OTHER_CODE_BASE)`.
pub const OTHER_CODE_BASE: u32 = 1024;

op_kinds! {
    Init = 0, "MPI_Init", Environment;
    InitThread = 1, "MPI_Init_thread", Environment;
    Finalize = 2, "MPI_Finalize", Environment;
    Abort = 3, "MPI_Abort", Environment;

    Send = 10, "MPI_Send", PointToPoint;
    Bsend = 11, "MPI_Bsend", PointToPoint;
    Ssend = 12, "MPI_Ssend", PointToPoint;
    Rsend = 13, "MPI_Rsend", PointToPoint;
    Isend = 14, "MPI_Isend", PointToPoint;
    Ibsend = 15, "MPI_Ibsend", PointToPoint;
    Issend = 16, "MPI_Issend", PointToPoint;
    Irsend = 17, "MPI_Irsend", PointToPoint;
    Recv = 18, "MPI_Recv", PointToPoint;
    Irecv = 19, "MPI_Irecv", PointToPoint;
    Sendrecv = 20, "MPI_Sendrecv", PointToPoint;
    SendrecvReplace = 21, "MPI_Sendrecv_replace", PointToPoint;

    Wait = 30, "MPI_Wait", Completion;
    Waitall = 31, "MPI_Waitall", Completion;
    Waitany = 32, "MPI_Waitany", Completion;
    Waitsome = 33, "MPI_Waitsome", Completion;
    Test = 34, "MPI_Test", Completion;
    Testall = 35, "MPI_Testall", Completion;
    Testany = 36, "MPI_Testany", Completion;
    Testsome = 37, "MPI_Testsome", Completion;
    Cancel = 38, "MPI_Cancel", Completion;
    RequestFree = 39, "MPI_Request_free", Completion;

    Probe = 40, "MPI_Probe", Probe;
    Iprobe = 41, "MPI_Iprobe", Probe;

    Barrier = 50, "MPI_Barrier", Collective;
    Bcast = 51, "MPI_Bcast", Collective;
    Gather = 52, "MPI_Gather", Collective;
    Gatherv = 53, "MPI_Gatherv", Collective;
    Scatter = 54, "MPI_Scatter", Collective;
    Scatterv = 55, "MPI_Scatterv", Collective;
    Reduce = 56, "MPI_Reduce", Collective;
    Allreduce = 57, "MPI_Allreduce", Collective;
    Allgather = 58, "MPI_Allgather", Collective;
    Allgatherv = 59, "MPI_Allgatherv", Collective;
    Alltoall = 60, "MPI_Alltoall", Collective;
    Alltoallv = 61, "MPI_Alltoallv", Collective;
    Alltoallw = 62, "MPI_Alltoallw", Collective;
    ReduceScatter = 63, "MPI_Reduce_scatter", Collective;
    ReduceScatterBlock = 64, "MPI_Reduce_scatter_block", Collective;
    Scan = 65, "MPI_Scan", Collective;
    Exscan = 66, "MPI_Exscan", Collective;

    Ibarrier = 70, "MPI_Ibarrier", Collective;
    Ibcast = 71, "MPI_Ibcast", Collective;
    Igather = 72, "MPI_Igather", Collective;
    Igatherv = 73, "MPI_Igatherv", Collective;
    Iscatter = 74, "MPI_Iscatter", Collective;
    Iscatterv = 75, "MPI_Iscatterv", Collective;
    Ireduce = 76, "MPI_Ireduce", Collective;
    Iallreduce = 77, "MPI_Iallreduce", Collective;
    Iallgather = 78, "MPI_Iallgather", Collective;
    Iallgatherv = 79, "MPI_Iallgatherv", Collective;
    Ialltoall = 80, "MPI_Ialltoall", Collective;
    Ialltoallv = 81, "MPI_Ialltoallv", Collective;
    Ialltoallw = 82, "MPI_Ialltoallw", Collective;
    IreduceScatter = 83, "MPI_Ireduce_scatter", Collective;
    IreduceScatterBlock = 84, "MPI_Ireduce_scatter_block", Collective;
    Iscan = 85, "MPI_Iscan", Collective;
    Iexscan = 86, "MPI_Iexscan", Collective;

    CommSplit = 90, "MPI_Comm_split", Communicator;
    CommDup = 91, "MPI_Comm_dup", Communicator;
    CommCreate = 92, "MPI_Comm_create", Communicator;
    CommFree = 93, "MPI_Comm_free", Communicator;
}

impl OpKind {
    /// True for every operation that sends a point-to-point message (including `MPI_Sendrecv`).
    pub fn is_send(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Send | Bsend
                | Ssend
                | Rsend
                | Isend
                | Ibsend
                | Issend
                | Irsend
                | Sendrecv
                | SendrecvReplace
        )
    }

    /// True for every operation that receives a point-to-point message (including `MPI_Sendrecv`).
    pub fn is_receive(self) -> bool {
        use OpKind::*;
        matches!(self, Recv | Irecv | Sendrecv | SendrecvReplace)
    }

    /// True for operations that return a request completed later by a Wait or Test.
    pub fn is_nonblocking(self) -> bool {
        use OpKind::*;
        matches!(self, Isend | Ibsend | Issend | Irsend | Irecv)
            || (self.class() == OpClass::Collective && self.blocking_collective() != Some(self))
    }

    /// True for collective operations, blocking or not.
    pub fn is_collective(self) -> bool {
        self.class() == OpClass::Collective
    }

    /// True for Wait and Test variants, which complete requests.
    pub fn is_completion(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Wait | Waitall | Waitany | Waitsome | Test | Testall | Testany | Testsome
        )
    }

    /// For a collective, the blocking operation it performs (`Ibcast` → `Bcast`);
    /// `None` for anything else.
    pub fn blocking_collective(self) -> Option<OpKind> {
        use OpKind::*;
        Some(match self {
            Ibarrier => Barrier,
            Ibcast => Bcast,
            Igather => Gather,
            Igatherv => Gatherv,
            Iscatter => Scatter,
            Iscatterv => Scatterv,
            Ireduce => Reduce,
            Iallreduce => Allreduce,
            Iallgather => Allgather,
            Iallgatherv => Allgatherv,
            Ialltoall => Alltoall,
            Ialltoallv => Alltoallv,
            Ialltoallw => Alltoallw,
            IreduceScatter => ReduceScatter,
            IreduceScatterBlock => ReduceScatterBlock,
            Iscan => Scan,
            Iexscan => Exscan,
            k if k.class() == OpClass::Collective => k,
            _ => return None,
        })
    }

    /// True for collectives that name a root (Bcast, Gather(v), Scatter(v), Reduce and their
    /// non-blocking forms). Allgather, Alltoall and friends have none (Table 3.1, rules 11-12).
    pub fn is_rooted(self) -> bool {
        use OpKind::*;
        matches!(
            self.blocking_collective(),
            Some(Bcast | Gather | Gatherv | Scatter | Scatterv | Reduce)
        )
    }
}
