//! Global value numbering with constant folding and exact algebraic
//! simplification.
//!
//! The blocks are visited in a preorder of the dominator tree, so every
//! operand's definition is seen before its uses. Each instruction, with its
//! operands already rewritten, is first *simplified* (folded to a constant,
//! replaced by one of its operands, or rewritten to a cheaper form), then,
//! if it is pure, looked up in a scoped table of the pure instructions of
//! the dominating blocks: an identical one there computes the same bits, so
//! the later one is removed and its uses read the earlier result.
//!
//! ```text
//! block0(v0: f64, v8: bool):             block0(v0: f64, v8: bool):
//!     v1 = fconst 2.0                         v1 = fconst 2.0
//!     v2 = fmul v0, v1                        v2 = fmul v0, v1
//!     brif v8, block1, block2                 brif v8, block1, block2
//! block1:                                 block1:
//!     v3 = fconst 2.0          ; = v1         v6 = fadd v2, v2
//!     v4 = fmul v0, v3         ; = v2         ...
//!     v5 = fconst 1.0
//!     v7 = fmul v4, v5         ; = v4 (quiet)
//!     v6 = fadd v7, v2
//! ```
//!
//! **Exactness.** Folding evaluates with [`adze_ir::semantics`], the very
//! functions the interpreter calls and the JIT calls or matches bit for
//! bit, so a folded constant has the bits the operation would have had at
//! run time. An operation that would trap (`idiv`/`irem` by zero,
//! `i64::MIN / -1`) is never folded. Merging needs no argument: pure
//! operations are deterministic functions of their operands' bits.
//! Operands are never commuted (`fadd a, b` and `fadd b, a` differ in the
//! NaN payload they return when both are NaN).
//!
//! The simplifications, each exact for every operand (the list, with the
//! tempting ones that are *not* exact, is in `docs/optimizer.md`):
//!
//! | rewrite | why exact |
//! |---|---|
//! | `fmul x, 1.0`, `fmul 1.0, x`, `fdiv x, 1.0` → `x` | `x·1 = x/1 = x` for every `x` but a signaling NaN, which the operation quiets: applied only when `x` is *quiet* (see below) |
//! | `fadd x, -0.0`, `fadd -0.0, x`, `fsub x, 0.0` → `x` | `x + (-0) = x - (+0) = x`, zeros of both signs included (`+0 + -0 = +0`, `-0 + -0 = -0`); same NaN condition |
//! | `fneg (fneg x)` → `x` | `fneg` flips the sign bit only |
//! | `powi x, 1` → `x`, `powi x, 0` → `1.0` | [`adze_ir::semantics::powi`] returns `x` itself, and `1.0` for every `x` |
//! | `iadd x, 0`, `iadd 0, x`, `isub x, 0`, `imul x, 1`, `imul 1, x`, `idiv x, 1` → `x` | wrapping arithmetic; `idiv` by 1 cannot trap |
//! | `imul x, 0`, `imul 0, x`, `isub x, x`, `irem x, 1` → `0` | wrapping arithmetic; `irem` by 1 cannot trap |
//! | `ineg (ineg x)`, `not (not x)` → `x` | involutions (`ineg` wraps) |
//! | `icmp eq/le/ge x, x` → `true`, `icmp ne/lt/gt x, x` → `false` | integers have no NaN |
//! | `select true, a, b` → `a`, `select false, a, b` → `b`, `select c, a, a` → `a` | |
//! | `brif true/false, ..` → `jump`; `brif c, B(args), B(args)` → `jump B(args)`; `brif (not c), T, E` → `brif c, E, T` | |
//!
//! A value is *quiet* when it cannot be a signaling NaN: the result of
//! `fadd`, `fsub`, `fmul`, `fdiv`, `sqrt`, `min`, `max` (IEEE 754 delivers
//! quiet NaNs), of `sitof`, of `powi` with an exponent other than 1, an
//! `fconst` that is not a signaling NaN, or `fneg`/`abs`/`select` of quiet
//! values. Parameters, loads, pops and call results may hold any bits.
//!
//! **Regions.** The table is keyed by the region scope of the block
//! (`analysis::Scopes`), so code inside a rule region is never merged with
//! code outside it, and a simplification only substitutes a value allowed in
//! the replaced value's scope (`analysis::Scopes::can_replace`).
//! A pinned value (a region's argument or result) keeps its instruction,
//! which may still be folded in place.
//!
//! Branch folding only removes CFG edges, which can only make dominance
//! grow: the dominator tree computed at the start stays valid for the whole
//! pass. The blocks it leaves unreachable are removed by [`mod@crate::dce`].

