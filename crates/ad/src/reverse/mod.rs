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
//! function without parameters; they are for display. The module is the
//! cache: it records what each function is made from
//! ([`ReverseRequest::derivation`], an [`adze_ir::Derivation`]), and a
//! request finds its functions by that record.
//!
//! # Rules, regions, tapes
//!
//! - A call to a function `F` with rules stays `call F` in `f.aug` (rule
//!   identity: an outer pass still meets `F`), preceded by the taping of
//!   the reverse rule's inputs (scalars pushed, arrays pushed element by
//!   element by `@adze.tape.save.L`); at the mirror point `f.adj` calls
//!   `rule.apply.tL.<mask>`, which pops them and calls `F`'s reverse rule
//!   (or, when `F` has rules but no reverse rule, `F.revrule`, a rule built
//!   from `F`'s own split derivative). A request on `F` itself applies `F`'s
//!   reverse rule too.
//! - A rule region is collapsed into the call it stands for for the
//!   analyses (`crate::regions`) and put back in `f.aug`, where it is kept.
//! - The primal's own `push`/`pop` (reverse over reverse) are copied into
//!   `f.aug`; in `f.adj`, the reverse of `w = pop T` pushes `adj(w)` on
//!   [`adjoint_tape`]`(L, T)` and the reverse of `push T, v` pops it into
//!   `adj(v)`. A call to a function that uses a tape is always
//!   differentiated.
//!
//! The analyses (reachable CFG, activity, slots, tape) are in module `plan`;
//! `docs/ad-reverse.md` describes the design with real dumps.

/// The tape a top-level derivative of a primal that uses no tape records
/// on. In general a derivative records on `L =` [`crate::rules::tape_floor`]
/// of its primal (1 + the highest tape the primal reaches), and keeps the
/// adjoints of the primal's own traffic on tape `T < L` on tape
/// [`adjoint_tape`]`(L, T) = L + 1 + T`; the functions it derives for its
/// callees use the same `L`, and are named with a `.tL` suffix when `L > 0`.
pub const TAPE: u8 = 0;

/// The tape on which a derivative recording on `tape` keeps the adjoints of
/// its primal's traffic on `primal_tape`: one per primal tape, because the
/// primal's traffic on different tapes need not nest (its pushes on tape 0
/// and tape 1 may interleave), while each tape's own traffic does.
pub fn adjoint_tape(tape: u8, primal_tape: u8) -> u8 {
    tape.saturating_add(1).saturating_add(primal_tape)
}

mod adj;
mod aug;
mod checkpoint;
pub(crate) use checkpoint::{counterpart_chain, runner_activity};
pub(crate) mod plan;

use crate::{rules, AdContext, AdError};
use adze_ir::{
    ArgActivity, Derivation, FuncBuilder, FuncId, Function, Inst, InstData, Mode, Module, Opcode,
    Param, RetActivity, ReverseSpec, Rules, Signature, Step, Type, Value,
};
use cranelift_entity::SecondaryMap;

/// A reverse-mode derivative request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReverseRequest {
    pub func: FuncId,
    /// One per parameter: `Const`, `Active` (f64) or `Dup` (array).
    pub args: Vec<ArgActivity>,
    /// `Active` (seed the f64 results' cotangents with 1.0) or `Const`.
    pub ret: RetActivity,
    /// Parameters (by number) that the adjoint does not take although it
    /// could (`plan::adj_takes`). Empty for a top-level request; for a
    /// callee, its scalars (see `plan_calls`) and the read-only arrays
    /// whose contents may change before its adjoint runs.
    pub untaken: Vec<usize>,
    /// Results (by number) whose cotangent the caller does not use: they
    /// are not differentiated (nothing is useful only for them), so that a
    /// call is as precise as its callee inlined. Empty for a top-level
    /// request; for a callee, the results its caller never uses.
    pub ignored: Vec<usize>,
    /// `mut` array parameters (by number, `dup` or not) whose contents the caller
    /// does not read after the call, and array results (numbered after the
    /// parameters) it does not read: a store into one of them that no read
    /// of the callee follows gets no adjoint (the callee's `return` does
    /// not read a dead result), as it gets none when the body is inlined
    /// (`plan/useful.rs`). Empty for a top-level request.
    pub dead: Vec<usize>,
    /// Checkpoint the loops (set by the pass from its [`AdContext`]:
    /// `AdLimits::checkpoint`, unless a reverse derivation is lowering the
    /// requests inside its primal); in the name as `.ckpt`.
    pub checkpoint: bool,
    /// Checkpointed for forward derivatives of it (set by the pass, see
    /// [`AdContext::checkpoint_scope`]): only loops whose activity its
    /// runners know from their arguments (`checkpoint::choose`); `.ckptf`.
    pub for_forward: bool,
    /// No reverse derivative of it is taken (set by the pass from its
    /// [`AdContext`], [`AdContext::with_final_derivatives`]): the tape plan
    /// may recompute a block parameter from the one argument it receives
    /// ([`plan::tape::Recipe::Arg`]).
    pub no_reverse_over: bool,
}

impl ReverseRequest {
    pub fn new(func: FuncId, args: Vec<ArgActivity>, ret: RetActivity) -> ReverseRequest {
        ReverseRequest {
            func,
            args,
            ret,
            untaken: Vec::new(),
            ignored: Vec::new(),
            dead: Vec::new(),
            checkpoint: false,
            for_forward: false,
            no_reverse_over: false,
        }
    }

    /// This request with the checkpointing `cx` asks for: every loop it
    /// can (`AdLimits::checkpoint`), or the loops with a `#[checkpoint]`
    /// hint; for forward mode when forward derivations are lowering the
    /// requests inside their primal; neither when a reverse derivation is
    /// ([`AdContext::checkpoint_scope`]).
    fn in_context(&self, cx: &AdContext<'_>, module: &Module) -> ReverseRequest {
        let hinted = || module.is_valid(self.func) && checkpoint::has_hints(module.func(self.func));
        let (checkpoint, for_forward) = match cx.checkpoint_scope() {
            Some(for_forward) => {
                let on = cx.limits().checkpoint || hinted();
                (on, on && for_forward)
            }
            None => (false, false),
        };
        ReverseRequest {
            checkpoint,
            for_forward,
            no_reverse_over: cx.final_derivatives() && cx.under_reverse == 0,
            ..self.clone()
        }
    }

