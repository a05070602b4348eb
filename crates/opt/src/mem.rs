//! Store-to-load forwarding, redundant-load elimination and dead-store
//! elimination.
//!
//! ```text
//! block3:                                 block3:
//!     v10 = load v4, v8                       v10 = load v4, v8
//!     v11 = fadd v10, v2                      v11 = fadd v10, v2
//!     store v4, v8, v11      ; overwritten    v15 = fmul v11, v3
//!     v12 = load v4, v8      ; = v11          store v4, v8, v15
//!     v15 = fmul v12, v3                      jump block5
//!     store v4, v8, v15                   block5:                 ; one predecessor
//!     jump block5                             v17 = fadd v15, v9  ; v16 = v15
//! block5:                                     ...
//!     v16 = load v4, v8      ; = v15
//!     v17 = fadd v16, v9
//! ```
//!
//! The pass walks each *extended basic block* — a block and, recursively,
//! the successors whose only predecessor it is — carrying what is known
//! about memory at each point: for some (array, index) pairs the value the
//! element holds, for some arrays a value every element not written since
//! holds (after `zeros`: `0.0`; after `fill a, x`: `x`), and the (array,
//! index) pairs that an access has already shown to be in bounds. Each
//! block's knowledge starts from its only predecessor's, or from nothing at
//! a join or a loop header.
//!
//! **Rewrites.** A `load a, i` whose element is known is removed and its uses
//! read the known value: the value stored there (forwarding), the result of
//! an earlier load of it (redundant load), or the array's uniform value when
//! the load provably cannot trap (its pair was accessed before, or `i` is a
//! constant below the constant length of a `zeros` array `a`). A load of a
//! known pair cannot trap either: the earlier access of the same array at
//! an equal index succeeded, and array lengths never change. A `store a, i,
//! x` is removed when a later `store a, i, y` of the same block overwrites
//! it with nothing in between that may read the element: its trap, if it is
//! out of bounds, is the later store's, so removing it is exact as long as
//! nothing observable happens in between — nothing that may trap, unless
//! the first store is proven in bounds and to a local (`zeros`) array
//! (nothing sees a local array after a trap), and no other effect, unless
//! the first store is proven in bounds. The later store then takes the
//! removed one's source location: a fault it raises is the removed one's.
//! A `fill a` likewise removes an
//! earlier in-bounds store to `a`, and `return` one to a local array.
//!
//! **Indices.** An index is normalised to `base + offset` (through `iconst`,
//! and `iadd`/`isub` of constants); two indices are *equal* when base and
//! offset are, and *different* when they have the same base and different
//! offsets (i64 arithmetic wraps, so `x + c1 = x + c2` only if `c1 = c2`).
//! Otherwise they may be equal.
//!
//! **Arrays.** Two array values *must* alias only if they are the same value
//! (arrays never flow through block parameters, so a value names one array
//! at any point of an extended basic block: no back edge is crossed). A
//! `zeros` result never aliases another array value but its views: it is a
//! fresh array, and a function can only see arrays passed to it or created
//! by it. Parameters may alias each other, and a view (`slice`) may alias
//! anything. Indices compare only within one array value: two values that
//! may alias may be views at different offsets, so a write through one
//! forgets all that is known of the other. Writes are: `store` (the element, in
//! every array that may alias), `fill` (every element), and a `call` that
//! passes an array to a `mut` parameter (every element of every array that
//! may alias it; a callee can write only arrays it receives as `mut`
//! parameters or creates). An `autodiff` request forgets everything.
//! `pop`, `push`, `samelen` and non-array calls touch no array.
//!
//! **Regions.** A load is only replaced by a value allowed in its region
//! scope (`analysis::Scopes::can_replace`); stores are only removed
//! by a later store of the same block, hence of the same region.

use crate::analysis::{def_inst, iconst_of, Cfg, Replacements, Scopes};
use adze_ir::bounds::LengthClasses;
use adze_ir::{
    Block, Effects, FuncId, Function, Inst, InstData, Module, Opcode, Type, Value, ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::HashSet;

/// What the memory pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Loads replaced by the value stored to their element.
    pub forwarded: usize,
    /// Loads replaced by an earlier load of their element.
    pub reused: usize,
    /// Loads replaced by the value of a `zeros` or `fill`.
    pub uniform: usize,
    /// Stores removed because the element is overwritten, or dies.
    pub dead_stores: usize,
}