use crate::analysis::{
    bconst_of, def_inst, fconst_of, iconst_of, is_pure, Cfg, Replacements, Scopes,
};
use adze_ir::{
    semantics, BlockCall, CmpCond, Cost, Function, Inst, InstData, Opcode, Region, Type, Value,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// What GVN did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GvnStats {
    /// Instructions folded to a constant.
    pub folded: usize,
    /// Instructions replaced by an operand or rewritten by a simplification.
    pub simplified: usize,
    /// Pure instructions removed because a dominating one computes the same.
    pub merged: usize,
    /// Conditional branches made unconditional.
    pub branches: usize,
}

/// A pure instruction (operands resolved to their value numbers) and the
/// region scope it is in.
type Key = (InstData, Option<Region>);

/// Is `data` replaced by an identical instruction of a dominating *other*
/// block? Only what costs more than keeping its value live: the opcodes
/// whose [`Opcode::cost`] is `Slow` (`fdiv`, `sqrt`) or `Libm` (`exp`,
/// `pow`, ...; not `round` and `sign`, called out of line but cheap). A constant or a cheap
/// operation replaced across blocks becomes one value live through
/// everything in between, loops and calls to `exp` (which clobber every
/// register) included; Cranelift's own value numbering merges those where
/// it optimises, with its own cost model. A cheap duplicate still gets the
/// number of the dominating one, so that what is computed from both (the
/// `sin` of two equal sums) is merged.
fn global(data: &InstData) -> bool {
    match data {
        InstData::Unary { op, .. } | InstData::Binary { op, .. } => {
            matches!(op.cost(), Some(Cost::Slow | Cost::Libm))
        }
        _ => false,
    }
}

