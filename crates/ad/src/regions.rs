//! Collapsing rule regions into the calls they stand for.
//!
//! Reverse mode collapses every applied region
//! ([`crate::rules::applied_regions`]) for its analyses and expands it back
//! in the augmented primal (below). Forward mode collapses the applied
//! regions that have a forward rule, for good: like the call it stands for,
//! such a region becomes a call to the rule, which supplies the primal
//! values itself, so the derivative is the same whether the call was
//! inlined or not (an outer pass then differentiates the rule's body in both
//! cases). An applied region without a forward rule stays in a forward
//! derivative (see `forward.rs`).
//!
//! The inliner's shape (and the one of `docs/ir.md`) is required: the region
//! is entered by one `jump entry` from a block `P` outside it, and every edge
//! leaving it goes to one continuation block `C`. Its results are either
//! parameters of `C` (the inliner) or values defined inside the region
//! (`docs/ir.md`); any other parameter of `C` gets one value defined outside
//! the region from every exit (the zero tangents a forward derivative passes
//! around an opaque region). No other value defined inside the region is
//! used outside it. For the analyses ([`super::plan`], the adjoint) the
//! copy of the primal then reads
//!
//! ```text
//! P:  ... jump X                      ; was: jump entry
//! X:  r' = call @F(args)              ; the region, as the call it stands for
//!     jump C(r')                      ; (C(), results = r', for docs/ir.md's shape)
//! ```
//!
//! with the region's blocks out of the layout, and then `X` and `C` are
//! merged into `P` ([`merge`]): the block the inliner split at the call is
//! one block again, `... r' = call @F(args) ...`, so the region is analysed,
//! taped and reversed exactly like the call `call @F(args)` with the
//! region's rules ([`Collapse::rules`]) — the same blocks, the same segments,
//! the same adjoint slots, and so the same summation order in derivatives
//! of the derivative.
//! The augmented primal puts the region back: at the call it pushes the
//! rule's inputs and jumps to the region's entry, the region's blocks are
//! copied as they are (nested regions included), and their exits go to a new
//! block, which receives the region's results as the call's result values
//! and holds the rest of the block. The region and the regions nested in it
//! are kept in the augmented primal with their values and blocks, whose
//! numbers it shares with the primal.

use crate::rules::{applied_regions, region_pred};
use adze_ir::{Block, Function, Inst, InstData, Region, Value, ValueDef};
use cranelift_entity::{EntitySet, SecondaryMap};

/// One collapsed region.
#[derive(Clone, Debug)]
pub(crate) struct Collapsed {
    pub region: Region,
    /// The call standing for the region, in the collapsed function.
    pub call: Inst,
    /// The block holding the call: `P`, the block that entered the region
    /// (`X` is merged into it, see [`collapse`]).
    pub block: Block,
    pub entry: Block,
    /// The region's continuation in the primal (merged into `P` too when
    /// the region was its only way in).
    pub cont: Block,
    /// For each parameter of `cont`: the number of the call's result that
    /// the region's exits pass to it, or `None` for a value defined
    /// outside the region.
    pub cont_results: Vec<Option<usize>>,
    /// The region's blocks, in the primal's layout order.
    pub blocks: Vec<Block>,
}

/// The collapsed regions of one function and the function as it was.
#[derive(Clone, Debug, Default)]
pub(crate) struct Collapse {
    pub orig: Function,
    pub regions: Vec<Collapsed>,
    /// Values of merged continuations replaced by others (a parameter that
    /// is not a result: what the region's exits pass it; a second parameter
    /// for one result): the augmented primal's copies of region code and
    /// kept regions use them too.
    pub subst: Vec<(Value, Value)>,
}

impl Collapse {
    /// `v`, or what it was replaced by when a continuation was merged.
    pub fn renamed(&self, v: Value) -> Value {
        self.subst
            .iter()
            .find(|(a, _)| *a == v)
            .map_or(v, |&(_, b)| b)
    }
}

impl Collapse {
    pub fn by_call(&self, inst: Inst) -> Option<&Collapsed> {
        self.regions.iter().find(|c| c.call == inst)
    }

