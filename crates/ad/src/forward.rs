//! Forward mode: the tangent transformation, IR to IR.
//!
//! [`forward_derivative`] turns a function and a [`ForwardRequest`] (one
//! activity per parameter, the result's activity, a vector width) into a new
//! function of the module that computes the primal and, alongside every
//! active value, its tangent. For `dual x`:
//!
//! ```text
//! function @f(x: f64) -> f64 {          function @f.fwd.dual(x: f64, x.t: f64) -> (f64, f64) {
//! block0(v0: f64):                      block0(v0: f64, v3: f64):
//!     v1 = sin v0                           v1 = sin v0
//!     v2 = fmul v1, v0                      v4 = cos v0
//!     return v2                             v5 = fmul v4, v3
//! }                                         v2 = fmul v1, v0
//!                                           v6 = fmul v0, v5
//!                                           v7 = fmul v1, v3
//!                                           v8 = fadd v6, v7
//!                                           return v2, v8
//!                                       }
//! ```
//!
//! - **Numbering.** The derivative keeps every primal value and block number
//!   (`v1` is the same value in both), so the primal reads unchanged; the
//!   tangents are numbered after the last primal value, and each tangent
//!   instruction sits right after the primal instruction it differentiates.
//!   The pass keeps the map from a primal value to its tangents (one per
//!   lane) in a side table indexed by the value (`TangentMap`).
//! - **Signature** (the value layout of an `autodiff` instruction, so that
//!   lowering one is a plain call): per parameter, `const` → `p`; `dual` →
//!   `p, p.t` (vector mode: `p.t1 .. p.tN`); `dup` → `a, a.d` (`a.d1 ..`),
//!   the shadow `mut` iff the array is. Results: `ret dual` → the primal
//!   results, then each result's N tangents (0 for an i64 or bool result:
//!   at width 1 exactly [`adze_ir::Module::autodiff_result_types`]);
//!   `ret const` → none.
//! - **Activity** ([`crate::activity`]): inactive values get no tangent code;
//!   integer and boolean code is copied once and shared by all lanes.
//! - **Local derivatives** come from the one table, [`crate::partials`].
//! - **Control flow.** Every block keeps its parameters and gets N tangent
//!   parameters per active f64 parameter; branches pass the tangents of their
//!   arguments (0.0 for an inactive argument). Loops, early returns and any
//!   CFG need nothing more.
//! - **Arrays.** An active array has a shadow per lane: the `dup` parameter's,
//!   or a `zeros` of the same length named `t.d` for an active local array
//!   `t` (and for a `const` `mut` parameter that receives active values).
//!   `load` also loads the shadow, `store` and `fill` also write it (0.0 when
//!   the stored value is inactive), `len` is unchanged.
//! - **Tape.** When an active value is pushed, every f64 `push` also pushes
//!   its N tangents after the value and every f64 `pop` first pops the N
//!   tangents (last in, first out), so a function's tape stays balanced.
//! - **Calls** with an active argument call the callee's forward derivative
//!   for the induced activities (built on demand through the same cache), or
//!   the callee's forward rule when it has one; the call's results keep their
//!   numbers. A recursive call becomes a call to the derivative being built,
//!   which is declared before its body is.
//! - **`autodiff forward`** requests in the body are first replaced by calls
//!   to their derivatives, so a derivative of a function that takes
//!   derivatives itself is a derivative of a call (forward over forward, to
//!   any depth).
//! - **Vector mode** (width N): the primal is computed once, partials once,
//!   and each lane's tangent code is exactly a width-1 sweep's, so the results
//!   equal N single sweeps bit for bit.
//! - **Cache.** The module records what each derivative is made from
//!   ([`ForwardRequest::derivation`]: the function, the activities, the
//!   width), and a request finds its derivative by that record, so the
//!   cache lives in the module. The name ([`ForwardRequest::derivative_name`],
//!   e.g. `f.fwd.dual_const_dup` or `f.fwd.dual.x4`) is for display.

use crate::activity::{self, Activity};
use crate::partials::{self, Local};
use crate::{AdContext, AdError};
use adze_ir::{
    ArgActivity, Block, Derivation, FuncBuilder, FuncId, Function, Inst, InstData, Mode, Module,
    Opcode, Param, Region, RetActivity, Rules, Signature, Step, Type, Value,
};
use cranelift_entity::{EntitySet, SecondaryMap};

/// How deeply derivative requests may nest while one is being built, by
/// default (see [`crate::AdLimits`]).
pub const MAX_NESTING: usize = 64;

/// A forward-mode derivative request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ForwardRequest {
    pub func: FuncId,
    /// One per parameter: `Const`, `Dual` (f64) or `Dup` (array).
    pub args: Vec<ArgActivity>,
    /// `Dual` (primal results and their tangents) or `Const` (nothing).
    pub ret: RetActivity,
    /// Number of tangents per active value (vector mode), at least 1.
    pub width: usize,
    /// The array results (by number, increasing) that the caller treats
    /// as active although nothing active reaches them in the function (it
    /// stores active values into them after the call): the derivative's
    /// activity analysis starts with them active, so the function's own
    /// loads from them get tangents, as they do in the caller once inlined.
    pub seeded: Vec<usize>,
}

impl ForwardRequest {
    /// A width-1 request.
    pub fn new(func: FuncId, args: Vec<ArgActivity>, ret: RetActivity) -> ForwardRequest {
        ForwardRequest {
            func,
            args,
            ret,
            width: 1,
            seeded: Vec::new(),
        }
    }

    /// What the derivative is made from, as the module records it: the key
    /// a request finds its derivative by ([`Module::find_derived`]).
    pub fn derivation(&self) -> Derivation {
        Derivation {
            from: Some(self.func),
            step: Step::Forward {
                args: self.args.clone(),
                ret: self.ret,
                width: self.width,
                seeded: self.seeded.clone(),
            },
        }
    }

