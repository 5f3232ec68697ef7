//! The MTF text format, version 1.