    /// The rules of the region a collapsed call stands for.
    pub fn rules(&self, inst: Inst) -> Option<&adze_ir::Rules> {
        self.by_call(inst)
            .map(|c| &self.orig.regions[c.region].rules)
    }

    /// Gives `out` the regions the augmented primal keeps: the collapsed ones
    /// (without parent) and every region nested in one, renumbered in order.
    pub fn keep_regions(&self, out: &mut Function) {
        let regions = &self.orig.regions;
        let top = |r: Region| -> Option<Region> {
            let mut cur = Some(r);
            for _ in 0..=regions.len() {
                let c = cur?;
                if self.regions.iter().any(|k| k.region == c) {
                    return Some(c);
                }
                cur = regions.get(c).and_then(|d| d.parent);
            }
            None
        };
        let mut map: SecondaryMap<Region, Option<Region>> = SecondaryMap::new();
        out.regions.clear();
        for (r, rd) in regions.iter() {
            if top(r).is_none() {
                continue;
            }
            let mut d = rd.clone();
            let is_top = self.regions.iter().any(|k| k.region == r);
            d.parent = if is_top {
                None
            } else {
                rd.parent.and_then(|p| map[p])
            };
            map[r] = Some(out.regions.push(d));
        }
    }
}

fn unsupported(_func: &Function, r: Region, what: &str) -> String {
    format!("{r}: {what}")
}

/// Collapses the applied regions of `func` (see the module doc) for which
/// `which` holds; `func` keeps, renumbered, the regions that are neither
/// collapsed nor nested in a collapsed one. A region of another shape is an
/// error (what is wrong with it).
///
/// Per region: its shape is checked ([`shape`]), then it is replaced by a
/// call ([`rewrite`]); then the other regions are renumbered
/// ([`keep_other_regions`]) and the call blocks merged ([`merge`]).
pub(crate) fn collapse(
    func: &mut Function,
    which: impl Fn(&adze_ir::RegionData) -> bool,
) -> Result<Collapse, String> {
    let orig = func.clone();
    let (applied, _) = applied_regions(func);
    let mut out = Collapse {
        orig: orig.clone(),
        regions: Vec::new(),
        subst: Vec::new(),
    };
    for r in applied {
        if !which(&orig.regions[r]) {
            continue;
        }
        let shape = shape(&orig, r)?;
        let collapsed = rewrite(func, &orig, r, shape)?;
        out.regions.push(collapsed);
    }
    keep_other_regions(func, &orig, &out);
    merge(func, &mut out);
    Ok(out)
}

/// A region of the shape [`collapse`] accepts.
struct Shape {
    /// The region's blocks.
    inside: EntitySet<Block>,
    /// The one block that enters it, and its entry block.
    pred: Block,
    entry: Block,
    /// The one block its exits go to.
    cont: Block,
    /// What X passes to each parameter of `cont`: the number of a result,
    /// or a value defined outside the region.
    cont_args: Vec<Result<usize, Value>>,
    /// Are the region's results parameters of `cont` (else values defined
    /// inside it)?
    results_are_params: Vec<bool>,
}