    /// The deterministic name of the derivative, for display: `f.fwd.`,
    /// then the parameter activities joined by `_` (`dual_const_dup`;
    /// `noargs` for a function without parameters), then `.noret` for `ret
    /// const`, then `.xN` for width N > 1. (A rule named `f.fwd` never
    /// collides.)
    pub fn derivative_name(&self, module: &Module) -> String {
        let mut name = format!("{}.fwd.", module.func(self.func).name);
        if self.args.is_empty() {
            name.push_str("noargs");
        }
        let acts: Vec<&str> = self.args.iter().map(|a| a.name()).collect();
        name.push_str(&acts.join("_"));
        if self.ret == RetActivity::Const {
            name.push_str(".noret");
        }
        if !self.seeded.is_empty() {
            let ks: Vec<String> = self.seeded.iter().map(|k| k.to_string()).collect();
            name.push_str(&format!(".ar{}", ks.join("_")));
        }
        if self.width > 1 {
            name.push_str(&format!(".x{}", self.width));
        }
        name
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
        if self.width == 0 {
            return Err(bad("the width must be at least 1".into()));
        }
        if !matches!(self.ret, RetActivity::Dual | RetActivity::Const) {
            return Err(bad(format!(
                "forward mode takes `dual` or `const` for the result, not `{}`",
                self.ret.name()
            )));
        }
        crate::check_activities(&f.sig, &self.args, adze_ir::Mode::Forward).map_err(bad)
    }

    /// The signature of the derivative (see the module doc).
    pub fn derivative_signature(&self, module: &Module) -> Signature {
        let f = module.func(self.func);
        let mut params = Vec::new();
        for (p, a) in f.sig.params.iter().zip(&self.args) {
            params.push(p.clone());
            let (suffix, ty, mutable) = match a {
                ArgActivity::Dual => ("t", Type::F64, false),
                ArgActivity::Dup => ("d", Type::Array, p.mutable),
                _ => continue,
            };
            for lane in 0..self.width {
                params.push(Param {
                    name: lane_name(&p.name, suffix, lane, self.width),
                    ty,
                    mutable,
                });
            }
        }
        let mut results = Vec::new();
        if self.ret == RetActivity::Dual {
            results.extend(f.sig.results.iter().copied());
            for (_, ty) in f.sig.differentiable_results() {
                results.extend(std::iter::repeat_n(ty, self.width));
            }
        }
        Signature { params, results }
    }
}

/// `x.t` at width 1, `x.t1 .. x.tN` in vector mode.
fn lane_name(base: &str, suffix: &str, lane: usize, width: usize) -> String {
    if width == 1 {
        format!("{base}.{suffix}")
    } else {
        format!("{base}.{suffix}{}", lane + 1)
    }
}

/// Primal value → its tangents, one per lane (for an array: its shadows).
/// Values without an entry (an empty list) have tangent zero.
type TangentMap = SecondaryMap<Value, Vec<Value>>;

/// The tangents of `v`, one per lane, if it has any.
fn tangents(tan: &TangentMap, v: Value) -> Option<&[Value]> {
    Some(tan[v].as_slice()).filter(|l| !l.is_empty())
}

/// Builds (or finds) the forward derivative for `request` and returns its id.
///
/// The derivative is created once per distinct request and found again by
/// the request ([`ForwardRequest::derivation`]). A derivative is declared
/// before its body is built (so that a recursive call can call it); when
/// building fails, the declaration stays in the module without a body, and
/// a later request for it builds it again.
///
/// With the default [`AdContext`]: see [`AdContext::forward_derivative`]
/// for limits and a pass between nested lowerings.
pub fn forward_derivative(
    module: &mut Module,
    request: &ForwardRequest,
) -> Result<FuncId, AdError> {
    AdContext::default().forward_derivative(module, request)
}

/// The forward derivatives being built (outermost first: a request for one
/// of them is a recursive call), and how deeply the one being built now is
/// nested in derivatives of derivatives (requests inside a function being
/// differentiated; calls do not count).
#[derive(Default)]
pub(crate) struct Building {
    pub stack: Vec<FuncId>,
    pub nesting: usize,
}

impl Building {
    /// At nesting depth `nesting` (a reverse pass's depth).
    pub fn at(nesting: usize) -> Building {
        Building {
            stack: Vec::new(),
            nesting,
        }
    }
}

/// [`forward_derivative`], with the derivatives being built (outermost
/// first): a request for one of them is a recursive call. Part of the
/// lowering in progress for the size limit, or a lowering of its own
/// (see [`crate::context`]).
pub(crate) fn derive(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    req: &ForwardRequest,
    building: &mut Building,
) -> Result<FuncId, AdError> {
    let root = module
        .is_valid(req.func)
        .then(|| module.func(req.func).name.clone());
    cx.session(root.as_deref(), |cx| derive_in(cx, module, req, building))
}

fn derive_in(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    req: &ForwardRequest,
    building: &mut Building,
) -> Result<FuncId, AdError> {
    req.validate(module)?;
    let name = req.derivative_name(module);
    let sig = req.derivative_signature(module);
    let key = req.derivation();
    let existing = module.find_derived(&key);
    if let Some(id) = existing {
        if module.func(id).sig != sig {
            return Err(AdError::NameTaken { name });
        }
        if !module.func(id).is_declaration() || building.stack.contains(&id) {
            return Ok(id);
        }
    }
    let primal = module.func(req.func);
    if primal.is_declaration() {
        return Err(AdError::NoBody {
            func: primal.name.clone(),
        });
    }
    let limit = cx.limits().max_nesting;
    if building.nesting >= limit {
        return Err(AdError::TooDeep {
            func: primal.name.clone(),
            limit,
        });
    }
    // A request on a function with a forward rule applies the rule.
    let mut primal = if primal.meta.rules.forward.is_some() {
        crate::rules::call_body(module, req.func)
    } else {
        primal.clone()
    };
    let id = match existing {
        Some(id) => id,
        None => module
            .declare_derived(&name, sig.clone(), key)
            .map_err(|_| AdError::NameTaken { name: name.clone() })?,
    };
    building.stack.push(id);
    let built = build(
        cx,
        module,
        &mut primal,
        req,
        building,
        Function::new(name, sig),
    );
    building.stack.pop();
    let mut built = built?;
    // A forward derivative of a checkpointed derivative's half or runner is
    // kept as a call too (`reverse::derive_split`).
    if module.derivation(req.func).is_some()
        && module.func(req.func).meta.inline == adze_ir::InlineHint::Never
    {
        built.meta.inline = adze_ir::InlineHint::Never;
    }
    crate::lower::check_shadows(&mut built, &req.args, req.width);
    module.replace(id, built);
    cx.account(module, [id]);
    cx.check_size()?;
    Ok(id)
}

