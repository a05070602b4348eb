//! Text-format parser (in progress).
