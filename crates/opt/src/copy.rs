//! Copying a loop: what `carry` (which peels one iteration) and `version`
//! (which runs a second copy of the loop behind a guard) share.
//!
//! The loops both passes copy have one exit, from the header `H`, to a block
//! `E` only `H` branches to. A copy's header `H'` branches to `E` too, so the
//! values `H` defines that code after the loop reads must meet there:
//! [`merge_at_exit`] gives `E` a parameter for each, passed the original
//! from `H` and the copy from `H'`. Every block outside the loop that reads
//! such a value is dominated by `E` (the loop's only exit), so the parameter
//! can replace it there.

use crate::analysis::{Cfg, Scopes};
use adze_ir::{Block, Function, Inst, InstData, Type, Value};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// The blocks around a loop that both passes need.
pub(crate) struct LoopShape {
    /// The one block in the loop that branches to the header.
    pub(crate) latch: Block,
    /// The one block outside the loop that branches to the header, by a
    /// `jump`.
    pub(crate) preheader: Block,
    /// The loop's one exit, which only the header branches to.
    pub(crate) exit: Block,
}

/// The shape both passes copy: a loop of at most `max_insts` instructions,
/// outside rule regions, entered from one preheader by a `jump`, with one
/// latch, no `return`, and one exit, from the header, to a block only the
/// header reaches.
pub(crate) fn loop_shape(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    header: Block,
    body: &[Block],
    max_insts: usize,
) -> Option<LoopShape> {
    let in_loop = |b: Block| body.contains(&b);
    let (latch, preheader) = entered_once(func, cfg, scopes, header, body, max_insts)?;
    let mut exits = Vec::new();
    for &b in body {
        let last = func.layout.last_inst(b)?;
        if matches!(func.dfg.inst(last), InstData::Return { .. }) {
            return None;
        }
        for &s in cfg.succs(b) {
            if !in_loop(s) {
                if b != header {
                    return None;
                }
                exits.push(s);
            }
        }
    }
    let [exit] = exits[..] else { return None };
    if cfg.preds(exit) != [header] {
        return None;
    }
    Some(LoopShape {
        latch,
        preheader,
        exit,
    })
}

/// `(latch, preheader)` of a loop of at most `max_insts` instructions,
/// outside rule regions, with one latch, entered from one preheader by a
/// `jump` (what `loop_shape` and `vectorize` ask first).
pub(crate) fn entered_once(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    header: Block,
    body: &[Block],
    max_insts: usize,
) -> Option<(Block, Block)> {
    let in_loop = |b: Block| body.contains(&b);
    if body.iter().any(|&b| scopes.block_scope(b).is_some()) {
        return None;
    }
    let size: usize = body.iter().map(|&b| func.layout.block_insts(b).len()).sum();
    if size > max_insts {
        return None;
    }
    let (inside, outside): (Vec<Block>, Vec<Block>) =
        cfg.preds(header).iter().partition(|&&p| in_loop(p));
    let (&[latch], &[preheader]) = (&inside[..], &outside[..]) else {
        return None;
    };
    let enters_by_jump = func.layout.last_inst(preheader).is_some_and(
        |i| matches!(func.dfg.inst(i), InstData::Jump { dest } if dest.block == header),
    );
    enters_by_jump.then_some((latch, preheader))
}

/// Where the copy's edges to the loop's header go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackEdges {
    /// To the original header: the copy is one iteration (`carry`).
    ToOriginal,
    /// To the copy's own header: the copy is a loop (`version`).
    ToCopy,
}

/// A copy of a loop's blocks: original → copy, for blocks and for the
/// values the blocks define. Hash maps, not entity maps: the keys are one
/// loop's entities, few of the function's, and a pass copies a loop at a
/// time (an entity map would cost the whole function's entity count per
/// copy).
pub(crate) struct LoopCopy {
    pub(crate) blocks: HashMap<Block, Block>,
    pub(crate) values: HashMap<Value, Value>,
}