/// Which parameters of each function of a module are `mut` arrays: what a
/// call may write.
#[derive(Clone, Debug, Default)]
pub struct Callees {
    writes: SecondaryMap<FuncId, Vec<bool>>,
}

impl Callees {
    pub fn of(module: &Module) -> Callees {
        Callees {
            writes: module
                .iter()
                .map(|(id, f)| (id, f.sig.params.iter().map(|p| p.mutable).collect()))
                .collect(),
        }
    }

    /// For each parameter of `f`, may `f` write an array passed there?
    /// `None` for a function this table does not know.
    pub(crate) fn writes(&self, f: FuncId) -> Option<&[bool]> {
        self.writes.get(f).map(Vec::as_slice)
    }
}

/// Bounds on what is remembered, so that the pass stays linear on large
/// functions (forgetting is always safe).
const MAX_KNOWN: usize = 256;
const MAX_WRITTEN: usize = 64;

/// An index as `base + off` (`base` none: the constant `off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Index {
    base: Option<Value>,
    off: i64,
}

impl Index {
    fn of(func: &Function, mut v: Value) -> Index {
        let mut off: i64 = 0;
        for _ in 0..8 {
            if let Some(c) = iconst_of(func, v) {
                return Index {
                    base: None,
                    off: off.wrapping_add(c),
                };
            }
            let next = match def_inst(func, v) {
                Some(InstData::Binary {
                    op: Opcode::Iadd,
                    args: [a, b],
                }) => match (iconst_of(func, *a), iconst_of(func, *b)) {
                    (_, Some(c)) => Some((*a, c)),
                    (Some(c), _) => Some((*b, c)),
                    _ => None,
                },
                Some(InstData::Binary {
                    op: Opcode::Isub,
                    args: [a, b],
                }) => iconst_of(func, *b)
                    .and_then(i64::checked_neg)
                    .map(|c| (*a, c)),
                _ => None,
            };
            let Some((x, c)) = next else { break };
            v = x;
            off = off.wrapping_add(c);
        }
        Index { base: Some(v), off }
    }

    fn must_differ(self, other: Index) -> bool {
        self.base == other.base && self.off != other.off
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An entry-block parameter.
    Param,
    /// A `zeros` result.
    Local,
    /// Anything else (not in verified IR): may alias everything.
    Unknown,
}

fn kind(func: &Function, a: Value) -> Kind {
    if !func.dfg.value_is_valid(a) {
        return Kind::Unknown;
    }
    match *func.dfg.value_def(a) {
        ValueDef::Param { block, .. } if Some(block) == func.entry_block() => Kind::Param,
        ValueDef::Result { inst, .. } if func.dfg.inst(inst).opcode() == Opcode::Zeros => {
            Kind::Local
        }
        _ => Kind::Unknown,
    }
}

/// Is `a` a local array (a `zeros` result), which no caller can see?
pub(crate) fn is_local(func: &Function, a: Value) -> bool {
    kind(func, a) == Kind::Local
}

/// May `a` and `b` share an element? The same value does; views
/// (`slice`, `view`) are what their roots are: views of one local array
/// may overlap each other and it, never another local or a parameter's
/// array; views of parameters may overlap any parameter's.
pub(crate) fn may_alias(func: &Function, a: Value, b: Value) -> bool {
    if a == b {
        return true;
    }
    let (ra, rb) = (func.array_root(a), func.array_root(b));
    match (kind(func, ra), kind(func, rb)) {
        (Kind::Local, Kind::Local) => ra == rb,
        (Kind::Local, Kind::Param) | (Kind::Param, Kind::Local) => false,
        _ => true,
    }
}

/// The value every element of an array holds (outside `written`).
#[derive(Clone, Copy, Debug)]
enum Uniform {
    /// `+0.0`, after `zeros`.
    Zero,
    /// After `fill a, v`.
    Value(Value),
}

#[derive(Clone, Debug, Default)]
struct ArrayState {
    uniform: Option<Uniform>,
    /// Indices written since `uniform` was set.
    written: Vec<Index>,
    /// Elements whose value is known: (index, value, stored by a `store`
    /// rather than read by a `load`).
    known: Vec<(Index, Value, bool)>,
}

#[derive(Clone, Debug, Default)]
struct State {
    arrays: Vec<(Value, ArrayState)>,
    /// Pairs shown to be in bounds by an access that succeeded. A hash
    /// set, not an entity set: the keys are (array, index expression)
    /// pairs, few of a large space, and the state is copied for every
    /// block of the dominator tree walk.
    in_bounds: HashSet<(Value, Index)>,
}

impl State {
    fn array(&self, a: Value) -> Option<&ArrayState> {
        self.arrays.iter().find(|(b, _)| *b == a).map(|(_, s)| s)
    }

