//! adze
