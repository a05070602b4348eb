//! Reverse mode: augmented primal + adjoint sweep, IR to IR.
//!
//! [`reverse_derivative`] turns a function and a [`ReverseRequest`] (one
//! activity per parameter: `const`, `active` for f64, `dup` for arrays; the
//! result's activity: `active` or `const`) into a function whose signature
//! is the value layout of the IR `autodiff reverse` instruction, so that
//! lowering one is a plain call:
//!
//! - parameters, per parameter of the primal: `const` → `p`; `active` →
//!   `p`; `dup` → `a, a.d` (the shadow, always `mut`);
//! - results: the adjoint of each `active` parameter, in order
//!   ([`adze_ir::Module::autodiff_result_types`]).
//!
//! `ret active` seeds the cotangent of every f64 result with 1.0 (so a
//! tuple result gives the gradient of the sum of its f64 parts); `ret
//! const` seeds nothing, and only the shadows of `mut` arrays drive the
//! sweep. The derivative performs the primal's effects (`mut` arrays hold
//! the primal's results afterwards). A shadow of a `mut` array is read as the
//! cotangent of the array's final contents and holds, on return, the
//! adjoint of its initial contents (Enzyme's convention); for a read-only
//! array the adjoint is accumulated (`+=`) into the shadow.
//!
//! # Split functions
//!
//! Per (function, activities) the pass builds two functions:
//!
//! - the *augmented primal* `f.aug.<acts>` (module `aug`): the primal's signature;
//!   runs the primal and pushes on the tape what the adjoint will read;
//! - the *adjoint* `f.adj.<acts>` (module `adj`): parameters: the shadows of the
//!   `dup` arrays, then one cotangent per f64 result; results: the adjoints
//!   of the `active` parameters. It pops everything the augmented primal
//!   pushed, in reverse.
//!
//! The derivative `f.rev.<acts>` calls one, then the other, with the seed:
//!
//! ```text
//! function @sq.rev.active(x: f64) -> f64 {
//! block0(v0: f64):
//!     v1 = call @sq.aug.active(v0)
//!     v2 = fconst 1.0
//!     v3 = call @sq.adj.active(v2)
//!     return v3
//! }
//! ```
//!
//! A call `r = call g(..)` with an active argument becomes `call
//! g.aug.<acts>` in `f.aug` and, at the mirror point of `f.adj`, `call
//! g.adj.<acts>(shadows, adj(r))`, whose results are added to the adjoints
//! of the active arguments. The tape is last-in-first-out, so this composes
//! for any call depth and for recursion (the pair is declared before either
//! body is built). Other calls stay plain calls in `f.aug` and vanish from
//! `f.adj`. The names include `.noret` for `ret const`, and `noargs` for a
//! function without parameters; the module is the cache.
//!
//! The analyses (reachable CFG, activity, slots, tape) are in module `plan`;
//! `docs/ad-reverse.md` describes the design with a real dump.

/// The tape the derivatives of this pass record on. A primal that itself
/// uses a tape (reverse over reverse) is rejected for now, so one tape
/// suffices; nested reverse passes will record on `1 +` the highest tape
/// their primal uses, so that their records never interleave.
const TAPE: u8 = 0;

mod adj;
mod aug;
pub(crate) mod plan;

use crate::forward::{forward_derivative, ForwardRequest, MAX_NESTING};
use crate::AdError;
use adze_ir::{
    ArgActivity, FuncBuilder, FuncId, Function, Inst, InstData, Mode, Module, Param, RetActivity,
    Signature, Type, Value,
};
use std::collections::HashMap;

/// A reverse-mode derivative request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReverseRequest {
    pub func: FuncId,
    /// One per parameter: `Const`, `Active` (f64) or `Dup` (array).
    pub args: Vec<ArgActivity>,
    /// `Active` (seed the f64 results' cotangents with 1.0) or `Const`.
    pub ret: RetActivity,
}

impl ReverseRequest {
    pub fn new(func: FuncId, args: Vec<ArgActivity>, ret: RetActivity) -> ReverseRequest {
        ReverseRequest { func, args, ret }
    }

    fn acts_suffix(&self) -> String {
        let mut s = if self.args.is_empty() {
            "noargs".to_string()
        } else {
            let acts: Vec<&str> = self.args.iter().map(|a| a.name()).collect();
            acts.join("_")
        };
        if self.ret == RetActivity::Const {
            s.push_str(".noret");
        }
        s
    }