    fn array_mut(&mut self, a: Value) -> &mut ArrayState {
        let pos = match self.arrays.iter().position(|(b, _)| *b == a) {
            Some(p) => p,
            None => {
                self.arrays.push((a, ArrayState::default()));
                self.arrays.len() - 1
            }
        };
        &mut self.arrays[pos].1
    }

    /// The value of `a[i]` if known, and whether it was stored.
    fn known(&self, a: Value, i: Index) -> Option<(Value, bool)> {
        let s = self.array(a)?;
        s.known
            .iter()
            .rev()
            .find(|(k, ..)| *k == i)
            .map(|&(_, v, stored)| (v, stored))
    }

    /// The uniform value of `a[i]`, if `i` was not written since.
    fn uniform(&self, a: Value, i: Index) -> Option<Uniform> {
        let s = self.array(a)?;
        let u = s.uniform?;
        s.written.iter().all(|w| w.must_differ(i)).then_some(u)
    }

    fn remember(&mut self, a: Value, i: Index, v: Value, stored: bool) {
        let s = self.array_mut(a);
        if s.known.len() >= MAX_KNOWN {
            s.known.remove(0);
        }
        s.known.push((i, v, stored));
    }

    /// `a[i]` is written (with `v` if known).
    fn write(&mut self, func: &Function, a: Value, i: Index, v: Option<Value>) {
        // Another array that may alias `a` may see it at an offset (a view,
        // or a parameter that is one): its indices say nothing about `i`.
        self.arrays
            .retain(|(b, _)| *b == a || !may_alias(func, a, *b));
        for (b, s) in &mut self.arrays {
            if *b != a {
                continue;
            }
            s.known.retain(|(k, ..)| k.must_differ(i));
            if s.uniform.is_some() {
                s.written.push(i);
                if s.written.len() > MAX_WRITTEN {
                    s.uniform = None;
                    s.written.clear();
                }
            }
        }
        if let Some(v) = v {
            self.remember(a, i, v, true);
        }
    }

    /// Every element of every array that may alias `a` is written.
    fn clobber(&mut self, func: &Function, a: Value) {
        self.arrays.retain(|(b, _)| !may_alias(func, a, *b));
    }

    fn set_uniform(&mut self, func: &Function, a: Value, u: Uniform) {
        self.clobber(func, a);
        self.arrays.push((
            a,
            ArrayState {
                uniform: Some(u),
                ..ArrayState::default()
            },
        ));
    }

