//! Structural validation of the metamodel constraints.
