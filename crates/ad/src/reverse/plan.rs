//! The analyses behind one split derivative: the reachable CFG and its
//! edges, which values are *active* (varied and useful), which adjoints need
//! a memory slot, and what each block puts on the tape.
//!
//! Everything here is decided before any code is emitted, so that the
//! augmented primal ([`super::aug`]) and the adjoint ([`super::adj`]) agree
//! on the tape layout by construction: both read the same
//! [`Plan::tape`] lists.

use crate::activity::{self, Activity};
use crate::partials::{self, Local, Partial};
use crate::AdError;
use adze_ir::{
    ArgActivity, Block, FuncBuilder, Function, Inst, InstData, Module, Opcode, RetActivity,
    Signature, Type, Value, ValueDef,
};
use std::collections::HashSet;

/// A control-flow edge: destination number `dest` of the terminator `inst`
/// of block `from` (a `brif` has two, possibly to the same block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub from: Block,
    pub inst: Inst,
    pub dest: usize,
}

/// One entry of a block's tape record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TapeItem {
    /// A primal scalar that the block's adjoint reads.
    Value(Value),
    /// The number of the incoming edge the block was entered by (an i64);
    /// only for blocks with more than one incoming edge.
    Edge,
}

/// A local `zeros` array that needs a shadow in the adjoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZerosSite {
    pub array: Value,
    pub len: Value,
    /// `None` when the `zeros` sits in the entry block (it runs once; its
    /// length is pushed at `return`); otherwise the number of the running
    /// maximum threaded through the augmented primal's blocks.
    pub threaded: Option<usize>,
}

pub(crate) struct Plan {
    pub entry: Block,
    /// Reachable blocks in reverse postorder.
    pub order: Vec<Block>,
    reachable: Vec<bool>,
    /// Incoming edges of each block, from reachable blocks, numbered in
    /// this order (the number is what [`TapeItem::Edge`] records).
    pub preds: Vec<Vec<Edge>>,
    /// Reachable blocks ending in `return`, numbered in this order.
    pub returns: Vec<Block>,
    varied: Activity,
    useful: Vec<bool>,
    shadowed: Vec<bool>,
    /// Adjoint slot of each value whose adjoint crosses reverse blocks.
    slot: Vec<Option<u32>>,
    pub num_slots: u32,
    /// Per block: what its reverse block pops, in push order.
    pub tape: Vec<Vec<TapeItem>>,
    /// Per block: constants its reverse block re-materialises.
    pub remat: Vec<Vec<Value>>,
    pub zeros_sites: Vec<ZerosSite>,
    pub num_threaded: usize,
    /// `const` `mut` array parameters that receive active values: they get a
    /// local shadow in the adjoint, of the parameter's length.
    pub const_shadows: Vec<Value>,
}

fn idx(v: Value) -> usize {
    v.as_u32() as usize
}

fn bidx(b: Block) -> usize {
    b.as_u32() as usize
}

impl Plan {
    pub fn is_reachable(&self, b: Block) -> bool {
        self.reachable.get(bidx(b)).copied().unwrap_or(false)
    }

    /// Does the f64 value `v` get an adjoint (varied and useful)?
    pub fn is_active(&self, func: &Function, v: Value) -> bool {
        func.dfg.value_is_valid(v)
            && func.dfg.value_type(v) == Type::F64
            && self.varied.is_active(v)
            && self.useful.get(idx(v)).copied().unwrap_or(false)
    }

    /// Does the array `a` have a shadow in the adjoint?
    pub fn is_shadowed(&self, a: Value) -> bool {
        self.shadowed.get(idx(a)).copied().unwrap_or(false)
    }

    pub fn slot(&self, v: Value) -> Option<u32> {
        self.slot.get(idx(v)).copied().flatten()
    }

    /// The incoming-edge number of `edge` at its destination.
    pub fn edge_number(&self, to: Block, edge: Edge) -> Option<usize> {
        self.preds.get(bidx(to))?.iter().position(|&e| e == edge)
    }

    /// Is the call `inst` differentiated (some argument active)?
    pub fn call_is_active(&self, func: &Function, args: &[Value]) -> bool {
        args.iter().any(|&a| match func.dfg.value_type(a) {
            Type::F64 => self.is_active(func, a),
            Type::Array => self.is_shadowed(a),
            _ => false,
        })
    }

