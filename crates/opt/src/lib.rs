//! IR passes (in progress).
