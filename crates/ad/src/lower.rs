//! Lowering of `autodiff` requests: each `autodiff forward` instruction
//! becomes a plain `call` of the derivative function, whose signature is the
//! request's value layout.
//!
//! ```text
//! v3, v4 = autodiff forward dual @sq(dual v1, v2)   =>   v3, v4 = call @sq.fwd.dual(v1, v2)
//! ```
//!
//! Requests are lowered innermost first: before a request on `g` is lowered,
//! every function reachable from `g` has had its own requests lowered, so
//! that `g` is differentiated as a function of calls only (forward over
//! forward, to any depth; a function that requests its own derivative is
//! handled by [`crate::forward`], which lowers the requests of the copy it
//! differentiates). Functions created on the way are visited too.
//!
//! `autodiff reverse` requests are left in place, unchanged, for the reverse
//! pass. The result is `Ok` unless a forward request is invalid or its
//! derivative cannot be built — in particular a forward request on a function
//! that itself contains a reverse request with active arguments fails with
//! [`crate::AdError::Unsupported`] until the reverse pass lowers that first.

use crate::forward::{derive, ForwardRequest};
use crate::AdError;
use adze_ir::{FuncId, InstData, Mode, Module};
use std::collections::HashSet;

/// Replaces every `autodiff forward` instruction of the module by a call to
/// its derivative; see the module doc.
pub fn lower_autodiff(module: &mut Module) -> Result<(), AdError> {
    let mut done = HashSet::new();
    let mut i = 0;
    // The module grows while we lower: visit the new functions too.
    while i < module.len() {
        let id = module.ids().nth(i).expect("index below len");
        lower_func(module, id, &mut done)?;
        i += 1;
    }
    Ok(())
}

fn lower_func(module: &mut Module, id: FuncId, done: &mut HashSet<FuncId>) -> Result<(), AdError> {
    if !done.insert(id) {
        return Ok(());
    }
    let func = module.func(id);
    let requests: Vec<_> = func
        .layout
        .insts()
        .filter_map(|(_, inst)| match func.dfg.inst(inst) {
            InstData::Autodiff { spec, args } if spec.mode == Mode::Forward => {
                Some((inst, spec.clone(), args.clone()))
            }
            _ => None,
        })
        .collect();
    for (inst, spec, args) in requests {
        if !module.is_valid(spec.func) {
            return Err(AdError::NoSuchFunction(spec.func.to_string()));
        }
        for inner in module.reachable_from(spec.func) {
            lower_func(module, inner, done)?;
        }
        let req = ForwardRequest::new(spec.func, spec.args.clone(), spec.ret);
        let d = derive(module, &req, &mut Vec::new())?;
        let have = module.func(id).dfg.inst_results(inst).len();
        let want = module.func(d).sig.results.len();
        if have != want {
            return Err(AdError::BadRequest {
                func: module.func(spec.func).name.clone(),
                reason: format!(
                    "the request in @{} has {have} results, the derivative {want}",
                    module.func(id).name
                ),
            });
        }
        *module.func_mut(id).dfg.inst_mut(inst) = InstData::Call { func: d, args };
    }
    Ok(())
}
