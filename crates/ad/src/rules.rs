//! What both modes share about custom rules, rule regions and tapes.
//!
//! - **Applied regions.** A rule region whose rules are not empty and that
//!   has no enclosing region with rules is treated by every pass exactly like
//!   a call to its callee: [`applied_regions`], [`region_pred`].
//! - **Rule signatures** are checked against
//!   [`adze_ir::verify::rule_signature`] before a rule is called
//!   ([`check_rule_signature`]).
//! - **Tape numbers.** A reverse pass records on the tape
//!   `L = 1 + the highest tape anything its primal reaches uses` (0 if none),
//!   and uses `L + 1 + T` for the adjoints of the primal's own traffic on
//!   tape `T` ([`tape_floor`], [`crate::reverse::adjoint_tape`]). An `autodiff reverse` request that is not lowered yet
//!   counts as the derivative it will become.
//! - **Helpers** the passes call, generated once per module (and per tape):
//!   `@adze.tape.save.T(a: arr)` pushes the elements of `a` then its length
//!   on tape `T`; `@adze.tape.restore.T(a: mut arr)` pops them back into an
//!   array of that length (the caller pops the length and allocates it);
//!   `@adze.copy(src: arr, dst: mut arr)` copies. They are ordinary
//!   functions: every pass differentiates them like any other (their `push`
//!   and `pop` follow the tape conventions of both modes).

use crate::AdError;
use adze_ir::{
    Block, CmpCond, Derivation, FuncBuilder, FuncId, Function, InstData, Mode, Module, Param,
    Region, Signature, Step, Type, Value,
};
use cranelift_entity::EntitySet;

/// The regions every pass treats as calls: rules not empty, and no
/// enclosing region with rules (an enclosing one hides them, as a call hides
/// the calls of its callee). Also returns the blocks that lie inside one of
/// them.
pub fn applied_regions(func: &Function) -> (Vec<Region>, EntitySet<Block>) {
    let top_with_rules = |r: Region| -> Option<Region> {
        let mut found = None;
        let mut cur = Some(r);
        let mut steps = 0;
        while let Some(c) = cur {
            let Some(rd) = func.regions.get(c) else { break };
            if !rd.rules.is_empty() {
                found = Some(c);
            }
            cur = rd.parent;
            steps += 1;
            if steps > func.regions.len() {
                break; // a parent cycle: the verifier reports it
            }
        }
        found
    };
    let mut applied = Vec::new();
    let mut inside = EntitySet::with_capacity(func.dfg.num_blocks());
    for (r, rd) in func.regions.iter() {
        let Some(top) = top_with_rules(r) else {
            continue;
        };
        if top == r {
            applied.push(r);
        }
        for b in &rd.blocks {
            inside.insert(*b);
        }
    }
    (applied, inside)
}

/// The one block that enters region `r`: it ends in `jump entry` without
/// arguments and lies outside the region (the inliner's shape). Derivative
/// code of the region (a rule call, a tangent call, taping) is placed there,
/// outside the region, so that the region itself stays the callee's code.
pub fn region_pred(func: &Function, r: Region) -> Result<Block, String> {
    let rd = &func.regions[r];
    let entry = *rd.blocks.first().ok_or("a region without blocks")?;
    let mut preds = Vec::new();
    for &b in func.layout.blocks() {
        if let Some(term) = func.layout.last_inst(b) {
            for d in func.dfg.inst(term).destinations() {
                if d.block == entry {
                    preds.push((b, term, d.args.is_empty()));
                }
            }
        }
    }
    match preds.as_slice() {
        [(b, term, true)]
            if !rd.blocks.contains(b)
                && matches!(func.dfg.inst(*term), InstData::Jump { .. }) =>
        {
            Ok(*b)
        }
        _ => Err(format!(
            "{r} of @{}: a rule region must be entered by exactly one `jump` without arguments from outside it",
            func.name
        )),
    }
}

