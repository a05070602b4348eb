//! IR-to-IR passes of adze that are not AD: the rule-preserving inliner
//! ([`inline`]) and the optimizer ([`mod@gvn`], [`mod@promote`],
//! [`mod@mem`], [`mod@indvars`], [`mod@dce`], [`mod@loopdel`],
//! [`mod@licm`], [`mod@carry`], [`mod@version`], run in order by [`optimize_module`]).
//!
//! Each pass is a free function over a [`adze_ir::Function`] (the inliner:
//! over a [`adze_ir::Module`]). The inliner replaces calls by the callee's
//! body and, when the callee carries custom derivative rules, records the
//! body as a rule region, so that inlining never changes a derivative; every
//! inlined body is also recorded as provenance (`inlined0`), which run-time
//! errors use to name the inlined function a fault comes from:
//!
//! ```text
//! ; before                                ; after
//! function @f(x: f64) -> f64 {            function @f(x: f64) -> f64 {
//! block0(v0: f64):                            region0: @sq(v0) -> (v1) blocks(block2) rules(forward: @sq.fwd)
//!     v1 = call @sq(v0)                       inlined0: @sq blocks(block2)
//!     return v1                           block0(v0: f64):
//! }                                           jump block2
//!                                         block2:
//!                                             v2 = fmul v0, v0
//!                                             jump block1(v2)
//!                                         block1(v1: f64):
//!                                             return v1
//!                                         }
//! ```
//!
//! The optimizer's passes are *exact*: none changes a result bit (NaN
//! payloads and the sign of zero included), removes, adds or reorders a
//! trap or another effect, or changes a rule region's interface. The
//! pipeline runs it after AD, so derivatives are computed on unoptimized IR
//! and, each pass being exact, an optimized derivative computes the same
//! bits as the unoptimized one.
//!
//! ```
//! let src = "fn f(x: f64) -> f64 { let y = x * 1.0 + 0.0; (y + 2.0 * 3.0) * (y + 6.0) }";
//! let mut module = adze_lang::compile("f.adz", src).unwrap();
//! let stats = adze_opt::optimize_module(&mut module).unwrap();
//! assert!(stats.insts_after < stats.insts_before);
//! ```
//!
//! See `docs/inliner.md` and `docs/optimizer.md`.
#![forbid(unsafe_code)]

mod analysis;
pub mod carry;
mod copy;
pub mod dce;
pub mod gvn;
pub mod indvars;
pub mod inline;
pub mod licm;
pub mod loopdel;
pub mod mem;
mod phis;
pub mod promote;
pub mod touch;
pub mod unroll;
pub mod vectorize;
pub mod version;

pub use carry::{carry_loads, CarryStats};
pub use dce::{dce, DceStats};
pub use gvn::{gvn, GvnStats};
pub use indvars::{indvars, IndvarsStats};
pub use inline::{
    inline_functions, inline_module, DefaultPolicy, InlinePolicy, InlineStats, DEFAULT_BUDGET,
    MAX_FUNCTION_INSTS,
};
pub use licm::{licm, LicmStats};
pub use loopdel::{delete_loops, LoopDelStats};
pub use mem::{forward_memory, Callees, MemStats};
pub use touch::{first_touch, specialize_filled_calls, EntryFill};
pub use unroll::{unroll_loops, UnrollStats};
pub use vectorize::{vectorize_loops, VectorizeStats};
pub use version::{version_loops, VersionStats};

use adze_ir::verify::{verify_function, VerifierErrors};
use adze_ir::{FuncId, Function, Inst, InstData, Module};
use std::collections::HashMap;
use std::ops::AddAssign;

