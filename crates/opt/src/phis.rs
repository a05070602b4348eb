//! Block parameters that are one value in disguise, and which parameters can
//! never hold a signaling NaN. Both are used by [`crate::gvn`].
//!
//! ```text
//! block1(v4: f64, v5: f64):               ; every edge passes v5 = fconst -0.0
//!     ...                                 ; or the other constant v9 = fconst -0.0:
//!     v8 = fadd v5, v4                    ;   v5 is that constant, and
//!     v9 = fconst -0.0                    ;   `fadd -0.0, v4` is v4 when v4 is quiet:
//!     jump block1(v8, v9)                 ;   v4 is, since v8 (an fadd) and every
//!                                         ;   value entering v4 is
//! ```
//!
//! **Trivial parameters** (Braun et al., "Simple and efficient construction
//! of SSA form"): a parameter `p` of a non-entry block whose every incoming
//! argument, over the edges from reachable blocks, is `p` itself or one value
//! `x` always holds `x`, and `x` dominates the block (it dominates every
//! predecessor, where the edges use it). Its uses read `x`.
//!
//! **Constant parameters**: when every incoming argument is a constant
//! instruction with the same bits, the parameter always holds those bits; a
//! copy of the constant is placed at the top of the block and its uses read
//! that.
//!
//! Either keeps every bit: the parameter's value at run time is exactly the
//! value it is replaced by. A parameter a rule region lists stays (pinned),
//! and a replacement must be allowed in the parameter's region scope. The
//! parameter itself is left for DCE.
//!
//! **Quiet parameters.** A value is *quiet* when it cannot be a signaling
//! NaN (`gvn` simplifies `fmul x, 1.0` and `fadd x, -0.0` to `x` only then).
//! A parameter is quiet when every value entering it is: the largest set of
//! parameters such that each incoming argument is quiet by its instruction
//! or a member of the set. Sound because every value a parameter in the set
//! can hold entered the web of such parameters through some argument that is
//! quiet by its own instruction.

use crate::analysis::{Cfg, Replacements, Scopes};
use adze_ir::{Block, Function, InstData, Type, Value};
use cranelift_entity::{EntitySet, SecondaryMap};

/// Incoming arguments of each block parameter, over the edges from
/// `blocks` (the reachable ones, or every placed block).
/// A parameter without incoming edges has none.
fn incoming(func: &Function, blocks: &[Block]) -> SecondaryMap<Value, Vec<Value>> {
    let mut map: SecondaryMap<Value, Vec<Value>> =
        SecondaryMap::with_capacity(func.dfg.num_values());
    for &b in blocks {
        let Some(last) = func.layout.last_inst(b) else {
            continue;
        };
        for dest in func.dfg.inst(last).destinations() {
            let params = func.dfg.block_params(dest.block);
            for (&p, &a) in params.iter().zip(&dest.args) {
                map[p].push(a);
            }
        }
    }
    map
}

fn constant(func: &Function, v: Value) -> Option<InstData> {
    match crate::analysis::def_inst(func, v)? {
        d @ (InstData::FConst { .. } | InstData::IConst { .. } | InstData::BConst { .. }) => {
            Some(d.clone())
        }
        _ => None,
    }
}

enum Fate {
    Is(Value),
    Constant(InstData, Type),
}

