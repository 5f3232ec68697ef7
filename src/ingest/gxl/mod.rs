//! GXL: reads back the graphs [`crate::export::gxl`] writes.

pub(crate) mod schema;