/// Lowers the requests inside `primal` (innermost first) and what it
/// reaches; calls to checkpointed derivatives become calls to the twins
/// forward mode differentiates exactly (`reverse::untwin_checkpoints`).
fn lower_inside(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &mut Function,
    building: &mut Building,
    mark: usize,
) -> Result<(), AdError> {
    // Requests inside the function are derivatives of derivatives: one
    // level deeper (calls are not; see `AdLimits::max_nesting`).
    crate::reverse::lower_reverse_requests(cx, module, primal, building.nesting + 1)?;
    building.nesting += 1;
    let lowered = lower_forward_requests(cx, module, primal, building);
    building.nesting -= 1;
    lowered?;
    cx.between(module, mark);
    crate::lower::lower_reachable(cx, module, primal)?;
    crate::reverse::untwin_checkpoints(cx, module, primal, building.nesting)
}

fn build(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    primal: &mut Function,
    req: &ForwardRequest,
    building: &mut Building,
    out: Function,
) -> Result<Function, AdError> {
    // Innermost first: the requests inside the function, of either mode,
    // become calls before it is differentiated (forward over reverse).
    let mark = module.len();
    // What is lowered here is differentiated again, by forward mode: its
    // reverse derivatives are checkpointed for it (`.ckptf`, see
    // `AdContext::checkpoint_scope`), and calls to other checkpointed
    // derivatives call their twins (`untwin_checkpoints`).
    cx.under_derivation += 1;
    let lowered = lower_inside(cx, module, primal, building, mark);
    cx.under_derivation -= 1;
    lowered?;
    cx.check_size()?;
    // Regions with a forward rule become calls to the rule, as the calls
    // they stand for do.
    let collapse =
        crate::regions::collapse(primal, |rd| rd.rules.forward.is_some()).map_err(|what| {
            AdError::Unsupported {
                func: primal.name.clone(),
                what,
            }
        })?;
    let region_rules = collapse
        .regions
        .iter()
        .map(|c| (c.call, collapse.orig.regions[c.region].rules))
        .collect();
    // A checkpoint runner has the activity of the augmented primal it
    // recomputes (`reverse::checkpoint::runner_activity`).
    let fixed = crate::reverse::runner_activity(cx, module, req.func, &req.args, building.nesting)?;
    let act = match fixed {
        Some(fixed) => activity::analyze_fixed(&mut cx.cache, module, primal, &req.args, &fixed),
        None => activity::analyze_cached(&mut cx.cache, module, primal, &req.args, &req.seeded),
    };
    let mut t = Transform {
        cx,
        module,
        primal,
        act: &act,
        req,
        building,
        out,
        tan: TangentMap::new(),
        consts: Vec::new(),
        region_rules,
        leaving_opaque: EntitySet::new(),
        used: None,
    };
    t.run()?;
    let mut out = t.out;
    if crate::reverse::counterpart_chain(t.module, req.func) {
        out.tangents = t
            .tan
            .iter()
            .filter(|(_, lanes)| !lanes.is_empty())
            .map(|(v, lanes)| (v, lanes.clone()))
            .collect();
    }
    Ok(out)
}

/// Replaces the `autodiff forward` instructions of `func` (not yet in the
/// module, or a copy) by calls to their derivatives.
pub(crate) fn lower_forward_requests(
    cx: &mut AdContext<'_>,
    module: &mut Module,
    func: &mut Function,
    building: &mut Building,
) -> Result<(), AdError> {
    let requests: Vec<(Inst, ForwardRequest, Vec<Value>)> = func
        .layout
        .insts()
        .filter_map(|(_, inst)| match func.dfg.inst(inst) {
            InstData::Autodiff { spec, args } if spec.mode == Mode::Forward => Some((
                inst,
                ForwardRequest {
                    width: spec.width,
                    ..ForwardRequest::new(spec.func, spec.args.clone(), spec.ret)
                },
                args.clone(),
            )),
            _ => None,
        })
        .collect();
    for (inst, req, args) in requests {
        crate::lower::check_not_self(module, func, req.func)?;
        let d = derive(cx, module, &req, building)?;
        crate::lower::replace_request(module, func, inst, d, args)?;
    }
    Ok(())
}

struct Transform<'a, 'h> {
    /// The context: building a callee's derivative may lower requests and
    /// run the pass between lowerings.
    cx: &'a mut AdContext<'h>,
    module: &'a mut Module,
    primal: &'a Function,
    act: &'a Activity,
    req: &'a ForwardRequest,
    building: &'a mut Building,
    out: Function,
    tan: TangentMap,
    /// Zero constants of each type, placed at the top of the entry block.
    consts: Vec<(Type, Value)>,
    /// The calls that stand for collapsed rule regions, with the regions'
    /// rules.
    region_rules: Vec<(Inst, Rules)>,
    /// Per block: is it inside an applied region without forward rule
    /// (opaque)? An edge from such a block to one outside the region is an
    /// exit to the region's continuation, whose results' tangents come from
    /// the call placed before the region, the same on every exit.
    leaving_opaque: EntitySet<Block>,
    /// The primal's values that some instruction uses (made on first need).
    used: Option<EntitySet<Value>>,
}