/// Runs GVN, folding and simplification on `func`.
pub fn gvn(func: &mut Function) -> GvnStats {
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    let mut stats = GvnStats {
        simplified: crate::phis::simplify_params(func, &cfg, &scopes)
            + crate::phis::narrow_bit_params(func, &cfg, &scopes),
        ..GvnStats::default()
    };
    let quiet = crate::phis::quiet_params(func, &cfg, |v| {
        is_quiet_depth(func, &EntitySet::new(), v, 4)
    });
    let mut repl = Replacements::new(func);
    let Some(&entry) = cfg.rpo.first() else {
        return stats;
    };

    // A scoped table in the manner of Cranelift's `ScopedHashMap`: each
    // entry records the depth in the dominator tree of the block that made
    // it and that block's visit number; it is in scope while that block is
    // on the current path (`path[depth]` is its visit number). Entries out
    // of scope are overwritten, never removed: removing a block's entries
    // one by one as its subtree is left filled the table with tombstones,
    // and the probes through them made the pass superlinear on one block
    // of 100 000 instructions.
    // Sized once: growing by rehashing was half of the pass on a large
    // function.
    let mut table: FxHashMap<Key, (Value, u32, u32)> =
        FxHashMap::with_capacity_and_hasher(func.num_placed_insts(), Default::default());
    let mut path: Vec<u32> = Vec::new();
    let mut visits: u32 = 0;
    // A cheap instruction equal to one of a dominating block keeps its
    // result but is numbered as that one (see `global`).
    let mut number: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    let mut stack = vec![(entry, 0usize)];
    while let Some((block, depth)) = stack.pop() {
        path.truncate(depth);
        path.push(visits);
        visits += 1;
        for &child in doms.children(block).iter().rev() {
            stack.push((child, depth + 1));
        }
        let scope = scopes.block_scope(block);
        let insts: Vec<Inst> = func.layout.block_insts(block).to_vec();
        // Removed at the end of the block, in one pass (one by one is
        // quadratic in a block of 30 000 instructions).
        let mut removed: Vec<Inst> = Vec::new();
        // New constants, each placed before the instruction that reads it.
        let mut inserted: Vec<(Inst, Inst)> = Vec::new();
        for inst in insts {
            repl.rewrite_inst(func, inst);
            if func.dfg.inst(inst).opcode() == Opcode::Brif {
                if let Some(data) = simplify_branch(func, func.dfg.inst(inst)) {
                    *func.dfg.inst_mut(inst) = data;
                    stats.branches += 1;
                }
                continue;
            }
            let results = func.dfg.inst_results(inst);
            if results.len() != 1 {
                continue;
            }
            let result = results[0];
            match simplify(func, &quiet, func.dfg.inst(inst)) {
                Simplified::Keep => {}
                Simplified::Value(v) => {
                    if scopes.can_replace(func, result, v) {
                        repl.replace(result, v);
                        removed.push(inst);
                        stats.simplified += 1;
                        continue;
                    }
                }
                Simplified::Data(data) => {
                    if is_constant(&data) {
                        stats.folded += 1;
                    } else {
                        stats.simplified += 1;
                    }
                    *func.dfg.inst_mut(inst) = data;
                }
                // Reading `x` instead of the operand: the scopes of a
                // region allow it as they allow replacing by it.
                Simplified::Offset(x, _) if !scopes.can_replace(func, result, x) => {}
                Simplified::Offset(x, k) => {
                    // An equal constant in scope, or a new one placed just
                    // before, which later equal constants are merged into.
                    let key = (InstData::IConst { imm: k }, scope);
                    let kv = match table.get(&key) {
                        Some(&(v, d, visit)) if path.get(d as usize) == Some(&visit) => v,
                        _ => {
                            let c = func.dfg.make_inst(key.0.clone(), &[Type::I64]);
                            let cv = func.dfg.first_result(c);
                            inserted.push((c, inst));
                            table.insert(key, (cv, depth as u32, path[depth]));
                            cv
                        }
                    };
                    *func.dfg.inst_mut(inst) = InstData::Binary {
                        op: Opcode::Iadd,
                        args: [x, kv],
                    };
                    stats.simplified += 1;
                }
            }
            let data = func.dfg.inst(inst);
            if !is_pure(func, data) {
                continue;
            }
            let mut numbered = data.clone();
            numbered.map_uses(|v| number[v].unwrap_or(v));
            let key = (numbered, scope);
            let here = (result, depth as u32, path[depth]);
            match table.entry(key) {
                Entry::Occupied(mut o) => {
                    let (v, d, visit) = *o.get();
                    let in_scope = path.get(d as usize) == Some(&visit);
                    if !in_scope {
                        o.insert(here);
                    } else if !scopes.is_pinned(result) {
                        if global(data) || func.def_block(v) == Some(block) {
                            repl.replace(result, v);
                            removed.push(inst);
                            stats.merged += 1;
                        } else {
                            number[result] = Some(v);
                        }
                    }
                }
                Entry::Vacant(e) => {
                    e.insert(here);
                }
            }
        }
        func.layout.insert_insts_before(block, &inserted);
        func.layout.remove_insts(&removed);
    }
    repl.apply(func);
    stats
}

fn is_constant(data: &InstData) -> bool {
    matches!(
        data,
        InstData::FConst { .. } | InstData::IConst { .. } | InstData::BConst { .. }
    )
}

/// The outcome of simplifying one instruction.
enum Simplified {
    Keep,
    /// The result equals this value.
    Value(Value),
    /// The instruction can be replaced by this one (same result type).
    Data(InstData),
    /// The result is `x + k` (integers, wrapping): the instruction becomes
    /// `iadd x, k` with a new constant `k` (`(i + 1) + 1`, `(1 + j) - 2`).
    Offset(Value, i64),
}

const ONE: u64 = 0x3ff0_0000_0000_0000; // 1.0
const POS_ZERO: u64 = 0;
const NEG_ZERO: u64 = 0x8000_0000_0000_0000;

