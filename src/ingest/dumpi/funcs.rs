//! The functions DUMPI records: their labels, MPI names and record layouts.
//!
//! A function's label is its position in DUMPI's function list (`MPI_Send` is 0, the file
//! I/O completions `MPIO_Test` … `MPIO_Testsome` are 282-289); 290 counts all functions in
//! the footer, 291 and 292 are the entry into and exit from a profiled user function, and
//! 293 ends the call stream. The layouts are read from DUMPI's specification of each
//! record (the `dumpi_read_*` functions of sst-dumpi's `dumpi/common/dumpiio.c`) and written
//! here in mtfdb's own terms: [`Field`]s in file order, each with the [`Slot`] or [`List`]
//! that keeps the arguments mtfdb uses.

use super::record::Field::{self, *};
use super::record::List::*;
use super::record::Slot::*;

/// Label of `MPI_Finalize`.
pub(crate) const FINALIZE: u16 = 125;
/// The footer's count of all functions (and the number of MPI function labels).
pub(crate) const ALL_FUNCTIONS: u16 = 290;
/// Label of a profiled user function's entry.
pub(crate) const FUNCTION_ENTER: u16 = 291;
/// Label of a profiled user function's exit.
pub(crate) const FUNCTION_EXIT: u16 = 292;
/// Label that ends the call stream.
pub(crate) const END_OF_STREAM: u16 = 293;

/// A function: its MPI name and its record layout (`None` for a label DUMPI never writes a
/// record for).
struct Func {
    name: &'static str,
    layout: Option<&'static [Field]>,
}

const fn f(name: &'static str, layout: Option<&'static [Field]>) -> Func {
    Func { name, layout }
}

/// The MPI name of label `func` (`MPI_Send`), if it is one of DUMPI's labels.
pub(crate) fn name(func: u16) -> Option<&'static str> {
    FUNCS.get(usize::from(func)).map(|f| f.name)
}

/// The record layout of label `func`.
pub(crate) fn layout(func: u16) -> Option<&'static [Field]> {
    FUNCS.get(usize::from(func)).and_then(|f| f.layout)
}

/// The label of the MPI function called `name` (exact DUMPI spelling, `MPI_Send`).
#[cfg(test)]
pub(crate) fn label(name: &str) -> Option<u16> {
    FUNCS.iter().position(|f| f.name == name).map(|i| i as u16)
}

