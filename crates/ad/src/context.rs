//! The AD context: everything the AD passes keep while they work, in one
//! value that is passed down explicitly.
//!
//! [`AdContext`] owns
//!
//! - the **limits** ([`AdLimits`]): how deeply derivatives may nest, how
//!   much code one lowering may create;
//! - the **pass run between nested lowerings** (`--inline late` runs the
//!   inliner there): a `&mut dyn FnMut(&mut Module, &[FuncId])` the caller
//!   lends for as long as the context lives ([`AdContext::with_between`]).
//!   Every function that may lower an inner request takes the context, so
//!   its signature shows that it may run that pass;
//! - the **lowering in progress**: the size budget (what it has created,
//!   for [`AdLimits::max_size`]), the function whose derivatives are being
//!   built (for the error), and which functions have had their requests
//!   lowered;
//! - the **analyses' final answers** (`Cache`): whether a function uses
//!   the tape, activity summaries, usefulness summaries. They are kept for
//!   one lowering only, where the code they were read from cannot change
//!   any more, so that each callee is summarised once per pattern rather
//!   than once per caller (which was quadratic in a chain of calls).
//!   Analyses take only the cache, not the context: they run no pass.
//!
//! # One lowering
//!
//! One lowering is one call of an entry point: [`AdContext::lower_autodiff`],
//! [`AdContext::lower_autodiff_from`], [`AdContext::forward_derivative`]
//! (and [`AdContext::derive_forward`]), [`AdContext::reverse_derivative`]
//! (and [`AdContext::derive_reverse`]), [`AdContext::vjp_derivative`] or
//! [`AdContext::split_derivative`].
//! Entry points called while one is in progress (a derivative requested
//! while a module is lowered) are part of it. When the outermost one ends,
//! its budget and caches are dropped: a context may be used for any number
//! of lowerings, of any modules. ([`AdContext::lower_reverse_autodiff`]
//! is not a lowering: it keeps nothing and has no size limit, as before
//! the context existed.)
//!
//! # The size limit
//!
//! Nested derivatives can double the code at every level (a forward
//! derivative of a forward derivative of .. of a function with `n` results
//! has `2^k·n` results at depth `k`), so the code one lowering creates is
//! limited: [`AdLimits::max_size`] bounds the sum of [`ir_size`]
//! (instructions plus values) over every function created during one
//! lowering, and going beyond it is [`AdError::TooLarge`]. The size is
//! counted whenever a derivative is finished (forward mode), after the
//! inner requests of a function about to be differentiated are lowered
//! (both modes, after the pass run between lowerings), and after each
//! function's requests, so the error comes at most one doubling after the
//! limit.
//!
//! ```
//! use adze_ad::{AdContext, AdLimits};
//! use adze_ir::{FuncId, Module};
//!
//! let src = "fn dd(x: f64) -> (f64, f64) { autodiff(forward, d, dual, dual(x, 1.0)) }
//!            fn d(x: f64) -> f64 { autodiff(reverse, sq, active, active(x)) }
//!            fn sq(x: f64) -> f64 { x * x }";
//! let mut module = adze_lang::compile("d.adz", src).unwrap();
//! // Called on the functions each inner lowering creates: `sq`'s reverse
//! // derivative, made while `d` is differentiated for `dd`, before `d` is
//! // analysed (the pipeline's `--inline late` runs the inliner there).
//! let mut created = Vec::new();
//! let mut hook = |_: &mut Module, new: &[FuncId]| created.extend_from_slice(new);
//! let mut cx = AdContext::new(AdLimits::default()).with_between(&mut hook);
//! cx.lower_autodiff(&mut module).unwrap();
//! drop(cx);
//! assert!(!created.is_empty());
//! ```

use crate::{activity, reverse, AdError, AdLimits, ForwardRequest, ReverseRequest};
use adze_ir::{ArgActivity, FuncId, Function, Module, RetActivity};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::HashMap;

/// The size of a function for [`AdLimits::max_size`]: its instructions plus
/// its values (instruction results, block parameters). Counting values
/// catches code whose instruction count grows slowly while its calls and
/// signatures double.
pub fn ir_size(func: &Function) -> usize {
    func.dfg.num_insts() + func.dfg.num_values()
}

/// The pass run on derivative IR between nested lowerings: on the functions
/// an inner request created (the second argument), before an outer pass
/// differentiates the code that calls them.
pub type BetweenHook<'h> = &'h mut dyn FnMut(&mut Module, &[FuncId]);