/// Checks that `rule` has the signature a rule of `mode` of a function with
/// signature `owner` must have.
pub fn check_rule_signature(
    module: &Module,
    owner: FuncId,
    rule: FuncId,
    mode: Mode,
) -> Result<(), AdError> {
    let name = module.func(owner).name.clone();
    if !module.is_valid(rule) {
        return Err(AdError::BadRequest {
            func: name,
            reason: format!("its {mode} rule {rule} does not exist"),
        });
    }
    let expected = adze_ir::verify::rule_signature(&module.func(owner).sig, mode);
    let rule_sig = &module.func(rule).sig;
    let types = |s: &Signature| s.param_types().collect::<Vec<_>>();
    if types(rule_sig) != types(&expected) || rule_sig.results != expected.results {
        return Err(AdError::RuleSignature {
            mode,
            func: name,
            rule: module.func(rule).name.clone(),
            expected: format_sig(&expected),
            found: format_sig(rule_sig),
        });
    }
    if module.func(rule).is_declaration() {
        return Err(AdError::NoBody {
            func: module.func(rule).name.clone(),
        });
    }
    Ok(())
}

pub(crate) fn format_sig(sig: &Signature) -> String {
    let p: Vec<&str> = sig.params.iter().map(|p| p.ty.name()).collect();
    let r: Vec<&str> = sig.results.iter().map(|t| t.name()).collect();
    format!("({}) -> ({})", p.join(", "), r.join(", "))
}

/// The tape a reverse derivative of `func` records on: 1 + the highest tape
/// used by `func` or anything it reaches (calls, regions, rules, derivative
/// requests), or 0 if none is used.
pub fn tape_floor(module: &Module, func: &Function) -> u8 {
    let mut stack = Vec::new();
    floor_of(max_tape_in(module, func, &mut stack))
}

fn floor_of(max: Option<u8>) -> u8 {
    max.map_or(0, |t| t.saturating_add(1))
}

/// The highest tape a reverse derivative with recording tape `l` uses: `l`,
/// and, when its primal has tape traffic (on tapes `0 .. l`), the adjoint
/// tapes `l + 1 .. 2l` ([`crate::reverse::adjoint_tape`]).
pub(crate) fn derivative_max(l: u8) -> u8 {
    if l == 0 {
        0
    } else {
        l.saturating_mul(2)
    }
}

fn max_tape_in(module: &Module, func: &Function, stack: &mut Vec<FuncId>) -> Option<u8> {
    let mut roots = Vec::new();
    let mut max = scan(module, func, &mut roots, stack);
    let mut seen = EntitySet::new();
    for root in roots {
        if !module.is_valid(root) {
            continue;
        }
        for id in module.reachable_from(root) {
            if !seen.insert(id) {
                continue;
            }
            let mut ignore = Vec::new();
            max = max.max(scan(module, module.func(id), &mut ignore, stack));
        }
    }
    max
}

/// The tapes `func`'s own instructions use (a reverse request counting as
/// its derivative); pushes the functions it refers to onto `refs`.
fn scan(
    module: &Module,
    func: &Function,
    refs: &mut Vec<FuncId>,
    stack: &mut Vec<FuncId>,
) -> Option<u8> {
    let mut max: Option<u8> = None;
    refs.extend(func.meta.rules.iter().map(|(_, r)| r));
    for r in func.regions.values() {
        refs.push(r.callee);
        refs.extend(r.rules.iter().map(|(_, r)| r));
    }
    for (_, inst) in func.layout.insts() {
        match func.dfg.inst(inst) {
            InstData::Push { tape, .. }
            | InstData::Pop { tape, .. }
            | InstData::Tape { tape, .. } => {
                max = max.max(Some(*tape));
            }
            InstData::Call { func: f, .. } => refs.push(*f),
            InstData::Autodiff { spec, .. } => {
                refs.push(spec.func);
                if spec.mode == Mode::Reverse
                    && module.is_valid(spec.func)
                    && !stack.contains(&spec.func)
                {
                    stack.push(spec.func);
                    let inner = max_tape_in(module, module.func(spec.func), stack);
                    stack.pop();
                    max = max.max(Some(derivative_max(floor_of(inner))));
                }
            }
            _ => {}
        }
    }
    max
}

/// Finds the helper that `step` makes (from nothing), or builds it as
/// `name` with `body` (which gets a builder positioned in the entry block).
fn helper(
    module: &mut Module,
    step: Step,
    name: &str,
    sig: Signature,
    body: impl FnOnce(&mut FuncBuilder),
) -> Result<FuncId, AdError> {
    let key = Derivation { from: None, step };
    if let Some(id) = module.find_derived(&key) {
        if module.func(id).sig != sig || module.func(id).is_declaration() {
            return Err(AdError::NameTaken { name: name.into() });
        }
        return Ok(id);
    }
    let mut f = Function::new(name, sig);
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    body(&mut b);
    module
        .push_derived(f, key)
        .map_err(|_| AdError::NameTaken { name: name.into() })
}