    /// The arrays whose shadow length the augmented primal pushes just
    /// before returning, in push order: shadowed `zeros` sites, then
    /// shadowed `const` parameters.
    pub fn length_items(&self) -> Vec<Value> {
        self.zeros_sites
            .iter()
            .map(|z| z.array)
            .chain(self.const_shadows.iter().copied())
            .collect()
    }

    pub fn new(
        module: &Module,
        func: &Function,
        args: &[ArgActivity],
        ret: RetActivity,
    ) -> Result<Plan, AdError> {
        let entry = func.entry_block().ok_or_else(|| AdError::NoBody {
            func: func.name.clone(),
        })?;
        let nb = func.dfg.num_blocks();
        let nv = func.dfg.num_values();
        let order = reverse_postorder(func, entry);
        let mut reachable = vec![false; nb];
        for &b in &order {
            reachable[bidx(b)] = true;
        }
        let mut preds = vec![Vec::new(); nb];
        let mut returns = Vec::new();
        for &b in &order {
            let Some(inst) = func.layout.last_inst(b) else {
                continue;
            };
            let data = func.dfg.inst(inst);
            if matches!(data, InstData::Return { .. }) {
                returns.push(b);
            }
            for (dest, call) in data.destinations().iter().enumerate() {
                if let Some(p) = preds.get_mut(bidx(call.block)) {
                    p.push(Edge {
                        from: b,
                        inst,
                        dest,
                    });
                }
            }
        }

        // Varied: forward activity with `active` scalars as `dual`.
        let fwd_args: Vec<ArgActivity> = args
            .iter()
            .map(|a| match a {
                ArgActivity::Active => ArgActivity::Dual,
                other => *other,
            })
            .collect();
        let varied = activity::analyze(module, func, &fwd_args);

        let useful = usefulness(module, func, &order, args, ret);

        let mut plan = Plan {
            entry,
            order,
            reachable,
            preds,
            returns,
            varied,
            useful,
            shadowed: vec![false; nv],
            slot: vec![None; nv],
            num_slots: 0,
            tape: vec![Vec::new(); nb],
            remat: vec![Vec::new(); nb],
            zeros_sites: Vec::new(),
            num_threaded: 0,
            const_shadows: Vec::new(),
        };
        plan.find_shadows(func, args, entry);
        plan.assign_slots(func, ret);
        plan.plan_tape(func)?;
        Ok(plan)
    }

    fn find_shadows(&mut self, func: &Function, args: &[ArgActivity], entry: Block) {
        let useful = |p: &Plan, v: Value| p.useful[idx(v)] && p.varied.is_active(v);
        for (num, &p) in func.params().iter().enumerate() {
            if func.dfg.value_type(p) != Type::Array {
                continue;
            }
            match args.get(num) {
                Some(ArgActivity::Dup) => self.shadowed[idx(p)] = true,
                _ => {
                    if func.array_is_writable(p) && useful(self, p) {
                        self.shadowed[idx(p)] = true;
                        self.const_shadows.push(p);
                    }
                }
            }
        }
        for &b in &self.order.clone() {
            for &inst in func.layout.block_insts(b) {
                if let InstData::Zeros { len, .. } = func.dfg.inst(inst) {
                    let a = func.dfg.first_result(inst);
                    if useful(self, a) {
                        self.shadowed[idx(a)] = true;
                        let threaded = if b == entry {
                            None
                        } else {
                            self.num_threaded += 1;
                            Some(self.num_threaded - 1)
                        };
                        self.zeros_sites.push(ZerosSite {
                            array: a,
                            len: *len,
                            threaded,
                        });
                    }
                }
            }
        }
    }

