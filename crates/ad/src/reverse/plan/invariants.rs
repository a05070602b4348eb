//! Loop invariants: values a block of a counted loop reads that are the
//! same in all the loop's iterations, taped once where the loop is left
//! (see [`Plan::invariants`]), and the trip-array slots that keep them.

use super::Plan;
use adze_ir::{Block, Function, InstData, Opcode, Type, Value, ValueDef};
use cranelift_entity::EntitySet;

impl Plan {
    /// The invariants of counted loop `l`, in push order.
    pub fn invariants_of(&self, l: usize) -> impl Iterator<Item = Value> + '_ {
        self.invariants
            .iter()
            .filter(move |&&(_, lp)| lp == l)
            .map(|&(v, _)| v)
    }

    /// The trip-array slot of invariant `v` of loop `l`.
    pub fn invariant_slot(&self, v: Value, l: usize) -> Option<usize> {
        self.invariants
            .iter()
            .position(|&e| e == (v, l))
            .map(|k| self.loops.len() + k)
    }

    /// Slots of the adjoint's trip array: one per counted loop, then one per
    /// invariant, then one per checkpointed loop.
    pub fn trip_slots(&self) -> usize {
        self.loops.len() + self.invariants.len() + self.checkpointed.len()
    }

    /// For a checkpointed loop `l`: the trip-array slot of the start of the
    /// segment the reverse sweep is in (whose snapshot is on the tape).
    pub fn checkpoint_slot(&self, l: usize) -> Option<usize> {
        let k = self.checkpointed.iter().position(|&c| c == l)?;
        Some(self.loops.len() + self.invariants.len() + k)
    }

    /// `K` of checkpointed loop `l`'s counted hint ([`Plan::checkpoint_every`]).
    pub fn checkpoint_every(&self, l: usize) -> Option<Value> {
        let k = self.checkpointed.iter().position(|&c| c == l)?;
        self.checkpoint_every.get(k).copied().flatten()
    }

    /// Does checkpointed loop `l` of `func` follow a binomial schedule: its
    /// snapshots counted (`#[checkpoint(snapshots = K)]`) and its trip
    /// count known at entry (left only by its header)? Its `K` snapshots
    /// then go where Revolve puts them (`reverse::checkpoint`).
    pub fn checkpoint_binomial(&self, func: &Function, l: usize) -> bool {
        self.checkpoint_every(l).is_some() && self.single_exit(func, l)
    }

    /// The outermost counted loop around `b` that does not contain the
    /// definition of `v`: `v` is the same in all its iterations (its
    /// definition dominates `b`, so it dominates the loop's header).
    pub(super) fn invariant_loop(&self, func: &Function, v: Value, b: Block) -> Option<usize> {
        let def = func.def_block(v)?;
        self.enclosing(b)
            .take_while(|&l| !self.in_loop(l, def))
            .last()
            .or_else(|| self.invariant_load_loop(func, v, b))
    }

    /// The outermost counted loop `l` around `b` in which `v` is a load
    /// that is the same in every iteration: a load from a local `zeros`
    /// array that no instruction of `l` can write, at an index defined
    /// outside `l`, that the loop bounds prove in bounds. Such a value is
    /// taped once, where `l` is left, by loading it again there: the array
    /// and the index are those of the load (defined outside `l`, so they
    /// dominate its exits), the array has not changed, and the proof holds
    /// there too: it rests on an enclosing loop's index, whose body
    /// dominates `l`'s header and so its exits, and on `samelen`s that
    /// dominate the load — which is why a loop with a `samelen` inside is
    /// refused: when it runs zero times, that `samelen` has not run at its
    /// exit (found by review: the load trapped there, depending on the
    /// inline setting; test `a_samelen_inside_the_loop_is_not_relied_on`).
    /// GMM's triangular loop reads
    /// `xc[i]` in every iteration of its inner loop: taped once per inner
    /// loop instead of once per iteration.
    fn invariant_load_loop(&self, func: &Function, v: Value, b: Block) -> Option<usize> {
        let ValueDef::Result { inst, .. } = *func.dfg.value_def(v) else {
            return None;
        };
        let InstData::Binary {
            op: Opcode::Load,
            args: [arr, index],
        } = *func.dfg.inst(inst)
        else {
            return None;
        };
        if !self.safe_loads.contains(inst) {
            return None;
        }
        let ValueDef::Result { inst: z, .. } = *func.dfg.value_def(arr) else {
            return None;
        };
        if !matches!(func.dfg.inst(z), InstData::Zeros { .. }) {
            return None;
        }
        let (def, arr_def, index_def) = (
            func.def_block(v)?,
            func.def_block(arr)?,
            func.def_block(index)?,
        );
        let around: Vec<usize> = self.enclosing(b).collect();
        around.into_iter().rev().find(|&l| {
            let inside = |b: Block| self.in_loop(l, b);
            inside(def) && !inside(arr_def) && !inside(index_def) && {
                let mut cache = self.loop_writes.borrow_mut();
                let (writes, samelen) = cache.entry(l).or_insert_with(|| self.scan_loop(func, l));
                !writes.contains(func.array_root(arr)) && !*samelen
            }
        })
    }

    /// The arrays an instruction of counted loop `l` can change (the root of
    /// any that it takes, unless it is a `load`, `len` or `samelen`: a view
    /// written is its array written), and whether
    /// `l` contains a `samelen`.
    fn scan_loop(&self, func: &Function, l: usize) -> (EntitySet<Value>, bool) {
        let mut writes = EntitySet::new();
        let mut samelen = false;
        for b in self.loop_blocks(l) {
            for &i in func.layout.block_insts(b) {
                let data = func.dfg.inst(i);
                match data {
                    InstData::Binary {
                        op: Opcode::SameLen,
                        ..
                    } => samelen = true,
                    InstData::Binary {
                        op: Opcode::Load, ..
                    }
                    | InstData::Unary {
                        op: Opcode::Len, ..
                    } => {}
                    _ => {
                        // By root: a store through a view writes the
                        // array it views.
                        for &v in data.args() {
                            if func.dfg.value_type(v) == Type::Array {
                                writes.insert(func.array_root(v));
                            }
                        }
                    }
                }
            }
        }
        (writes, samelen)
    }

    /// The load a loop invariant is, when it is defined inside loop `l`
    /// (see [`Plan::invariant_load_loop`]): the augmented primal loads it
    /// again, as `(array, index)`, where `l` is left.
    pub fn reloaded_invariant(
        &self,
        func: &Function,
        v: Value,
        l: usize,
    ) -> Option<(Value, Value)> {
        let ValueDef::Result { inst, .. } = *func.dfg.value_def(v) else {
            return None;
        };
        if !self.in_loop(l, func.layout.inst_block(inst)?) {
            return None;
        }
        match *func.dfg.inst(inst) {
            InstData::Binary {
                op: Opcode::Load,
                args: [arr, index],
            } => Some((arr, index)),
            _ => None,
        }
    }
}