    /// Can an access of `a[i]` not trap? `key`: `a`'s length class
    /// ([`Pass::key`]).
    fn is_in_bounds(&self, func: &Function, a: Value, key: Value, i: Index) -> bool {
        if self.in_bounds.contains(&(key, i)) {
            return true;
        }
        let len = match def_inst(func, a) {
            Some(InstData::Zeros { len, .. }) => iconst_of(func, *len),
            _ => None,
        };
        i.base.is_none() && len.is_some_and(|n| 0 <= i.off && i.off < n)
    }
}

/// A store that nothing has read yet, in the current block.
struct Pending {
    inst: Inst,
    array: Value,
    index: Index,
    /// Proven in bounds: it cannot trap.
    safe: bool,
    /// To a local (`zeros`) array, which nothing can observe after a trap
    /// or a return.
    local: bool,
}

/// An instruction that may trap: a store that has not happened yet would
/// be observed in the arrays the run leaves behind, unless it cannot trap
/// itself and is to a local array.
fn trap_point(pending: &mut Vec<Pending>) {
    pending.retain(|p| p.safe && p.local);
}

/// An effect that cannot trap: a store that may trap cannot be removed in
/// favour of a later one (its trap would come after the effect).
fn effect_point(pending: &mut Vec<Pending>) {
    pending.retain(|p| p.safe);
}

/// Runs the memory pass on `func`; `callees` says which arrays a call may
/// write.
pub fn forward_memory(func: &mut Function, callees: &Callees) -> MemStats {
    let cfg = Cfg::new(func);
    let scopes = Scopes::new(func);
    let mut pass = Pass {
        scopes: &scopes,
        callees,
        repl: Replacements::new(func),
        stats: MemStats::default(),
        same_len: LengthClasses::of_entry_block(func),
        entry: func.entry_block(),
        in_entry: false,
        proven: adze_ir::bounds::safe_accesses(func),
    };
    for &root in &cfg.rpo {
        if cfg.preds(root).len() == 1 {
            continue;
        }
        let mut stack: Vec<(Block, State)> = vec![(root, State::default())];
        while let Some((block, mut state)) = stack.pop() {
            pass.block(func, block, &mut state);
            let children: Vec<Block> = cfg
                .succs(block)
                .iter()
                .copied()
                .filter(|&s| cfg.preds(s) == [block])
                .collect();
            if let Some((&last, rest)) = children.split_last() {
                for &c in rest {
                    stack.push((c, state.clone()));
                }
                stack.push((last, state));
            }
        }
    }
    pass.repl.apply(func);
    pass.stats
}

struct Pass<'a> {
    scopes: &'a Scopes,
    callees: &'a Callees,
    repl: Replacements,
    stats: MemStats,
    /// Arrays of one length by a `samelen` of the entry block, which hold
    /// outside the entry block (it dominates every other block).
    same_len: LengthClasses,
    entry: Option<Block>,
    /// Is the block being rewritten the entry block?
    in_entry: bool,
    /// Accesses the loop bounds prove in bounds (`adze_ir::bounds`; a
    /// `HashSet` because that is what `safe_accesses` returns).
    proven: EntitySet<Inst>,
}

