//! Usefulness: which values can influence what the derivative
//! differentiates, and its summaries across calls.

use crate::activity;
use crate::context::Cache;
use crate::partials;
use adze_ir::{
    ArgActivity, Block, FuncId, Function, InstData, Module, Opcode, RetActivity, Type, Value,
};
use cranelift_entity::EntitySet;
use std::collections::HashMap;

/// Backward analysis: which values can influence what the derivative
/// differentiates — the f64 results (for `ret active`, except the results
/// numbered in `ignored`, whose cotangents the caller does not use) and the
/// final contents of `dup` `mut` arrays. Iterated to a fixed point over the
/// reachable blocks.
///
/// A call is as precise as its callee's body inlined: which arguments are
/// useful is the callee's own analysis for the results and the `mut`
/// arrays that are useful here ([`UsefulSummaries`]), so an argument that
/// only feeds a result nobody uses, or a scratch array nobody reads, gets
/// no adjoint — as it gets none when the inliner has put the body here.
/// Calls to functions with rules (a rule takes every input) stay
/// conservative: every argument is useful. A callee that uses the tape is
/// summarised too: what it pushes is useful, as in its inlined body.
#[allow(clippy::too_many_arguments)]
pub(super) fn usefulness(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    order: &[Block],
    args: &[ArgActivity],
    ret: RetActivity,
    ignored: &[usize],
    summaries: &mut UsefulSummaries,
) -> EntitySet<Value> {
    let mut useful = EntitySet::new();
    for (num, &p) in func.params().iter().enumerate() {
        if args.get(num) == Some(&ArgActivity::Dup) && func.array_is_writable(p) {
            useful.insert(p);
        }
    }
    let mut tape_use = activity::TapeUse::default();
    loop {
        let mut changed = false;
        let mut mark = |useful: &mut EntitySet<Value>, v: Value| changed |= useful.insert(v);
        for &b in order.iter().rev() {
            for &inst in func.layout.block_insts(b).iter().rev() {
                let data = func.dfg.inst(inst);
                let results = func.dfg.inst_results(inst);
                match data {
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for (k, &a) in args.iter().enumerate() {
                                if !ignored.contains(&k) {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for dest in data.destinations() {
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if useful.contains(p) {
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
                        if useful.contains(*a) {
                            mark(&mut useful, *x);
                        }
                    }
                    InstData::Binary {
                        op: Opcode::Load,
                        args: [a, _],
                    } => {
                        if useful.contains(results[0]) {
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
                        let arrays: Vec<bool> = args
                            .iter()
                            .enumerate()
                            .map(|(k, &a)| {
                                params
                                    .get(k)
                                    .is_some_and(|p| p.ty == Type::Array && p.mutable)
                                    && useful.contains(a)
                            })
                            .collect();
                        let results_useful: Vec<bool> =
                            results.iter().map(|&r| useful.contains(r)).collect();
                        // A callee that uses the tape may push values of its
                        // arguments for code elsewhere to pop: its own
                        // usefulness marks what it pushes (as inlined code
                        // does), whatever the call's results.
                        let tape = tape_use.uses(cache, module, *callee);
                        if tape || arrays.contains(&true) || results_useful.contains(&true) {
                            let which =
                                summaries.params(cache, module, *callee, &results_useful, &arrays);
                            for (k, &a) in args.iter().enumerate() {
                                if which.as_ref().is_none_or(|w| w.get(k) != Some(&false)) {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    _ => {
                        if let [r] = results {
                            if useful.contains(*r) && partials::is_differentiable(data.opcode()) {
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

/// Usefulness across calls: for a callee, which results are useful at the
/// call and which `mut` array arguments are useful there (their contents
/// after the call may be read), the callee's parameters that are useful —
/// the callee's own [`usefulness`] on the code its split derivative is
/// built from (rule regions collapsed into calls). Memoized per pattern; a
/// callee being summarised (recursion, which is never inlined) and a callee
/// with rules (the rule takes every input) are conservative (`None`).
#[derive(Default)]
pub(crate) struct UsefulSummaries {
    stack: Vec<FuncId>,
    memo: HashMap<UsefulKey, Option<Vec<bool>>>,
    /// Answers so far that depended on what may change (a call into the
    /// stack, a declaration, a request not lowered yet); a summary computed
    /// without any is final for the lowering and is kept for it.
    unsettled: usize,
}

/// A callee, its useful results and its useful `mut` array arguments.
pub(crate) type UsefulKey = (FuncId, Vec<bool>, Vec<bool>);

impl UsefulSummaries {
    fn params(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        callee: FuncId,
        results: &[bool],
        arrays: &[bool],
    ) -> Option<Vec<bool>> {
        if !module.is_valid(callee) {
            return None;
        }
        if self.stack.contains(&callee) {
            self.unsettled += 1;
            return None;
        }
        let key = (callee, results.to_vec(), arrays.to_vec());
        if let Some(s) = self.memo.get(&key) {
            return s.clone();
        }
        if let Some(s) = cache.useful.get(&key) {
            return s.clone();
        }
        let before = self.unsettled;
        self.stack.push(callee);
        let out = self.compute(cache, module, callee, results, arrays);
        self.stack.pop();
        if cache.is_active() && self.unsettled == before {
            cache.useful.insert(key.clone(), out.clone());
        }
        self.memo.insert(key, out.clone());
        out
    }

    fn compute(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        callee: FuncId,
        results: &[bool],
        arrays: &[bool],
    ) -> Option<Vec<bool>> {
        let f = module.func(callee);
        if f.is_declaration()
            || f.layout
                .insts()
                .any(|(_, i)| f.dfg.inst(i).opcode() == Opcode::Autodiff)
        {
            self.unsettled += 1;
            return None;
        }
        if !f.meta.rules.is_empty()
            || f.params().len() != arrays.len()
            || f.sig.results.len() != results.len()
        {
            return None;
        }
        let collapsed;
        let f = if crate::rules::applied_regions(f).0.is_empty() {
            f
        } else {
            let mut copy = f.clone();
            crate::regions::collapse(&mut copy, |_| true).ok()?;
            copy.regions.clear();
            collapsed = copy;
            &collapsed
        };
        let entry = f.entry_block()?;
        let order = adze_ir::cfg::reverse_postorder(f, entry);
        let args: Vec<ArgActivity> = arrays
            .iter()
            .map(|&a| {
                if a {
                    ArgActivity::Dup
                } else {
                    ArgActivity::Const
                }
            })
            .collect();
        let ret = if results.contains(&true) {
            RetActivity::Active
        } else {
            RetActivity::Const
        };
        let ignored: Vec<usize> = (0..results.len()).filter(|&k| !results[k]).collect();
        let useful = usefulness(cache, module, f, &order, &args, ret, &ignored, self);
        Some(f.params().iter().map(|&p| useful.contains(p)).collect())
    }
}
