//! Lowering of `autodiff` requests: each `autodiff` instruction becomes a
//! plain `call` of the derivative function, whose signature is the
//! request's value layout.
//!
//! ```text
//! v3, v4 = autodiff forward dual @sq(dual v1, v2)   =>   v3, v4 = call @sq.fwd.dual(v1, v2)
//! v5 = autodiff reverse active @sq(active v1)       =>   v5 = call @sq.rev.active(v1)
//! ```
//!
//! Requests are lowered innermost first, whatever their modes: before a
//! function is differentiated, each pass lowers the requests of the copy it
//! differentiates (forward mode in `forward::build`, reverse mode in
//! `reverse::prepare`), so a derivative is always taken of a function made of
//! calls only — forward over reverse, reverse over forward, forward over
//! forward, to any depth. Functions created on the way are visited too.
//!
//! Both passes, and this module, take the [`AdContext`]: lowering a request
//! builds derivatives, which may lower the requests inside the functions
//! they differentiate and run the context's pass between lowerings (the
//! late inliner) on what those created. The size limit on what one
//! lowering creates is described in [`crate::context`].

pub use crate::context::ir_size;
use crate::{AdContext, AdError};
use adze_ir::{ArgActivity, FuncId, Function, Inst, InstData, Module, Opcode, Type, Value};
use cranelift_entity::{EntitySet, SecondaryMap};

/// Replaces every `autodiff` instruction of the module by a call to its
/// derivative; see the module doc. (With the default [`AdContext`]: see
/// [`AdContext::lower_autodiff`] for limits and a pass between lowerings.)
pub fn lower_autodiff(module: &mut Module) -> Result<(), AdError> {
    AdContext::default().lower_autodiff(module)
}

/// Like [`lower_autodiff`], but only for `root` and what it reaches (calls,
/// rules, rule regions and their callees: what the JIT compiles for it): a
/// request elsewhere in the module that cannot be lowered does not stop
/// `root` from running. (With the default [`AdContext`]: see
/// [`AdContext::lower_autodiff_from`].)
pub fn lower_autodiff_from(module: &mut Module, root: FuncId) -> Result<(), AdError> {
    AdContext::default().lower_autodiff_from(module, root)
}

/// [`AdContext::lower_autodiff`].
pub(crate) fn lower_module(cx: &mut AdContext<'_>, module: &mut Module) -> Result<(), AdError> {
    cx.session(None, |cx| {
        let mut i = 0;
        // The module grows while we lower: visit the new functions too.
        while i < module.len() {
            let id = module.ids().nth(i).expect("index below len");
            lower_function(cx, module, id)?;
            i += 1;
        }
        Ok(())
    })
}

/// [`AdContext::lower_autodiff_from`].
pub(crate) fn lower_from(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    root: FuncId,
) -> Result<(), AdError> {
    cx.session(None, |cx| {
        let mut done = EntitySet::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if !module.is_valid(id) || !done.insert(id) {
                continue;
            }
            lower_function(cx, module, id)?;
            stack.extend(module.func(id).referenced_functions());
        }
        Ok(())
    })
}

/// Lowers, in the module, the requests of every function that `func`
/// reaches, before `func` is analysed and differentiated. The analyses read
/// callees' bodies (activity summaries, usefulness): they must see the
/// code a callee runs, a call of a derivative, not the request it stands
/// for — exactly as they see it when the inliner has put the callee's body
/// (requests lowered with it) into `func`. Each function is visited once
/// per lowering; outside a lowering every call walks again.
pub(crate) fn lower_reachable(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    func: &Function,
) -> Result<(), AdError> {
    let mut stack = func.referenced_functions();
    stack.reverse();
    while let Some(id) = stack.pop() {
        if !module.is_valid(id) {
            continue;
        }
        if !cx.first_visit(id) {
            continue;
        }
        let root = cx.root();
        lower_function(cx, module, id)?;
        cx.restore_root(root);
        let mut next = module.func(id).referenced_functions();
        next.reverse();
        stack.extend(next);
    }
    Ok(())
}

/// Whether a function uses the tape, and whether that answer is final
/// (nothing it reaches is a declaration or holds a request to lower).
pub(crate) type TapeAnswer = (bool, bool);