/// The state of the AD passes: limits, the pass run between nested
/// lowerings, the lowering in progress and the analyses' caches (see the
/// module doc). `AdContext::default()` has the default limits and no pass
/// between lowerings.
pub struct AdContext<'h> {
    limits: AdLimits,
    between: Option<BetweenHook<'h>>,
    lowering: Lowering,
    /// What the analyses may keep for the lowering in progress.
    pub(crate) cache: Cache,
    /// How many derivations are lowering the requests inside their primal:
    /// what they lower is differentiated again, so it is checkpointed only
    /// when they are all forward derivations ([`AdContext::checkpoint_scope`]).
    pub(crate) under_derivation: usize,
    /// How many of those are reverse derivations.
    pub(crate) under_reverse: usize,
    /// No derivative built with this context is differentiated again by
    /// reverse mode ([`AdContext::with_final_derivatives`]).
    final_derivatives: bool,
}

impl Default for AdContext<'_> {
    fn default() -> Self {
        AdContext::new(AdLimits::default())
    }
}

impl std::fmt::Debug for AdContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdContext")
            .field("limits", &self.limits)
            .field("between", &self.between.is_some())
            .field("open", &self.lowering.open)
            .finish_non_exhaustive()
    }
}

/// What the lowering in progress has done: the size budget and the walk of
/// [`crate::lower::lower_reachable`].
#[derive(Default)]
struct Lowering {
    /// Open entry points: nested ones share the outermost one's lowering.
    open: usize,
    /// The size counted so far for each function (by `FuncId` number).
    sizes: SecondaryMap<FuncId, usize>,
    /// The sum of `sizes`.
    total: usize,
    /// The function whose derivatives are being built, for the error.
    root: Option<String>,
    /// Functions whose requests [`crate::lower::lower_reachable`] has
    /// lowered (or found none) in this lowering: each is visited once, so
    /// that the walk stays linear in the module over all the derivatives
    /// one lowering builds.
    lowered: EntitySet<FuncId>,
}

/// Answers of the analyses that cannot change any more during the lowering
/// in progress; empty, and not filled, outside a lowering (every question
/// is then answered afresh).
#[derive(Default)]
pub(crate) struct Cache {
    /// Is a lowering in progress?
    active: bool,
    /// [`Cache::uses_tape`] answers, by `FuncId`.
    tape_use: SecondaryMap<FuncId, Option<bool>>,
    /// Final activity summaries (`activity::summarize`): each function is
    /// summarised once per pattern of argument activities, not once per
    /// function that calls it.
    pub activity: HashMap<activity::SummaryKey, activity::Summary>,
    /// Final usefulness summaries (`reverse::plan::useful::UsefulSummaries`), once
    /// per callee and pattern.
    pub useful: HashMap<reverse::plan::UsefulKey, Option<reverse::plan::ParamUse>>,
}

impl Cache {
    /// Is a lowering in progress (so that answers may be kept)?
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Does `func`, or anything it reaches, use the tape? Answered once per
    /// lowering where the answer is final: `true` always is (lowering and
    /// inlining never remove a `push`), `false` when nothing reached is a
    /// declaration (a derivative being built) or holds a request still to
    /// be lowered. Outside a lowering, computed every time.
    pub fn uses_tape(&mut self, module: &Module, func: FuncId) -> bool {
        if let Some(known) = self.tape_use[func] {
            return known;
        }
        if !module.is_valid(func) {
            return false;
        }
        let known = |f: FuncId| self.tape_use[f];
        let (uses, answers) = crate::lower::tape_use_closure(module, func, known);
        if self.active {
            for (f, (uses, settled)) in answers {
                if uses || settled {
                    self.tape_use[f] = Some(uses);
                }
            }
        }
        uses
    }
}

impl<'h> AdContext<'h> {
    /// A context with these limits and no pass between lowerings.
    pub fn new(limits: AdLimits) -> Self {
        AdContext {
            limits,
            between: None,
            lowering: Lowering::default(),
            cache: Cache::default(),
            under_derivation: 0,
            under_reverse: 0,
            final_derivatives: false,
        }
    }

    /// The same context, with `hook` run on the functions each inner
    /// lowering creates, before an outer pass differentiates the code that
    /// calls them (see [`BetweenHook`]).
    pub fn with_between(mut self, hook: BetweenHook<'h>) -> Self {
        self.between = Some(hook);
        self
    }

    /// The same context, promising that no reverse derivative will be taken
    /// of the derivatives it builds (nor of code they are inlined into):
    /// reverse derivatives may then recompute a value instead of taping it
    /// where a reverse pass over them would sum adjoints in another order
    /// if they did (docs/ad-reverse.md, "Final derivatives"). Their values,
    /// and those of forward derivatives of them, keep every bit. What
    /// needs the promise can be asked with
    /// [`crate::reverse_over_derivatives`]; a reverse derivative of a
    /// function that calls one built under it is an error.
    pub fn with_final_derivatives(mut self) -> Self {
        self.final_derivatives = true;
        self
    }

