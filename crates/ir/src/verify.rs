//! IR verifier (in progress).