    /// The request as the module records it: what the name says (the
    /// ignored results only with an active result).
    fn spec(&self) -> ReverseSpec {
        ReverseSpec {
            args: self.args.clone(),
            ret: self.ret,
            ignored: if self.ret == RetActivity::Active {
                self.ignored.clone()
            } else {
                Vec::new()
            },
            untaken: self.untaken.clone(),
            dead: self.dead.clone(),
            checkpoint: self.checkpoint,
            for_forward: self.for_forward,
            no_reverse_over: self.no_reverse_over,
        }
    }

    /// What the derivative `f.rev.<acts>` is made from, as the module
    /// records it: the key a request finds it by ([`Module::find_derived`]).
    pub fn derivation(&self) -> Derivation {
        Derivation {
            from: Some(self.func),
            step: Step::Reverse(self.spec()),
        }
    }

    /// The records of the split pair recording on `tape`: the augmented
    /// primal's and the adjoint's.
    fn split_derivations(&self, tape: u8) -> (Derivation, Derivation) {
        let from = Some(self.func);
        let aug = Step::Augmented {
            spec: self.spec(),
            tape,
        };
        let adj = Step::Adjoint {
            spec: self.spec(),
            tape,
        };
        (
            Derivation { from, step: aug },
            Derivation { from, step: adj },
        )
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
        } else if self.ret == RetActivity::Dup {
            s.push_str(".dupret");
        } else if !self.ignored.is_empty() {
            let ks: Vec<String> = self.ignored.iter().map(|k| k.to_string()).collect();
            s.push_str(".nr");
            s.push_str(&ks.join("_"));
        }
        if !self.untaken.is_empty() {
            let ks: Vec<String> = self.untaken.iter().map(|k| k.to_string()).collect();
            s.push_str(".u");
            s.push_str(&ks.join("_"));
        }
        if !self.dead.is_empty() {
            let ks: Vec<String> = self.dead.iter().map(|k| k.to_string()).collect();
            s.push_str(".dead");
            s.push_str(&ks.join("_"));
        }
        if self.for_forward {
            s.push_str(".ckptf");
        } else if self.checkpoint {
            s.push_str(".ckpt");
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

    /// The name of one half of a split pair recording on `tape`: `.tL`
    /// appended when `tape > 0`.
    fn split_name(&self, module: &Module, kind: &str, tape: u8) -> String {
        let name = self.name(module, kind);
        if tape == 0 {
            name
        } else {
            format!("{name}.t{tape}")
        }
    }

    /// `f.rev.<acts>`: the derivative with the `autodiff` layout (names
    /// are for display; [`ReverseRequest::derivation`] is the key).
    pub fn derivative_name(&self, module: &Module) -> String {
        self.name(module, "rev")
    }

    /// `f.vjp.<acts>`: the derivative that also returns the primal results
    /// and takes the results' cotangents ([`vjp_derivative`]).
    pub fn vjp_name(&self, module: &Module) -> String {
        self.name(module, "vjp")
    }

    /// What `f.vjp.<acts>` is made from, as the module records it.
    pub fn vjp_derivation(&self) -> Derivation {
        Derivation {
            from: Some(self.func),
            step: Step::Vjp(self.spec()),
        }
    }

    /// The signature of `f.vjp.<acts>`: the parameters of the derivative,
    /// then, with an `active` result, one cotangent per f64 result (`dret`,
    /// or `dret0`, `dret1`, ..); the primal results, then the adjoints of
    /// the `active` parameters.
    pub fn vjp_signature(&self, module: &Module) -> Signature {
        let f = module.func(self.func);
        let mut sig = self.derivative_signature(module);
        if self.ret == RetActivity::Active {
            sig.params.extend(cotangent_params(&f.sig));
        }
        sig.results = f.sig.results.iter().copied().chain(sig.results).collect();
        sig
    }

    /// `f.aug.<acts>`: the augmented primal (of a request whose primal uses
    /// no tape; see [`TAPE`] for the others).
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
                if f.sig.differentiable_results().next().is_none() {
                    return Err(bad(
                        "`active` result, but the function has no f64 or array result".into(),
                    ));
                }
            }
            RetActivity::Const => {}
            RetActivity::Dup => {
                if f.sig.differentiable_results().next().is_none() {
                    return Err(bad(
                        "`dup` result, but the function has no f64 or array result".into(),
                    ));
                }
            }
            RetActivity::Dual => {
                return Err(bad(
                    "reverse mode takes `active` or `const` for the result, not `dual`".into(),
                ))
            }
        }
        crate::check_activities(&f.sig, &self.args, Mode::Reverse).map_err(bad)
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
        if self.ret == RetActivity::Dup {
            params.extend(cotangent_params(&f.sig));
        }
        Signature {
            params,
            results: self.adjoint_results(),
        }
    }

    /// The parameters the adjoint takes as witnesses, by number
    /// ([`plan::adj_witnesses`]), after those it takes.
    fn witnessed<'s>(
        &'s self,
        sig: &'s Signature,
    ) -> impl Iterator<Item = (usize, &'s Param)> + 's {
        sig.params
            .iter()
            .enumerate()
            .filter(|(k, p)| plan::adj_witnesses(p, *k, &self.untaken, self.for_forward))
    }

    fn adjoint_results(&self) -> Vec<Type> {
        self.args
            .iter()
            .filter(|a| **a == ArgActivity::Active)
            .map(|_| Type::F64)
            .collect()
    }

    /// The adjoint's signature: the primal parameters it takes
    /// ([`plan::adj_takes`]: the scalars and the stable read-only arrays),
    /// the shadows of the `dup` arrays, then one cotangent per f64 result;
    /// the adjoints of the `active` parameters.
    fn adj_signature(&self, module: &Module) -> Signature {
        let f = module.func(self.func);
        let mut params: Vec<Param> = f
            .sig
            .params
            .iter()
            .enumerate()
            .filter(|(k, p)| plan::adj_takes(p, *k, &self.untaken))
            .map(|(_, p)| p.clone())
            .collect();
        params.extend(self.witnessed(&f.sig).map(|(_, p)| Param {
            name: format!("w_{}", p.name),
            ty: p.ty,
            mutable: false,
        }));
        params.extend(
            f.sig
                .params
                .iter()
                .zip(&self.args)
                .filter(|(_, a)| **a == ArgActivity::Dup)
                .map(|(p, _)| Param::mutable_array(format!("{}.d", p.name))),
        );
        params.extend(cotangent_params(&f.sig));
        Signature {
            params,
            results: self.adjoint_results(),
        }
    }
}