/// Replaces trivial and constant parameters; returns how many.
pub(crate) fn simplify_params(func: &mut Function, cfg: &Cfg, scopes: &Scopes) -> usize {
    let Some(&entry) = cfg.rpo.first() else {
        return 0;
    };
    let mut done = EntitySet::new();
    let mut replaced = 0;
    // Each round can make more parameters trivial; a few rounds reach
    // almost every chain, and what is left waits for the next GVN.
    for _ in 0..8 {
        let inc = incoming(func, &cfg.rpo);
        let mut fates: Vec<(Value, Block, Fate)> = Vec::new();
        for &b in &cfg.rpo {
            if b == entry {
                continue;
            }
            for &p in func.dfg.block_params(b) {
                let args = &inc[p];
                if args.is_empty() {
                    continue;
                }
                if scopes.is_pinned(p) || done.contains(p) {
                    continue;
                }
                let mut others = args.iter().copied().filter(|&a| a != p);
                let Some(first) = others.next() else { continue };
                let rest: Vec<Value> = others.collect();
                if rest.iter().all(|&a| a == first) {
                    if scopes.can_replace(func, p, first) {
                        fates.push((p, b, Fate::Is(first)));
                    }
                    continue;
                }
                let Some(c) = constant(func, first) else {
                    continue;
                };
                if rest.iter().all(|&a| constant(func, a).as_ref() == Some(&c)) {
                    fates.push((p, b, Fate::Constant(c, func.dfg.value_type(p))));
                }
            }
        }
        if fates.is_empty() {
            fates = webs(func, &cfg.rpo, entry, &inc, scopes, &done);
        }
        if fates.is_empty() {
            break;
        }
        // New constants first: the replacement table is sized for them.
        let mut targets = Vec::with_capacity(fates.len());
        for (p, b, fate) in fates {
            let to = match fate {
                Fate::Is(x) => x,
                Fate::Constant(data, ty) => {
                    let inst = func.dfg.make_inst(data, &[ty]);
                    func.layout.insert_inst(inst, b, 0);
                    func.dfg.first_result(inst)
                }
            };
            targets.push((p, to));
        }
        let mut repl = Replacements::new(func);
        for (p, to) in targets {
            repl.replace(p, to);
            if done.insert(p) {
                replaced += 1;
            }
        }
        repl.apply(func);
    }
    replaced
}