/// Is `bits` a signaling NaN (exponent all ones, fraction nonzero, quiet bit
/// clear)?
fn is_signaling_nan(bits: u64) -> bool {
    let exp = (bits >> 52) & 0x7ff;
    let frac = bits & ((1 << 52) - 1);
    exp == 0x7ff && frac != 0 && frac & (1 << 51) == 0
}

/// Can `v` not be a signaling NaN (see the module documentation)?
fn is_quiet(func: &Function, quiet: &EntitySet<Value>, v: Value) -> bool {
    is_quiet_depth(func, quiet, v, 4)
}

/// `quiet`: the block parameters known to be quiet (`phis::quiet_params`).
fn is_quiet_depth(func: &Function, quiet: &EntitySet<Value>, v: Value, depth: usize) -> bool {
    use Opcode::*;
    let Some(data) = def_inst(func, v) else {
        return quiet.contains(v);
    };
    match data {
        InstData::FConst { bits } => !is_signaling_nan(*bits),
        InstData::Binary { op, .. } => matches!(op, Fadd | Fsub | Fmul | Fdiv | Min | Max),
        InstData::Unary { op, arg } => match op {
            Sqrt | Sitof => true,
            Fneg | Abs => depth > 0 && is_quiet_depth(func, quiet, *arg, depth - 1),
            _ => false,
        },
        InstData::Powi { exp, .. } => *exp != 1,
        InstData::Ternary {
            op: Select,
            args: [_, a, b],
        } => {
            depth > 0
                && is_quiet_depth(func, quiet, *a, depth - 1)
                && is_quiet_depth(func, quiet, *b, depth - 1)
        }
        _ => false,
    }
}

/// `iadd`/`isub` of a constant and a value that is itself a value plus a
/// constant: one addition of the summed constant, or the value itself when
/// they cancel (`(1 + j) - 1` is `j`: the adjoint's `i = 1 + j` indexing
/// `x[i - 1]`, which the bounds analysis and `vectorize` read as offsets
/// of `j`). And `iadd c, x` becomes `iadd x, c`. Exact: wrapping addition
/// is associative and commutative, every bit.
fn integer_offset(func: &Function, op: Opcode, a: Value, b: Value) -> Option<Simplified> {
    let int = |v| iconst_of(func, v);
    // The operation as `value + constant`.
    let (x, c) = match (op, int(a), int(b)) {
        (Opcode::Iadd, None, Some(c)) => (a, c),
        (Opcode::Iadd, Some(c), None) => (b, c),
        (Opcode::Isub, None, Some(c)) => (a, c.wrapping_neg()),
        _ => return None,
    };
    // `x + 0` is `x` (below, in `simplify`): not a new `iadd` of `x`'s parts.
    if c == 0 {
        return None;
    }
    let inner = match def_inst(func, x) {
        Some(InstData::Binary {
            op: inner @ (Opcode::Iadd | Opcode::Isub),
            args: [p, q],
        }) => match (*inner, int(*p), int(*q)) {
            (Opcode::Iadd, None, Some(d)) => Some((*p, d)),
            (Opcode::Iadd, Some(d), None) => Some((*q, d)),
            (Opcode::Isub, None, Some(d)) => Some((*p, d.wrapping_neg())),
            _ => None,
        },
        _ => None,
    };
    match inner {
        Some((y, d)) => match c.wrapping_add(d) {
            0 => Some(Simplified::Value(y)),
            k => Some(Simplified::Offset(y, k)),
        },
        // Constant first: swapped.
        None if op == Opcode::Iadd && int(a).is_some() => {
            Some(Simplified::Data(InstData::Binary {
                op: Opcode::Iadd,
                args: [b, a],
            }))
        }
        None => None,
    }
}

fn fconst(x: f64) -> Simplified {
    Simplified::Data(InstData::fconst(x))
}

fn iconst(imm: i64) -> Simplified {
    Simplified::Data(InstData::IConst { imm })
}

fn bconst(imm: bool) -> Simplified {
    Simplified::Data(InstData::BConst { imm })
}