    fn name(&self, module: &Module, kind: &str) -> String {
        format!(
            "{}.{kind}.{}",
            module.func(self.func).name,
            self.acts_suffix()
        )
    }

    /// `f.rev.<acts>`: the derivative with the `autodiff` layout.
    pub fn derivative_name(&self, module: &Module) -> String {
        self.name(module, "rev")
    }

    /// `f.aug.<acts>`: the augmented primal.
    pub fn aug_name(&self, module: &Module) -> String {
        self.name(module, "aug")
    }

    /// `f.adj.<acts>`: the adjoint sweep.
    pub fn adj_name(&self, module: &Module) -> String {
        self.name(module, "adj")
    }

    /// Checks the request against the function's signature.
    pub fn validate(&self, module: &Module) -> Result<(), AdError> {
        if !module.is_valid(self.func) {
            return Err(AdError::NoSuchFunction(self.func.to_string()));
        }
        let f = module.func(self.func);
        let bad = |reason: String| AdError::BadRequest {
            func: f.name.clone(),
            reason,
        };
        match self.ret {
            RetActivity::Active => {
                if !f.sig.results.contains(&Type::F64) {
                    return Err(bad(
                        "`active` result, but the function has no f64 result".into()
                    ));
                }
            }
            RetActivity::Const => {}
            RetActivity::Dual => {
                return Err(bad(
                    "reverse mode takes `active` or `const` for the result, not `dual`".into(),
                ))
            }
        }
        if self.args.len() != f.sig.params.len() {
            return Err(bad(format!(
                "{} activities for {} parameters",
                self.args.len(),
                f.sig.params.len()
            )));
        }
        for (p, a) in f.sig.params.iter().zip(&self.args) {
            let ok = match a {
                ArgActivity::Const => true,
                ArgActivity::Active => p.ty == Type::F64,
                ArgActivity::Dup => p.ty == Type::Array,
                ArgActivity::Dual => false,
            };
            if !ok {
                return Err(bad(format!(
                    "parameter `{}: {}` cannot be `{}` in reverse mode",
                    p.name,
                    p.ty,
                    a.name()
                )));
            }
        }
        Ok(())
    }

    /// The signature of the derivative (the `autodiff reverse` layout).
    pub fn derivative_signature(&self, module: &Module) -> Signature {
        let f = module.func(self.func);
        let mut params = Vec::new();
        for (p, a) in f.sig.params.iter().zip(&self.args) {
            params.push(p.clone());
            if *a == ArgActivity::Dup {
                params.push(Param::mutable_array(format!("{}.d", p.name)));
            }
        }
        Signature {
            params,
            results: self.adjoint_results(),
        }
    }

    fn adjoint_results(&self) -> Vec<Type> {
        self.args
            .iter()
            .filter(|a| **a == ArgActivity::Active)
            .map(|_| Type::F64)
            .collect()
    }

    /// The adjoint's signature: shadows of the `dup` arrays, then one
    /// cotangent per f64 result; the adjoints of the `active` parameters.
    fn adj_signature(&self, module: &Module) -> Signature {
        let f = module.func(self.func);
        let mut params: Vec<Param> = f
            .sig
            .params
            .iter()
            .zip(&self.args)
            .filter(|(_, a)| **a == ArgActivity::Dup)
            .map(|(p, _)| Param::mutable_array(format!("{}.d", p.name)))
            .collect();
        let n = f.sig.results.iter().filter(|&&t| t == Type::F64).count();
        for k in 0..n {
            let name = if n == 1 {
                "dret".to_string()
            } else {
                format!("dret{k}")
            };
            params.push(Param::new(name, Type::F64));
        }
        Signature {
            params,
            results: self.adjoint_results(),
        }
    }
}

/// The split pair of a call's callee, and the activities it was derived for.
#[derive(Clone, Debug)]
pub(crate) struct CallTarget {
    pub aug: FuncId,
    pub adj: FuncId,
    pub acts: Vec<ArgActivity>,
}

pub(crate) type Calls = HashMap<Inst, CallTarget>;