    /// An adjoint needs a memory slot when something outside the reverse
    /// block of its definition contributes to it: a use in another block, a
    /// branch argument (moved on the reverse edge), a returned value (seeded
    /// at the adjoint's entry).
    fn assign_slots(&mut self, func: &Function, ret: RetActivity) {
        let mut need = vec![false; func.dfg.num_values()];
        let def_block = |v: Value| -> Option<Block> {
            match *func.dfg.value_def(v) {
                ValueDef::Param { block, .. } => Some(block),
                ValueDef::Result { inst, .. } => func.layout.inst_block(inst),
                ValueDef::Detached => None,
            }
        };
        for &b in &self.order {
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                match data {
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for dest in data.destinations() {
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if self.is_active(func, p) && self.is_active(func, a) {
                                    need[idx(a)] = true;
                                }
                            }
                        }
                    }
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for &a in args {
                                if self.is_active(func, a) {
                                    need[idx(a)] = true;
                                }
                            }
                        }
                    }
                    _ => {
                        for &a in data.args() {
                            if self.is_active(func, a) && def_block(a) != Some(b) {
                                need[idx(a)] = true;
                            }
                        }
                    }
                }
            }
        }
        let mut n = 0;
        for (i, &needed) in need.iter().enumerate() {
            if needed {
                self.slot[i] = Some(n);
                n += 1;
            }
        }
        self.num_slots = n;
    }

    /// What each block's adjoint reads from the primal: the operands its
    /// partials use (asked of [`partials::local_derivative`] itself, in a
    /// scratch function), the indices of active loads and stores, and the
    /// incoming-edge number. Constants are re-materialised instead.
    fn plan_tape(&mut self, func: &Function) -> Result<(), AdError> {
        for &b in &self.order.clone() {
            let mut items: Vec<TapeItem> = Vec::new();
            let mut remat: Vec<Value> = Vec::new();
            let mut seen = HashSet::new();
            if self.preds[bidx(b)].len() > 1 {
                items.push(TapeItem::Edge);
            }
            let mut add = |v: Value, items: &mut Vec<TapeItem>, remat: &mut Vec<Value>| {
                if !seen.insert(v) {
                    return;
                }
                if is_constant(func, v) {
                    remat.push(v);
                } else {
                    items.push(TapeItem::Value(v));
                }
            };
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                let results = func.dfg.inst_results(inst);
                match data {
                    InstData::Binary {
                        op: Opcode::Load,
                        args: [_, i],
                    } => {
                        if self.is_active(func, results[0]) {
                            add(*i, &mut items, &mut remat);
                        }
                    }
                    InstData::Ternary {
                        op: Opcode::Store,
                        args: [a, i, _],
                    } => {
                        if self.is_shadowed(*a) {
                            add(*i, &mut items, &mut remat);
                        }
                    }
                    _ => {
                        let [r] = results else { continue };
                        if !partials::is_differentiable(data.opcode()) || !self.is_active(func, *r)
                        {
                            continue;
                        }
                        let wanted: Vec<bool> = data
                            .args()
                            .iter()
                            .map(|&a| self.is_active(func, a))
                            .collect();
                        let (ops, res) = partial_needs(func, data, *r, &wanted);
                        for (k, &a) in data.args().iter().enumerate() {
                            if ops[k] {
                                add(a, &mut items, &mut remat);
                            }
                        }
                        if res {
                            add(*r, &mut items, &mut remat);
                        }
                    }
                }
            }
            for item in &items {
                if let TapeItem::Value(v) = item {
                    if !func.dfg.value_type(*v).is_scalar() {
                        return Err(AdError::ReverseUnsupported {
                            func: func.name.clone(),
                            what: format!("taping the array {v}"),
                        });
                    }
                }
            }
            self.tape[bidx(b)] = items;
            self.remat[bidx(b)] = remat;
        }
        Ok(())
    }
}

/// Is `v` defined by `fconst`, `iconst` or `bconst`?
pub(crate) fn is_constant(func: &Function, v: Value) -> bool {
    match *func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => matches!(
            func.dfg.inst(inst),
            InstData::FConst { .. } | InstData::IConst { .. } | InstData::BConst { .. }
        ),
        _ => false,
    }
}

/// Which operands (and whether the result) of `data` the local derivative
/// reads, for the operands marked `wanted`: the partials are emitted into a
/// scratch function whose operands are block parameters, and the emitted
/// code and returned partials are searched for them. So the one table in
/// [`partials`] is also the one source of what reverse mode must tape.
pub(crate) fn partial_needs(
    func: &Function,
    data: &InstData,
    result: Value,
    wanted: &[bool],
) -> (Vec<bool>, bool) {
    let mut scratch = Function::new("scratch", Signature::default());
    let mut b = FuncBuilder::new(&mut scratch);
    let block = b.create_block();
    b.switch_to_block(block);
    let mut d = data.clone();
    let mut ops = Vec::new();
    for a in d.args_mut() {
        let p = b.append_block_param(block, func.dfg.value_type(*a));
        ops.push(p);
        *a = p;
    }
    let res = b.append_block_param(block, func.dfg.value_type(result));
    let local = partials::local_derivative(&mut b, &d, res, wanted);
    let mut used = HashSet::new();
    for &inst in scratch.layout.block_insts(block) {
        scratch.dfg.inst(inst).for_each_use(|v| {
            used.insert(v);
        });
    }
    match local {
        Some(Local::Partials(ps)) => {
            for (k, p) in ps.iter().enumerate() {
                if let (Partial::Value(v), true) = (p, wanted.get(k).copied().unwrap_or(false)) {
                    used.insert(*v);
                }
            }
        }
        Some(Local::Choose { cond, .. }) => {
            used.insert(cond);
        }
        None => {}
    }
    (
        ops.iter().map(|v| used.contains(v)).collect(),
        used.contains(&res),
    )
}

