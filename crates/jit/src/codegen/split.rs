//! The values whose live ranges `crate::spill` splits around calls and
//! loops. Each is a Cranelift `Variable` with an 8-byte stack slot; within
//! an IR block the translator tracks where the value's current version is
//! (register, slot), stores it before the calls and loops the plan names,
//! and reloads it where it is used out of its register.

use super::{scalar_type, Translator};
use crate::spill::SpillPlan;
use crate::JitError;
use adze_ir::{Block as IrBlock, Function, Value as IrValue};
use cranelift_codegen::ir::{self as cl, InstBuilder, StackSlotData, StackSlotKind};
use cranelift_frontend::Variable;
use std::collections::HashMap;

use super::values::{Ptr, Slot};

/// The split values and where they are.
pub(super) struct Split {
    /// Which values are split, and where they are to be on block entries,
    /// around calls and before loops.
    pub(super) plan: SpillPlan,
    /// The location of the split values in the current IR block. A
    /// `HashMap` rather than a `SecondaryMap`: it is emptied at every block
    /// and holds the few values live there, and refilling a cleared
    /// `SecondaryMap` costs up to the highest value number each time, the
    /// number of blocks times the number of values in all.
    at: HashMap<IrValue, Location>,
}

/// Where the current version of a split value is, within an IR block:
/// in a register (the variable's current SSA version), in its slot. A
/// value not listed is in a register only (it was just defined).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Location {
    reg: bool,
    slot: bool,
}

impl Split {
    pub(super) fn new(plan: SpillPlan) -> Split {
        Split {
            plan,
            at: HashMap::new(),
        }
    }

    /// Enters `blk`: each split value live into it is where the plan says.
    pub(super) fn enter_block(&mut self, func: &Function, blk: IrBlock) -> Result<(), JitError> {
        self.at.clear();
        for &(v, reg, slot) in &self.plan.entry[blk] {
            if !reg && !slot {
                return Err(JitError::Codegen {
                    func: func.name.clone(),
                    message: format!("the spill plan lost {v} on entry to {blk}"),
                });
            }
            self.at.insert(v, Location { reg, slot });
        }
        Ok(())
    }

    /// A new version of `v` was just defined: it is in a register only.
    pub(super) fn defined(&mut self, v: IrValue) {
        self.at.remove(&v);
    }

    /// A call clobbered the registers of `values`, which were saved before
    /// it: they are in their slots only.
    pub(super) fn clobbered<'v>(&mut self, values: impl Iterator<Item = &'v IrValue>) {
        for &v in values {
            self.at.insert(
                v,
                Location {
                    reg: false,
                    slot: true,
                },
            );
        }
    }

    /// Where the split value `v` is in the current block (one not listed
    /// was just defined: in a register only).
    fn location(&self, v: IrValue) -> Location {
        self.at.get(&v).copied().unwrap_or(Location {
            reg: true,
            slot: false,
        })
    }
}

impl Translator<'_, '_> {
    /// Defines the split parameters of `blk` from those of its Cranelift
    /// block `cb` (the others are defined when the blocks are created).
    pub(super) fn define_split_params(&mut self, blk: IrBlock, cb: cl::Block) {
        let func = self.func;
        let cvs = self.b.block_params(cb).to_vec();
        for (&p, &cv) in func.dfg.block_params(blk).iter().zip(cvs.iter()) {
            if self.split.plan.is_split(p) {
                self.set_scalar(p, cv);
            }
        }
    }

    /// Before the terminator of `blk`: the stores a successor needs, the
    /// reloads before a loop, and the values parked while a loop runs.
    pub(super) fn before_terminator(&mut self, blk: IrBlock) -> Result<(), JitError> {
        let list = self.split.plan.store_at_end[blk].clone();
        if !list.is_empty() {
            self.save(&list, false)?;
        }
        for v in self.split.plan.reload_at_end[blk].clone() {
            self.reload(v)?;
        }
        let list = self.split.plan.park[blk].clone();
        if !list.is_empty() {
            self.save(&list, true)?;
        }
        Ok(())
    }

    /// The current version of the split value `v`, reloaded from its slot
    /// when it is not in a register.
    pub(super) fn read_split(&mut self, v: IrValue, var: Variable, ss: cl::StackSlot) -> cl::Value {
        let at = self.split.location(v);
        if !at.reg {
            let ty = scalar_type(self.func.dfg.value_type(v)).unwrap_or(self.env.ptr);
            let x = self.slot_load(ty, ss, 0);
            self.b.def_var(var, x);
            self.split.at.insert(
                v,
                Location {
                    reg: true,
                    slot: true,
                },
            );
        }
        self.b.use_var(var)
    }

    /// The variable and the slot of `v`, if it is split and defined.
    fn split_of(&self, v: IrValue) -> Option<(Variable, cl::StackSlot)> {
        match self.vals[v]? {
            Slot::Split(var, ss)
            | Slot::Array {
                ptr: Ptr::Split(var, ss),
                ..
            } => Some((var, ss)),
            _ => None,
        }
    }

    /// A variable and a slot for the split value `v`, made at its first
    /// definition.
    pub(super) fn split_home(&mut self, v: IrValue, ty: cl::Type) -> (Variable, cl::StackSlot) {
        self.split_of(v).unwrap_or_else(|| {
            let var = self.b.declare_var(ty);
            let ss = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                8,
                3,
            ));
            (var, ss)
        })
    }

    /// Puts the split value `v` in a register (reloading it if needed).
    fn reload(&mut self, v: IrValue) -> Result<(), JitError> {
        let (var, ss) = self
            .split_of(v)
            .ok_or_else(|| self.err(format!("{v} is to be reloaded but is not split")))?;
        self.read_split(v, var, ss);
        Ok(())
    }

    /// Puts each value of `list` in its slot (unless it is there already);
    /// with `drop`, it then leaves its register (a call clobbers it, or a
    /// loop it is not used in wants the register).
    pub(super) fn save(&mut self, list: &[IrValue], drop: bool) -> Result<(), JitError> {
        for &v in list {
            let (var, ss) = self
                .split_of(v)
                .ok_or_else(|| self.err(format!("{v} is to be saved but is not split")))?;
            let at = self.split.location(v);
            if !at.slot {
                let x = self.read_split(v, var, ss);
                self.b.ins().stack_store(self.env.ptr, x, ss, 0);
            }
            let reg = !drop && (at.reg || !at.slot);
            self.split.at.insert(v, Location { reg, slot: true });
        }
        Ok(())
    }
}