// Layouts shared by several functions, named after the first.
/// MPI_Allgather, MPI_Alltoall
const L_ALLGATHER: &[Field] = &[
    I32(SendCount),
    I16(SendType),
    I32(RecvCount),
    I16(RecvType),
    I16(Comm),
];
/// MPI_Allreduce, MPI_Scan, MPI_Exscan
const L_ALLREDUCE: &[Field] = &[I32(Count), I16(Datatype), I8(Skip), I16(Comm)];
/// MPI_Attr_put, MPI_Attr_delete
const L_ATTR_PUT: &[Field] = &[I16(Comm), I32(Key)];
/// MPI_Barrier, MPI_Comm_free, MPI_Comm_disconnect
const L_BARRIER: &[Field] = &[I16(Comm)];
/// MPI_Buffer_attach, MPI_Buffer_detach, MPI_Address, MPI_Initialized, MPI_Add_error_class, MPI_Get_address
const L_BUFFER_ATTACH: &[Field] = &[I32(Skip)];
/// MPI_Cart_coords, MPI_Graph_neighbors
const L_CART_COORDS: &[Field] = &[I32(Skip), I16(Comm), I32(Skip), I32(Skip), Ints(Ignored)];
/// MPI_Close_port, MPI_Register_datarep
const L_CLOSE_PORT: &[Field] = &[Chars];
/// MPI_Comm_accept, MPI_Comm_connect
const L_COMM_ACCEPT: &[Field] = &[Chars, I16(Skip), I32(Root), I16(OldComm), I16(NewComm)];
/// MPI_Comm_group, MPI_Comm_remote_group
const L_COMM_GROUP: &[Field] = &[I16(Comm), I16(Group)];
/// MPI_Comm_size, MPI_Comm_rank, MPI_Comm_test_inter, MPI_Comm_remote_size, MPI_Cartdim_get, MPI_Abort, MPI_Comm_call_errhandler
const L_COMM_SIZE: &[Field] = &[I16(Comm), I32(Skip)];
/// MPI_Errhandler_create, MPI_Errhandler_free, MPI_Comm_get_parent, MPI_Win_complete, MPI_Win_free, MPI_Win_wait, MPI_Comm_create_keyval, MPI_Comm_free_keyval, MPI_Type_create_keyval, MPI_Type_free_keyval, MPI_Win_create_keyval, MPI_Win_free_keyval, MPI_Comm_create_errhandler, MPI_File_create_errhandler, MPI_Info_create, MPI_Info_free, MPI_Win_create_errhandler, MPI_File_close, MPI_File_sync
const L_ERRHANDLER_CREATE: &[Field] = &[I16(Skip)];
/// MPI_Errhandler_set, MPI_Errhandler_get, MPI_Comm_delete_attr, MPI_Comm_set_attr, MPI_Comm_get_errhandler, MPI_Comm_set_errhandler
const L_ERRHANDLER_SET: &[Field] = &[I16(Comm), I16(Skip)];
/// MPI_File_call_errhandler, MPI_Win_call_errhandler, MPI_Info_get_nkeys
const L_FILE_CALL_ERRHANDLER: &[Field] = &[I16(Skip), I32(Skip)];
/// MPI_File_iread, MPI_File_iwrite, MPI_File_iread_shared, MPI_File_iwrite_shared
const L_FILE_IREAD: &[Field] = &[I16(Skip), I32(Count), I16(Datatype), I32(Request)];
/// MPI_File_iread_at, MPI_File_iwrite_at
const L_FILE_IREAD_AT: &[Field] = &[
    I16(Skip),
    I64(Skip),
    I32(Count),
    I16(Datatype),
    I32(Request),
];
/// MPI_File_read, MPI_File_read_all, MPI_File_write, MPI_File_write_all, MPI_File_read_shared, MPI_File_write_shared, MPI_File_read_ordered, MPI_File_write_ordered
const L_FILE_READ: &[Field] = &[I16(Skip), I32(Count), I16(Datatype), Statuses];
/// MPI_File_read_all_begin, MPI_File_write_all_begin, MPI_File_read_ordered_begin, MPI_File_write_ordered_begin
const L_FILE_READ_ALL_BEGIN: &[Field] = &[I16(Skip), I32(Count), I16(Datatype)];
/// MPI_File_read_at, MPI_File_read_at_all, MPI_File_write_at, MPI_File_write_at_all
const L_FILE_READ_AT: &[Field] = &[I16(Skip), I64(Skip), I32(Count), I16(Datatype), Statuses];
/// MPI_File_read_at_all_begin, MPI_File_write_at_all_begin
const L_FILE_READ_AT_ALL_BEGIN: &[Field] = &[I16(Skip), I64(Skip), I32(Count), I16(Datatype)];
/// MPI_File_read_at_all_end, MPI_File_write_at_all_end, MPI_File_read_all_end, MPI_File_write_all_end, MPI_File_read_ordered_end, MPI_File_write_ordered_end
const L_FILE_READ_AT_ALL_END: &[Field] = &[I16(Skip), Statuses];
/// MPI_File_seek, MPI_File_seek_shared
const L_FILE_SEEK: &[Field] = &[I16(Skip), I64(Skip), I8(Skip)];
/// MPI_File_set_size, MPI_File_preallocate, MPI_File_get_size, MPI_File_get_position, MPI_File_get_position_shared
const L_FILE_SET_SIZE: &[Field] = &[I16(Skip), I64(Skip)];
/// function entry and exit (the tracer's profiling of user functions)
const L_FUNCTION: &[Field] = &[I64(Address)];
/// MPI_Get, MPI_Put
const L_GET: &[Field] = &[
    I32(Skip),
    I16(Skip),
    I32(Skip),
    I32(Skip),
    I32(Skip),
    I16(Skip),
    I16(Skip),
];
/// MPI_Get_count, MPI_Status_set_elements
const L_GET_COUNT: &[Field] = &[Statuses, I16(Datatype), I32(Count)];
/// MPI_Get_version, MPI_Error_class, MPI_Add_error_code
const L_GET_VERSION: &[Field] = &[I32(Skip), I32(Skip)];
/// MPI_Graphdims_get, MPI_Graph_neighbors_count
const L_GRAPHDIMS_GET: &[Field] = &[I16(Comm), I32(Skip), I32(Skip)];
/// MPI_Group_incl, MPI_Group_excl
const L_GROUP_INCL: &[Field] = &[I16(Group), I32(Count), Ints(Ranks), I16(NewGroup)];
/// MPI_Group_range_incl, MPI_Group_range_excl
const L_GROUP_RANGE_INCL: &[Field] = &[I16(Group), I32(Count), Ints2(Ranges), I16(NewGroup)];
/// MPI_Group_size, MPI_Group_rank
const L_GROUP_SIZE: &[Field] = &[I16(Group), I32(Skip)];
/// MPI_Group_union, MPI_Group_intersection, MPI_Group_difference
const L_GROUP_UNION: &[Field] = &[I16(Group), I16(Group2), I16(NewGroup)];
/// MPI_Irecv, MPI_Recv_init
const L_IRECV: &[Field] = &[
    I32(Count),
    I16(Datatype),
    I32(Source),
    I32(Tag),
    I16(Comm),
    I32(Request),
];
/// MPI_Isend, MPI_Ibsend, MPI_Issend, MPI_Irsend, MPI_Send_init, MPI_Bsend_init, MPI_Ssend_init, MPI_Rsend_init
const L_ISEND: &[Field] = &[
    I32(Count),
    I16(Datatype),
    I32(Dest),
    I32(Tag),
    I16(Comm),
    I32(Request),
];
/// MPI_Is_thread_main, MPI_Finalized
const L_IS_THREAD_MAIN: &[Field] = &[I32(Flag)];
/// MPI_Keyval_create, MPI_Keyval_free
const L_KEYVAL_CREATE: &[Field] = &[I16(Key)];
/// MPI_Lookup_name, MPI_Publish_name, MPI_Unpublish_name
const L_LOOKUP_NAME: &[Field] = &[Chars, I16(Skip), Chars];
/// MPI_Open_port, MPI_Win_set_name, MPI_Info_delete
const L_OPEN_PORT: &[Field] = &[I16(Skip), Chars];
/// MPI_Op_free, MPI_Query_thread
const L_OP_FREE: &[Field] = &[I8(Skip)];
/// MPI_Request_free, MPI_Cancel, MPI_Start, MPI_Grequest_complete, MPI_Grequest_start
const L_REQUEST_FREE: &[Field] = &[I32(Request)];
/// MPI_Send, MPI_Bsend, MPI_Ssend, MPI_Rsend
const L_SEND: &[Field] = &[I32(Count), I16(Datatype), I32(Dest), I32(Tag), I16(Comm)];
/// MPI_Test, MPI_Request_get_status, MPIO_Test
const L_TEST: &[Field] = &[I32(Request), I32(Flag), Statuses];
/// MPI_Testall, MPIO_Testall
const L_TESTALL: &[Field] = &[I32(Count), Ints(Requests), I32(Flag), Statuses];
/// MPI_Type_commit, MPI_Type_free
const L_TYPE_COMMIT: &[Field] = &[I16(Datatype)];
/// MPI_Type_delete_attr, MPI_Type_set_attr
const L_TYPE_DELETE_ATTR: &[Field] = &[I16(Datatype), I16(Skip)];
/// MPI_Type_dup, MPI_Win_delete_attr, MPI_Win_set_attr, MPI_File_get_errhandler, MPI_File_set_errhandler, MPI_Info_dup, MPI_Win_get_errhandler, MPI_Win_set_errhandler, MPI_File_set_info, MPI_File_get_info
const L_TYPE_DUP: &[Field] = &[I16(Skip), I16(Skip)];
/// MPI_Type_extent, MPI_Type_size, MPI_Type_lb, MPI_Type_ub
const L_TYPE_EXTENT: &[Field] = &[I16(Datatype), I32(Skip)];
/// MPI_Type_get_extent, MPI_Type_get_true_extent
const L_TYPE_GET_EXTENT: &[Field] = &[I16(Datatype), I32(Skip), I32(Skip)];
/// MPI_Type_indexed, MPI_Type_hindexed
const L_TYPE_INDEXED: &[Field] = &[
    I32(Count),
    Ints(Ignored),
    Ints(Ignored),
    I16(Skip),
    I16(Skip),
];
/// MPI_Type_vector, MPI_Type_hvector, MPI_Type_create_hvector
const L_TYPE_VECTOR: &[Field] = &[I32(Count), I32(Skip), I32(Skip), I16(Skip), I16(Skip)];
/// MPI_Wait, MPIO_Wait
const L_WAIT: &[Field] = &[I32(Request), Statuses];
/// MPI_Waitall, MPIO_Waitall
const L_WAITALL: &[Field] = &[I32(Count), Ints(Requests), Statuses];
/// MPI_Waitany, MPIO_Waitany
const L_WAITANY: &[Field] = &[I32(Count), Ints(Requests), I32(Index), Statuses];
/// MPI_Waitsome, MPI_Testsome, MPIO_Waitsome, MPIO_Testsome
const L_WAITSOME: &[Field] = &[
    I32(Count),
    Ints(Requests),
    I32(Outcount),
    Ints(Indices),
    Statuses,
];
/// MPI_Win_get_group, MPI_File_get_group
const L_WIN_GET_GROUP: &[Field] = &[I16(Skip), I16(Group)];
/// MPI_Win_post, MPI_Win_start
const L_WIN_POST: &[Field] = &[I16(Group), I8(Skip), I16(Skip)];
/// MPI_Win_test, MPI_File_set_atomicity, MPI_File_get_atomicity
const L_WIN_TEST: &[Field] = &[I16(Skip), I32(Flag)];
/// MPI_Win_unlock, MPI_Alloc_mem
const L_WIN_UNLOCK: &[Field] = &[I32(Skip), I16(Skip)];
/// MPI_Wtime, MPI_Wtick, MPI_Finalize, MPI_Free_mem
const L_WTIME: &[Field] = &[];

