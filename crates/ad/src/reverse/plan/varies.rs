//! What each f64 value the augmented primal pushes *varies with*, in terms
//! of the primal's parameters, so that the adjoint can say so of the value
//! it pops (`pop T, f64 varies(..)`, see `adze_ir::InstData::Pop`).
//!
//! A forward derivative of the adjoint (forward over reverse) gives a
//! popped value a tangent only when one of these varies there. Without
//! that, every popped value had one, zero when the pushed value had none,
//! and a zero tangent times an infinite or NaN partial is NaN where the
//! same code, inlined before reverse mode ran, recomputes the value from
//! a parameter that does not vary and has no term at all (fuzzer seed
//! 104143: `asin''` of a value out of its domain, times 0).
//!
//! Forward activity is reachability: a value varies when a varying
//! parameter reaches it. So a value varies under a request exactly when it
//! varies under some request with one of those parameters varying alone.
//! The plan asks each parameter alone, and leaves a value unknown (a plain
//! `pop`, which always varies) when that reading cannot be trusted: when it
//! varies with no parameter varying, or with the contents of an array the
//! function makes or a call returns (a callee's adjoint does not take such
//! an array, so it could not say so; the same code inlined must not either),
//! or when all parameters together make it vary but none alone does. (Every parameter is asked, however many there
//! are: a limit would describe a function's pops called and not inlined, or
//! the other way round, which is the difference this exists to remove.)

use super::{Plan, TapeItem};
use crate::activity;
use crate::context::Cache;
use adze_ir::{ArgActivity, Function, Module, Type, Value};
use std::collections::HashMap;

impl Plan {
    /// Fills [`Plan::pushed_varies`] for the f64 values on the tape (its
    /// values and the loop invariants).
    pub(crate) fn plan_varies(&mut self, cache: &mut Cache, module: &Module, primal: &Function) {
        let mut pushed: Vec<Value> = Vec::new();
        for &b in &self.order {
            for &(_, item) in &self.tape[b] {
                if let TapeItem::Value(v) = item {
                    pushed.push(v);
                }
            }
        }
        pushed.extend(self.invariants.iter().map(|&(v, _)| v));
        pushed.retain(|&v| primal.dfg.value_type(v) == Type::F64);
        if pushed.is_empty() {
            return;
        }
        let params = primal.params();
        let sources: Vec<usize> = (primal.sig.params.iter().enumerate())
            .filter(|(_, p)| matches!(p.ty, Type::F64 | Type::Array))
            .map(|(k, _)| k)
            .collect();
        let active = |k: usize| match primal.sig.params[k].ty {
            Type::F64 => ArgActivity::Dual,
            _ => ArgActivity::Dup,
        };
        let none = vec![ArgActivity::Const; params.len()];
        // What varies with no parameter varying, but with the contents of
        // every array the function or a callee makes (as if they varied):
        // unknown. A value read from a local array is then unknown here as
        // it is in a callee the array is passed to, whose adjoint does not
        // take it, and a call's result a callee reads from its own local
        // array is unknown as the same code inlined is.
        let constant = activity::analyze_with_locals(cache, module, primal, &none);
        let mut all = none.clone();
        for &k in &sources {
            all[k] = active(k);
        }
        let everything = activity::analyze_cached(cache, module, primal, &all, &[]);
        let mut varies: HashMap<Value, Vec<Value>> = pushed
            .iter()
            .filter(|&&v| !constant.is_active(v))
            .map(|&v| (v, Vec::new()))
            .collect();
        for &k in &sources {
            let mut one = none.clone();
            one[k] = active(k);
            let act = activity::analyze_cached(cache, module, primal, &one, &[]);
            for (&v, with) in varies.iter_mut() {
                if act.is_active(v) {
                    with.push(params[k]);
                }
            }
        }
        varies.retain(|&v, with| !with.is_empty() || !everything.is_active(v));
        self.pushed_varies = varies;
    }
}