impl Pass<'_> {
    /// The key of array `a` in the in-bounds facts: its length class
    /// outside the entry block (where the entry's `samelen`s have run, so
    /// an access of one array of a class proves the same index in all),
    /// itself in the entry block.
    fn key(&self, a: Value) -> Value {
        if self.in_entry {
            a
        } else {
            self.same_len.rep(a)
        }
    }

    fn block(&mut self, func: &mut Function, block: Block, state: &mut State) {
        self.in_entry = Some(block) == self.entry;
        let mut pending: Vec<Pending> = Vec::new();
        let insts: Vec<Inst> = func.layout.block_insts(block).to_vec();
        for inst in insts {
            self.repl.rewrite_inst(func, inst);
            let data = func.dfg.inst(inst).clone();
            match data {
                InstData::Binary {
                    op: Opcode::Load,
                    args: [a, i],
                } => {
                    let index = Index::of(func, i);
                    if self.load(func, inst, a, index, state) {
                        continue;
                    }
                    pending.retain(|p| {
                        !may_alias(func, p.array, a) || (p.array == a && p.index.must_differ(index))
                    });
                    let key = self.key(a);
                    if !self.proven.contains(inst) && !state.is_in_bounds(func, a, key, index) {
                        trap_point(&mut pending);
                    }
                    let r = func.dfg.first_result(inst);
                    state.remember(a, index, r, false);
                    state.in_bounds.insert((key, index));
                }
                InstData::Ternary {
                    op: Opcode::Store,
                    args: [a, i, x],
                } => {
                    let index = Index::of(func, i);
                    // An overwritten store dies. This store then traps
                    // exactly when the dead one would have: what showed the
                    // element in bounds may have been the dead store itself.
                    let overwritten = pending
                        .iter()
                        .position(|p| p.array == a && p.index == index);
                    let safe = match overwritten {
                        Some(k) => {
                            let dead = pending.remove(k);
                            func.layout.remove_inst(dead.inst);
                            // Its fault is the dead store's, at the dead
                            // store's source location.
                            func.dfg.copy_srcloc(dead.inst, inst);
                            self.stats.dead_stores += 1;
                            dead.safe
                        }
                        None => {
                            self.proven.contains(inst)
                                || state.is_in_bounds(func, a, self.key(a), index)
                        }
                    };
                    if safe {
                        effect_point(&mut pending);
                    } else {
                        trap_point(&mut pending);
                    }
                    state.write(func, a, index, Some(x));
                    state.in_bounds.insert((self.key(a), index));
                    pending.push(Pending {
                        inst,
                        array: a,
                        index,
                        safe,
                        local: is_local(func, a),
                    });
                }
                InstData::Binary {
                    op: Opcode::Fill,
                    args: [a, x],
                } => {
                    self.kill_pending(func, &mut pending, |_, p| p.array == a && p.safe);
                    effect_point(&mut pending);
                    state.set_uniform(func, a, Uniform::Value(x));
                }
                InstData::Zeros { .. } => {
                    trap_point(&mut pending);
                    let z = func.dfg.first_result(inst);
                    state.set_uniform(func, z, Uniform::Zero);
                }
                InstData::Call {
                    func: callee,
                    ref args,
                } => {
                    let arrays: Vec<Value> = args
                        .iter()
                        .copied()
                        .filter(|&a| func.dfg.value_type(a) == Type::Array)
                        .collect();
                    pending.retain(|p| !arrays.iter().any(|&a| may_alias(func, p.array, a)));
                    trap_point(&mut pending);
                    match self.callees.writes(callee) {
                        Some(writes) => {
                            for (&a, &w) in args.iter().zip(writes) {
                                if w && func.dfg.value_type(a) == Type::Array {
                                    state.clobber(func, a);
                                }
                            }
                        }
                        None => state.arrays.clear(),
                    }
                }
                // A store to a local array is dead at `return`, unless the
                // array (or the array it views) is returned: the caller
                // owns it then (found by review: `y[1] = ..; y` lost the
                // store).
                InstData::Return { ref args } => {
                    let returned = args.clone();
                    self.kill_pending(func, &mut pending, |f, p| {
                        p.safe && p.local && !returned.contains(&f.array_root(p.array))
                    });
                }
                InstData::Push { .. } => effect_point(&mut pending),
                // The tape is not an array.
                InstData::Pop { .. } => trap_point(&mut pending),
                _ => {
                    let op = data.opcode();
                    let effects = op.effects();
                    if effects
                        == (Effects {
                            may_trap: true,
                            ..Effects::PURE
                        })
                    {
                        // `idiv`, `irem`, `samelen`: no memory, a trap.
                        trap_point(&mut pending);
                    } else if op.has_side_effects() && !op.is_terminator() {
                        // `autodiff`, or an opcode this pass does not know:
                        // it may read, write and trap.
                        pending.clear();
                        state.arrays.clear();
                    }
                }
            }
        }
    }

    /// Removes the pending stores that `dead` selects.
    fn kill_pending(
        &mut self,
        func: &mut Function,
        pending: &mut Vec<Pending>,
        dead: impl Fn(&Function, &Pending) -> bool,
    ) {
        let mut k = 0;
        while k < pending.len() {
            if dead(func, &pending[k]) {
                let p = pending.remove(k);
                func.layout.remove_inst(p.inst);
                self.stats.dead_stores += 1;
            } else {
                k += 1;
            }
        }
    }

    /// Replaces the load `inst` of `a[index]` if its value is known; true if
    /// it is gone (it then neither reads memory nor traps).
    fn load(
        &mut self,
        func: &mut Function,
        inst: Inst,
        a: Value,
        index: Index,
        state: &State,
    ) -> bool {
        let r = func.dfg.first_result(inst);
        if let Some((v, stored)) = state.known(a, index) {
            if self.scopes.can_replace(func, r, v) {
                if stored {
                    self.stats.forwarded += 1;
                } else {
                    self.stats.reused += 1;
                }
                self.repl.replace(r, v);
                func.layout.remove_inst(inst);
                return true;
            }
            return false;
        }
        if !self.proven.contains(inst) && !state.is_in_bounds(func, a, self.key(a), index) {
            return false;
        }
        match state.uniform(a, index) {
            Some(Uniform::Zero) => {
                *func.dfg.inst_mut(inst) = InstData::fconst(0.0);
                self.stats.uniform += 1;
                true
            }
            Some(Uniform::Value(v)) if self.scopes.can_replace(func, r, v) => {
                self.repl.replace(r, v);
                func.layout.remove_inst(inst);
                self.stats.uniform += 1;
                true
            }
            _ => false,
        }
    }
}