/// Every label from 0 to 292, in label order.
#[rustfmt::skip]
static FUNCS: [Func; 293] = [
    f("MPI_Send", Some(L_SEND)),  // 0
    f("MPI_Recv", Some(&[I32(Count), I16(Datatype), I32(Source), I32(Tag), I16(Comm), Statuses])),  // 1
    f("MPI_Get_count", Some(L_GET_COUNT)),  // 2
    f("MPI_Bsend", Some(L_SEND)),  // 3
    f("MPI_Ssend", Some(L_SEND)),  // 4
    f("MPI_Rsend", Some(L_SEND)),  // 5
    f("MPI_Buffer_attach", Some(L_BUFFER_ATTACH)),  // 6
    f("MPI_Buffer_detach", Some(L_BUFFER_ATTACH)),  // 7
    f("MPI_Isend", Some(L_ISEND)),  // 8
    f("MPI_Ibsend", Some(L_ISEND)),  // 9
    f("MPI_Issend", Some(L_ISEND)),  // 10
    f("MPI_Irsend", Some(L_ISEND)),  // 11
    f("MPI_Irecv", Some(L_IRECV)),  // 12
    f("MPI_Wait", Some(L_WAIT)),  // 13
    f("MPI_Test", Some(L_TEST)),  // 14
    f("MPI_Request_free", Some(L_REQUEST_FREE)),  // 15
    f("MPI_Waitany", Some(L_WAITANY)),  // 16
    f("MPI_Testany", Some(&[I32(Count), Ints(Requests), I32(Index), I32(Flag), Statuses])),  // 17
    f("MPI_Waitall", Some(L_WAITALL)),  // 18
    f("MPI_Testall", Some(L_TESTALL)),  // 19
    f("MPI_Waitsome", Some(L_WAITSOME)),  // 20
    f("MPI_Testsome", Some(L_WAITSOME)),  // 21
    f("MPI_Iprobe", Some(&[I32(Source), I32(Tag), I16(Comm), I32(Flag), Statuses])),  // 22
    f("MPI_Probe", Some(&[I32(Source), I32(Tag), I16(Comm), Statuses])),  // 23
    f("MPI_Cancel", Some(L_REQUEST_FREE)),  // 24
    f("MPI_Test_cancelled", Some(&[Statuses, I32(Skip)])),  // 25
    f("MPI_Send_init", Some(L_ISEND)),  // 26
    f("MPI_Bsend_init", Some(L_ISEND)),  // 27
    f("MPI_Ssend_init", Some(L_ISEND)),  // 28
    f("MPI_Rsend_init", Some(L_ISEND)),  // 29
    f("MPI_Recv_init", Some(L_IRECV)),  // 30
    f("MPI_Start", Some(L_REQUEST_FREE)),  // 31
    f("MPI_Startall", Some(&[I32(Count), Ints(Requests)])),  // 32
    f("MPI_Sendrecv", Some(&[I32(SendCount), I16(SendType), I32(Dest), I32(SendTag), I32(RecvCount), I16(RecvType), I32(Source), I32(RecvTag), I16(Comm), Statuses])),  // 33
    f("MPI_Sendrecv_replace", Some(&[I32(Count), I16(Datatype), I32(Dest), I32(SendTag), I32(Source), I32(RecvTag), I16(Comm), Statuses])),  // 34
    f("MPI_Type_contiguous", Some(&[I32(Count), I16(Skip), I16(Skip)])),  // 35
    f("MPI_Type_vector", Some(L_TYPE_VECTOR)),  // 36
    f("MPI_Type_hvector", Some(L_TYPE_VECTOR)),  // 37
    f("MPI_Type_indexed", Some(L_TYPE_INDEXED)),  // 38
    f("MPI_Type_hindexed", Some(L_TYPE_INDEXED)),  // 39
    f("MPI_Type_struct", Some(&[I32(Skip), Ints(Ignored), IntsSince([0, 6, 9]), Shorts(Ignored), I16(Skip)])),  // 40
    f("MPI_Address", Some(L_BUFFER_ATTACH)),  // 41
    f("MPI_Type_extent", Some(L_TYPE_EXTENT)),  // 42
    f("MPI_Type_size", Some(L_TYPE_EXTENT)),  // 43
    f("MPI_Type_lb", Some(L_TYPE_EXTENT)),  // 44
    f("MPI_Type_ub", Some(L_TYPE_EXTENT)),  // 45
    f("MPI_Type_commit", Some(L_TYPE_COMMIT)),  // 46
    f("MPI_Type_free", Some(L_TYPE_COMMIT)),  // 47
    f("MPI_Get_elements", Some(&[Statuses, I16(Datatype), I32(Skip)])),  // 48
    f("MPI_Pack", Some(&[I32(Skip), I16(Datatype), I32(Skip), I32(Skip), I32(Skip), I16(Comm)])),  // 49
    f("MPI_Unpack", Some(&[I32(Skip), I32(Skip), I32(Skip), I32(Skip), I16(Datatype), I16(Comm)])),  // 50
    f("MPI_Pack_size", Some(&[I32(Skip), I16(Datatype), I16(Comm), I32(Skip)])),  // 51
    f("MPI_Barrier", Some(L_BARRIER)),  // 52
    f("MPI_Bcast", Some(&[I32(Count), I16(Datatype), I32(Root), I16(Comm)])),  // 53
    f("MPI_Gather", Some(&[I32(CommRank), I32(SendCount), I16(SendType), I32(Root), I16(Comm), AtRoot(&[I32(RecvCount), I16(RecvType)])])),  // 54
    f("MPI_Gatherv", Some(&[I32(CommRank), I32(CommSize), I32(SendCount), I16(SendType), I32(Root), I16(Comm), AtRoot(&[Ints(RecvCounts), Ints(Ignored)]), I16(RecvType)])),  // 55
    f("MPI_Scatter", Some(&[I32(CommRank), I32(RecvCount), I16(RecvType), I32(Root), I16(Comm), AtRoot(&[I32(SendCount), I16(SendType)])])),  // 56
    f("MPI_Scatterv", Some(&[I32(CommRank), I32(CommSize), I16(SendType), I32(RecvCount), I16(RecvType), I32(Root), I16(Comm), AtRoot(&[Ints(SendCounts), Ints(Ignored)])])),  // 57
    f("MPI_Allgather", Some(L_ALLGATHER)),  // 58
    f("MPI_Allgatherv", Some(&[I32(CommSize), I32(SendCount), I16(SendType), Ints(RecvCounts), Ints(Ignored), I16(RecvType), I16(Comm)])),  // 59
    f("MPI_Alltoall", Some(L_ALLGATHER)),  // 60
    f("MPI_Alltoallv", Some(&[I32(CommSize), Ints(SendCounts), Ints(Ignored), I16(SendType), Ints(RecvCounts), Ints(Ignored), I16(RecvType), I16(Comm)])),  // 61
    f("MPI_Reduce", Some(&[I32(Count), I16(Datatype), I8(Skip), I32(Root), I16(Comm)])),  // 62
    f("MPI_Op_create", Some(&[I32(Skip), I8(Skip)])),  // 63
    f("MPI_Op_free", Some(L_OP_FREE)),  // 64
    f("MPI_Allreduce", Some(L_ALLREDUCE)),  // 65
    f("MPI_Reduce_scatter", Some(&[I32(CommSize), Ints(RecvCounts), I16(Datatype), I8(Skip), I16(Comm)])),  // 66
    f("MPI_Scan", Some(L_ALLREDUCE)),  // 67
    f("MPI_Group_size", Some(L_GROUP_SIZE)),  // 68
    f("MPI_Group_rank", Some(L_GROUP_SIZE)),  // 69
    f("MPI_Group_translate_ranks", Some(&[I16(Group), I32(Count), Ints(Ignored), I16(Group2), Ints(Ignored)])),  // 70
    f("MPI_Group_compare", Some(&[I16(Group), I16(Group2), I8(Skip)])),  // 71
    f("MPI_Comm_group", Some(L_COMM_GROUP)),  // 72
    f("MPI_Group_union", Some(L_GROUP_UNION)),  // 73
    f("MPI_Group_intersection", Some(L_GROUP_UNION)),  // 74
    f("MPI_Group_difference", Some(L_GROUP_UNION)),  // 75
    f("MPI_Group_incl", Some(L_GROUP_INCL)),  // 76
    f("MPI_Group_excl", Some(L_GROUP_INCL)),  // 77
    f("MPI_Group_range_incl", Some(L_GROUP_RANGE_INCL)),  // 78
    f("MPI_Group_range_excl", Some(L_GROUP_RANGE_INCL)),  // 79
    f("MPI_Group_free", Some(&[I16(Group)])),  // 80
    f("MPI_Comm_size", Some(L_COMM_SIZE)),  // 81
    f("MPI_Comm_rank", Some(L_COMM_SIZE)),  // 82
    f("MPI_Comm_compare", Some(&[I16(Skip), I16(Skip), I8(Skip)])),  // 83
    f("MPI_Comm_dup", Some(&[I16(OldComm), I16(NewComm)])),  // 84
    f("MPI_Comm_create", Some(&[I16(OldComm), I16(Group), I16(NewComm)])),  // 85
    f("MPI_Comm_split", Some(&[I16(OldComm), I32(Color), I32(Key), I16(NewComm)])),  // 86
    f("MPI_Comm_free", Some(L_BARRIER)),  // 87
    f("MPI_Comm_test_inter", Some(L_COMM_SIZE)),  // 88
    f("MPI_Comm_remote_size", Some(L_COMM_SIZE)),  // 89
    f("MPI_Comm_remote_group", Some(L_COMM_GROUP)),  // 90
    f("MPI_Intercomm_create", Some(&[I16(Skip), I32(Skip), I16(Skip), I32(Skip), I32(Tag), I16(NewComm)])),  // 91
    f("MPI_Intercomm_merge", Some(&[I16(Comm), I32(Skip), I16(NewComm)])),  // 92
    f("MPI_Keyval_create", Some(L_KEYVAL_CREATE)),  // 93
    f("MPI_Keyval_free", Some(L_KEYVAL_CREATE)),  // 94
    f("MPI_Attr_put", Some(L_ATTR_PUT)),  // 95
    f("MPI_Attr_get", Some(&[I16(Comm), I32(Key), I32(Flag)])),  // 96
    f("MPI_Attr_delete", Some(L_ATTR_PUT)),  // 97
    f("MPI_Topo_test", Some(&[I16(Comm), I8(Skip)])),  // 98
    f("MPI_Cart_create", Some(&[I16(OldComm), I32(Skip), Ints(Dims), Ints(Ignored), I32(Skip), I16(NewComm)])),  // 99
    f("MPI_Dims_create", Some(&[I32(Skip), I32(Skip), Ints(Ignored), Ints(Ignored)])),  // 100
    f("MPI_Graph_create", Some(&[I32(Skip), I16(OldComm), I32(Count), Ints(Ignored), Ints(Ignored), I32(Skip), I16(NewComm)])),  // 101
    f("MPI_Graphdims_get", Some(L_GRAPHDIMS_GET)),  // 102
    f("MPI_Graph_get", Some(&[I32(Skip), I32(Skip), I16(Comm), I32(Skip), I32(Skip), Ints(Ignored), Ints(Ignored)])),  // 103
    f("MPI_Cartdim_get", Some(L_COMM_SIZE)),  // 104
    f("MPI_Cart_get", Some(&[I32(Skip), I16(Comm), I32(Skip), Ints(Ignored), Ints(Ignored), IntsSince([0, 6, 8])])),  // 105
    f("MPI_Cart_rank", Some(&[I32(Skip), I16(Comm), Ints(Ignored), I32(Skip)])),  // 106
    f("MPI_Cart_coords", Some(L_CART_COORDS)),  // 107
    f("MPI_Graph_neighbors_count", Some(L_GRAPHDIMS_GET)),  // 108
    f("MPI_Graph_neighbors", Some(L_CART_COORDS)),  // 109
    f("MPI_Cart_shift", Some(&[I16(Comm), I32(Skip), I32(Skip), I32(Source), I32(Dest)])),  // 110
    f("MPI_Cart_sub", Some(&[I32(Skip), I16(OldComm), Ints(RemainDims), I16(NewComm)])),  // 111
    f("MPI_Cart_map", Some(&[I16(Comm), I32(Skip), Ints(Ignored), Ints(Ignored), I32(Skip)])),  // 112
    f("MPI_Graph_map", Some(&[I32(Skip), I16(Comm), I32(Skip), Ints(Ignored), Ints(Ignored), I32(Skip)])),  // 113
    f("MPI_Get_processor_name", Some(&[Chars, I32(Skip)])),  // 114
    f("MPI_Get_version", Some(L_GET_VERSION)),  // 115
    f("MPI_Errhandler_create", Some(L_ERRHANDLER_CREATE)),  // 116
    f("MPI_Errhandler_set", Some(L_ERRHANDLER_SET)),  // 117
    f("MPI_Errhandler_get", Some(L_ERRHANDLER_SET)),  // 118
    f("MPI_Errhandler_free", Some(L_ERRHANDLER_CREATE)),  // 119
    f("MPI_Error_string", Some(&[I32(Skip), Chars, I32(Skip)])),  // 120
    f("MPI_Error_class", Some(L_GET_VERSION)),  // 121
    f("MPI_Wtime", Some(L_WTIME)),  // 122
    f("MPI_Wtick", Some(L_WTIME)),  // 123
    f("MPI_Init", Some(&[Argv { early_quirk: true }])),  // 124
    f("MPI_Finalize", Some(L_WTIME)),  // 125
    f("MPI_Initialized", Some(L_BUFFER_ATTACH)),  // 126
    f("MPI_Abort", Some(L_COMM_SIZE)),  // 127
    f("MPI_Pcontrol", None),  // 128
    f("MPI_Close_port", Some(L_CLOSE_PORT)),  // 129
    f("MPI_Comm_accept", Some(L_COMM_ACCEPT)),  // 130
    f("MPI_Comm_connect", Some(L_COMM_ACCEPT)),  // 131
    f("MPI_Comm_disconnect", Some(L_BARRIER)),  // 132
    f("MPI_Comm_get_parent", Some(L_ERRHANDLER_CREATE)),  // 133
    f("MPI_Comm_join", Some(&[I32(Skip), I16(Comm)])),  // 134
    f("MPI_Comm_spawn", Some(&[I32(CommRank), I32(Root), I16(OldComm), I16(NewComm), AtRoot(&[Chars, Chars2, I32(Skip), I16(Skip), Ints(Ignored)])])),  // 135
    f("MPI_Comm_spawn_multiple", Some(&[I32(Skip), I32(CommRank), I32(Root), I16(OldComm), I16(NewComm), AtRoot(&[I32(Count), Chars2, Chars3, Ints(Ignored), Shorts(Ignored), Ints(Ignored)])])),  // 136
    f("MPI_Lookup_name", Some(L_LOOKUP_NAME)),  // 137
    f("MPI_Open_port", Some(L_OPEN_PORT)),  // 138
    f("MPI_Publish_name", Some(L_LOOKUP_NAME)),  // 139
    f("MPI_Unpublish_name", Some(L_LOOKUP_NAME)),  // 140
    f("MPI_Accumulate", Some(&[I32(Skip), I16(Skip), I32(Skip), I32(Skip), I32(Skip), I16(Skip), I8(Skip), I16(Skip)])),  // 141
    f("MPI_Get", Some(L_GET)),  // 142
    f("MPI_Put", Some(L_GET)),  // 143
    f("MPI_Win_complete", Some(L_ERRHANDLER_CREATE)),  // 144
    f("MPI_Win_create", Some(&[I32(Skip), I32(Skip), I16(Skip), I16(Comm), I16(Skip)])),  // 145
    f("MPI_Win_fence", Some(&[I8(Skip), I16(Skip)])),  // 146
    f("MPI_Win_free", Some(L_ERRHANDLER_CREATE)),  // 147
    f("MPI_Win_get_group", Some(L_WIN_GET_GROUP)),  // 148
    f("MPI_Win_lock", Some(&[I8(Skip), I32(Skip), I8(Skip), I16(Skip)])),  // 149
    f("MPI_Win_post", Some(L_WIN_POST)),  // 150
    f("MPI_Win_start", Some(L_WIN_POST)),  // 151
    f("MPI_Win_test", Some(L_WIN_TEST)),  // 152
    f("MPI_Win_unlock", Some(L_WIN_UNLOCK)),  // 153
    f("MPI_Win_wait", Some(L_ERRHANDLER_CREATE)),  // 154
    f("MPI_Alltoallw", Some(&[I32(CommSize), Ints(SendCounts), Ints(Ignored), Shorts(SendTypes), Ints(RecvCounts), Ints(Ignored), Shorts(RecvTypes), I16(Comm)])),  // 155
    f("MPI_Exscan", Some(L_ALLREDUCE)),  // 156
    f("MPI_Add_error_class", Some(L_BUFFER_ATTACH)),  // 157
    f("MPI_Add_error_code", Some(L_GET_VERSION)),  // 158
    f("MPI_Add_error_string", Some(&[I32(Skip), Chars])),  // 159
    f("MPI_Comm_call_errhandler", Some(L_COMM_SIZE)),  // 160
    f("MPI_Comm_create_keyval", Some(L_ERRHANDLER_CREATE)),  // 161
    f("MPI_Comm_delete_attr", Some(L_ERRHANDLER_SET)),  // 162
    f("MPI_Comm_free_keyval", Some(L_ERRHANDLER_CREATE)),  // 163
    f("MPI_Comm_get_attr", Some(&[I16(Comm), I16(Skip), I32(Flag)])),  // 164
    f("MPI_Comm_get_name", Some(&[I16(Comm), Chars, I32(Skip)])),  // 165
    f("MPI_Comm_set_attr", Some(L_ERRHANDLER_SET)),  // 166
    f("MPI_Comm_set_name", Some(&[I16(Comm), Chars])),  // 167
    f("MPI_File_call_errhandler", Some(L_FILE_CALL_ERRHANDLER)),  // 168
    f("MPI_Grequest_complete", Some(L_REQUEST_FREE)),  // 169
    f("MPI_Grequest_start", Some(L_REQUEST_FREE)),  // 170
    f("MPI_Init_thread", Some(&[Argv { early_quirk: false }, I8(Skip), I8(Skip)])),  // 171
    f("MPI_Is_thread_main", Some(L_IS_THREAD_MAIN)),  // 172
    f("MPI_Query_thread", Some(L_OP_FREE)),  // 173
    f("MPI_Status_set_cancelled", Some(&[Statuses, I32(Flag)])),  // 174
    f("MPI_Status_set_elements", Some(L_GET_COUNT)),  // 175
    f("MPI_Type_create_keyval", Some(L_ERRHANDLER_CREATE)),  // 176
    f("MPI_Type_delete_attr", Some(L_TYPE_DELETE_ATTR)),  // 177
    f("MPI_Type_dup", Some(L_TYPE_DUP)),  // 178
    f("MPI_Type_free_keyval", Some(L_ERRHANDLER_CREATE)),  // 179
    f("MPI_Type_get_attr", Some(&[I16(Datatype), I16(Skip), I32(Flag)])),  // 180
    f("MPI_Type_get_contents", Some(&[I32(Skip), I32(Skip), I32(Skip), I16(Datatype), I32(Skip), I32(Skip), I32(Skip), Ints(Ignored), Ints(Ignored), Shorts(Ignored)])),  // 181
    f("MPI_Type_get_envelope", Some(&[I16(Datatype), I32(Skip), I32(Skip), I32(Skip), I8(Skip)])),  // 182
    f("MPI_Type_get_name", Some(&[I16(Datatype), Chars, I32(Skip)])),  // 183
    f("MPI_Type_set_attr", Some(L_TYPE_DELETE_ATTR)),  // 184
    f("MPI_Type_set_name", Some(&[I16(Datatype), Chars])),  // 185
    f("MPI_Type_match_size", Some(&[I8(Skip), I32(Skip), I16(Datatype)])),  // 186
    f("MPI_Win_call_errhandler", Some(L_FILE_CALL_ERRHANDLER)),  // 187
    f("MPI_Win_create_keyval", Some(L_ERRHANDLER_CREATE)),  // 188
    f("MPI_Win_delete_attr", Some(L_TYPE_DUP)),  // 189
    f("MPI_Win_free_keyval", Some(L_ERRHANDLER_CREATE)),  // 190
    f("MPI_Win_get_attr", Some(&[I16(Skip), I16(Skip), I32(Flag)])),  // 191
    f("MPI_Win_get_name", Some(&[I16(Skip), Chars, I32(Skip)])),  // 192
    f("MPI_Win_set_attr", Some(L_TYPE_DUP)),  // 193
    f("MPI_Win_set_name", Some(L_OPEN_PORT)),  // 194
    f("MPI_Alloc_mem", Some(L_WIN_UNLOCK)),  // 195
    f("MPI_Comm_create_errhandler", Some(L_ERRHANDLER_CREATE)),  // 196
    f("MPI_Comm_get_errhandler", Some(L_ERRHANDLER_SET)),  // 197
    f("MPI_Comm_set_errhandler", Some(L_ERRHANDLER_SET)),  // 198
    f("MPI_File_create_errhandler", Some(L_ERRHANDLER_CREATE)),  // 199
    f("MPI_File_get_errhandler", Some(L_TYPE_DUP)),  // 200
    f("MPI_File_set_errhandler", Some(L_TYPE_DUP)),  // 201
    f("MPI_Finalized", Some(L_IS_THREAD_MAIN)),  // 202
    f("MPI_Free_mem", Some(L_WTIME)),  // 203
    f("MPI_Get_address", Some(L_BUFFER_ATTACH)),  // 204
    f("MPI_Info_create", Some(L_ERRHANDLER_CREATE)),  // 205
    f("MPI_Info_delete", Some(L_OPEN_PORT)),  // 206
    f("MPI_Info_dup", Some(L_TYPE_DUP)),  // 207
    f("MPI_Info_free", Some(L_ERRHANDLER_CREATE)),  // 208
    f("MPI_Info_get", Some(&[I16(Skip), Chars, I32(Skip), Chars, I32(Flag)])),  // 209
    f("MPI_Info_get_nkeys", Some(L_FILE_CALL_ERRHANDLER)),  // 210
    f("MPI_Info_get_nthkey", Some(&[I16(Skip), I32(Skip), Chars])),  // 211
    f("MPI_Info_get_valuelen", Some(&[I16(Skip), Chars, I32(Skip), I32(Flag)])),  // 212
    f("MPI_Info_set", Some(&[I16(Skip), Chars, Chars])),  // 213
    f("MPI_Pack_external", Some(&[Chars, I32(Skip), I16(Skip), I32(Skip), I32(Skip), I32(Skip)])),  // 214
    f("MPI_Pack_external_size", Some(&[Chars, I32(Skip), I16(Datatype), I32(Skip)])),  // 215
    f("MPI_Request_get_status", Some(L_TEST)),  // 216
    f("MPI_Type_create_darray", Some(&[I32(Skip), I32(Skip), I32(Skip), Ints(Ignored), Bytes, Ints(Ignored), Ints(Ignored), I8(Skip), I16(Skip), I16(Skip)])),  // 217
    f("MPI_Type_create_hindexed", Some(&[I32(Count), Ints(Ignored), Ints(Ignored), I16(Skip), I16(Skip)])),  // 218
    f("MPI_Type_create_hvector", Some(L_TYPE_VECTOR)),  // 219
    f("MPI_Type_create_indexed_block", Some(&[I32(Count), I32(Skip), Ints(Ignored), I16(Skip), I16(Skip)])),  // 220
    f("MPI_Type_create_resized", Some(&[I16(Skip), I32(Skip), I32(Skip), I16(Skip)])),  // 221
    f("MPI_Type_create_struct", Some(&[I32(Count), Ints(Ignored), Ints(Ignored), Shorts(Ignored), I16(Skip)])),  // 222
    f("MPI_Type_create_subarray", Some(&[I32(Skip), Ints(Ignored), Ints(Ignored), Ints(Ignored), I8(Skip), I16(Skip), I16(Skip)])),  // 223
    f("MPI_Type_get_extent", Some(L_TYPE_GET_EXTENT)),  // 224
    f("MPI_Type_get_true_extent", Some(L_TYPE_GET_EXTENT)),  // 225
    f("MPI_Unpack_external", Some(&[Chars, I32(Skip), I32(Skip), I32(Skip), I32(Skip), I16(Datatype)])),  // 226
    f("MPI_Win_create_errhandler", Some(L_ERRHANDLER_CREATE)),  // 227
    f("MPI_Win_get_errhandler", Some(L_TYPE_DUP)),  // 228
    f("MPI_Win_set_errhandler", Some(L_TYPE_DUP)),  // 229
    f("MPI_File_open", Some(&[I16(Comm), Chars, I8(Skip), I16(Skip), I16(Skip)])),  // 230
    f("MPI_File_close", Some(L_ERRHANDLER_CREATE)),  // 231
    f("MPI_File_delete", Some(&[Chars, I16(Skip)])),  // 232
    f("MPI_File_set_size", Some(L_FILE_SET_SIZE)),  // 233
    f("MPI_File_preallocate", Some(L_FILE_SET_SIZE)),  // 234
    f("MPI_File_get_size", Some(L_FILE_SET_SIZE)),  // 235
    f("MPI_File_get_group", Some(L_WIN_GET_GROUP)),  // 236
    f("MPI_File_get_amode", Some(&[I16(Skip), I8(Skip)])),  // 237
    f("MPI_File_set_info", Some(L_TYPE_DUP)),  // 238
    f("MPI_File_get_info", Some(L_TYPE_DUP)),  // 239
    f("MPI_File_set_view", Some(&[I16(Skip), I64(Skip), I16(Skip), I16(Skip), Chars, I16(Skip)])),  // 240
    f("MPI_File_get_view", Some(&[I16(Skip), I64(Skip), I16(Skip), I16(Skip), Chars])),  // 241
    f("MPI_File_read_at", Some(L_FILE_READ_AT)),  // 242
    f("MPI_File_read_at_all", Some(L_FILE_READ_AT)),  // 243
    f("MPI_File_write_at", Some(L_FILE_READ_AT)),  // 244
    f("MPI_File_write_at_all", Some(L_FILE_READ_AT)),  // 245
    f("MPI_File_iread_at", Some(L_FILE_IREAD_AT)),  // 246
    f("MPI_File_iwrite_at", Some(L_FILE_IREAD_AT)),  // 247
    f("MPI_File_read", Some(L_FILE_READ)),  // 248
    f("MPI_File_read_all", Some(L_FILE_READ)),  // 249
    f("MPI_File_write", Some(L_FILE_READ)),  // 250
    f("MPI_File_write_all", Some(L_FILE_READ)),  // 251
    f("MPI_File_iread", Some(L_FILE_IREAD)),  // 252
    f("MPI_File_iwrite", Some(L_FILE_IREAD)),  // 253
    f("MPI_File_seek", Some(L_FILE_SEEK)),  // 254
    f("MPI_File_get_position", Some(L_FILE_SET_SIZE)),  // 255
    f("MPI_File_get_byte_offset", Some(&[I16(Skip), I64(Skip), I64(Skip)])),  // 256
    f("MPI_File_read_shared", Some(L_FILE_READ)),  // 257
    f("MPI_File_write_shared", Some(L_FILE_READ)),  // 258
    f("MPI_File_iread_shared", Some(L_FILE_IREAD)),  // 259
    f("MPI_File_iwrite_shared", Some(L_FILE_IREAD)),  // 260
    f("MPI_File_read_ordered", Some(L_FILE_READ)),  // 261
    f("MPI_File_write_ordered", Some(L_FILE_READ)),  // 262
    f("MPI_File_seek_shared", Some(L_FILE_SEEK)),  // 263
    f("MPI_File_get_position_shared", Some(L_FILE_SET_SIZE)),  // 264
    f("MPI_File_read_at_all_begin", Some(L_FILE_READ_AT_ALL_BEGIN)),  // 265
    f("MPI_File_read_at_all_end", Some(L_FILE_READ_AT_ALL_END)),  // 266
    f("MPI_File_write_at_all_begin", Some(L_FILE_READ_AT_ALL_BEGIN)),  // 267
    f("MPI_File_write_at_all_end", Some(L_FILE_READ_AT_ALL_END)),  // 268
    f("MPI_File_read_all_begin", Some(L_FILE_READ_ALL_BEGIN)),  // 269
    f("MPI_File_read_all_end", Some(L_FILE_READ_AT_ALL_END)),  // 270
    f("MPI_File_write_all_begin", Some(L_FILE_READ_ALL_BEGIN)),  // 271
    f("MPI_File_write_all_end", Some(L_FILE_READ_AT_ALL_END)),  // 272
    f("MPI_File_read_ordered_begin", Some(L_FILE_READ_ALL_BEGIN)),  // 273
    f("MPI_File_read_ordered_end", Some(L_FILE_READ_AT_ALL_END)),  // 274
    f("MPI_File_write_ordered_begin", Some(L_FILE_READ_ALL_BEGIN)),  // 275
    f("MPI_File_write_ordered_end", Some(L_FILE_READ_AT_ALL_END)),  // 276
    f("MPI_File_get_type_extent", Some(&[I16(Skip), I16(Datatype), I32(Skip)])),  // 277
    f("MPI_Register_datarep", Some(L_CLOSE_PORT)),  // 278
    f("MPI_File_set_atomicity", Some(L_WIN_TEST)),  // 279
    f("MPI_File_get_atomicity", Some(L_WIN_TEST)),  // 280
    f("MPI_File_sync", Some(L_ERRHANDLER_CREATE)),  // 281
    f("MPIO_Test", Some(L_TEST)),  // 282
    f("MPIO_Wait", Some(L_WAIT)),  // 283
    f("MPIO_Testall", Some(L_TESTALL)),  // 284
    f("MPIO_Waitall", Some(L_WAITALL)),  // 285
    f("MPIO_Testany", Some(&[I32(Count), Ints(Requests), I32(Flag), I32(Index), Statuses])),  // 286
    f("MPIO_Waitany", Some(L_WAITANY)),  // 287
    f("MPIO_Waitsome", Some(L_WAITSOME)),  // 288
    f("MPIO_Testsome", Some(L_WAITSOME)),  // 289
    f("MPI_ALL_FUNCTIONS", None),  // 290
    f("function enter", Some(L_FUNCTION)),  // 291
    f("function exit", Some(L_FUNCTION)),  // 292
];