/// [`crate::context::Cache::uses_tape`] of `root` and of every function it reaches whose answer is
/// not `known` (as `(uses, settled)`), in one pass over the call graph:
/// the strongly connected components (Tarjan's algorithm, iterative) in
/// the order it finishes them, each taking what its callees answered.
/// Walking the whole reachable graph for each function instead made the
/// reverse derivative of a chain of `n` functions quadratic (each of the
/// `n` answers walked the rest of the chain).
pub(crate) fn tape_use_closure(
    module: &Module,
    root: FuncId,
    known: impl Fn(FuncId) -> Option<bool>,
) -> (bool, Vec<(FuncId, TapeAnswer)>) {
    #[derive(Clone)]
    struct Node {
        index: usize,
        low: usize,
        on_stack: bool,
        succs: Vec<FuncId>,
        uses: bool,
        settled: bool,
    }
    let mut nodes: SecondaryMap<FuncId, Option<Node>> = SecondaryMap::new();
    let mut done: SecondaryMap<FuncId, Option<TapeAnswer>> = SecondaryMap::new();
    let mut visited = 0;
    let mut order: Vec<FuncId> = Vec::new();
    let mut stack: Vec<FuncId> = Vec::new();
    let mut call: Vec<(FuncId, usize)> = Vec::new();
    let visit = |f: FuncId,
                 nodes: &mut SecondaryMap<FuncId, Option<Node>>,
                 visited: &mut usize,
                 stack: &mut Vec<FuncId>| {
        let func = module.func(f);
        let mut uses = false;
        let mut settled = !func.is_declaration();
        for (_, inst) in func.layout.insts() {
            match func.dfg.inst(inst).opcode() {
                Opcode::Push
                | Opcode::Pop
                | Opcode::Tapelen
                | Opcode::Tapecut
                | Opcode::Tapeover => uses = true,
                Opcode::Autodiff => settled = false,
                _ => {}
            }
        }
        let index = *visited;
        *visited += 1;
        nodes[f] = Some(Node {
            index,
            low: index,
            on_stack: true,
            succs: func
                .referenced_functions()
                .into_iter()
                .filter(|&g| module.is_valid(g))
                .collect(),
            uses,
            settled,
        });
        stack.push(f);
    };
    visit(root, &mut nodes, &mut visited, &mut stack);
    call.push((root, 0));
    while let Some(&(v, k)) = call.last() {
        if let Some(&w) = nodes[v].as_ref().expect("visited").succs.get(k) {
            call.last_mut().expect("a frame").1 += 1;
            if let Some(answer) = known(w) {
                let n = nodes[v].as_mut().expect("visited");
                n.uses |= answer;
            } else if let Some(&(uses, settled)) = done[w].as_ref() {
                let n = nodes[v].as_mut().expect("visited");
                n.uses |= uses;
                n.settled &= settled;
            } else if let Some(wn) = nodes[w].as_ref() {
                if wn.on_stack {
                    let wi = wn.index;
                    let n = nodes[v].as_mut().expect("visited");
                    n.low = n.low.min(wi);
                }
            } else {
                visit(w, &mut nodes, &mut visited, &mut stack);
                call.push((w, 0));
            }
            continue;
        }
        call.pop();
        let n = nodes[v].as_ref().expect("visited");
        let (low, index) = (n.low, n.index);
        if let Some(&(u, _)) = call.last() {
            let n = nodes[u].as_mut().expect("visited");
            n.low = n.low.min(low);
        }
        if low != index {
            continue;
        }
        // `v` roots a component: pop it, and give every member the answer
        // of the whole (its members' own code and their callees').
        let mut members = Vec::new();
        let (mut uses, mut settled) = (false, true);
        while let Some(w) = stack.pop() {
            let n = nodes[w].as_mut().expect("visited");
            n.on_stack = false;
            uses |= n.uses;
            settled &= n.settled;
            members.push(w);
            if w == v {
                break;
            }
        }
        for &w in &members {
            done[w] = Some((uses, settled));
            order.push(w);
        }
        if let Some(&(u, _)) = call.last() {
            let n = nodes[u].as_mut().expect("visited");
            n.uses |= uses;
            n.settled &= settled;
        }
    }
    let uses = done[root].is_some_and(|(u, _)| u);
    let answers = order
        .into_iter()
        .map(|f| (f, done[f].expect("answered")))
        .collect();
    (uses, answers)
}