/// **Webs of parameters that hold one value**: parameters connected by
/// edges that pass one to another (weakly connected), none pinned, whose
/// incoming arguments are all members of the web or one value `x` from
/// outside it. Each member only ever holds `x`: every value entering the
/// web is `x`, and members only pass that around. `x` dominates each
/// member's block, since every way to it passed an edge carrying `x` into
/// the web. The partial sums of a loop's accumulation (`crate::sums` in the
/// front end, `docs/language.md`) make such a web in reverse mode: both
/// adjoints of the rotated partial sums are the sum's adjoint, rotated
/// every iteration.
///
/// An argument `0.0 + w` (+0.0, through any chain of such additions) of a
/// member `w` joins the web as `w` does when the outside value `x` is itself
/// such an addition: then `0.0 + x` is `x` bit for bit (`gvn`'s
/// `plus_zero`), so the members still only hold `x`. Forward over reverse
/// makes these: the tangents of the rotated adjoints, normalized by `0.0
/// +` every iteration.
fn webs(
    func: &Function,
    blocks: &[Block],
    entry: Block,
    inc: &SecondaryMap<Value, Vec<Value>>,
    scopes: &Scopes,
    done: &EntitySet<Value>,
) -> Vec<(Value, Block, Fate)> {
    let mut cands: Vec<(Value, Block)> = Vec::new();
    let mut index: SecondaryMap<Value, u32> = SecondaryMap::with_default(u32::MAX);
    for &b in blocks {
        if b == entry {
            continue;
        }
        for &p in func.dfg.block_params(b) {
            if !inc[p].is_empty() && !scopes.is_pinned(p) && !done.contains(p) {
                index[p] = cands.len() as u32;
                cands.push((p, b));
            }
        }
    }
    // The member an argument is, through `0.0 +` chains (bounded).
    let member = |a: Value| -> Option<(u32, bool)> {
        let mut v = a;
        for step in 0..8 {
            if index[v] != u32::MAX {
                return Some((index[v], step > 0));
            }
            v = crate::gvn::plus_zero_of(func, v)?;
        }
        None
    };
    // Union-find over the candidates, joined along the edges between them.
    let mut parent: Vec<u32> = (0..cands.len() as u32).collect();
    fn root(parent: &mut [u32], mut i: u32) -> u32 {
        while parent[i as usize] != i {
            parent[i as usize] = parent[parent[i as usize] as usize];
            i = parent[i as usize];
        }
        i
    }
    for (i, &(p, _)) in cands.iter().enumerate() {
        for &a in &inc[p] {
            if let Some((j, _)) = member(a) {
                let (x, y) = (root(&mut parent, i as u32), root(&mut parent, j));
                parent[x as usize] = y;
            }
        }
    }
    // The one outside value of each web: None before any, Some(None) once
    // two differ. Two equal constants count as one (`gvn` places a copy of
    // a constant in each block that reads it): the web then holds that
    // constant.
    let mut outside: Vec<Option<Option<Value>>> = vec![None; cands.len()];
    let same = |x: Value, a: Value| {
        x == a || constant(func, x).is_some_and(|c| constant(func, a) == Some(c))
    };
    let mut size = vec![0usize; cands.len()];
    let mut normalized = vec![false; cands.len()];
    for (i, &(p, _)) in cands.iter().enumerate() {
        let r = root(&mut parent, i as u32) as usize;
        size[r] += 1;
        for &a in &inc[p] {
            if let Some((j, through)) = member(a) {
                if root(&mut parent, j) as usize == r {
                    normalized[r] |= through;
                    continue;
                }
            }
            outside[r] = match outside[r] {
                None => Some(Some(a)),
                Some(Some(x)) if same(x, a) => Some(Some(x)),
                _ => Some(None),
            };
        }
    }
    let mut fates = Vec::new();
    let mut ok = vec![true; cands.len()];
    for (i, &(p, _)) in cands.iter().enumerate() {
        let r = root(&mut parent, i as u32) as usize;
        if let Some(Some(x)) = outside[r] {
            ok[r] &= scopes.can_replace(func, p, x);
            ok[r] &= !normalized[r] || crate::gvn::zero_plus_keeps(func, x);
        }
    }
    for (i, &(p, b)) in cands.iter().enumerate() {
        let r = root(&mut parent, i as u32) as usize;
        // Single parameters are the trivial ones, found above.
        if let (Some(Some(x)), true, true) = (outside[r], ok[r], size[r] > 1) {
            // A constant is placed in each member's block (the web's
            // constants need not dominate it); any other value dominates
            // every member's block.
            let fate = match constant(func, x) {
                Some(c) => Fate::Constant(c, func.dfg.value_type(p)),
                None => Fate::Is(x),
            };
            fates.push((p, b, fate));
        }
    }
    fates
}

/// The `f64` parameters of non-entry blocks that can never hold a
/// signaling NaN; `quiet_inst(v)` says whether a value is quiet by its
/// defining instruction.
pub(crate) fn quiet_params(
    func: &Function,
    cfg: &Cfg,
    quiet_inst: impl Fn(Value) -> bool,
) -> EntitySet<Value> {
    let inc = incoming(func, &cfg.rpo);
    let mut set = EntitySet::new();
    for (p, args) in inc.iter() {
        if !args.is_empty() && func.dfg.value_type(p) == Type::F64 {
            set.insert(p);
        }
    }
    loop {
        let out: Vec<Value> = set
            .iter()
            .filter(|&p| !inc[p].iter().all(|&a| set.contains(a) || quiet_inst(a)))
            .collect();
        if out.is_empty() {
            return set;
        }
        for p in out {
            set.remove(p);
        }
    }
}