impl Transform<'_, '_> {
    fn width(&self) -> usize {
        self.req.width
    }

    fn unsupported(&self, what: String) -> AdError {
        AdError::Unsupported {
            func: self.primal.name.clone(),
            what,
        }
    }

    fn run(&mut self) -> Result<(), AdError> {
        let p = self.primal;
        // Same value and block numbers as the primal.
        for i in 0..p.dfg.num_values() {
            let ty = p.dfg.value_type(Value::from_u32(i as u32));
            self.out.dfg.make_detached_value(ty);
        }
        for _ in 0..p.dfg.num_blocks() {
            self.out.dfg.make_block();
        }
        for &block in p.layout.blocks() {
            self.out.layout.append_block(block);
        }
        self.out.regions = p.regions.clone();
        // Provenance of inlined code: same block numbers, so it carries over
        // (without the blocks of collapsed regions, which are not laid out).
        self.out.inlined = p.inlined.clone();
        for d in self.out.inlined.values_mut() {
            d.blocks.retain(|&b| p.layout.is_block_inserted(b));
        }
        let Some(entry) = p.entry_block() else {
            return Err(AdError::NoBody {
                func: p.name.clone(),
            });
        };
        // Parameters: the entry's in the signature's layout, the other
        // blocks' followed by the tangents of their active f64 parameters.
        for &block in p.layout.blocks() {
            let params = p.dfg.block_params(block);
            let mut tangent_params = Vec::new();
            for (num, &v) in params.iter().enumerate() {
                let ty = p.dfg.value_type(v);
                self.out.dfg.attach_block_param(block, v, ty);
                let lanes_of = |t: &mut Transform, ty| {
                    (0..t.width())
                        .map(|_| t.out.dfg.append_block_param(block, ty))
                        .collect::<Vec<_>>()
                };
                if block == entry {
                    match self.req.args.get(num) {
                        Some(ArgActivity::Dual) | Some(ArgActivity::Dup) => {
                            let lanes = lanes_of(self, ty);
                            self.tan[v] = lanes;
                        }
                        _ => {}
                    }
                } else if ty == Type::F64 && self.act.is_active(v) {
                    tangent_params.push(v);
                }
            }
            for v in tangent_params {
                let lanes = (0..self.width())
                    .map(|_| self.out.dfg.append_block_param(block, Type::F64))
                    .collect();
                self.tan[v] = lanes;
            }
        }
        // Active arrays among the `const` parameters get local shadows.
        for (num, &v) in p.params().iter().enumerate() {
            let is_const = self.req.args.get(num) == Some(&ArgActivity::Const);
            if is_const && p.dfg.value_type(v) == Type::Array && self.act.is_active(v) {
                let name = p.array_name(v);
                let width = self.width();
                let mut b = self.builder(entry);
                let n = b.len(v);
                let lanes = (0..width)
                    .map(|lane| b.zeros(n, lane_name(&name, "d", lane, width)))
                    .collect();
                self.tan[v] = lanes;
            }
        }
        // Blocks in reverse postorder (definitions before uses), then any
        // unreachable ones.
        let mut order = adze_ir::cfg::reverse_postorder(p, entry);
        let mut seen = EntitySet::with_capacity(p.dfg.num_blocks());
        for &b in &order {
            seen.insert(b);
        }
        order.extend(
            p.layout
                .blocks()
                .iter()
                .copied()
                .filter(|&b| !seen.contains(b)),
        );
        let (rule_regions, opaque) = activity::forward_rule_regions(p);
        self.leaving_opaque = opaque.clone();
        // Each applied region's derivative call goes at the end of the one
        // block that enters it, outside the region.
        let mut at_pred: Vec<(Block, Region)> = Vec::new();
        for &r in &rule_regions {
            let pred = crate::rules::region_pred(p, r).map_err(|e| self.unsupported(e))?;
            at_pred.push((pred, r));
        }
        for block in order {
            let is_opaque = opaque.contains(block);
            for &inst in p.layout.block_insts(block) {
                // Everything made for `inst` — its copy, its tangent code,
                // the call of a rule region it enters — has its location.
                let mark = self.out.dfg.inst_mark();
                let data = p.dfg.inst(inst);
                if data.opcode().is_terminator() {
                    for &(pred, r) in &at_pred {
                        if pred == block {
                            self.rule_region(block, r)?;
                        }
                    }
                }
                if is_opaque && !data.opcode().is_terminator() {
                    self.copy(block, inst, data.clone(), &[]);
                } else {
                    self.inst(block, inst)?;
                }
                self.out.dfg.set_srclocs_since(mark, p.dfg.srcloc(inst));
            }
        }
        Ok(())
    }

    /// An applied rule region (see [`crate::rules::applied_regions`]), at the
    /// end of the block that enters it: its forward rule, or else (rule
    /// identity) the forward derivative of its callee, is called on the
    /// region's arguments and gives the tangents of its results. The region's
    /// body stays primal code that computes the primal results, so an outer
    /// pass still sees the region; the call's own primal results are unused.
    fn rule_region(&mut self, block: Block, r: Region) -> Result<(), AdError> {
        let rd = &self.primal.regions[r];
        // As a call (`Builder::call`): differentiated when an argument has
        // a tangent, the callee uses the tape (the activity analysis made
        // its results active then), or this function makes an array result
        // active (a store into it after the region: its tangent array comes
        // from the derivative; fuzzer seed 2400108).
        if !rd.args.iter().any(|&v| tangents(&self.tan, v).is_some())
            && !self.cx.cache.uses_tape(self.module, rd.callee)
            && activity::seeded_results(self.primal, self.act, &rd.results).is_empty()
        {
            return Ok(());
        }
        let (callee, args, results) = (rd.callee, rd.args.clone(), rd.results.clone());
        match rd.rules.forward {
            Some(rule) => {
                let primal: Vec<(Value, Type)> = results
                    .iter()
                    .map(|&v| {
                        let ty = self.primal.dfg.value_type(v);
                        (self.out.dfg.make_detached_value(ty), ty)
                    })
                    .collect();
                self.rule_call(block, callee, rule, &args, primal, &results)
            }
            None => self.body_tangents(block, callee, &args, &results),
        }
    }