/// One pass of the optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    /// [`gvn()`]: value numbering, constant folding, exact simplification.
    Gvn,
    /// [`forward_memory`]: store-to-load forwarding, redundant loads, dead
    /// stores.
    Mem,
    /// [`dce()`]: unreachable blocks and dead instructions.
    Dce,
    /// [`licm()`]: loop-invariant code motion.
    Licm,
    /// [`promote::promote_arrays`]: small local arrays accessed at constant
    /// indices (reverse mode's adjoint slots and trip counts) become SSA
    /// values.
    Promote,
    /// [`indvars()`]: congruent induction variables become one.
    Indvars,
    /// [`delete_loops`]: counted loops without effects whose results
    /// nothing reads (but the final index, computed in closed form).
    LoopDel,
    /// [`touch::first_touch`]: a load in a loop of an element no iteration
    /// has written yet, of an array filled before the loop (or by every
    /// caller, [`touch::specialize_filled_calls`]), reads the fill's value.
    Touch,
    /// [`carry_loads`]: an element read (and written) at a loop-invariant
    /// index is carried in a block parameter (first iteration peeled).
    Carry,
    /// [`version_loops`]: a count-down loop with unproven indices gets a
    /// copy behind one guard that checks their whole range.
    Version,
    /// [`vectorize_loops`]: a counting loop whose iterations are
    /// independent but for a split sum runs two iterations at a time in
    /// the lanes of `f64x2` values.
    Vectorize,
    /// [`unroll_loops`]: a counting loop whose back edge rotates values
    /// runs two iterations per trip.
    Unroll,
}

impl Pass {
    /// The name that a verifier error after this pass carries (`opt-gvn`, ..).
    pub fn name(self) -> &'static str {
        match self {
            Pass::Gvn => "opt-gvn",
            Pass::Mem => "opt-mem",
            Pass::Dce => "opt-dce",
            Pass::Licm => "opt-licm",
            Pass::Promote => "opt-promote",
            Pass::Indvars => "opt-indvars",
            Pass::LoopDel => "opt-loopdel",
            Pass::Touch => "opt-touch",
            Pass::Carry => "opt-carry",
            Pass::Version => "opt-version",
            Pass::Vectorize => "opt-vectorize",
            Pass::Unroll => "opt-unroll",
        }
    }
}

/// The order in which [`optimize_module`] runs the passes:
///
/// 1. `gvn` folds constants, merges duplicates (the `iconst` indices of
///    adjoint slots become one value each) and simplifies;
/// 2. `promote` turns the adjoint's slot and trip arrays into SSA values
///    (block parameters where definitions meet), across the whole CFG;
/// 3. `mem` forwards the remaining stores and loads, which exposes more of
///    the same (`fadd` of a forwarded `-0.0`, constants read back from
///    memory);
/// 4. `gvn` again, for what forwarding exposed;
/// 5. `indvars` merges congruent loop counters (reverse mode's trip count
///    with the loop's index);
/// 6. `dce` removes what the first five left unused and unreachable, dead
///    block parameters included (the loop-carried values nobody reads);
/// 7. `loopdel` removes the counted loops that are left with no effect and
///    no result but their final index;
/// 8. `licm` hoists what is still in loops and invariant;
/// 9. `carry` peels the first iteration of inner loops that read and write
///    an element at an invariant index (the adjoint's `xc.d[i] += ..`), so
///    that the element is carried in a register;
/// 10. `version` gives count-down loops (reverse mode's) whose indices no
///     analysis bounds a copy behind one guard on their whole range;
/// 11. `touch` replaces the loads in loops of elements no iteration has
///     written yet, of arrays filled before the loop, or by the callers of
///     a copy [`touch::specialize_filled_calls`] made (the adjoint's first
///     `x.d[i] += ..` reads the caller's `fill(dx, 0.0)`), by the fill's
///     value; after `version`, whose guarded copy is what proves a
///     count-down loop's loads in bounds;
/// 12. `gvn` merges the hoisted code with the preheader's;
/// 13. `dce` sweeps once more;
/// 14. `vectorize` runs two iterations at a time, in the lanes of `f64x2`
///     values, of the innermost counting loops whose iterations are
///     independent but for a split sum's partial sums (the loop finishes
///     what is left);
/// 15. `licm` again: the lanes' guard of an inner loop tests ranges whose
///     atoms mostly depend on the outer loops only (kmeans' `i * d <=
///     len(points)` inside the loop over `j`); they move out, and the
///     guard keeps its `select` chain (`adze_ir::bounds` reads atoms
///     through it wherever they are defined);
/// 16. `unroll` runs two iterations per trip of the innermost counting
///     loops whose back edge rotates values (a split sum's partial sums,
///     or the lanes' two vectors of them), last, so that no pass before it
///     sees a loop twice.
pub const PIPELINE: [Pass; 16] = [
    Pass::Gvn,
    Pass::Promote,
    Pass::Mem,
    Pass::Gvn,
    Pass::Indvars,
    Pass::Dce,
    Pass::LoopDel,
    Pass::Licm,
    Pass::Carry,
    Pass::Version,
    Pass::Touch,
    Pass::Gvn,
    Pass::Dce,
    Pass::Vectorize,
    Pass::Licm,
    Pass::Unroll,
];