/// Copies the blocks `body` (in reverse postorder, header first) of the
/// loop headed by `header`, laid out after `after`. Edges to blocks outside
/// the loop stay; edges inside it go to the copies, and edges to `header`
/// as `back` says. The copies join the provenance lists of their originals.
pub(crate) fn copy_loop(
    func: &mut Function,
    body: &[Block],
    header: Block,
    after: Block,
    back: BackEdges,
) -> LoopCopy {
    let mut blocks: HashMap<Block, Block> = HashMap::new();
    let mut values: HashMap<Value, Value> = HashMap::new();
    let mut prev = after;
    for &b in body {
        let nb = func.dfg.make_block();
        func.layout.insert_block_after(nb, prev);
        prev = nb;
        for &v in func.dfg.block_params(b).to_vec().iter() {
            let ty = func.dfg.value_type(v);
            values.insert(v, func.dfg.append_block_param(nb, ty));
        }
        blocks.insert(b, nb);
    }
    for &b in body {
        let nb = blocks[&b];
        for inst in func.layout.block_insts(b).to_vec() {
            let mut data = func.dfg.inst(inst).clone();
            data.map_uses(|v| values.get(&v).copied().unwrap_or(v));
            for dest in data.destinations_mut() {
                if dest.block == header && back == BackEdges::ToOriginal {
                    continue;
                }
                if let Some(&c) = blocks.get(&dest.block) {
                    dest.block = c;
                }
            }
            let results = func.dfg.inst_results(inst).to_vec();
            let types: Vec<Type> = results.iter().map(|&r| func.dfg.value_type(r)).collect();
            let copy = func.dfg.make_inst(data, &types);
            func.dfg.copy_srcloc(inst, copy);
            for (&r, &nr) in results.iter().zip(func.dfg.inst_results(copy)) {
                values.insert(r, nr);
            }
            func.layout.append_inst(copy, nb);
        }
    }
    for data in func.inlined.values_mut() {
        let extra: Vec<Block> = data
            .blocks
            .iter()
            .filter_map(|b| blocks.get(b).copied())
            .collect();
        data.blocks.extend(extra);
    }
    LoopCopy { blocks, values }
}

/// Gives `exit` a parameter for each value `header` defines that a block
/// outside the loop and its copy reads, passed from `header` and from its
/// copy, and makes those blocks read the parameter.
pub(crate) fn merge_at_exit(
    func: &mut Function,
    body: &[Block],
    header: Block,
    exit: Block,
    blocks: &HashMap<Block, Block>,
    values: &HashMap<Value, Value>,
) {
    // A loop and its copy: few of the function's blocks (see `LoopCopy`).
    let mut inside: HashSet<Block> = body.iter().copied().collect();
    inside.extend(blocks.values().copied());
    let defined: Vec<Value> = func
        .dfg
        .block_params(header)
        .iter()
        .copied()
        .chain(
            func.layout
                .block_insts(header)
                .iter()
                .flat_map(|&i| func.dfg.inst_results(i).to_vec()),
        )
        .collect();
    let outside: Vec<Block> = func
        .layout
        .blocks()
        .iter()
        .copied()
        .filter(|b| !inside.contains(b))
        .collect();
    // One pass over the outside blocks for all of `defined` (a pass per
    // value made a function of many loops quadratic with a large factor).
    let mut wanted: EntitySet<Value> = EntitySet::with_capacity(func.dfg.num_values());
    for &v in &defined {
        wanted.insert(v);
    }
    let mut used: EntitySet<Value> = EntitySet::with_capacity(func.dfg.num_values());
    let mut readers: Vec<Inst> = Vec::new();
    for &b in &outside {
        for &i in func.layout.block_insts(b) {
            let mut reads = false;
            func.dfg.inst(i).for_each_use(|u| {
                if wanted.contains(u) {
                    used.insert(u);
                    reads = true;
                }
            });
            if reads {
                readers.push(i);
            }
        }
    }
    let mut merged: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    for v in defined {
        if !used.contains(v) {
            continue;
        }
        let m = func.dfg.append_block_param(exit, func.dfg.value_type(v));
        merged[v] = Some(m);
        add_arg(func, header, exit, v);
        add_arg(func, blocks[&header], exit, values[&v]);
    }
    for inst in readers {
        func.dfg.inst_mut(inst).map_uses(|u| merged[u].unwrap_or(u));
    }
}

/// Appends `v` to the arguments of `from`'s branch to `to`.
pub(crate) fn add_arg(func: &mut Function, from: Block, to: Block, v: Value) {
    let last = func.layout.last_inst(from).expect("a terminator");
    for dest in func.dfg.inst_mut(last).destinations_mut() {
        if dest.block == to {
            dest.args.push(v);
        }
    }
}

/// Makes every instruction of `b` read `new` instead of `old`.
pub(crate) fn replace_in_block(func: &mut Function, b: Block, old: Value, new: Value) {
    for inst in func.layout.block_insts(b).to_vec() {
        func.dfg
            .inst_mut(inst)
            .map_uses(|u| if u == old { new } else { u });
    }
}