    /// The array results of a call to `callee` that its derivative must
    /// treat as active from the start: those this function makes active
    /// (stores into them after the call) that are not active anyway.
    fn seeds(&mut self, callee: FuncId, acts: &[ArgActivity], results: &[Value]) -> Vec<usize> {
        let seeded = activity::seeded_results(self.primal, self.act, results);
        activity::needed_seeds(
            &mut self.cx.cache,
            self.module,
            self.module.func(callee),
            acts,
            &seeded,
        )
    }

    /// Rule identity for a function `F` with rules but no forward rule: the
    /// tangents of `results` come from `F`'s forward derivative (its body
    /// differentiated), called at the end of `block` with copies of the
    /// arrays `F` may write, and its primal results are discarded; the caller
    /// computes the primal values by `call F` (or the region's body), so an
    /// outer pass still meets `F`.
    fn body_tangents(
        &mut self,
        block: Block,
        callee: FuncId,
        args: &[Value],
        results: &[Value],
    ) -> Result<(), AdError> {
        if !self.module.is_valid(callee) {
            return Err(self.unsupported(format!("a call to the unknown function {callee}")));
        }
        let callee_sig = self.module.func(callee).sig.clone();
        if callee_sig.params.len() != args.len() {
            return Err(self.unsupported(format!(
                "a call to @{} with {} arguments for {} parameters",
                self.module.func(callee).name,
                args.len(),
                callee_sig.params.len()
            )));
        }
        let acts = self.call_acts(args);
        let ret = if callee_sig.results.is_empty() {
            RetActivity::Const
        } else {
            RetActivity::Dual
        };
        let seeded = self.seeds(callee, &acts, results);
        let req = ForwardRequest {
            func: callee,
            args: acts.clone(),
            ret,
            width: self.width(),
            seeded,
        };
        let d = derive(self.cx, self.module, &req, self.building)?;
        let copy = if callee_sig
            .params
            .iter()
            .any(|p| p.ty == Type::Array && p.mutable)
        {
            Some(crate::rules::copy_helper(self.module)?)
        } else {
            None
        };
        let mut new_args = Vec::new();
        for ((&v, a), p) in args.iter().zip(&acts).zip(&callee_sig.params) {
            let mut arg = v;
            if let (Some(copy), true) = (copy, p.ty == Type::Array && p.mutable) {
                // The derivative must not perform `F`'s effects a second time.
                let name = format!("{}.copy", self.primal.array_name(v));
                let mut b = self.builder(block);
                let n = b.len(v);
                arg = b.zeros(n, name);
                b.call(copy, &[v, arg], &[]);
            }
            new_args.push(arg);
            if *a != ArgActivity::Const {
                new_args.extend_from_slice(tangents(&self.tan, v).unwrap_or_default());
            }
        }
        let mut all: Vec<(Value, Type)> = Vec::new();
        if ret == RetActivity::Dual {
            for &r in results {
                let ty = self.primal.dfg.value_type(r);
                all.push((self.out.dfg.make_detached_value(ty), ty));
            }
            all.extend(self.tangent_results(results));
        }
        let call = InstData::Call {
            func: d,
            args: new_args,
        };
        let new = self.out.dfg.make_inst_with_results(call, &all);
        self.out.layout.append_inst(new, block);
        Ok(())
    }

    /// The activities a call passes on: `dual` for an f64 with a tangent,
    /// `dup` for an array with a shadow, `const` otherwise.
    fn call_acts(&self, args: &[Value]) -> Vec<ArgActivity> {
        args.iter()
            .map(
                |&v| match (self.primal.dfg.value_type(v), tangents(&self.tan, v)) {
                    (Type::F64, Some(_)) => ArgActivity::Dual,
                    (Type::Array, Some(_)) => ArgActivity::Dup,
                    _ => ArgActivity::Const,
                },
            )
            .collect()
    }