/// The name part of an array type in a helper's name: `save` for `arr`,
/// `isave` for `iarr`.
fn helper_name(ty: Type, what: &str, tape: u8) -> String {
    let i = if ty == Type::IArray { "i" } else { "" };
    format!("adze.tape.{i}{what}.{tape}")
}

/// `@adze.tape.save.T(a: arr)`: pushes `a[0] .. a[n-1]`, then `n`
/// (`@adze.tape.isave.T(a: iarr)` for an i64 array).
pub(crate) fn save_helper(module: &mut Module, tape: u8, ty: Type) -> Result<FuncId, AdError> {
    let sig = Signature {
        params: vec![Param::new("a", ty)],
        results: vec![],
    };
    let step = Step::TapeSave { tape, ty };
    helper(module, step, &helper_name(ty, "save", tape), sig, |b| {
        let a = b.func.params()[0];
        let n = b.len(a);
        push_elements(b, tape, a, n);
        b.push(tape, n);
        b.ret(&[]);
    })
}

/// `push a[i]` for `i` in `0..n`, as a loop; leaves the builder in the
/// loop's exit block. The body of [`save_helper`], and of the snapshots a
/// final reverse derivative pushes at `return` (`reverse::aug`).
pub(crate) fn push_elements(b: &mut FuncBuilder, tape: u8, a: Value, n: Value) {
    b.count_up(n, |b, i| {
        let x = b.load(a, i);
        b.push(tape, x);
    });
}

/// `a[i] = pop` (of type `elem`) for `i` from `n - 1` down to 0, as a
/// loop; leaves the builder in the loop's exit block. The body of
/// [`restore_helper`], and of a final reverse derivative's adjoint taking
/// its snapshots back (`reverse::adj`).
pub(crate) fn pop_elements(b: &mut FuncBuilder, tape: u8, a: Value, n: Value, elem: Type) {
    let (header, body, exit) = (b.create_block(), b.create_block(), b.create_block());
    b.jump(header, &[n]);
    b.switch_to_block(header);
    let i = b.append_block_param(header, Type::I64);
    let zero = b.iconst(0);
    let c = b.icmp(CmpCond::Gt, i, zero);
    b.brif(c, body, &[], exit, &[]);
    b.switch_to_block(body);
    let one = b.iconst(1);
    let j = b.isub(i, one);
    let x = b.pop(tape, elem);
    b.store(a, j, x);
    b.jump(header, &[j]);
    b.switch_to_block(exit);
}

/// `@adze.tape.restore.T(a: mut arr)`: pops `a[n-1] .. a[0]` (the caller
/// has popped `n` and allocated `a`; `@adze.tape.irestore.T(a: mut iarr)`
/// for an i64 array).
pub(crate) fn restore_helper(module: &mut Module, tape: u8, ty: Type) -> Result<FuncId, AdError> {
    let sig = Signature {
        params: vec![Param {
            name: "a".into(),
            ty,
            mutable: true,
        }],
        results: vec![],
    };
    let step = Step::TapeRestore { tape, ty };
    let elem = if ty == Type::IArray {
        Type::I64
    } else {
        Type::F64
    };
    helper(module, step, &helper_name(ty, "restore", tape), sig, |b| {
        let a = b.func.params()[0];
        let n = b.len(a);
        pop_elements(b, tape, a, n, elem);
        b.ret(&[]);
    })
}

/// `@adze.copy(src: arr, dst: mut arr)`: `dst[i] = src[i]` for every `i`
/// of `src`.
pub(crate) fn copy_helper(module: &mut Module) -> Result<FuncId, AdError> {
    let sig = Signature {
        params: vec![Param::new("src", Type::Array), Param::mutable_array("dst")],
        results: vec![],
    };
    helper(module, Step::Copy, "adze.copy", sig, |b| {
        let (src, dst) = (b.func.params()[0], b.func.params()[1]);
        let n = b.len(src);
        b.copy_loop(src, dst, n);
        b.ret(&[]);
    })
}