/// What the optimizer did: placed instructions before and after (summed
/// over functions), and each pass's counts (summed over runs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptStats {
    pub insts_before: usize,
    pub insts_after: usize,
    pub gvn: GvnStats,
    pub mem: MemStats,
    pub dce: DceStats,
    pub licm: LicmStats,
    /// Arrays promoted to SSA values.
    pub promoted: usize,
    pub indvars: IndvarsStats,
    pub loopdel: LoopDelStats,
    /// Loads [`touch::first_touch`] replaced.
    pub touched: usize,
    /// Copies [`touch::specialize_filled_calls`] made.
    pub filled_copies: usize,
    pub carry: CarryStats,
    pub version: VersionStats,
    pub vectorize: VectorizeStats,
    pub unroll: UnrollStats,
}

macro_rules! add_assign {
    ($($t:ident { $($f:ident),* })*) => {$(
        impl AddAssign for $t {
            fn add_assign(&mut self, other: $t) {
                $(self.$f += other.$f;)*
            }
        }
    )*};
}

add_assign! {
    GvnStats { folded, simplified, merged, branches }
    MemStats { forwarded, reused, uniform, dead_stores }
    DceStats { blocks, insts, params }
    LicmStats { loops, with_preheader, hoisted }
    IndvarsStats { replaced, offset }
    LoopDelStats { deleted, exit_values }
    CarryStats { loops, loads }
    VersionStats { loops, ranges }
    UnrollStats { loops }
    VectorizeStats { loops, neighbours, ranged, hoisted }
    OptStats { insts_before, insts_after, gvn, mem, dce, licm, promoted, indvars, loopdel, touched, filled_copies, carry, version, vectorize, unroll }
}

/// Optimizes every function of `module` with [`PIPELINE`]. In debug builds
/// (and so in tests) the function is verified after each pass; an error
/// names the pass (`pass `opt-gvn` produced invalid IR`), which is a bug of
/// that pass.
pub fn optimize_module(module: &mut Module) -> Result<OptStats, VerifierErrors> {
    let ids: Vec<FuncId> = module.ids().collect();
    optimize_functions(module, &ids)
}

/// Optimizes the functions `ids` of `module` (see [`optimize_module`]).
pub fn optimize_functions(module: &mut Module, ids: &[FuncId]) -> Result<OptStats, VerifierErrors> {
    optimize_with(module, ids, &PIPELINE)
}

/// Runs `pipeline` instead of [`PIPELINE`] on the functions `ids` (to
/// measure what one pass is worth: the benchmarks' `ADZE_BENCH_AB`).
pub fn optimize_with(
    module: &mut Module,
    ids: &[FuncId],
    pipeline: &[Pass],
) -> Result<OptStats, VerifierErrors> {
    let mut stats = OptStats::default();
    // Calls that pass a filled array to a copy of their callee that knows
    // it, the copies optimized with the others.
    let mut ids = ids.to_vec();
    let mut entry: HashMap<FuncId, Vec<EntryFill>> = HashMap::new();
    if pipeline.contains(&Pass::Touch) {
        let called_before = called_by(module, &ids);
        for (copy, fills) in specialize_filled_calls(module, &ids) {
            ids.push(copy);
            entry.insert(copy, fills);
            stats.filled_copies += 1;
        }
        if !entry.is_empty() {
            ids = without_lost_callees(module, ids, &called_before);
        }
    }
    let callees = Callees::of(module);
    for &id in &ids {
        if !module.is_valid(id) {
            continue;
        }
        stats.insts_before += module.func(id).num_placed_insts();
        drop_pop_varies(module.func_mut(id));
        let fills = entry.get(&id).map_or(&[][..], Vec::as_slice);
        for &pass in pipeline {
            stats += run(module, id, pass, &callees, fills)?;
        }
        stats.insts_after += module.func(id).num_placed_insts();
    }
    Ok(stats)
}