    fn builder(&mut self, block: Block) -> FuncBuilder<'_> {
        let mut b = FuncBuilder::new(&mut self.out);
        b.switch_to_block(block);
        b
    }

    /// A zero of type `ty`, defined once at the top of the entry block. The
    /// f64 zero tangent is -0.0, the exact identity of IEEE addition
    /// (`t + -0.0 == t` for every `t`, where `0.0 + -0.0` is `0.0`), so a
    /// tangent summed from an explicit zero has the same bits as one summed
    /// without it — whichever way inlining cut the code. Lowering an
    /// `autodiff` request turns a -0.0 result into 0.0 for the user.
    fn zero(&mut self, ty: Type) -> Value {
        if let Some(&(_, v)) = self.consts.iter().find(|(t, _)| *t == ty) {
            return v;
        }
        let data = match ty {
            Type::I64 => InstData::IConst { imm: 0 },
            Type::Bool => InstData::BConst { imm: false },
            _ => InstData::fconst(-0.0),
        };
        let inst = self.out.dfg.make_inst(data, &[ty]);
        let entry = self
            .out
            .layout
            .entry_block()
            .expect("the entry is laid out");
        self.out.layout.insert_inst(inst, entry, 0);
        let v = self.out.dfg.first_result(inst);
        self.consts.push((ty, v));
        v
    }

    /// The tangent of `v` in `lane`, if it has one.
    fn lane(&self, v: Value, lane: usize) -> Option<Value> {
        tangents(&self.tan, v).map(|l| l[lane])
    }

    fn lane_or_zero(&mut self, v: Value, lane: usize) -> Value {
        match self.lane(v, lane) {
            Some(t) => t,
            None => self.zero(Type::F64),
        }
    }

    /// Places a copy of the primal instruction `inst` (with the same result
    /// values, or `extra` more) at the end of `block`.
    fn copy(&mut self, block: Block, inst: Inst, data: InstData, extra: &[(Value, Type)]) {
        let mut results: Vec<(Value, Type)> = self
            .primal
            .dfg
            .inst_results(inst)
            .iter()
            .map(|&v| (v, self.primal.dfg.value_type(v)))
            .collect();
        results.extend_from_slice(extra);
        let new = self.out.dfg.make_inst_with_results(data, &results);
        self.out.layout.append_inst(new, block);
    }

    fn inst(&mut self, block: Block, inst: Inst) -> Result<(), AdError> {
        let data = self.primal.dfg.inst(inst).clone();
        let results = self.primal.dfg.inst_results(inst).to_vec();
        let w = self.width();
        match &data {
            InstData::Call { func, args } => return self.call(block, inst, *func, args),
            InstData::Autodiff { spec, args } => {
                if args.iter().any(|&v| self.act.is_active(v)) {
                    return Err(self.unsupported(format!(
                        "a {} `autodiff` of @{} with active arguments (lower it first)",
                        spec.mode,
                        self.module.func(spec.func).name
                    )));
                }
                self.copy(block, inst, data.clone(), &[]);
            }
            InstData::Jump { .. } | InstData::Brif { .. } => {
                let mut data = data.clone();
                let opaque = |b: Block| self.leaving_opaque.contains(b);
                let from_opaque = opaque(block);
                let leaving: Vec<bool> = data
                    .destinations()
                    .iter()
                    .map(|d| from_opaque && !opaque(d.block))
                    .collect();
                for (dest, leaving) in data.destinations_mut().into_iter().zip(leaving) {
                    let params = self.primal.dfg.block_params(dest.block).to_vec();
                    for (&arg, &p) in dest.args.clone().iter().zip(&params) {
                        if let Some(lanes) = tangents(&self.tan, p) {
                            if leaving {
                                // A region's exit: its results' tangents are
                                // the ones the region's rule or derivative
                                // call gave, on every exit (the region keeps
                                // the shape of a call for an outer pass).
                                dest.args.extend_from_slice(lanes);
                                continue;
                            }
                            for lane in 0..w {
                                let t = self.lane_or_zero(arg, lane);
                                dest.args.push(t);
                            }
                        }
                    }
                }
                self.copy(block, inst, data, &[]);
            }
            InstData::Return { args } => {
                let mut all = Vec::new();
                if self.req.ret == RetActivity::Dual {
                    all.extend_from_slice(args);
                    for &v in args {
                        let ty = self.primal.dfg.value_type(v);
                        for lane in 0..w {
                            let t = match ty {
                                Type::F64 => self.lane_or_zero(v, lane),
                                // The caller owns the tangent array too: the
                                // tangent of an owned array is owned (a
                                // `zeros`, or a call's tangent result); an
                                // inactive one is a new zero array.
                                Type::Array => self.lane_or_zeros(block, v, lane),
                                _ => continue,
                            };
                            all.push(t);
                        }
                    }
                }
                self.copy(block, inst, InstData::Return { args: all }, &[]);
            }
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, i, x],
            } => {
                self.copy(block, inst, data.clone(), &[]);
                if let Some(shadows) = tangents(&self.tan, *a).map(<[Value]>::to_vec) {
                    for (lane, sh) in shadows.into_iter().enumerate() {
                        let t = self.element_tangent(block, *x, lane);
                        self.builder(block).store(sh, *i, t);
                    }
                }
            }
            InstData::Binary {
                op: Opcode::Fill,
                args: [a, x],
            } => {
                self.copy(block, inst, data.clone(), &[]);
                if let Some(shadows) = tangents(&self.tan, *a).map(<[Value]>::to_vec) {
                    for (lane, sh) in shadows.into_iter().enumerate() {
                        let t = self.element_tangent(block, *x, lane);
                        self.builder(block).fill(sh, t);
                    }
                }
            }
            InstData::Binary {
                op: Opcode::Load,
                args: [a, i],
            } => {
                self.copy(block, inst, data.clone(), &[]);
                // An inactive element of an active array (activity per
                // element, `activity.rs`) has no tangent.
                if !self.act.is_active(results[0]) {
                    return Ok(());
                }
                if let Some(shadows) = tangents(&self.tan, *a).map(<[Value]>::to_vec) {
                    let lanes = shadows
                        .into_iter()
                        .map(|sh| self.builder(block).load(sh, *i))
                        .collect();
                    self.tan[results[0]] = lanes;
                }
            }
            InstData::Ternary {
                op: Opcode::Slice | Opcode::View,
                args: [a, lo, hi],
            } => {
                // A view of an active array views its shadows alike.
                self.copy(block, inst, data.clone(), &[]);
                if self.act.is_active(results[0]) {
                    if let Some(shadows) = tangents(&self.tan, *a).map(<[Value]>::to_vec) {
                        let lanes = shadows
                            .into_iter()
                            .map(|sh| self.builder(block).view(sh, *lo, *hi))
                            .collect();
                        self.tan[results[0]] = lanes;
                    }
                }
            }
            InstData::Push { tape, arg } => {
                self.copy(block, inst, data.clone(), &[]);
                if self.primal.dfg.value_type(*arg) == Type::F64 {
                    for lane in 0..w {
                        let t = self.lane_or_zero(*arg, lane);
                        self.builder(block).push(*tape, t);
                    }
                }
            }
            InstData::Pop {
                tape,
                ty: Type::F64,
                varies,
            } => {
                // Last in, first out: the tangents were pushed after the
                // value. Each varies with what the value varies with and
                // their tangents in its lane (a forward derivative of this
                // one gives it a tangent exactly when the push's has one).
                // (Not known when an active one has no tangent yet.)
                let lane_varies = |t: &Self, lane: usize| -> Option<Vec<Value>> {
                    let vs = varies.as_ref()?;
                    let mut out = vs.clone();
                    for &v in vs {
                        match tangents(&t.tan, v).and_then(|ls| ls.get(lane)) {
                            Some(&tv) => out.push(tv),
                            None if t.act.is_active(v) => return None,
                            None => {}
                        }
                    }
                    Some(out)
                };
                let mut lanes = Vec::with_capacity(w);
                for lane in (0..w).rev() {
                    let vs = lane_varies(self, lane);
                    lanes.push(self.builder(block).pop_varying(*tape, Type::F64, vs));
                }
                lanes.reverse();
                self.copy(block, inst, data.clone(), &[]);
                // Inactive only in a checkpoint runner, for a value the
                // augmented primal computes from constants: its tangent,
                // popped, is dropped.
                if self.act.is_active(results[0]) {
                    self.tan[results[0]] = lanes;
                }
            }
            InstData::Zeros {
                op: Opcode::Zeros,
                len,
                name,
            } => {
                self.copy(block, inst, data.clone(), &[]);
                if self.act.is_active(results[0]) {
                    let lanes = (0..w)
                        .map(|lane| {
                            self.builder(block)
                                .zeros(*len, lane_name(name, "d", lane, w))
                        })
                        .collect();
                    self.tan[results[0]] = lanes;
                }
            }
            _ => {
                self.copy(block, inst, data.clone(), &[]);
                if let [r] = results[..] {
                    if self.act.is_active(r) && self.primal.dfg.value_type(r) == Type::F64 {
                        self.local(block, &data, r);
                    }
                }
            }
        }
        Ok(())
    }

    /// Lane `lane` of the tangent of the array `v`, or a new zero array of
    /// its length (`v.d`) when it has none: what a rule, a caller or the
    /// caller of this derivative receives for an inactive array.
    fn lane_or_zeros(&mut self, block: Block, v: Value, lane: usize) -> Value {
        if let Some(t) = self.lane(v, lane) {
            return t;
        }
        let name = format!("{}.d", self.primal.array_name(v));
        let mut b = self.builder(block);
        let n = b.len(v);
        b.zeros(n, name)
    }

    /// The tangent an array element gets from `x`: its tangent, or for an
    /// inactive `x` +0.0, the zero every tangent array starts with (a
    /// `zeros` tangent, or the one the derivative of a callee returns for
    /// an inactive array result) rather than the SSA zero -0.0: an element
    /// stored by code inlined into an active array must have the bits the
    /// same element has when the callee's array stays inactive (fuzzer
    /// seed 1200785).
    fn element_tangent(&mut self, block: Block, x: Value, lane: usize) -> Value {
        match self.lane(x, lane) {
            Some(t) => t,
            None => self.builder(block).fconst(0.0),
        }
    }

    /// Tangent code for an instruction of the partials table.
    fn local(&mut self, block: Block, data: &InstData, r: Value) {
        let args = data.args().to_vec();
        let wanted: Vec<bool> = args
            .iter()
            .map(|&v| tangents(&self.tan, v).is_some())
            .collect();
        let local = partials::local_derivative(&mut self.builder(block), data, r, &wanted);
        let w = self.width();
        let mut lanes = Vec::with_capacity(w);
        for lane in 0..w {
            let t = match &local {
                Some(Local::Partials(ps)) => {
                    let ts: Vec<Option<Value>> = args.iter().map(|&v| self.lane(v, lane)).collect();
                    partials::emit_tangent(&mut self.builder(block), ps, &ts)
                }
                Some(Local::Choose {
                    cond,
                    on_true,
                    on_false,
                }) => {
                    let (a, b) = (args[*on_true], args[*on_false]);
                    if self.lane(a, lane).is_none() && self.lane(b, lane).is_none() {
                        None
                    } else {
                        let ta = self.lane_or_zero(a, lane);
                        let tb = self.lane_or_zero(b, lane);
                        Some(self.builder(block).select(*cond, ta, tb))
                    }
                }
                None => None,
            };
            lanes.push(match t {
                Some(t) => t,
                None => self.zero(Type::F64),
            });
        }
        self.tan[r] = lanes;
    }

    /// A call: a primal call when no argument is active, else a call to the
    /// callee's forward rule or forward derivative.
    fn call(
        &mut self,
        block: Block,
        inst: Inst,
        callee: FuncId,
        args: &[Value],
    ) -> Result<(), AdError> {
        let data = self.primal.dfg.inst(inst).clone();
        let tape = self.cx.cache.uses_tape(self.module, callee);
        // An array result the caller makes active (a store into it) is
        // differentiated even when nothing active goes in: the callee's
        // derivative treats it as active from the start (`seeded`), so its
        // own loads from it have tangents as they do inlined (fuzzer seeds
        // 1201165, 1600290).
        let seeded_any =
            !activity::seeded_results(self.primal, self.act, self.primal.dfg.inst_results(inst))
                .is_empty();
        if !tape && !seeded_any && !args.iter().any(|&v| tangents(&self.tan, v).is_some()) {
            self.copy(block, inst, data, &[]);
            return Ok(());
        }
        if !self.module.is_valid(callee) {
            return Err(self.unsupported(format!("a call to the unknown function {callee}")));
        }
        let w = self.width();
        let callee_sig = self.module.func(callee).sig.clone();
        if callee_sig.params.len() != args.len() {
            return Err(self.unsupported(format!(
                "a call to @{} with {} arguments for {} parameters",
                self.module.func(callee).name,
                args.len(),
                callee_sig.params.len()
            )));
        }
        let rules = match self.region_rules.iter().find(|(i, _)| *i == inst) {
            Some((_, r)) => *r,
            None => self.module.func(callee).meta.rules,
        };
        if let Some(rule) = rules.forward {
            let results = self.primal.dfg.inst_results(inst).to_vec();
            let primal = results
                .iter()
                .map(|&v| (v, self.primal.dfg.value_type(v)))
                .collect();
            return self.rule_call(block, callee, rule, args, primal, &results);
        }
        if !rules.is_empty() {
            // Rule identity: `F` has rules (not a forward one). The primal
            // value comes from `call F`, the tangents from its body's
            // forward derivative.
            let results = self.primal.dfg.inst_results(inst).to_vec();
            self.body_tangents(block, callee, args, &results)?;
            self.copy(block, inst, data, &[]);
            return Ok(());
        }
        let acts = self.call_acts(args);
        let results = self.primal.dfg.inst_results(inst).to_vec();
        let seeded = self.seeds(callee, &acts, &results);
        // A call whose results nothing reads (an augmented primal's value,
        // which a gradient drops) asks for the derivative without them
        // (`ret const`): no tangent of the result is computed, and the
        // optimizer then removes what only fed it.
        let unread = !results.is_empty() && seeded.is_empty() && !self.any_used(&results);
        let ret = if callee_sig.results.is_empty() || unread {
            RetActivity::Const
        } else {
            RetActivity::Dual
        };
        let req = ForwardRequest {
            func: callee,
            args: acts.clone(),
            ret,
            width: w,
            seeded,
        };
        let d = derive(self.cx, self.module, &req, self.building)?;
        let mut new_args = Vec::new();
        for (&v, a) in args.iter().zip(&acts) {
            new_args.push(v);
            if *a != ArgActivity::Const {
                new_args.extend_from_slice(tangents(&self.tan, v).unwrap_or_default());
            }
        }
        let call = InstData::Call {
            func: d,
            args: new_args,
        };
        if unread {
            let new = self.out.dfg.make_inst_with_results(call, &[]);
            self.out.layout.append_inst(new, block);
            return Ok(());
        }
        let extra = self.tangent_results(&results);
        self.copy(block, inst, call, &extra);
        Ok(())
    }

    /// Does an instruction of the primal, or a rule region (its call),
    /// use one of `values`?
    fn any_used(&mut self, values: &[Value]) -> bool {
        let primal = self.primal;
        let used = self.used.get_or_insert_with(|| {
            let mut used = EntitySet::new();
            for (_, inst) in primal.layout.insts() {
                primal.dfg.inst(inst).for_each_use(|v| {
                    used.insert(v);
                });
            }
            // A rule region's arguments are read by the call that stands
            // for it, even when its body ignores one (the review of
            // session 20: `h(x, g(x))` with `h` ignoring `y`).
            for data in primal.regions.values() {
                for &v in data.args.iter().chain(&data.results) {
                    used.insert(v);
                }
            }
            used
        });
        values.iter().any(|&v| used.contains(v))
    }

    /// Fresh values for the tangents of a call's differentiable (f64 and
    /// array) results, each result's lanes, result after result, recorded
    /// as the tangents of the active ones.
    fn tangent_results(&mut self, results: &[Value]) -> Vec<(Value, Type)> {
        let w = self.width();
        let mut extra = Vec::new();
        for &r in results {
            let ty = self.primal.dfg.value_type(r);
            if !matches!(ty, Type::F64 | Type::Array) {
                continue;
            }
            let lanes: Vec<Value> = (0..w)
                .map(|_| self.out.dfg.make_detached_value(ty))
                .collect();
            extra.extend(lanes.iter().map(|&v| (v, ty)));
            if self.act.is_active(r) {
                self.tan[r] = lanes;
            }
        }
        extra
    }

    /// A call to a function with a forward rule `rule(x, ẋ, a, ȧ, n, ..) ->
    /// (results.., tangents of the f64 results..)`
    /// ([`adze_ir::verify::rule_signature`]): every f64 and array argument is
    /// followed by its tangent (0.0, or a zero array of the same length, when
    /// inactive).
    ///
    /// `primal` are the values that receive the rule's primal results (the
    /// call's own results, or fresh values for a region); `results` are the
    /// values whose tangents the rule gives.
    fn rule_call(
        &mut self,
        block: Block,
        callee: FuncId,
        rule: FuncId,
        args: &[Value],
        primal: Vec<(Value, Type)>,
        results: &[Value],
    ) -> Result<(), AdError> {
        crate::rules::check_rule_signature(self.module, callee, rule, Mode::Forward)?;
        let w = self.width();
        // Vector mode: one rule call per lane; the lanes after the first
        // work on copies of the arrays the callee may write, and their
        // primal results are discarded.
        let mutable: Vec<bool> = self
            .module
            .func(callee)
            .sig
            .params
            .iter()
            .map(|p| p.ty == Type::Array && p.mutable)
            .collect();
        let copy = if w > 1 && mutable.iter().any(|&m| m) {
            Some(crate::rules::copy_helper(self.module)?)
        } else {
            None
        };
        let tangents = self.tangent_results(results);
        let n_res = tangents.len() / w;
        for lane in 0..w {
            let mut new_args = Vec::new();
            for (k, &v) in args.iter().enumerate() {
                let mut arg = v;
                if let (Some(copy), true) = (copy, lane > 0 && mutable.get(k) == Some(&true)) {
                    let name = format!("{}.copy", self.primal.array_name(v));
                    let mut b = self.builder(block);
                    let n = b.len(v);
                    arg = b.zeros(n, name);
                    b.call(copy, &[v, arg], &[]);
                }
                new_args.push(arg);
                match self.primal.dfg.value_type(v) {
                    Type::F64 => {
                        let t = self.lane_or_zero(v, lane);
                        new_args.push(t);
                    }
                    Type::Array => {
                        let sh = self.lane_or_zeros(block, v, lane);
                        new_args.push(sh);
                    }
                    _ => {}
                }
            }
            let mut outs: Vec<(Value, Type)> = if lane == 0 {
                primal.clone()
            } else {
                primal
                    .iter()
                    .map(|&(_, ty)| (self.out.dfg.make_detached_value(ty), ty))
                    .collect()
            };
            outs.extend((0..n_res).map(|r| tangents[r * w + lane]));
            let call = InstData::Call {
                func: rule,
                args: new_args,
            };
            let new = self.out.dfg.make_inst_with_results(call, &outs);
            self.out.layout.append_inst(new, block);
        }
        Ok(())
    }
}