/// Checks the shape of region `r` of `orig`: one way in, one block out,
/// results that are the continuation's parameters or defined inside, and
/// nothing else defined inside used outside.
fn shape(orig: &Function, r: Region) -> Result<Shape, String> {
    let rd = &orig.regions[r];
    let mut inside: EntitySet<Block> = EntitySet::new();
    for &b in &rd.blocks {
        inside.insert(b);
    }
    let pred = region_pred(orig, r)?;
    let entry = rd.blocks[0];
    let cont = region_exit(orig, r, &inside)?;
    // No other edge from outside into the region.
    for &b in orig.layout.blocks() {
        if inside.contains(b) || b == pred {
            continue;
        }
        if let Some(term) = orig.layout.last_inst(b) {
            if orig
                .dfg
                .inst(term)
                .destinations()
                .iter()
                .any(|d| inside.contains(d.block))
            {
                return Err(unsupported(orig, r, "a second entry into a rule region"));
            }
        }
    }
    let cont_params = orig.dfg.block_params(cont).to_vec();
    let defined_inside = |v: Value| defined_in(orig, &inside, v);
    // Each result is a parameter of the continuation (a scalar passed out
    // by the jump) or defined inside (an array result of an inlined
    // callee, which never passes through a block parameter); a tuple with
    // an array has both.
    let results_are_params: Vec<bool> =
        rd.results.iter().map(|v| cont_params.contains(v)).collect();
    if rd
        .results
        .iter()
        .zip(&results_are_params)
        .any(|(&v, &p)| !p && !defined_inside(v))
    {
        return Err(unsupported(
            orig,
            r,
            "a rule region whose results are neither its continuation's parameters nor defined inside it",
        ));
    }
    let cont_args = cont_args(orig, r, cont, &cont_params, &inside)?;
    // Nothing else escapes.
    for &b in orig.layout.blocks() {
        if inside.contains(b) {
            continue;
        }
        for &inst in orig.layout.block_insts(b) {
            let mut bad = None;
            orig.dfg.inst(inst).for_each_use(|v| {
                if defined_inside(v) && !rd.results.contains(&v) {
                    bad = Some(v);
                }
            });
            if let Some(v) = bad {
                return Err(unsupported(
                    orig,
                    r,
                    &format!("{v}, defined inside a rule region, is used outside it"),
                ));
            }
        }
    }
    Ok(Shape {
        inside,
        pred,
        entry,
        cont,
        cont_args,
        results_are_params,
    })
}

/// Is `v` defined in one of the blocks `inside`?
fn defined_in(orig: &Function, inside: &EntitySet<Block>, v: Value) -> bool {
    match *orig.dfg.value_def(v) {
        ValueDef::Param { block, .. } => inside.contains(block),
        ValueDef::Result { inst, .. } => orig
            .layout
            .inst_block(inst)
            .is_some_and(|b| inside.contains(b)),
        ValueDef::Detached => false,
    }
}

/// The one block the exits of region `r` (every edge from a region block
/// to a block outside it) go to.
fn region_exit(orig: &Function, r: Region, inside: &EntitySet<Block>) -> Result<Block, String> {
    let mut cont: Option<Block> = None;
    for &b in &orig.regions[r].blocks {
        let Some(term) = orig.layout.last_inst(b) else {
            return Err(unsupported(orig, r, "a region block without terminator"));
        };
        let data = orig.dfg.inst(term);
        if matches!(data, InstData::Return { .. }) {
            return Err(unsupported(orig, r, "a `return` inside a rule region"));
        }
        for d in data.destinations() {
            if inside.contains(d.block) {
                continue;
            }
            match cont {
                None => cont = Some(d.block),
                Some(c) if c == d.block => {}
                Some(_) => {
                    return Err(unsupported(
                        orig,
                        r,
                        "a rule region that leaves to more than one block",
                    ))
                }
            }
        }
    }
    cont.ok_or_else(|| unsupported(orig, r, "a rule region that never leaves"))
}

/// What X passes to each parameter of C: a result, or the one value
/// defined outside the region that every exit passes (as the zero
/// tangents forward mode passes around an opaque region).
fn cont_args(
    orig: &Function,
    r: Region,
    cont: Block,
    cont_params: &[Value],
    inside: &EntitySet<Block>,
) -> Result<Vec<Result<usize, Value>>, String> {
    let rd = &orig.regions[r];
    let mut cont_args: Vec<Result<usize, Value>> = Vec::new();
    for (i, p) in cont_params.iter().enumerate() {
        if let Some(k) = rd.results.iter().position(|r| r == p) {
            cont_args.push(Ok(k));
            continue;
        }
        let mut passed: Option<Value> = None;
        for &b in &rd.blocks {
            let Some(term) = orig.layout.last_inst(b) else {
                continue;
            };
            for d in orig.dfg.inst(term).destinations() {
                if d.block != cont {
                    continue;
                }
                let v = d.args.get(i).copied();
                match (passed, v) {
                    (_, None) => {
                        return Err(unsupported(orig, r, "a malformed exit"));
                    }
                    (None, Some(v)) => passed = Some(v),
                    (Some(a), Some(v)) if a == v => {}
                    _ => {
                        return Err(unsupported(
                            orig,
                            r,
                            "exits that pass different values to a parameter that is not a result",
                        ))
                    }
                }
            }
        }
        match passed {
            Some(v) if !defined_in(orig, inside, v) => cont_args.push(Err(v)),
            _ => {
                return Err(unsupported(
                    orig,
                    r,
                    "an exit that passes a value defined inside the region to a parameter that is not a result",
                ))
            }
        }
    }
    Ok(cont_args)
}