/// The operand of `v`'s defining instruction if it is `op` of one operand.
pub(crate) fn unary_operand(func: &Function, v: Value, op: Opcode) -> Option<Value> {
    match def_inst(func, v)? {
        InstData::Unary { op: o, arg } if *o == op => Some(*arg),
        _ => None,
    }
}

fn simplify(func: &Function, quiet: &EntitySet<Value>, data: &InstData) -> Simplified {
    use Opcode::*;
    let f = |v| fconst_of(func, v);
    let i = |v| iconst_of(func, v);
    match *data {
        InstData::Unary { op, arg } => {
            if semantics::is_unary_f64(op) {
                if let Some(x) = f(arg) {
                    return fconst(semantics::unary_f64(op, f64::from_bits(x)));
                }
            }
            match op {
                Fneg | Ineg | Not => {
                    if let Some(x) = unary_operand(func, arg, op) {
                        return Simplified::Value(x);
                    }
                }
                _ => {}
            }
            // `tobits (frombits x)` and `frombits (tobits x)` are `x`.
            if let (Tobits | Frombits, Some(InstData::Unary { op: inner, arg: x })) =
                (op, def_inst(func, arg))
            {
                if matches!((op, inner), (Tobits, Frombits) | (Frombits, Tobits)) {
                    return Simplified::Value(*x);
                }
            }
            if let (Tobits, Some(x)) = (op, f(arg)) {
                return iconst(semantics::tobits(f64::from_bits(x)));
            }
            // `ftosi` of a constant in range; out of range it stays, to trap.
            if let (Ftosi, Some(x)) = (op, f(arg)) {
                if let Ok(r) = semantics::ftosi(f64::from_bits(x)) {
                    return iconst(r);
                }
            }
            match (op, i(arg), bconst_of(func, arg)) {
                (Ineg, Some(x), _) => iconst(x.wrapping_neg()),
                (Sitof, Some(x), _) => fconst(semantics::sitof(x)),
                (Frombits, Some(x), _) => fconst(semantics::frombits(x)),
                (Not, _, Some(b)) => bconst(!b),
                _ => Simplified::Keep,
            }
        }
        InstData::Binary { op, args: [a, b] } => {
            if semantics::is_binary_f64(op) {
                if let (Some(x), Some(y)) = (f(a), f(b)) {
                    return fconst(semantics::binary_f64(
                        op,
                        f64::from_bits(x),
                        f64::from_bits(y),
                    ));
                }
                return simplify_f64(func, quiet, op, a, b);
            }
            if !semantics::is_binary_i64(op) {
                return Simplified::Keep;
            }
            // Folded by the one definition; an operation that would trap
            // (`x / 0`, `x << 64`) stays, to trap at run time.
            if let (Some(x), Some(y)) = (i(a), i(b)) {
                return match semantics::binary_i64(op, x, y) {
                    Ok(r) => iconst(r),
                    Err(_) => Simplified::Keep,
                };
            }
            if let Some(s) = integer_offset(func, op, a, b) {
                return s;
            }
            match (op, i(a), i(b)) {
                (Iadd, _, Some(0))
                | (Isub, _, Some(0))
                | (Imul, _, Some(1))
                | (Idiv, _, Some(1)) => Simplified::Value(a),
                (Iadd, Some(0), _) | (Imul, Some(1), _) => Simplified::Value(b),
                (Imul, Some(0), _) | (Imul, _, Some(0)) | (Irem, _, Some(1)) => iconst(0),
                (Isub, _, _) if a == b => iconst(0),
                _ => Simplified::Keep,
            }
        }
        InstData::Cmp {
            op,
            cond,
            args: [a, b],
        } => match op {
            Fcmp => match (f(a), f(b)) {
                (Some(x), Some(y)) => {
                    bconst(semantics::fcmp(cond, f64::from_bits(x), f64::from_bits(y)))
                }
                _ => Simplified::Keep,
            },
            Icmp => match (i(a), i(b)) {
                (Some(x), Some(y)) => bconst(semantics::icmp(cond, x, y)),
                _ if a == b => bconst(matches!(cond, CmpCond::Eq | CmpCond::Le | CmpCond::Ge)),
                _ => Simplified::Keep,
            },
            _ => Simplified::Keep,
        },
        InstData::Ternary {
            op: Select,
            args: [c, a, b],
        } => match bconst_of(func, c) {
            Some(true) => Simplified::Value(a),
            Some(false) => Simplified::Value(b),
            None if a == b => Simplified::Value(a),
            None => Simplified::Keep,
        },
        InstData::Powi { op: Powi, arg, exp } => match (f(arg), exp) {
            (Some(x), _) => fconst(semantics::powi(f64::from_bits(x), exp)),
            (None, 1) => Simplified::Value(arg),
            (None, 0) => fconst(1.0),
            _ => Simplified::Keep,
        },
        _ => Simplified::Keep,
    }
}