/// The cotangent parameters of the differentiable results of `sig`, in
/// order: an f64 for an f64 result, a read-only array for an array result;
/// `dret` for one, `dret0`, `dret1`, .. for several.
fn cotangent_params(sig: &Signature) -> Vec<Param> {
    let tys: Vec<Type> = sig.differentiable_results().map(|(_, t)| t).collect();
    let n = tys.len();
    tys.into_iter()
        .enumerate()
        .map(|(k, t)| {
            let name = if n == 1 {
                "dret".to_string()
            } else {
                format!("dret{k}")
            };
            Param::new(name, t)
        })
        .collect()
}

/// What a differentiated call becomes.
#[derive(Clone, Debug)]
pub(crate) enum CallTarget {
    /// `call g.aug` in the augmented primal, `call g.adj` at the mirror
    /// point of the adjoint, for these activities.
    Split {
        aug: FuncId,
        adj: FuncId,
        acts: Vec<ArgActivity>,
        /// Per argument: does the callee's adjoint take it
        /// ([`plan::adj_takes`])?
        takes: Vec<bool>,
    },
    /// A call to a function with rules, or a collapsed rule region: the
    /// augmented primal tapes the rule's inputs (scalars by value, arrays
    /// through `save`, i64 arrays through `isave`) and computes the primal
    /// by the call itself (or the region's body); the adjoint calls
    /// `apply`, which pops the inputs and calls the reverse rule.
    /// `shadowed`: per argument, an array whose shadow the adjoint passes
    /// to `apply`.
    Rule {
        apply: FuncId,
        save: Option<FuncId>,
        isave: Option<FuncId>,
        shadowed: Vec<bool>,
    },
}

/// What each differentiated call of the primal becomes.
pub(crate) type Calls = SecondaryMap<Inst, Option<CallTarget>>;