/// Replaces region `r` in `func`: P jumps to X; X calls the callee and
/// jumps to C; the region's blocks leave the layout.
fn rewrite(
    func: &mut Function,
    orig: &Function,
    r: Region,
    shape: Shape,
) -> Result<Collapsed, String> {
    let rd = &orig.regions[r];
    let Shape {
        inside,
        pred,
        entry,
        cont,
        cont_args,
        results_are_params,
    } = shape;
    let x = func.dfg.make_block();
    func.layout.insert_block_after(x, pred);
    let result_types: Vec<_> = rd.results.iter().map(|&v| orig.dfg.value_type(v)).collect();
    let results: Vec<(Value, adze_ir::Type)> = rd
        .results
        .iter()
        .zip(result_types)
        .zip(&results_are_params)
        .map(|((&v, ty), &param)| {
            if param {
                (func.dfg.make_detached_value(ty), ty)
            } else {
                (v, ty)
            }
        })
        .collect();
    let call = func.dfg.make_inst_with_results(
        InstData::Call {
            func: rd.callee,
            args: rd.args.clone(),
        },
        &results,
    );
    func.layout.append_inst(call, x);
    let jump_args: Vec<Value> = cont_args
        .iter()
        .map(|a| match a {
            Ok(k) => results[*k].0,
            Err(v) => *v,
        })
        .collect();
    let jump = func.dfg.make_inst(
        InstData::Jump {
            dest: adze_ir::BlockCall {
                block: cont,
                args: jump_args,
            },
        },
        &[],
    );
    func.layout.append_inst(jump, x);
    let pterm = func
        .layout
        .last_inst(pred)
        .ok_or_else(|| unsupported(orig, r, "no terminator"))?;
    // The call stands for the region, entered by `pterm` (the inliner
    // gave the jump into it the inlined call's location).
    func.dfg.copy_srcloc(pterm, call);
    func.dfg.copy_srcloc(pterm, jump);
    for d in func.dfg.inst_mut(pterm).destinations_mut() {
        if d.block == entry {
            d.block = x;
        }
    }
    let blocks: Vec<Block> = orig
        .layout
        .blocks()
        .iter()
        .copied()
        .filter(|&b| inside.contains(b))
        .collect();
    for &b in &blocks {
        func.layout.remove_block(b);
    }
    Ok(Collapsed {
        region: r,
        call,
        block: x,
        entry,
        cont,
        cont_results: cont_args.iter().map(|a| a.ok()).collect(),
        blocks,
    })
}

/// Keeps in `func` the regions of `orig` that are neither collapsed (in
/// `out`) nor nested in a collapsed one, renumbered, parents remapped to
/// the nearest kept ancestor.
fn keep_other_regions(func: &mut Function, orig: &Function, out: &Collapse) {
    let regions = &orig.regions;
    let hidden = |r: Region| -> bool {
        let mut cur = Some(r);
        for _ in 0..=regions.len() {
            let Some(c) = cur else { return false };
            if out.regions.iter().any(|k| k.region == c) {
                return true;
            }
            cur = regions.get(c).and_then(|d| d.parent);
        }
        false
    };
    let mut map: SecondaryMap<Region, Option<Region>> = SecondaryMap::new();
    func.regions.clear();
    for (r, rd) in regions.iter() {
        if hidden(r) {
            continue;
        }
        let mut d = rd.clone();
        let mut parent = rd.parent;
        d.parent = None;
        for _ in 0..=regions.len() {
            let Some(p) = parent else { break };
            if let Some(np) = map[p] {
                d.parent = Some(np);
                break;
            }
            parent = regions.get(p).and_then(|x| x.parent);
        }
        map[r] = Some(func.regions.push(d));
    }
}

