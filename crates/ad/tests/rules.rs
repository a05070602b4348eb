//! Custom rules in every pass and nesting order, rule identity, rule
//! regions, tapes and reverse over reverse: one binary (see `rules/support`).

mod rules {
    pub mod cases;
    pub mod higher;
    pub mod identity;
    pub mod seed;
    pub mod support;
}
