//! Message, request and collective matching.