/// Refuses a request on `target` inside `func` when `target` reaches
/// `func` (through calls, rules, regions or requests): the derivative of
/// `target` would contain a derivative of itself, a tower that never ends.
pub(crate) fn check_not_self(
    module: &Module,
    func: &Function,
    target: FuncId,
) -> Result<(), AdError> {
    let Some(here) = module.get(&func.name) else {
        return Ok(());
    };
    if !module.is_valid(target) || !module.reachable_from(target).contains(&here) {
        return Ok(());
    }
    let t = &module.func(target).name;
    let reason = if here == target {
        format!("`{t}` differentiates itself: the derivative of `{t}` would contain its own derivative, without end; take the derivative outside `{t}`")
    } else {
        format!(
            "`{t}` calls `{}`, which differentiates `{t}`: the derivative of `{t}` would contain its own derivative, without end; take the derivative outside what `{t}` calls",
            func.name
        )
    };
    Err(AdError::BadRequest {
        func: func.name.clone(),
        reason,
    })
}

/// Lowers the requests of one function, if it has any, within the size
/// limit.
fn lower_function(cx: &mut AdContext<'_>, module: &mut Module, id: FuncId) -> Result<(), AdError> {
    let func = module.func(id);
    let has_requests = func
        .layout
        .insts()
        .any(|(_, inst)| func.dfg.inst(inst).opcode() == Opcode::Autodiff);
    if has_requests {
        cx.set_root(&func.name);
        let mut func = func.clone();
        let mark = module.len();
        crate::reverse::lower_reverse_requests(cx, module, &mut func, 0)?;
        cx.account_since(module, mark);
        cx.check_size()?;
        crate::forward::lower_forward_requests(
            cx,
            module,
            &mut func,
            &mut crate::forward::Building::default(),
        )?;
        cx.account_since(module, mark);
        cx.check_size()?;
        module.replace(id, func);
    }
    Ok(())
}

/// Replaces the `autodiff` request `inst` of `func` by a call of its
/// derivative `d` on the request's values `args`, after checking that the
/// derivative returns as many values as the request has results. The f64
/// results then pass through `+ 0.0`: inside derivative code a zero
/// derivative is -0.0 (the identity of addition, which keeps derivatives
/// bit-identical under inlining); the user gets 0.0 for it, and every other
/// value unchanged.
pub(crate) fn replace_request(
    module: &Module,
    func: &mut Function,
    inst: Inst,
    d: FuncId,
    args: Vec<Value>,
) -> Result<(), AdError> {
    let have = func.dfg.inst_results(inst).len();
    let want = module.func(d).sig.results.len();
    if have != want {
        let callee = match func.dfg.inst(inst) {
            InstData::Autodiff { spec, .. } => module.func(spec.func).name.clone(),
            _ => module.func(d).name.clone(),
        };
        return Err(AdError::BadRequest {
            func: func.name.clone(),
            reason: format!("an `autodiff` of @{callee} has {have} results, its derivative {want}"),
        });
    }
    *func.dfg.inst_mut(inst) = InstData::Call { func: d, args };
    let Some(block) = func.layout.inst_block(inst) else {
        return Ok(());
    };
    let results: Vec<Value> = func
        .dfg
        .inst_results(inst)
        .iter()
        .copied()
        .filter(|&r| func.dfg.value_type(r) == Type::F64)
        .collect();
    if results.is_empty() {
        return Ok(());
    }
    let mut at = func
        .layout
        .block_insts(block)
        .iter()
        .position(|&i| i == inst)
        .map_or(0, |p| p + 1);
    let mut place = |func: &mut Function, data: InstData| {
        let i = func.dfg.make_inst(data, &[Type::F64]);
        func.dfg.copy_srcloc(inst, i);
        func.layout.insert_inst(i, block, at);
        at += 1;
        (i, func.dfg.first_result(i))
    };
    let (_, zero) = place(func, InstData::fconst(0.0));
    let mut renamed = Vec::new();
    let mut added = Vec::new();
    for &r in &results {
        let (i, n) = place(
            func,
            InstData::Binary {
                op: Opcode::Fadd,
                args: [r, zero],
            },
        );
        renamed.push((r, n));
        added.push(i);
    }
    let rename = |v: Value| renamed.iter().find(|(r, _)| *r == v).map_or(v, |&(_, n)| n);
    let all: Vec<Inst> = func.layout.insts().map(|(_, i)| i).collect();
    for i in all.into_iter().filter(|i| !added.contains(i)) {
        func.dfg.inst_mut(i).map_uses(rename);
    }
    // A rule region names the values its inlined call was passed: they
    // are uses too. Left as the call's own results, a region inlined
    // before AD named `r` where the code passes `r + 0.0`, and outer
    // passes gave the rule's adjoint to `r`, summing it in another order
    // than the call's (fuzzer seed 2610140: the last bit of a reverse over
    // forward over reverse derivative changed with `--inline early`).
    for (_, data) in func.regions.iter_mut() {
        for a in &mut data.args {
            *a = rename(*a);
        }
    }
    Ok(())
}