/// `f64` parameters that only carry integer bits become `i64` parameters:
/// every argument a branch passes is `frombits x` (or the parameter
/// itself), and every use is `tobits` of it (or a branch passing it back to
/// itself). The new parameter receives the `x`s, and each `tobits` result
/// is replaced by it: `tobits (frombits x)` is `x`, bit for bit. The old
/// parameter and the conversions are left for DCE. Reverse mode keeps a
/// loop's trip count as bits in its f64 trip array; after `promote` the
/// count is such a parameter, and every iteration moved it between a vector
/// and a general register twice, on the loop's critical path. Returns how
/// many parameters were narrowed.
pub(crate) fn narrow_bit_params(func: &mut Function, cfg: &Cfg, scopes: &Scopes) -> usize {
    use adze_ir::Opcode;
    let Some(&entry) = cfg.rpo.first() else {
        return 0;
    };
    let frombits_arg =
        |func: &Function, v: Value| crate::gvn::unary_operand(func, v, Opcode::Frombits);
    // Every placed branch, reachable or not: each passes an argument.
    let blocks: Vec<Block> = func.layout.blocks().to_vec();
    let args_of = incoming(func, &blocks);
    // Candidates: f64 parameters of non-entry blocks whose arguments are
    // all `frombits` or themselves.
    let mut cands = EntitySet::new();
    for p in args_of
        .iter()
        .filter(|&(p, args)| {
            !args.is_empty()
                && func.dfg.value_type(p) == Type::F64
                && !scopes.is_pinned(p)
                && !matches!(func.dfg.value_def(p), adze_ir::ValueDef::Param { block, .. } if *block == entry)
                && args.iter().all(|&a| a == p || frombits_arg(func, a).is_some())
        })
        .map(|(p, _)| p)
    {
        cands.insert(p);
    }
    // Their uses: only `tobits`, or passing themselves back.
    let mut tobits: Vec<(Value, Value)> = Vec::new();
    for &b in &blocks {
        for &i in func.layout.block_insts(b) {
            let data = func.dfg.inst(i);
            if let InstData::Unary {
                op: Opcode::Tobits,
                arg,
            } = *data
            {
                if cands.contains(arg) {
                    tobits.push((arg, func.dfg.first_result(i)));
                }
                continue;
            }
            for &a in data.args() {
                cands.remove(a);
            }
            for dest in data.destinations() {
                let params = func.dfg.block_params(dest.block);
                for (k, &a) in dest.args.iter().enumerate() {
                    if params.get(k) != Some(&a) {
                        cands.remove(a);
                    }
                }
            }
        }
    }
    // Region arguments and results are uses too; and a `tobits` in another
    // region scope than the parameter must not read it directly (the new
    // parameter is in the old one's block, so the old one stands for it).
    for r in func.regions.values() {
        for v in r.args.iter().chain(&r.results) {
            cands.remove(*v);
        }
    }
    for &(p, r) in &tobits {
        if !scopes.can_replace(func, r, p) {
            cands.remove(p);
        }
    }
    if cands.is_empty() {
        return 0;
    }
    // In increasing order of value number.
    let cands: Vec<Value> = cands.iter().collect();
    let mut new_of: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    let mut narrowed = 0;
    for &p in &cands {
        let adze_ir::ValueDef::Param { block, .. } = *func.dfg.value_def(p) else {
            continue;
        };
        new_of[p] = Some(func.dfg.append_block_param(block, Type::I64));
        narrowed += 1;
    }
    for &b in &blocks {
        let Some(last) = func.layout.last_inst(b) else {
            continue;
        };
        let dests: Vec<(Block, Vec<Value>)> = func
            .dfg
            .inst(last)
            .destinations()
            .iter()
            .map(|d| (d.block, d.args.clone()))
            .collect();
        let mut extra: Vec<Vec<Value>> = Vec::new();
        for (dest, args) in &dests {
            let params = func.dfg.block_params(*dest).to_vec();
            let mut add = Vec::new();
            for (&p, &a) in params.iter().zip(args) {
                if let Some(q) = new_of[p] {
                    add.push(if a == p {
                        q
                    } else {
                        frombits_arg(func, a).unwrap_or(a)
                    });
                }
            }
            extra.push(add);
        }
        for (call, add) in func
            .dfg
            .inst_mut(last)
            .destinations_mut()
            .into_iter()
            .zip(extra)
        {
            call.args.extend(add);
        }
    }
    let mut repl = Replacements::new(func);
    for (p, r) in tobits {
        if let Some(q) = new_of[p] {
            repl.replace(r, q);
        }
    }
    repl.apply(func);
    narrowed
}