    /// The same context, promising that what it lowers is the primal of
    /// a derivative in mode `mode` built next (`Session::derive` lowers the
    /// requests its function reaches before differentiating it): they are
    /// lowered as that derivation lowers the requests inside its primal
    /// itself ([`AdContext::checkpoint_scope`]): checkpointed for forward
    /// mode (`.ckptf`) under a forward derivative, taped under a reverse
    /// one (`#[checkpoint]` hints included). Lowered `.ckpt` and inlined
    /// late before the derivation, an augmented primal could no longer be
    /// replaced by its twin while its adjoint, still called, was: the two
    /// halves' tapes out of step (fuzzer seed 90768; the reverse case with
    /// a hint, found in the review of session 25).
    pub fn under_derivative(mut self, mode: adze_ir::Mode) -> Self {
        self.under_derivation += 1;
        if mode == adze_ir::Mode::Reverse {
            self.under_reverse += 1;
        }
        self
    }

    /// See [`AdContext::with_final_derivatives`].
    pub fn final_derivatives(&self) -> bool {
        self.final_derivatives
    }

    /// The limits the passes are held to.
    pub fn limits(&self) -> AdLimits {
        self.limits
    }

    /// Where reverse derivatives built now may checkpoint their loops:
    /// `Some(false)` when no derivation is lowering the requests inside
    /// its primal; `Some(true)` when only forward derivations are (what
    /// they lower is differentiated by forward mode: the runners must then
    /// know the activity the augmented primal's values have,
    /// `checkpoint::choose`); `None` when a reverse derivation is: reverse
    /// mode over a cut is not exact (the adjoints of the records a cut
    /// dropped would flow through the runner: another order of sums).
    pub(crate) fn checkpoint_scope(&self) -> Option<bool> {
        match (self.under_derivation, self.under_reverse) {
            (0, _) => Some(false),
            (_, 0) => Some(true),
            _ => None,
        }
    }

    /// Replaces every `autodiff` instruction of the module by a call to its
    /// derivative (see [`crate::lower`]).
    pub fn lower_autodiff(&mut self, module: &mut Module) -> Result<(), AdError> {
        crate::lower::lower_module(self, module)
    }

    /// Like [`AdContext::lower_autodiff`], but only for `root` and what it
    /// reaches (calls, rules, rule regions and their callees: what the JIT
    /// compiles for it): a request elsewhere in the module that cannot be
    /// lowered does not stop `root` from running.
    pub fn lower_autodiff_from(
        &mut self,
        module: &mut Module,
        root: FuncId,
    ) -> Result<(), AdError> {
        crate::lower::lower_from(self, module, root)
    }

    /// Builds (or finds) the forward derivative for `request` (see
    /// [`crate::forward_derivative`]).
    pub fn forward_derivative(
        &mut self,
        module: &mut Module,
        request: &ForwardRequest,
    ) -> Result<FuncId, AdError> {
        crate::forward::derive(
            self,
            module,
            request,
            &mut crate::forward::Building::default(),
        )
    }

    /// The forward derivative of the function called `name` (see
    /// [`crate::derive_forward`]).
    pub fn derive_forward(
        &mut self,
        module: &mut Module,
        name: &str,
        args: &[ArgActivity],
        ret: RetActivity,
        width: usize,
    ) -> Result<FuncId, AdError> {
        let func = module
            .get(name)
            .ok_or_else(|| AdError::NoSuchFunction(name.to_string()))?;
        self.forward_derivative(
            module,
            &ForwardRequest {
                width,
                ..ForwardRequest::new(func, args.to_vec(), ret)
            },
        )
    }

    /// Builds (or finds) the reverse derivative for `request` (see
    /// [`crate::reverse_derivative`]).
    pub fn reverse_derivative(
        &mut self,
        module: &mut Module,
        request: &ReverseRequest,
    ) -> Result<FuncId, AdError> {
        reverse::reverse_derivative_in(self, module, request)
    }

    /// The reverse derivative of the function called `name` (see
    /// [`crate::derive_reverse`]).
    pub fn derive_reverse(
        &mut self,
        module: &mut Module,
        name: &str,
        args: &[ArgActivity],
        ret: RetActivity,
    ) -> Result<FuncId, AdError> {
        let func = module
            .get(name)
            .ok_or_else(|| AdError::NoSuchFunction(name.to_string()))?;
        self.reverse_derivative(module, &ReverseRequest::new(func, args.to_vec(), ret))
    }