/// How many calls (and other references) each function gets from the
/// functions `ids`.
fn called_by(module: &Module, ids: &[FuncId]) -> HashMap<FuncId, usize> {
    let mut count: HashMap<FuncId, usize> = HashMap::new();
    for &id in ids {
        if module.is_valid(id) {
            for f in module.func(id).referenced_functions() {
                *count.entry(f).or_default() += 1;
            }
        }
    }
    count
}

/// `ids` without the derivatives (functions the AD passes made, which no
/// one calls by name) that something among them called before `touch`
/// redirected calls to copies and that nothing left among them calls now
/// (to a fixed point: a derivative only such a one called goes too). They
/// are not run from where `ids` were chosen, so optimizing them would only
/// cost time (the forward derivatives of GMM's adjoint, twice). A
/// function of the source is always optimized: it may be called by name.
fn without_lost_callees(
    module: &Module,
    mut ids: Vec<FuncId>,
    called_before: &HashMap<FuncId, usize>,
) -> Vec<FuncId> {
    loop {
        let now = called_by(module, &ids);
        let before = ids.len();
        ids.retain(|&id| {
            module.derivation(id).is_none()
                || called_before.get(&id).copied().unwrap_or(0) == 0
                || now.get(&id).copied().unwrap_or(0) > 0
        });
        if ids.len() == before {
            return ids;
        }
    }
}

/// Forgets what each `pop` varies with (`pop T, f64 varies(..)`): it is
/// for the AD passes' activity analysis, which is over when the optimizer
/// runs, and as operands it would keep values alive.
fn drop_pop_varies(func: &mut Function) {
    let pops: Vec<Inst> = (func.layout.insts())
        .map(|(_, i)| i)
        .filter(|&i| {
            matches!(
                func.dfg.inst(i),
                InstData::Pop {
                    varies: Some(_),
                    ..
                }
            )
        })
        .collect();
    for inst in pops {
        if let InstData::Pop { varies, .. } = func.dfg.inst_mut(inst) {
            *varies = None;
        }
    }
}

/// Runs one pass on one function, verifying it afterwards in debug builds.
/// The instruction counts of the result are left at zero.
pub fn run_pass(module: &mut Module, id: FuncId, pass: Pass) -> Result<OptStats, VerifierErrors> {
    let callees = Callees::of(module);
    run(module, id, pass, &callees, &[])
}

fn run(
    module: &mut Module,
    id: FuncId,
    pass: Pass,
    callees: &Callees,
    fills: &[EntryFill],
) -> Result<OptStats, VerifierErrors> {
    let mut stats = OptStats::default();
    let func = module.func_mut(id);
    if func.is_declaration() {
        return Ok(stats);
    }
    match pass {
        Pass::Gvn => stats.gvn = gvn(func),
        Pass::Mem => stats.mem = forward_memory(func, callees),
        Pass::Dce => stats.dce = dce(func),
        Pass::Licm => stats.licm = licm(func),
        Pass::Promote => stats.promoted = promote::promote_arrays(func),
        Pass::Indvars => stats.indvars = indvars(func),
        Pass::LoopDel => stats.loopdel = delete_loops(func),
        Pass::Touch => stats.touched = first_touch(func, callees, fills),
        Pass::Carry => stats.carry = carry_loads(func),
        Pass::Version => stats.version = version_loops(func),
        Pass::Vectorize => stats.vectorize = vectorize_loops(func),
        Pass::Unroll => stats.unroll = unroll_loops(func),
    }
    if cfg!(debug_assertions) {
        verify_function(module, id).map_err(|e| e.with_pass(pass.name()))?;
    }
    Ok(stats)
}
