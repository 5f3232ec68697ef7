//! Deterministic generators of MTF traces of real application shapes.