/// Puts a `samelen a, da` check at the top of a derivative with the
/// `autodiff` value layout (`p`, then its tangent lanes or shadows) for every
/// `dup` pair: an array and its shadow must have the same length (SPEC §4),
/// and the error names both.
pub(crate) fn check_shadows(func: &mut Function, acts: &[ArgActivity], width: usize) {
    let Some(entry) = func.entry_block() else {
        return;
    };
    let params = func.params().to_vec();
    let mut pairs = Vec::new();
    let mut k = 0;
    for act in acts {
        let p = params.get(k).copied();
        k += 1;
        let lanes = match act {
            ArgActivity::Dual => width,
            ArgActivity::Dup => {
                if let Some(p) = p {
                    pairs.extend(params.iter().skip(k).take(width).map(|&s| (p, s)));
                }
                width
            }
            _ => 0,
        };
        k += lanes;
    }
    for (n, (a, s)) in pairs.into_iter().enumerate() {
        let inst = func.dfg.make_inst(
            InstData::Binary {
                op: Opcode::SameLen,
                args: [a, s],
            },
            &[],
        );
        func.layout.insert_inst(inst, entry, n);
    }
}

/// Would a reverse derivative differentiate derivative code: does a
/// reverse request in what `roots` reach, or a reverse derivative of one of
/// `reverse_roots`, differentiate a function that reaches (by calls,
/// requests, rules and rule regions) a request or a derivative? When not,
/// the derivatives built for `roots` may be final
/// ([`AdContext::with_final_derivatives`]). Decided on the module's
/// structure, which inlining keeps: a request stays reachable when its
/// function is inlined.
pub fn reverse_over_derivatives(
    module: &Module,
    roots: &[FuncId],
    reverse_roots: &[FuncId],
) -> bool {
    // The functions that reach derivative code, by propagation to callers.
    let mut callers: SecondaryMap<FuncId, Vec<FuncId>> = SecondaryMap::new();
    let mut holds = EntitySet::new();
    let mut work = Vec::new();
    for id in module.ids() {
        let func = module.func(id);
        for callee in func.referenced_functions() {
            if module.is_valid(callee) {
                callers[callee].push(id);
            }
        }
        let request = func
            .layout
            .insts()
            .any(|(_, i)| matches!(func.dfg.inst(i), InstData::Autodiff { .. }));
        if (request || module.derivation(id).is_some()) && holds.insert(id) {
            work.push(id);
        }
    }
    while let Some(id) = work.pop() {
        for &c in &callers[id] {
            if holds.insert(c) {
                work.push(c);
            }
        }
    }
    if reverse_roots.iter().any(|&r| holds.contains(r)) {
        return true;
    }
    let mut seen = EntitySet::new();
    let mut stack: Vec<FuncId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if !module.is_valid(id) || !seen.insert(id) {
            continue;
        }
        let func = module.func(id);
        for (_, i) in func.layout.insts() {
            if let InstData::Autodiff { spec, .. } = func.dfg.inst(i) {
                if spec.mode == adze_ir::Mode::Reverse && holds.contains(spec.func) {
                    return true;
                }
            }
        }
        stack.extend(func.referenced_functions());
    }
    false
}