/// Builds (or finds) the reverse derivative for `request` and returns its id
/// (see the module doc for its signature). Also builds the augmented primals
/// and adjoints of every function it calls with active arguments. Every
/// function the call creates is verified.
///
/// On error the module may keep declarations (functions without a body) of
/// the derivatives that were being built; discard it.
pub fn reverse_derivative(
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<FuncId, AdError> {
    let before = module.len();
    let id = derive_top(module, request, 0)?;
    verify_new(module, before)?;
    Ok(id)
}

/// The split pair `(f.aug.<acts>, f.adj.<acts>)` for `request` (built or
/// found), for callers that drive the two sweeps themselves (and for
/// measuring the tape).
pub fn split_derivative(
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<(FuncId, FuncId), AdError> {
    let before = module.len();
    let pair = derive_split(module, request, 0)?;
    verify_new(module, before)?;
    Ok(pair)
}

/// The reverse derivative of the function called `name`; see
/// [`reverse_derivative`].
///
/// ```
/// use adze_ad::derive_reverse;
/// use adze_interp::Interpreter;
/// use adze_ir::{ArgActivity, RetActivity, Val};
///
/// let src = "fn f(x: f64, a: [f64]) -> f64 {
///     var s = 0.0;
///     for i in 0..len(a) { s = s + sin(x) * a[i] * a[i]; }
///     s
/// }";
/// let mut module = adze_lang::compile("f.adz", src).unwrap();
/// let df = derive_reverse(
///     &mut module,
///     "f",
///     &[ArgActivity::Active, ArgActivity::Dup],
///     RetActivity::Active,
/// )
/// .unwrap();
/// assert_eq!(module.func(df).name, "f.rev.active_dup");
/// // (x, a, da) -> ∂f/∂x; ∂f/∂a is accumulated into da.
/// let (x, a) = (0.5f64, vec![1.0, 2.0]);
/// let out = Interpreter::new(&module)
///     .call(df, &[Val::F64(x), Val::Array(a.clone()), Val::Array(vec![0.0; 2])])
///     .unwrap();
/// assert_eq!(out.results, vec![Val::F64(x.cos() * 1.0 * 1.0 + x.cos() * 2.0 * 2.0)]);
/// let da: Vec<f64> = a.iter().map(|&ai| x.sin() * ai + x.sin() * ai).collect();
/// assert_eq!(out.args[2], Val::Array(da));
/// ```
pub fn derive_reverse(
    module: &mut Module,
    name: &str,
    args: &[ArgActivity],
    ret: RetActivity,
) -> Result<FuncId, AdError> {
    let func = module
        .get(name)
        .ok_or_else(|| AdError::NoSuchFunction(name.to_string()))?;
    reverse_derivative(module, &ReverseRequest::new(func, args.to_vec(), ret))
}

/// Replaces every `autodiff reverse` instruction of the module by a call to
/// its derivative (functions created on the way included). `autodiff
/// forward` requests are left for [`crate::lower_autodiff`]; run this one
/// first, so that forward mode differentiates calls (forward over reverse).
pub fn lower_reverse_autodiff(module: &mut Module) -> Result<(), AdError> {
    let before = module.len();
    let mut i = 0;
    while i < module.len() {
        let id = module
            .ids()
            .nth(i)
            .ok_or_else(|| AdError::ReverseInternal {
                func: String::new(),
                reason: "the module shrank".into(),
            })?;
        let mut func = module.func(id).clone();
        if lower_reverse_requests(module, &mut func, 0)? {
            module.replace(id, func);
        }
        i += 1;
    }
    verify_new(module, before)
}

fn verify_new(module: &Module, before: usize) -> Result<(), AdError> {
    for id in module.ids().skip(before) {
        if let Err(e) = adze_ir::verify::verify_function(module, id) {
            return Err(AdError::ReverseInternal {
                func: module.func(id).name.clone(),
                reason: format!("the derivative does not verify: {e:?}"),
            });
        }
    }
    Ok(())
}

/// Replaces the `autodiff reverse` instructions of `func` by calls to their
/// derivatives; true if there were any.
pub(crate) fn lower_reverse_requests(
    module: &mut Module,
    func: &mut Function,
    depth: usize,
) -> Result<bool, AdError> {
    let requests: Vec<(Inst, ReverseRequest, Vec<Value>)> = func
        .layout
        .insts()
        .filter_map(|(_, inst)| match func.dfg.inst(inst) {
            InstData::Autodiff { spec, args } if spec.mode == Mode::Reverse => Some((
                inst,
                ReverseRequest::new(spec.func, spec.args.clone(), spec.ret),
                args.clone(),
            )),
            _ => None,
        })
        .collect();
    let any = !requests.is_empty();
    for (inst, req, args) in requests {
        let d = derive_top(module, &req, depth)?;
        let expected = module.func(d).sig.results.len();
        if expected != func.dfg.inst_results(inst).len() {
            return Err(AdError::BadRequest {
                func: func.name.clone(),
                reason: format!(
                    "an `autodiff` of @{} has {} results, its derivative {expected}",
                    module.func(req.func).name,
                    func.dfg.inst_results(inst).len()
                ),
            });
        }
        *func.dfg.inst_mut(inst) = InstData::Call { func: d, args };
    }
    Ok(any)
}

/// The derivative with the `autodiff` layout: aug, then adj with the seed.
fn derive_top(module: &mut Module, req: &ReverseRequest, depth: usize) -> Result<FuncId, AdError> {
    req.validate(module)?;
    let name = req.derivative_name(module);
    let sig = req.derivative_signature(module);
    if let Some(id) = module.get(&name) {
        if module.func(id).sig != sig {
            return Err(AdError::NameTaken { name });
        }
        return Ok(id);
    }
    let (aug, adj) = derive_split(module, req, depth)?;
    let primal_sig = module.func(req.func).sig.clone();
    let mut f = Function::new(name.clone(), sig);
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let params = b.func.params().to_vec();
    let mut primal_args = Vec::new();
    let mut shadows = Vec::new();
    let mut k = 0;
    for a in &req.args {
        primal_args.push(params[k]);
        k += 1;
        if *a == ArgActivity::Dup {
            shadows.push(params[k]);
            k += 1;
        }
    }
    b.call(aug, &primal_args, &primal_sig.results);
    let seed = match req.ret {
        RetActivity::Active => 1.0,
        _ => 0.0,
    };
    let mut adj_args = shadows;
    for &t in &primal_sig.results {
        if t == Type::F64 {
            adj_args.push(b.fconst(seed));
        }
    }
    let results = req.adjoint_results();
    let call = b.call(adj, &adj_args, &results);
    let adjs = b.func.dfg.inst_results(call).to_vec();
    b.ret(&adjs);
    module
        .push(f)
        .map_err(|_| AdError::NameTaken { name: name.clone() })
}

/// Builds (or finds) the split pair of `req`.
pub(crate) fn derive_split(
    module: &mut Module,
    req: &ReverseRequest,
    depth: usize,
) -> Result<(FuncId, FuncId), AdError> {
    req.validate(module)?;
    let aug_name = req.aug_name(module);
    let adj_name = req.adj_name(module);
    // The augmented primal has the primal's signature.
    let aug_sig = module.func(req.func).sig.clone();
    let adj_sig = req.adj_signature(module);
    match (module.get(&aug_name), module.get(&adj_name)) {
        (Some(a), Some(d)) => {
            if module.func(a).sig != aug_sig {
                return Err(AdError::NameTaken { name: aug_name });
            }
            if module.func(d).sig != adj_sig {
                return Err(AdError::NameTaken { name: adj_name });
            }
            return Ok((a, d));
        }
        (Some(_), None) => return Err(AdError::NameTaken { name: aug_name }),
        (None, Some(_)) => return Err(AdError::NameTaken { name: adj_name }),
        (None, None) => {}
    }
    let primal = module.func(req.func);
    if primal.is_declaration() {
        return Err(AdError::NoBody {
            func: primal.name.clone(),
        });
    }
    if depth >= MAX_NESTING {
        return Err(AdError::TooDeep {
            func: primal.name.clone(),
            limit: MAX_NESTING,
        });
    }
    let mut primal = primal.clone();
    let aug_id = module
        .declare(&aug_name, aug_sig.clone())
        .map_err(|_| AdError::NameTaken {
            name: aug_name.clone(),
        })?;
    let adj_id = module
        .declare(&adj_name, adj_sig.clone())
        .map_err(|_| AdError::NameTaken {
            name: adj_name.clone(),
        })?;
    prepare(module, &mut primal, depth)?;
    let plan = plan::Plan::new(module, &primal, &req.args, req.ret)?;
    let calls = plan_calls(module, &primal, &plan, depth)?;
    let aug = aug::build(&primal, &plan, &calls, aug_name, aug_sig)?;
    let adj = adj::build(&primal, &plan, &calls, req, adj_name, adj_sig)?;
    module.replace(aug_id, aug);
    module.replace(adj_id, adj);
    Ok((aug_id, adj_id))
}

fn unsupported(func: &Function, what: impl Into<String>) -> AdError {
    AdError::ReverseUnsupported {
        func: func.name.clone(),
        what: what.into(),
    }
}

/// Lowers the derivative requests inside the copy of the primal and rejects
/// what reverse mode does not handle yet.
fn prepare(module: &mut Module, primal: &mut Function, depth: usize) -> Result<(), AdError> {
    lower_reverse_requests(module, primal, depth + 1)?;
    lower_forward(module, primal)?;
    if primal.regions.values().any(|r| r.rules.reverse.is_some()) {
        return Err(unsupported(primal, "rule regions with a reverse rule"));
    }
    // Regions with only forward rules are ordinary code for reverse mode.
    primal.regions.clear();
    for (_, inst) in primal.layout.insts() {
        match primal.dfg.inst(inst) {
            InstData::Push { .. } | InstData::Pop { .. } => {
                return Err(unsupported(
                    primal,
                    "tape instructions (`push`/`pop`, i.e. reverse over reverse)",
                ))
            }
            InstData::Autodiff { .. } => {
                return Err(unsupported(primal, "an `autodiff` request left unlowered"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Replaces the `autodiff forward` instructions of the copy `func` by calls
/// to their derivatives (through the public forward API, whose cache is the
/// module).
fn lower_forward(module: &mut Module, func: &mut Function) -> Result<(), AdError> {
    let requests: Vec<(Inst, ForwardRequest, Vec<Value>)> = func
        .layout
        .insts()
        .filter_map(|(_, inst)| match func.dfg.inst(inst) {
            InstData::Autodiff { spec, args } if spec.mode == Mode::Forward => Some((
                inst,
                ForwardRequest::new(spec.func, spec.args.clone(), spec.ret),
                args.clone(),
            )),
            _ => None,
        })
        .collect();
    for (inst, req, args) in requests {
        let d = forward_derivative(module, &req)?;
        if module.func(d).sig.results.len() != func.dfg.inst_results(inst).len() {
            return Err(AdError::BadRequest {
                func: func.name.clone(),
                reason: format!(
                    "an `autodiff forward` of @{} has the wrong number of results",
                    module.func(req.func).name
                ),
            });
        }
        *func.dfg.inst_mut(inst) = InstData::Call { func: d, args };
    }
    Ok(())
}

/// Does `func`, or anything it calls, push or pop?
fn touches_tape(module: &Module, func: FuncId) -> bool {
    if !module.is_valid(func) {
        return false;
    }
    module.reachable_from(func).into_iter().any(|id| {
        let f = module.func(id);
        f.layout
            .insts()
            .any(|(_, i)| matches!(f.dfg.inst(i), InstData::Push { .. } | InstData::Pop { .. }))
    })
}

/// Derives the split pair of every active call's callee.
fn plan_calls(
    module: &mut Module,
    primal: &Function,
    plan: &plan::Plan,
    depth: usize,
) -> Result<Calls, AdError> {
    let mut calls = Calls::new();
    for &b in &plan.order {
        for &inst in primal.layout.block_insts(b) {
            let InstData::Call { func: callee, args } = primal.dfg.inst(inst) else {
                continue;
            };
            if args.iter().any(|&a| plan.is_varied(a)) && touches_tape(module, *callee) {
                // Varied values would flow through the tape, which the
                // activity analysis cannot follow (reverse over reverse).
                return Err(unsupported(
                    primal,
                    format!(
                        "a call with active arguments to @{}, which uses the tape (reverse over reverse)",
                        module.func(*callee).name
                    ),
                ));
            }
            if !plan.call_is_active(primal, args) {
                continue;
            }
            if !module.is_valid(*callee) {
                return Err(unsupported(
                    primal,
                    format!("a call to the unknown function {callee}"),
                ));
            }
            let g = module.func(*callee);
            if g.meta.rules.reverse.is_some() {
                return Err(unsupported(
                    primal,
                    format!("the reverse rule of @{} (custom reverse rules)", g.name),
                ));
            }
            if g.sig.params.len() != args.len() {
                return Err(unsupported(
                    primal,
                    format!("a call to @{} with a wrong argument count", g.name),
                ));
            }
            let acts: Vec<ArgActivity> = args
                .iter()
                .map(|&a| match primal.dfg.value_type(a) {
                    Type::F64 if plan.is_active(primal, a) => ArgActivity::Active,
                    Type::Array if plan.is_shadowed(a) => ArgActivity::Dup,
                    _ => ArgActivity::Const,
                })
                .collect();
            let results = primal.dfg.inst_results(inst);
            let ret = if results.iter().any(|&r| plan.is_active(primal, r)) {
                RetActivity::Active
            } else {
                RetActivity::Const
            };
            let req = ReverseRequest::new(*callee, acts.clone(), ret);
            let (aug, adj) = derive_split(module, &req, depth + 1)?;
            calls.insert(inst, CallTarget { aug, adj, acts });
        }
    }
    Ok(calls)
}