/// Backward analysis: which values can influence what the derivative
/// differentiates — the f64 results (for `ret active`) and the final
/// contents of `dup` `mut` arrays. Iterated to a fixed point over the
/// reachable blocks.
fn usefulness(
    module: &Module,
    func: &Function,
    order: &[Block],
    args: &[ArgActivity],
    ret: RetActivity,
) -> Vec<bool> {
    let mut useful = vec![false; func.dfg.num_values()];
    for (num, &p) in func.params().iter().enumerate() {
        if args.get(num) == Some(&ArgActivity::Dup) && func.array_is_writable(p) {
            useful[idx(p)] = true;
        }
    }
    loop {
        let mut changed = false;
        let mut mark = |useful: &mut Vec<bool>, v: Value| {
            if let Some(u) = useful.get_mut(idx(v)) {
                if !*u {
                    *u = true;
                    changed = true;
                }
            }
        };
        for &b in order.iter().rev() {
            for &inst in func.layout.block_insts(b).iter().rev() {
                let data = func.dfg.inst(inst);
                let results = func.dfg.inst_results(inst);
                match data {
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for &a in args {
                                mark(&mut useful, a);
                            }
                        }
                    }
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for dest in data.destinations() {
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if useful[idx(p)] {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    InstData::Ternary {
                        op: Opcode::Store,
                        args: [a, _, x],
                    }
                    | InstData::Binary {
                        op: Opcode::Fill,
                        args: [a, x],
                    } => {
                        if useful[idx(*a)] {
                            mark(&mut useful, *x);
                        }
                    }
                    InstData::Binary {
                        op: Opcode::Load,
                        args: [a, _],
                    } => {
                        if useful[idx(results[0])] {
                            mark(&mut useful, *a);
                        }
                    }
                    InstData::Push { arg, .. } => {
                        // The value may be popped by code that is useful.
                        if func.dfg.value_type(*arg) == Type::F64 {
                            mark(&mut useful, *arg);
                        }
                    }
                    InstData::Call { func: callee, args } => {
                        let params = if module.is_valid(*callee) {
                            module.func(*callee).sig.params.clone()
                        } else {
                            Vec::new()
                        };
                        let writes_useful = args
                            .iter()
                            .zip(&params)
                            .any(|(&a, p)| p.ty == Type::Array && p.mutable && useful[idx(a)]);
                        // A callee that uses the tape may push its arguments
                        // for code elsewhere to pop.
                        if writes_useful
                            || results.iter().any(|&r| useful[idx(r)])
                            || activity::uses_tape(module, *callee)
                        {
                            for &a in args {
                                mark(&mut useful, a);
                            }
                        }
                    }
                    _ => {
                        if let [r] = results {
                            if useful[idx(*r)] && partials::is_differentiable(data.opcode()) {
                                for &a in data.args() {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                }
            }
        }
        if !changed {
            return useful;
        }
    }
}

/// Blocks reachable from `entry`, in reverse postorder.
pub(crate) fn reverse_postorder(func: &Function, entry: Block) -> Vec<Block> {
    let n = func.dfg.num_blocks();
    let mut visited = vec![false; n];
    let mut post = Vec::new();
    let succs = |b: Block| -> Vec<Block> {
        let mut s: Vec<Block> = func
            .layout
            .last_inst(b)
            .map(|i| {
                func.dfg
                    .inst(i)
                    .destinations()
                    .iter()
                    .map(|d| d.block)
                    .filter(|&d| func.dfg.block_is_valid(d) && func.layout.is_block_inserted(d))
                    .collect()
            })
            .unwrap_or_default();
        s.reverse();
        s
    };
    let mut stack: Vec<(Block, Vec<Block>)> = Vec::new();
    visited[bidx(entry)] = true;
    stack.push((entry, succs(entry)));
    while let Some((b, rest)) = stack.last_mut() {
        if let Some(next) = rest.pop() {
            if !visited[bidx(next)] {
                visited[bidx(next)] = true;
                let s = succs(next);
                stack.push((next, s));
            }
        } else {
            post.push(*b);
            stack.pop();
        }
    }
    post.reverse();
    post
}