/// The exact identities of f64 arithmetic with one constant operand.
fn simplify_f64(
    func: &Function,
    quiet: &EntitySet<Value>,
    op: Opcode,
    a: Value,
    b: Value,
) -> Simplified {
    use Opcode::*;
    let (ca, cb) = (fconst_of(func, a), fconst_of(func, b));
    let keep_a = match op {
        Fmul | Fdiv => cb == Some(ONE),
        Fadd => cb == Some(NEG_ZERO),
        Fsub => cb == Some(POS_ZERO),
        _ => false,
    };
    if keep_a && is_quiet(func, quiet, a) {
        return Simplified::Value(a);
    }
    let keep_b = match op {
        Fmul => ca == Some(ONE),
        Fadd => ca == Some(NEG_ZERO),
        _ => false,
    };
    if keep_b && is_quiet(func, quiet, b) {
        return Simplified::Value(b);
    }
    // `0.0 + y` is `y` when `y` is itself `0.0 + z` (either way round):
    // such a `y` is never -0.0 (`-0.0 + 0.0` is +0.0) and never a
    // signaling NaN, and adding +0.0 to anything else gives it back.
    // Forward over reverse makes these chains of an adjoint's tangent.
    if op == Fadd {
        if cb == Some(POS_ZERO) && zero_plus_keeps(func, a) {
            return Simplified::Value(a);
        }
        if ca == Some(POS_ZERO) && zero_plus_keeps(func, b) {
            return Simplified::Value(b);
        }
    }
    Simplified::Keep
}

/// Is `v` an `fadd` with a +0.0 operand?
pub(crate) fn plus_zero(func: &Function, v: Value) -> bool {
    plus_zero_of(func, v).is_some()
}

/// Is `0.0 + v` bit for bit `v`: `v` is itself `0.0 + w`, or a constant
/// that is neither -0.0 (`0.0 + -0.0` is +0.0) nor a signaling NaN (which
/// the addition quiets)?
pub(crate) fn zero_plus_keeps(func: &Function, v: Value) -> bool {
    plus_zero(func, v)
        || fconst_of(func, v).is_some_and(|bits| bits != NEG_ZERO && !is_signaling_nan(bits))
}

/// `w` when `v` is `0.0 + w` or `w + 0.0` (+0.0).
pub(crate) fn plus_zero_of(func: &Function, v: Value) -> Option<Value> {
    match crate::analysis::def_inst(func, v)? {
        InstData::Binary {
            op: Opcode::Fadd,
            args: [p, q],
        } => {
            if fconst_of(func, *p) == Some(POS_ZERO) {
                Some(*q)
            } else if fconst_of(func, *q) == Some(POS_ZERO) {
                Some(*p)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A simpler form of a `brif`, if any.
fn simplify_branch(func: &Function, data: &InstData) -> Option<InstData> {
    let InstData::Brif {
        cond,
        then_dest,
        else_dest,
    } = data
    else {
        return None;
    };
    let jump = |dest: &BlockCall| InstData::Jump { dest: dest.clone() };
    if let Some(c) = bconst_of(func, *cond) {
        return Some(jump(if c { then_dest } else { else_dest }));
    }
    if then_dest == else_dest {
        return Some(jump(then_dest));
    }
    let c = unary_operand(func, *cond, Opcode::Not)?;
    Some(InstData::Brif {
        cond: c,
        then_dest: else_dest.clone(),
        else_dest: then_dest.clone(),
    })
}