/// Builds (or finds) the reverse derivative for `request` and returns its id
/// (see the module doc for its signature). Also builds the augmented primals
/// and adjoints of every function it calls with active arguments. Every
/// function the call creates is verified.
///
/// On error the module may keep declarations (functions without a body) of
/// the derivatives that were being built; discard it.
///
/// With the default [`AdContext`]: see [`AdContext::reverse_derivative`]
/// for limits and a pass between nested lowerings.
pub fn reverse_derivative(
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<FuncId, AdError> {
    AdContext::default().reverse_derivative(module, request)
}

/// [`AdContext::reverse_derivative`].
pub(crate) fn reverse_derivative_in(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<FuncId, AdError> {
    one_lowering(cx, module, request, |cx, module| {
        derive_top(cx, module, request, 0)
    })
}

/// Runs `derive` as one lowering for the size limit
/// ([`crate::AdLimits::max_size`]: everything it creates counts, as for a
/// forward derivative), then verifies what it created.
fn one_lowering<T>(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    request: &ReverseRequest,
    derive: impl FnOnce(&mut AdContext<'_>, &mut Module) -> Result<T, AdError>,
) -> Result<T, AdError> {
    let root = module
        .is_valid(request.func)
        .then(|| module.func(request.func).name.clone());
    cx.session(root.as_deref(), |cx| {
        let before = module.len();
        let out = derive(cx, module)?;
        cx.account_since(module, before);
        cx.check_size()?;
        verify_new(module, before)?;
        Ok(out)
    })
}

/// The split pair `(f.aug.<acts>, f.adj.<acts>)` for `request` (built or
/// found), for callers that drive the two sweeps themselves (and for
/// measuring the tape). With the default [`AdContext`]: see
/// [`AdContext::split_derivative`].
pub fn split_derivative(
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<(FuncId, FuncId), AdError> {
    AdContext::default().split_derivative(module, request)
}

/// [`AdContext::split_derivative`].
pub(crate) fn split_derivative_in(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<(FuncId, FuncId), AdError> {
    one_lowering(cx, module, request, |cx, module| {
        derive_split(cx, module, request, 0, None)
    })
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
///
/// With the default [`AdContext`]: see [`AdContext::derive_reverse`].
pub fn derive_reverse(
    module: &mut Module,
    name: &str,
    args: &[ArgActivity],
    ret: RetActivity,
) -> Result<FuncId, AdError> {
    AdContext::default().derive_reverse(module, name, args, ret)
}

/// Replaces every `autodiff reverse` instruction of the module by a call to
/// its derivative (functions created on the way included). `autodiff
/// forward` requests are left for [`crate::lower_autodiff`]; run this one
/// first, so that forward mode differentiates calls (forward over reverse).
/// With the default [`AdContext`]: see [`AdContext::lower_reverse_autodiff`].
pub fn lower_reverse_autodiff(module: &mut Module) -> Result<(), AdError> {
    AdContext::default().lower_reverse_autodiff(module)
}

/// [`AdContext::lower_reverse_autodiff`]: not a lowering of its own (no
/// size limit, nothing kept), as it was before the context existed.
pub(crate) fn lower_reverse_autodiff_in(
    cx: &mut AdContext<'_>,
    module: &mut Module,
) -> Result<(), AdError> {
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
        if lower_reverse_requests(cx, module, &mut func, 0)? {
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
    cx: &mut AdContext<'_>,
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
        crate::lower::check_not_self(module, func, req.func)?;
        let d = derive_top(cx, module, &req, depth)?;
        crate::lower::replace_request(module, func, inst, d, args)?;
    }
    Ok(any)
}

/// The derivative with the `autodiff` layout: aug, then adj with the seed.
fn derive_top(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    req: &ReverseRequest,
    depth: usize,
) -> Result<FuncId, AdError> {
    let req = &req.in_context(cx, module);
    // Before the name and signature read the function.
    req.validate(module)?;
    let sig = req.derivative_signature(module);
    let (name, key) = (req.derivative_name(module), req.derivation());
    derive_whole(cx, module, req, depth, Whole { name, key, sig }, false)
}

/// A function that runs a whole reverse derivative (the augmented primal,
/// then the adjoint): its name, its record and its signature.
struct Whole {
    name: String,
    key: Derivation,
    sig: Signature,
}

/// Builds (or finds) `whole`: `f.rev.<acts>` (`vjp` false: the adjoints
/// for the seed 1.0 or 0.0, the `autodiff` layout) or `f.vjp.<acts>` (`vjp`
/// true: the primal results and the adjoints for the seeds it is given).
fn derive_whole(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    req: &ReverseRequest,
    depth: usize,
    whole: Whole,
    vjp: bool,
) -> Result<FuncId, AdError> {
    req.validate(module)?;
    let Whole { name, key, sig } = whole;
    if let Some(id) = find_reusable(cx, module, &key) {
        if module.func(id).sig != sig {
            return Err(AdError::NameTaken { name });
        }
        return Ok(id);
    }
    // The split pair of a `dup` return is that of an `active` one: the
    // adjoint takes every cotangent either way; only the seeds differ.
    let split_req = if req.ret == RetActivity::Dup {
        let mut r = req.clone();
        r.ret = RetActivity::Active;
        r
    } else {
        req.clone()
    };
    let (aug, adj) = derive_split(cx, module, &split_req, depth, None)?;
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
    let call = b.call(aug, &primal_args, &primal_sig.results);
    let primal_results = b.func.dfg.inst_results(call).to_vec();
    let mut adj_args: Vec<Value> = primal_args
        .iter()
        .zip(&primal_sig.params)
        .enumerate()
        .filter(|(k, (_, p))| plan::adj_takes(p, *k, &req.untaken))
        .map(|(_, (&a, _))| a)
        .collect();
    let split = split_req.in_context(cx, module);
    adj_args.extend(split.witnessed(&primal_sig).map(|(k, _)| primal_args[k]));
    adj_args.extend(shadows);
    if (vjp && req.ret == RetActivity::Active) || req.ret == RetActivity::Dup {
        // The seeds are the parameters after the derivative's; an array
        // seed must have its result's length.
        let seeds = &params[k..];
        let arrays = primal_sig
            .differentiable_results()
            .zip(seeds)
            .filter(|((_, t), _)| *t == Type::Array);
        for ((r, _), &s) in arrays {
            b.samelen(primal_results[r], s);
        }
        adj_args.extend_from_slice(seeds);
    } else {
        let seed = match req.ret {
            RetActivity::Active => 1.0,
            _ => 0.0,
        };
        for (_, t) in primal_sig.differentiable_results() {
            if t == Type::F64 {
                adj_args.push(b.fconst(seed));
            } else {
                // No cotangent for an array result: an empty one.
                let n = b.iconst(0);
                adj_args.push(b.zeros(n, "dret"));
            }
        }
    }
    let results = req.adjoint_results();
    let call = b.call(adj, &adj_args, &results);
    let adjs = b.func.dfg.inst_results(call).to_vec();
    // Inside the sweep a zero adjoint is -0.0 (the identity of addition,
    // see `adj.rs`); the derivative returns +0.0 for it, as users expect.
    let zero = b.fconst(0.0);
    let adjs: Vec<_> = adjs.into_iter().map(|a| b.fadd(a, zero)).collect();
    let returned: Vec<Value> = if vjp {
        primal_results.into_iter().chain(adjs).collect()
    } else {
        adjs
    };
    b.ret(&returned);
    crate::lower::check_shadows(&mut f, &req.args, 1);
    module
        .push_derived(f, key)
        .map_err(|_| AdError::NameTaken { name: name.clone() })
}

/// Builds (or finds) `f.vjp.<acts>` for `request` (see [`vjp_derivative`]).
pub(crate) fn vjp_derivative_in(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    request: &ReverseRequest,
) -> Result<FuncId, AdError> {
    one_lowering(cx, module, request, |cx, module| {
        let request = &request.in_context(cx, module);
        // Before the name and signature read the function.
        request.validate(module)?;
        let whole = Whole {
            name: request.vjp_name(module),
            key: request.vjp_derivation(),
            sig: request.vjp_signature(module),
        };
        derive_whole(cx, module, request, 0, whole, true)
    })
}

/// The value and the vector-Jacobian product in one function,
/// `f.vjp.<acts>`: its parameters are those of the reverse derivative
/// ([`reverse_derivative`]: `p`, and `a, a.d` for a `dup` array), then,
/// with `ret active`, the cotangent of each f64 result (`dret`, or `dret0`,
/// `dret1`, ..: the seeds, given rather than 1.0); its results are the
/// primal's results, then the adjoints of the `active` parameters. It runs
/// the same split pair as `f.rev.<acts>`, so its adjoints for the seeds 1.0
/// are those of `f.rev.<acts>` bit for bit. With the default
/// [`AdContext`]: see [`AdContext::vjp_derivative`].
///
/// ```
/// use adze_ad::{vjp_derivative, ReverseRequest};
/// use adze_interp::Interpreter;
/// use adze_ir::{ArgActivity, RetActivity, Val};
///
/// let src = "fn f(x: f64, y: f64) -> (f64, f64) { (x * y, x + y) }";
/// let mut module = adze_lang::compile("f.adz", src).unwrap();
/// let f = module.get("f").unwrap();
/// let acts = vec![ArgActivity::Active, ArgActivity::Active];
/// let req = ReverseRequest::new(f, acts, RetActivity::Active);
/// let d = vjp_derivative(&mut module, &req).unwrap();
/// assert_eq!(module.func(d).name, "f.vjp.active_active");
/// // (x, y, dret0, dret1) -> (x * y, x + y, d/dx, d/dy) of dret0 * (x * y) + dret1 * (x + y).
/// let args = [3.0, 4.0, 1.0, 0.0].map(Val::F64);
/// let out = Interpreter::new(&module).call(d, &args).unwrap();
/// assert_eq!(out.results, [12.0, 7.0, 4.0, 3.0].map(Val::F64));
/// ```
pub fn vjp_derivative(module: &mut Module, request: &ReverseRequest) -> Result<FuncId, AdError> {
    AdContext::default().vjp_derivative(module, request)
}

/// Builds (or finds) the split pair of `req`, recording on `tape` (for a
/// callee: its caller's tape), or on [`rules::tape_floor`] of the primal
/// when `None` (a top-level request).
pub(crate) fn derive_split(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    req: &ReverseRequest,
    depth: usize,
    tape: Option<u8>,
) -> Result<(FuncId, FuncId), AdError> {
    let req = &req.in_context(cx, module);
    req.validate(module)?;
    let tape = match tape {
        Some(t) => t,
        None => rules::tape_floor(module, module.func(req.func)),
    };
    if usize::from(rules::derivative_max(tape)) >= usize::from(adze_ir::MAX_TAPES) {
        return Err(unsupported(
            module.func(req.func),
            format!(
                "derivatives nested so deeply that they need tapes {tape} to {}, beyond the {} tapes",
                rules::derivative_max(tape),
                adze_ir::MAX_TAPES
            ),
        ));
    }
    let aug_name = req.split_name(module, "aug", tape);
    let adj_name = req.split_name(module, "adj", tape);
    let (aug_key, adj_key) = req.split_derivations(tape);
    // The augmented primal has the primal's signature.
    let aug_sig = module.func(req.func).sig.clone();
    let adj_sig = req.adj_signature(module);
    match (
        find_reusable(cx, module, &aug_key),
        find_reusable(cx, module, &adj_key),
    ) {
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
    let limit = cx.limits().max_nesting;
    if depth >= limit {
        return Err(AdError::TooDeep {
            func: primal.name.clone(),
            limit,
        });
    }
    // A request on a function with a reverse rule applies the rule.
    let mut primal = if primal.meta.rules.reverse.is_some() {
        rules::call_body(module, req.func)
    } else {
        primal.clone()
    };
    let aug_id = module
        .declare_derived(&aug_name, aug_sig.clone(), aug_key)
        .map_err(|_| AdError::NameTaken {
            name: aug_name.clone(),
        })?;
    let adj_id = module
        .declare_derived(&adj_name, adj_sig.clone(), adj_key)
        .map_err(|_| AdError::NameTaken {
            name: adj_name.clone(),
        })?;
    prepare(cx, module, &mut primal, depth)?;
    if primal
        .layout
        .insts()
        .any(|(_, i)| primal.dfg.inst(i).opcode() == Opcode::Tapecut)
    {
        return Err(unsupported(
            &primal,
            "reverse mode over a checkpointed loop (a derivative built with checkpointing \
             outside this one; build both in one lowering, or without `--checkpoint`)",
        ));
    }
    let collapse =
        crate::regions::collapse(&mut primal, |_| true).map_err(|e| unsupported(&primal, e))?;
    primal.regions.clear();
    let mut plan = plan::Plan::new(
        &mut cx.cache,
        module,
        &primal,
        &req.args,
        req.ret,
        &req.ignored,
        &req.untaken,
        &req.dead,
    )?;
    plan.adj_witnesses = req
        .witnessed(&primal.sig)
        .map(|(k, _)| primal.params()[k])
        .collect();
    plan.args_recomputed = req.no_reverse_over;
    // A final derivative's frozen local arrays go on the tape whole (its
    // checkpointed loops' runners would need them too: not with those).
    if req.no_reverse_over && !req.checkpoint {
        plan.snapshot_arrays(module, &primal);
    }
    let calls = plan_calls(cx, module, &primal, &plan, &collapse, depth, tape)?;
    let mut call_args: SecondaryMap<Inst, Vec<Value>> = SecondaryMap::new();
    for (inst, t) in calls.iter() {
        if let Some(CallTarget::Split { takes, .. }) = t {
            if let InstData::Call { args, .. } = primal.dfg.inst(inst) {
                let taken = args.iter().zip(takes).filter(|(_, &t)| t);
                call_args[inst] = taken.map(|(&a, _)| a).collect();
            }
        }
    }
    plan.plan_tape(&primal, &call_args)?;
    // Only where callees take their scalars (`plan_calls`): elsewhere a
    // callee's adjoint could not say what its pops vary with, and the same
    // code inlined could (docs/ad-reverse.md, "What a popped value varies
    // with").
    if req.no_reverse_over {
        plan.plan_varies(&mut cx.cache, module, &primal);
    }
    let mut refused = Vec::new();
    if req.checkpoint {
        let all = cx.limits().checkpoint;
        let c = checkpoint::choose(module, &primal, &plan, &calls, all, req.for_forward);
        plan.checkpointed = c.chosen.iter().map(|&(l, _)| l).collect();
        plan.checkpoint_every = c.chosen.iter().map(|&(_, n)| n).collect();
        refused = c.refused;
    }
    let mut aug = aug::build(&primal, &plan, &calls, &collapse, tape, aug_name, aug_sig)?;
    for (l, why) in refused {
        if let Some(&header) = plan.loop_blocks(l).first() {
            aug.notes.block(
                header,
                format!("tape {tape}: loop {l} is not checkpointed: {why}"),
            );
        }
    }
    let checkpoints = checkpoint::instrument(
        module,
        aug_id,
        &mut aug,
        &primal,
        &plan,
        tape,
        req.for_forward,
    )?;
    let mut adj = adj::build(
        &primal,
        &plan,
        &calls,
        &checkpoints,
        req,
        tape,
        adj_name,
        adj_sig,
    )?;
    if !checkpoints.is_empty() {
        // Kept as calls (and so are their forward derivatives, see
        // `forward::derive_in`): a derivation that differentiates a caller
        // replaces them by their twins (`untwin_checkpoints`), which it
        // could not do to code inlined.
        aug.meta.inline = adze_ir::InlineHint::Never;
        adj.meta.inline = adze_ir::InlineHint::Never;
    }
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

fn prepare_lowered(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &mut Function,
    depth: usize,
) -> Result<(), AdError> {
    let mark = module.len();
    lower_reverse_requests(cx, module, primal, depth + 1)?;
    crate::forward::lower_forward_requests(
        cx,
        module,
        primal,
        &mut crate::forward::Building::at(depth + 1),
    )?;
    cx.between(module, mark);
    crate::lower::lower_reachable(cx, module, primal)
}

/// Calls to derivatives built with checkpointing (before this derivation,
/// in the module) call the twin the derivation in progress can
/// differentiate exactly: the same values bit for bit. The twin is the
/// same request in the context now ([`ReverseRequest::in_context`]): under
/// forward derivations only, the `.ckptf` one (and a forward derivative of
/// one stays); otherwise the taped one, and a forward derivative of a
/// checkpointed derivative becomes the forward derivative of the taped
/// twin.
pub(crate) fn untwin_checkpoints(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &mut Function,
    depth: usize,
) -> Result<(), AdError> {
    let calls: Vec<(Inst, FuncId)> = primal
        .layout
        .insts()
        .filter_map(|(_, i)| match primal.dfg.inst(i) {
            InstData::Call { func, .. } => Some((i, *func)),
            _ => None,
        })
        .collect();
    for (inst, callee) in calls {
        if let Some(twin) = taped_twin(cx, module, callee, depth)? {
            if let InstData::Call { func, .. } = primal.dfg.inst_mut(inst) {
                *func = twin;
            }
        }
    }
    Ok(())
}

/// The twin of `id` when `id` is a derivative built with checkpointing,
/// or derived from one (a forward derivative of it): the request in the
/// context now (see [`untwin_checkpoints`]). `None` when `id` is its own
/// twin: a `.ckptf` derivative where only forward derivations are lowering.
fn taped_twin(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    id: FuncId,
    depth: usize,
) -> Result<Option<FuncId>, AdError> {
    let Some(Derivation {
        from: Some(from),
        step,
    }) = module.derivation(id).cloned()
    else {
        return Ok(None);
    };
    if cx.checkpoint_scope() == Some(true) && step.reverse_spec().is_some_and(|s| s.for_forward) {
        return Ok(None);
    }
    twin_in_context(cx, module, from, &step, depth)
}

fn twin_in_context(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    from: FuncId,
    step: &Step,
    depth: usize,
) -> Result<Option<FuncId>, AdError> {
    let request = |spec: &ReverseSpec, func: FuncId| ReverseRequest {
        func,
        args: spec.args.clone(),
        ret: spec.ret,
        untaken: spec.untaken.clone(),
        ignored: spec.ignored.clone(),
        dead: spec.dead.clone(),
        checkpoint: false,
        for_forward: false,
        no_reverse_over: false,
    };
    let twin = match step {
        Step::Augmented { spec, tape } | Step::Adjoint { spec, tape } if spec.checkpoint => {
            // The `.ckptf` twin's adjoint may take witnesses that the call
            // does not pass (a callee lowered `.ckpt` and inlined before a
            // forward derivation reached it, fuzzer seed 5200079): then
            // the pair is replaced by the taped one, whose signature is
            // the call's (the same bits; only memory is not bounded).
            let called = ReverseRequest {
                checkpoint: true,
                ..request(spec, from)
            };
            let twin = request(spec, from).in_context(cx, module);
            let taped =
                twin.for_forward && twin.adj_signature(module) != called.adj_signature(module);
            if taped {
                cx.under_reverse += 1;
            }
            let split = derive_split(cx, module, &request(spec, from), depth + 1, Some(*tape));
            if taped {
                cx.under_reverse -= 1;
            }
            let (aug, adj) = split?;
            Some(if matches!(step, Step::Augmented { .. }) {
                aug
            } else {
                adj
            })
        }
        Step::Reverse(spec) if spec.checkpoint => {
            Some(derive_top(cx, module, &request(spec, from), depth + 1)?)
        }
        Step::Vjp(spec) if spec.checkpoint => {
            // Named and keyed as what the context makes of it.
            let req = request(spec, from).in_context(cx, module);
            req.validate(module)?;
            let whole = Whole {
                name: req.vjp_name(module),
                key: req.vjp_derivation(),
                sig: req.vjp_signature(module),
            };
            Some(derive_whole(cx, module, &req, depth + 1, whole, true)?)
        }
        Step::Forward {
            args,
            ret,
            width,
            seeded,
        } => match taped_twin(cx, module, from, depth)? {
            Some(base) => {
                let req = crate::forward::ForwardRequest {
                    width: *width,
                    seeded: seeded.clone(),
                    ..crate::forward::ForwardRequest::new(base, args.clone(), *ret)
                };
                Some(crate::forward::derive(
                    cx,
                    module,
                    &req,
                    &mut crate::forward::Building::at(depth + 1),
                )?)
            }
            None => None,
        },
        _ => None,
    };
    Ok(twin)
}

/// Lowers the derivative requests inside the copy of the primal.
fn prepare(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &mut Function,
    depth: usize,
) -> Result<(), AdError> {
    // What is lowered here is differentiated again by reverse mode: no
    // checkpoints (see `checkpoint` and `AdContext::checkpoint_scope`).
    cx.under_derivation += 1;
    cx.under_reverse += 1;
    let lowered = prepare_lowered(cx, module, primal, depth)
        .and_then(|()| untwin_checkpoints(cx, module, primal, depth));
    cx.under_reverse -= 1;
    cx.under_derivation -= 1;
    lowered?;
    for (_, inst) in primal.layout.insts() {
        match primal.dfg.inst(inst) {
            InstData::Autodiff { .. } => {
                return Err(unsupported(primal, "an `autodiff` request left unlowered"));
            }
            // A final derivative may recompute what this derivation needs
            // popped: its bits could then depend on inlining.
            InstData::Call { func, .. } if built_final(module, *func) => {
                let callee = &module.func(*func).name;
                return Err(unsupported(
                    primal,
                    format!(
                        "a reverse derivative of `{callee}`, built where no reverse derivative \
                         of it was to be taken (AdContext::with_final_derivatives)"
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Is `id` a reverse derivative built final, or derived from one
/// ([`ReverseRequest::no_reverse_over`])?
fn built_final(module: &Module, mut id: FuncId) -> bool {
    while let Some(Derivation {
        from: Some(from),
        step,
    }) = module.derivation(id)
    {
        if step.reverse_spec().is_some_and(|s| s.no_reverse_over) {
            return true;
        }
        id = *from;
    }
    false
}

/// The derivative recorded with `key`; or, for a request that is not final
/// while no reverse derivation is lowering (`under_reverse == 0`), the
/// final one: the same bits, and nothing reverse-differentiates it
/// ([`prepare`] refuses to).
fn find_reusable(cx: &AdContext<'_>, module: &Module, key: &Derivation) -> Option<FuncId> {
    module.find_derived(key).or_else(|| {
        if cx.under_reverse > 0 {
            return None;
        }
        let mut key = key.clone();
        let spec = key.step.reverse_spec_mut().filter(|s| !s.no_reverse_over)?;
        spec.no_reverse_over = true;
        module.find_derived(&key)
    })
}

/// Decides what every differentiated call becomes: a call to a function
/// without rules is split (`g.aug` / `g.adj`); a call to a function with
/// rules, or a collapsed rule region, applies the reverse rule (or, without
/// one, a rule built from the callee's own derivative, see
/// [`recompute_rule`]). A call to a function that uses the tape is always
/// differentiated, whatever its arguments: its pushes and pops carry values
/// the analyses cannot follow, and the adjoints of that traffic must stay
/// balanced on tape `L + 1`.
fn plan_calls(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &Function,
    plan: &plan::Plan,
    collapse: &crate::regions::Collapse,
    depth: usize,
    tape: u8,
) -> Result<Calls, AdError> {
    let mut calls = Calls::new();
    let mut tape_use = crate::activity::TapeUse::default();
    for &b in &plan.order {
        for &inst in primal.layout.block_insts(b) {
            let InstData::Call { func: callee, args } = primal.dfg.inst(inst) else {
                continue;
            };
            let callee = *callee;
            if !plan.differentiates_call(&mut cx.cache, module, primal, inst, &mut tape_use) {
                continue;
            }
            if !module.is_valid(callee) {
                return Err(unsupported(
                    primal,
                    format!("a call to the unknown function {callee}"),
                ));
            }
            let g = module.func(callee);
            if g.sig.params.len() != args.len() {
                return Err(unsupported(
                    primal,
                    format!("a call to @{} with a wrong argument count", g.name),
                ));
            }
            let rules = match collapse.rules(inst) {
                Some(r) => *r,
                None => g.meta.rules,
            };
            if !rules.is_empty() {
                let t = rule_target(cx, module, callee, &rules, primal, plan, args, depth, tape)?;
                calls[inst] = Some(t);
                continue;
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
            // A result is differentiated when it is active and something
            // adds to its adjoint (`Plan::is_reached`).
            let differentiated = |r: Value| match primal.dfg.value_type(r) {
                Type::Array => plan.is_shadowed(r),
                _ => plan.is_active(primal, r) && plan.is_reached(r),
            };
            let ret = if results.iter().any(|&r| differentiated(r)) {
                RetActivity::Active
            } else {
                RetActivity::Const
            };
            // The f64 results nobody here differentiates: the callee does
            // not differentiate them either (as inlined code would not).
            let ignored: Vec<usize> = results
                .iter()
                .enumerate()
                .filter(|(_, &r)| {
                    matches!(primal.dfg.value_type(r), Type::F64 | Type::Array)
                        && !differentiated(r)
                })
                .map(|(k, _)| k)
                .collect();
            // The callee's adjoint takes the read-only arrays that the
            // caller's adjoint has (a local or writable array may change
            // before the callee's adjoint runs), and no scalar: inlined, the
            // callee's parameters would be block parameters, which the
            // adjoint pops or recomputes like any value; so the adjoint code,
            // and the order in which an outer reverse pass sums adjoints,
            // do not depend on inlining. In a final derivative, where no
            // outer reverse pass sums anything, it takes the scalars too: the
            // caller recomputes what it can (`x[i - 1]`) where the callee
            // would pop it (docs/ad-reverse.md, "Final derivatives").
            let params = &module.func(callee).sig.params;
            let untaken: Vec<usize> = args
                .iter()
                .zip(params)
                .enumerate()
                .filter(|(_, (&a, p))| {
                    if p.ty.is_scalar() {
                        !plan.args_recomputed
                    } else {
                        !plan.array_available(primal, a)
                    }
                })
                .map(|(k, _)| k)
                .collect();
            let takes: Vec<bool> = params
                .iter()
                .enumerate()
                .map(|(k, p)| plan::adj_takes(p, k, &untaken))
                .collect();
            let mut req = ReverseRequest::new(callee, acts.clone(), ret);
            req.untaken = untaken;
            req.dead = plan.dead_after(inst).to_vec();
            if ret == RetActivity::Active {
                req.ignored = ignored;
            }
            // A callee is at the caller's nesting depth: the limit counts
            // derivatives of derivatives, not calls.
            let (aug, adj) = derive_split(cx, module, &req, depth, Some(tape))?;
            calls[inst] = Some(CallTarget::Split {
                aug,
                adj,
                acts,
                takes,
            });
        }
    }
    Ok(calls)
}

/// The rule target of a call to `owner` (with `rules`).
#[allow(clippy::too_many_arguments)]
fn rule_target(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    owner: FuncId,
    rules: &Rules,
    primal: &Function,
    plan: &plan::Plan,
    args: &[Value],
    depth: usize,
    tape: u8,
) -> Result<CallTarget, AdError> {
    let rule = match rules.reverse {
        Some(r) => {
            rules::check_rule_signature(module, owner, r, Mode::Reverse)?;
            r
        }
        None => recompute_rule(cx, module, owner, depth, tape)?,
    };
    let shadowed: Vec<bool> = args
        .iter()
        .map(|&a| primal.dfg.value_type(a) == Type::Array && plan.is_shadowed(a))
        .collect();
    let mut saver = |ty: Type| -> Result<Option<FuncId>, AdError> {
        if args.iter().any(|&a| primal.dfg.value_type(a) == ty) {
            Ok(Some(rules::save_helper(module, tape, ty)?))
        } else {
            Ok(None)
        }
    };
    let save = saver(Type::Array)?;
    let isave = saver(Type::IArray)?;
    let apply = apply_rule(module, owner, rule, &shadowed, tape)?;
    Ok(CallTarget::Rule {
        apply,
        save,
        isave,
        shadowed,
    })
}

/// `rule.apply.tL.<mask>`: called by the adjoint at the mirror point of a
/// rule call. Parameters: the shadows of the arrays marked in `shadowed`
/// (`mask`: `d` for those, `c` for the other arrays; `s` when there is no
/// array), then one cotangent per f64 result of `owner`. It pops the rule's
/// inputs from tape `L` (scalars; arrays into fresh local copies through
/// `@adze.tape.restore.L`), gives each array without a shadow a zero scratch
/// shadow (so the rule can always write), calls the rule and returns its
/// results (the adjoints of the f64 parameters). The local copies are freed
/// when it returns.
fn apply_rule(
    module: &mut Module,
    owner: FuncId,
    rule: FuncId,
    shadowed: &[bool],
    tape: u8,
) -> Result<FuncId, AdError> {
    let owner_sig = module.func(owner).sig.clone();
    // Per array parameter: is its shadow passed?
    let passed: Vec<bool> = owner_sig
        .params
        .iter()
        .zip(shadowed)
        .filter(|(p, _)| p.ty == Type::Array)
        .map(|(_, &s)| s)
        .collect();
    let key = Derivation {
        from: Some(rule),
        step: Step::ApplyRule {
            tape,
            shadowed: passed.clone(),
        },
    };
    let mut mask: String = passed.iter().map(|&s| if s { 'd' } else { 'c' }).collect();
    if mask.is_empty() {
        mask.push('s');
    }
    let name = format!("{}.apply.t{tape}.{mask}", module.func(rule).name);
    let mut params: Vec<Param> = owner_sig
        .params
        .iter()
        .zip(shadowed)
        .filter(|(_, &s)| s)
        .map(|(p, _)| Param::mutable_array(format!("{}.d", p.name)))
        .collect();
    params.extend(cotangent_params(&owner_sig));
    let results: Vec<Type> = owner_sig
        .params
        .iter()
        .filter(|p| p.ty == Type::F64)
        .map(|_| Type::F64)
        .collect();
    let sig = Signature { params, results };
    if let Some(id) = module.find_derived(&key) {
        if module.func(id).sig != sig {
            return Err(AdError::NameTaken { name });
        }
        return Ok(id);
    }
    let mut restorer = |ty: Type| -> Result<Option<FuncId>, AdError> {
        if owner_sig.params.iter().any(|p| p.ty == ty) {
            Ok(Some(rules::restore_helper(module, tape, ty)?))
        } else {
            Ok(None)
        }
    };
    let restore = restorer(Type::Array)?;
    let irestore = restorer(Type::IArray)?;
    let mut f = Function::new(name.clone(), sig.clone());
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let ps = b.func.params().to_vec();
    let n_sh = shadowed.iter().filter(|&&s| s).count();
    let (given, drets) = ps.split_at(n_sh);
    // Pop the inputs, last pushed first.
    let mut vals: Vec<Option<Value>> = vec![None; owner_sig.params.len()];
    for (k, p) in owner_sig.params.iter().enumerate().rev() {
        vals[k] = Some(match p.ty {
            ty @ (Type::Array | Type::IArray) => {
                let n = b.pop(tape, Type::I64);
                let (c, restore) = if ty == Type::Array {
                    (b.zeros(n, p.name.clone()), restore)
                } else {
                    (b.izeros(n, p.name.clone()), irestore)
                };
                if let Some(restore) = restore {
                    b.call(restore, &[c], &[]);
                }
                c
            }
            ty => b.pop(tape, ty),
        });
    }
    let mut rule_args = Vec::new();
    let mut given = given.iter();
    for (k, p) in owner_sig.params.iter().enumerate() {
        let v = vals[k].ok_or_else(|| AdError::ReverseInternal {
            func: name.clone(),
            reason: "an input was not popped".into(),
        })?;
        rule_args.push(v);
        if p.ty == Type::Array {
            let sh = match (shadowed.get(k).copied().unwrap_or(false), given.next()) {
                (true, Some(&sh)) => sh,
                _ => {
                    let n = b.len(v);
                    b.zeros(n, format!("{}.d", p.name))
                }
            };
            rule_args.push(sh);
        }
    }
    rule_args.extend_from_slice(drets);
    let call = b.call(rule, &rule_args, &sig.results);
    let out = b.func.dfg.inst_results(call).to_vec();
    b.ret(&out);
    module
        .push_derived(f, key)
        .map_err(|_| AdError::NameTaken { name })
}

/// The reverse rule of a function `F` that has rules but no reverse rule
/// (rule identity: the augmented primal must still call `F`):
/// `F.revrule[.tL]`, with the signature of a reverse rule of `F`, runs `F`'s
/// own split derivative on the taped inputs — every f64 parameter `active`,
/// every array `dup` — seeded with the cotangents it is given. This
/// recomputes `F`'s primal once in the adjoint.
fn recompute_rule(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    owner: FuncId,
    depth: usize,
    tape: u8,
) -> Result<FuncId, AdError> {
    let f = module.func(owner);
    let name = if tape == 0 {
        format!("{}.revrule", f.name)
    } else {
        format!("{}.revrule.t{tape}", f.name)
    };
    let sig = adze_ir::verify::rule_signature(&f.sig, Mode::Reverse);
    let key = Derivation {
        from: Some(owner),
        step: Step::MadeRule { tape },
    };
    if let Some(id) = module.find_derived(&key) {
        if module.func(id).sig != sig {
            return Err(AdError::NameTaken { name });
        }
        return Ok(id);
    }
    let owner_sig = f.sig.clone();
    let acts: Vec<ArgActivity> = owner_sig
        .params
        .iter()
        .map(|p| match p.ty {
            Type::F64 => ArgActivity::Active,
            Type::Array => ArgActivity::Dup,
            _ => ArgActivity::Const,
        })
        .collect();
    let ret = if owner_sig.differentiable_results().next().is_some() {
        RetActivity::Active
    } else {
        RetActivity::Const
    };
    let id = module
        .declare_derived(&name, sig.clone(), key)
        .map_err(|_| AdError::NameTaken { name: name.clone() })?;
    let req = ReverseRequest::new(owner, acts, ret);
    let (aug, adj) = derive_split(cx, module, &req, depth, Some(tape))?;
    let mut w = Function::new(name, sig.clone());
    let mut b = FuncBuilder::new(&mut w);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let ps = b.func.params().to_vec();
    let mut primal_args = Vec::new();
    let mut shadows = Vec::new();
    let mut k = 0;
    for p in &owner_sig.params {
        primal_args.push(ps[k]);
        k += 1;
        if p.ty == Type::Array {
            shadows.push(ps[k]);
            k += 1;
        }
    }
    // The copies are `apply`'s locals: nothing writes them between the two
    // calls, so the adjoint takes them, and the scalars (the request has
    // nothing `untaken`; a call and a region of `F` both come here).
    let mut adj_args: Vec<Value> = primal_args
        .iter()
        .zip(&owner_sig.params)
        .enumerate()
        .filter(|(k, (_, p))| plan::adj_takes(p, *k, &req.untaken))
        .map(|(_, (&a, _))| a)
        .collect();
    let split = req.in_context(cx, module);
    adj_args.extend(split.witnessed(&owner_sig).map(|(k, _)| primal_args[k]));
    adj_args.extend(shadows);
    adj_args.extend_from_slice(&ps[k..]);
    b.call(aug, &primal_args, &owner_sig.results);
    let call = b.call(adj, &adj_args, &sig.results);
    let out = b.func.dfg.inst_results(call).to_vec();
    b.ret(&out);
    module.replace(id, w);
    Ok(id)
}