/// Puts each collapsed call where the call it stands for would be: `X` is
/// merged into `P` (which entered the region by a `jump`), and so is `C`
/// when `X` was its only way in (always, for the inliner's shape):
///
/// ```text
/// P:  ... jump X          X:  r' = call @F(args)          C(p):  ...
///                             jump C(r')
/// ```
///
/// becomes `P: ... r' = call @F(args) ...` with `p` replaced by `r'`: the
/// block the inliner split at the call is one block again. So the analyses
/// and the derivative see the blocks, the segments and the adjoint slots of
/// the call itself, and derivatives of the derivative (whose summation
/// order follows those) keep every bit whether `F` was inlined or not.
/// The augmented primal splits the block again at the call to put the
/// region back (`aug.rs`).
fn merge(func: &mut Function, collapse: &mut Collapse) {
    for k in 0..collapse.regions.len() {
        let x = collapse.regions[k].block;
        let cont = collapse.regions[k].cont;
        let Some(p) = jump_pred(func, x) else {
            continue;
        };
        if let Some(t) = func.layout.last_inst(p) {
            func.layout.remove_inst(t);
        }
        move_insts(func, x, p);
        func.layout.remove_block(x);
        collapse.regions[k].block = p;
        if cont == p || Some(cont) == func.layout.entry_block() || jump_pred(func, cont) != Some(p)
        {
            continue;
        }
        let Some(t) = func.layout.last_inst(p) else {
            continue;
        };
        let InstData::Jump { dest } = func.dfg.inst(t).clone() else {
            continue;
        };
        func.layout.remove_inst(t);
        // C's parameters become the call's results (each result once); any
        // other parameter is replaced by what X passed it. So the values
        // the rest of the code (and the regions kept in the augmented
        // primal) use keep their numbers.
        let call = collapse.regions[k].call;
        let params = func.dfg.block_params(cont).to_vec();
        for _ in 0..params.len() {
            func.dfg.remove_block_param(cont, 0);
        }
        let mut given = vec![false; func.dfg.inst_results(call).len()];
        for (i, &p) in params.iter().enumerate() {
            if let Some(Some(r)) = collapse.regions[k].cont_results.get(i) {
                if !given[*r] {
                    given[*r] = true;
                    func.dfg.replace_result(call, *r, p);
                }
            }
        }
        let mut subst: Vec<(Value, Value)> = Vec::new();
        for (i, &p) in params.iter().enumerate() {
            let to = match collapse.regions[k].cont_results.get(i) {
                Some(Some(r)) => func.dfg.inst_results(call)[*r],
                _ => dest.args[i],
            };
            if to != p {
                subst.push((p, to));
            }
        }
        if !subst.is_empty() {
            let map = |v: Value| subst.iter().find(|(a, _)| *a == v).map_or(v, |&(_, b)| b);
            let insts: Vec<Inst> = func.layout.insts().map(|(_, i)| i).collect();
            for i in insts {
                func.dfg.inst_mut(i).map_uses(map);
            }
            for rd in func.regions.values_mut() {
                for v in rd.args.iter_mut().chain(rd.results.iter_mut()) {
                    *v = map(*v);
                }
            }
            collapse.subst.extend(subst);
        }
        move_insts(func, cont, p);
        func.layout.remove_block(cont);
    }
}

/// The one block that reaches `b`, when that is by a `jump` and no other
/// edge enters `b`.
fn jump_pred(func: &Function, b: Block) -> Option<Block> {
    let mut found = None;
    for &from in func.layout.blocks() {
        let Some(t) = func.layout.last_inst(from) else {
            continue;
        };
        let data = func.dfg.inst(t);
        for d in data.destinations() {
            if d.block != b {
                continue;
            }
            if found.is_some() || !matches!(data, InstData::Jump { .. }) {
                return None;
            }
            found = Some(from);
        }
    }
    found
}

fn move_insts(func: &mut Function, from: Block, to: Block) {
    for inst in func.layout.block_insts(from).to_vec() {
        func.layout.remove_inst(inst);
        func.layout.append_inst(inst, to);
    }
}