/// `@adze.binomial(len, free) -> i64`: binomial checkpointing (Griewank's
/// Revolve): how many iterations to advance from a snapshot before taking
/// the next one, to reverse `len` iterations with `free` more snapshots
/// (docs/ad-reverse.md, "Binomial schedules"). With `t` the least number of
/// runs with `C(free + t, t) >= len`, it leaves to the right the most
/// iterations that `free - 1` snapshots reverse in `t` runs, `C(free - 1 +
/// t, t)`, and returns the rest: at least 1, at most `len - 1`; with one
/// snapshot left, `len - 1` (the last iteration alone). Returns `len` (no
/// snapshot) when `len < 2` or `free < 1`. The binomials are counted in
/// f64 (exact below 2^53, and a rounding only moves a snapshot: where
/// snapshots go changes time, never a derivative's bits).
pub(crate) fn binomial_helper(module: &mut Module) -> Result<FuncId, AdError> {
    let sig = Signature {
        params: vec![Param::new("len", Type::I64), Param::new("free", Type::I64)],
        results: vec![Type::I64],
    };
    helper(module, Step::Binomial, "adze.binomial", sig, |b| {
        let (len, free) = (b.func.params()[0], b.func.params()[1]);
        let (one, two) = (b.iconst(1), b.iconst(2));
        let short = b.icmp(CmpCond::Lt, len, two);
        let none = b.icmp(CmpCond::Lt, free, one);
        let whole = b.select(short, short, none);
        let (ret_len, split) = (b.create_block(), b.create_block());
        b.brif(whole, ret_len, &[], split, &[]);
        b.switch_to_block(ret_len);
        b.ret(&[len]);
        b.switch_to_block(split);
        let last = b.icmp(CmpCond::Eq, free, one);
        let (ret_last, search) = (b.create_block(), b.create_block());
        b.brif(last, ret_last, &[], search, &[]);
        b.switch_to_block(ret_last);
        let m = b.isub(len, one);
        b.ret(&[m]);
        // t = 0, 1, ..: beta = C(free + t, t) until it reaches len. (With
        // one free snapshot, above, that search would take len - 1 steps
        // to give the same len - 1.)
        b.switch_to_block(search);
        let (lf, ff) = (b.sitof(len), b.sitof(free));
        let (zero_f, one_f) = (b.fconst(0.0), b.fconst(1.0));
        let (header, step, done) = (b.create_block(), b.create_block(), b.create_block());
        b.jump(header, &[zero_f, one_f]);
        b.switch_to_block(header);
        let t = b.append_block_param(header, Type::F64);
        let beta = b.append_block_param(header, Type::F64);
        let below = b.fcmp(CmpCond::Lt, beta, lf);
        b.brif(below, step, &[], done, &[]);
        b.switch_to_block(step);
        let t1 = b.fadd(t, one_f);
        let up = b.fadd(ff, t1);
        let grown = b.fmul(beta, up);
        let beta1 = b.fdiv(grown, t1);
        b.jump(header, &[t1, beta1]);
        // right = C(free - 1 + t, t) = beta * free / (free + t), in 1..len-1.
        b.switch_to_block(done);
        let ft = b.fadd(ff, t);
        let scaled = b.fmul(beta, ff);
        let right = b.fdiv(scaled, ft);
        let cap = b.fsub(lf, one_f);
        let over = b.fcmp(CmpCond::Gt, right, cap);
        let right = b.select(over, cap, right);
        let under = b.fcmp(CmpCond::Lt, right, one_f);
        let right = b.select(under, one_f, right);
        let right = b.ftosi(right);
        let m = b.isub(len, right);
        b.ret(&[m]);
    })
}

/// The body a derivative of `F` itself is built from when `F` has a rule of
/// the derivative's mode: `call F(params..)` and return its results. So a
/// request on `F` (an `autodiff` of `F`, or the API) applies `F`'s rule,
/// exactly as a call to `F` inside another function does (Enzyme's and JAX's
/// behaviour), and keeps `F`'s identity for outer passes.
pub(crate) fn call_body(module: &Module, id: FuncId) -> Function {
    let f = module.func(id);
    let mut w = Function::new(f.name.clone(), f.sig.clone());
    w.meta = f.meta.clone();
    let results = f.sig.results.clone();
    let mut b = FuncBuilder::new(&mut w);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let params = b.func.params().to_vec();
    let call = b.call(id, &params, &results);
    let out = b.func.dfg.inst_results(call).to_vec();
    b.ret(&out);
    w
}