    /// Builds (or finds) the value-and-VJP function `f.vjp.<acts>` for
    /// `request` (see [`crate::vjp_derivative`]).
    pub fn vjp_derivative(
        &mut self,
        module: &mut Module,
        request: &ReverseRequest,
    ) -> Result<FuncId, AdError> {
        reverse::vjp_derivative_in(self, module, request)
    }

    /// The split pair `(f.aug.<acts>, f.adj.<acts>)` for `request` (see
    /// [`crate::split_derivative`]).
    pub fn split_derivative(
        &mut self,
        module: &mut Module,
        request: &ReverseRequest,
    ) -> Result<(FuncId, FuncId), AdError> {
        reverse::split_derivative_in(self, module, request)
    }

    /// Replaces every `autodiff reverse` instruction of the module by a
    /// call to its derivative (see [`crate::lower_reverse_autodiff`]).
    pub fn lower_reverse_autodiff(&mut self, module: &mut Module) -> Result<(), AdError> {
        reverse::lower_reverse_autodiff_in(self, module)
    }

    /// Runs `f` as one lowering (see the module doc), or as part of the
    /// lowering already in progress. `root` names the function whose
    /// derivatives are built, for the error.
    pub(crate) fn session<R>(&mut self, root: Option<&str>, f: impl FnOnce(&mut Self) -> R) -> R {
        self.lowering.open += 1;
        if self.lowering.open == 1 {
            self.lowering = Lowering {
                open: 1,
                root: root.map(str::to_string),
                ..Lowering::default()
            };
            self.cache = Cache {
                active: true,
                ..Cache::default()
            };
        }
        let out = f(self);
        self.lowering.open -= 1;
        if self.lowering.open == 0 {
            self.lowering = Lowering::default();
            self.cache = Cache::default();
        }
        out
    }

    /// Is a lowering in progress?
    fn in_lowering(&self) -> bool {
        self.lowering.open > 0
    }

    /// Names the function whose requests the lowering is lowering now.
    pub(crate) fn set_root(&mut self, name: &str) {
        if self.in_lowering() {
            self.lowering.root = Some(name.to_string());
        }
    }

    /// The function named in a [`AdError::TooLarge`] now.
    pub(crate) fn root(&self) -> Option<String> {
        self.lowering.root.clone()
    }

    /// Puts back a root saved with [`AdContext::root`].
    pub(crate) fn restore_root(&mut self, root: Option<String>) {
        self.lowering.root = root;
    }

    /// Marks `id` as visited by [`crate::lower::lower_reachable`]; true the
    /// first time in this lowering, and always outside a lowering (every
    /// call then walks again).
    pub(crate) fn first_visit(&mut self, id: FuncId) -> bool {
        if !self.in_lowering() {
            return true;
        }
        self.lowering.lowered.insert(id)
    }

    /// Counts the current size of `ids` (functions the AD passes created)
    /// in the lowering in progress; a function counted before is counted
    /// again at its new size. Outside a lowering, nothing is counted.
    pub(crate) fn account(&mut self, module: &Module, ids: impl IntoIterator<Item = FuncId>) {
        if !self.in_lowering() {
            return;
        }
        let b = &mut self.lowering;
        for id in ids {
            if !module.is_valid(id) {
                continue;
            }
            let size = ir_size(module.func(id));
            b.total = b.total - b.sizes[id] + size;
            b.sizes[id] = size;
            if b.root.is_none() {
                b.root = Some(module.func(module.base_function(id)).name.clone());
            }
        }
    }

    /// [`AdContext::account`] for the functions created since `mark` (a
    /// former `module.len()`).
    pub(crate) fn account_since(&mut self, module: &Module, mark: usize) {
        let created: Vec<FuncId> = module.ids().skip(mark).collect();
        self.account(module, created);
    }

    /// [`AdError::TooLarge`] when the lowering in progress has created more
    /// than [`AdLimits::max_size`].
    pub(crate) fn check_size(&self) -> Result<(), AdError> {
        let limit = self.limits.max_size;
        if self.in_lowering() && self.lowering.total > limit {
            Err(AdError::TooLarge {
                func: self.lowering.root.clone().unwrap_or_default(),
                limit,
            })
        } else {
            Ok(())
        }
    }

    /// Runs the pass between lowerings, if any, on the functions created
    /// since `mark` (a former `module.len()`), then counts them for the
    /// size limit (checked by the caller with [`AdContext::check_size`], or
    /// by the next check of the lowering).
    pub(crate) fn between(&mut self, module: &mut Module, mark: usize) {
        let created: Vec<FuncId> = module.ids().skip(mark).collect();
        if created.is_empty() {
            return;
        }
        if let Some(hook) = self.between.as_mut() {
            hook(module, &created);
        }
        self.account(module, created);
    }
}
