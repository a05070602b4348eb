//! Where each IR value is: a Cranelift value, the pointer and the length of
//! an array, or a split value's variable (`split`).

use super::Translator;
use crate::JitError;
use adze_ir::{Inst, Value as IrValue};
use cranelift_codegen::ir::{self as cl, InstBuilder, StackSlotData, StackSlotKind};
use cranelift_frontend::Variable;

/// A translated IR value.
#[derive(Copy, Clone)]
pub(super) enum Slot {
    Scalar(cl::Value),
    Array {
        ptr: Ptr,
        len: ArrayLen,
    },
    /// A scalar whose live range is split (`crate::spill`): read with
    /// `use_var`, kept in its stack slot where the plan says.
    Split(Variable, cl::StackSlot),
}

/// Where an array's pointer is.
#[derive(Clone, Copy)]
pub(super) enum Ptr {
    Value(cl::Value),
    /// Split like a scalar (`crate::spill`).
    Split(Variable, cl::StackSlot),
}

/// Where an array's length is.
#[derive(Clone, Copy)]
pub(super) enum ArrayLen {
    /// The IR value of a `zeros` array's requested length.
    Of(IrValue),
    /// In a stack slot, stored on entry (a parameter array). Hot loops
    /// read a parameter's length only in bounds checks the loop does not
    /// prove; kept in a register, the lengths of a function's parameter
    /// arrays competed with its loop variables for registers (GMM's
    /// primal spilled and reloaded its inner loop's operands).
    Slot(cl::StackSlot),
}

impl Translator<'_, '_> {
    /// Defines the entry block's parameters from the Cranelift function's
    /// `params` (`ctx` first, then the IR parameters, arrays as a pointer
    /// and a length).
    pub(super) fn bind_params(&mut self, params: &[cl::Value]) {
        let func = self.func;
        let mut k = 1;
        for &v in func.params() {
            if func.dfg.value_type(v).is_array() {
                let ss = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    8,
                    3,
                ));
                self.b.ins().stack_store(self.env.ptr, params[k + 1], ss, 0);
                self.set_array(v, params[k], ArrayLen::Slot(ss));
                k += 2;
            } else {
                self.set_scalar(v, params[k]);
                k += 1;
            }
        }
    }

    pub(super) fn slot(&self, v: IrValue) -> Result<Slot, JitError> {
        self.vals[v].ok_or_else(|| self.err(format!("{v} is used before it is defined")))
    }

    pub(super) fn scalar(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Scalar(x) => Ok(x),
            Slot::Split(var, ss) => Ok(self.read_split(v, var, ss)),
            Slot::Array { .. } => Err(self.err(format!("{v} is an array, a scalar was expected"))),
        }
    }

    pub(super) fn array(&mut self, v: IrValue) -> Result<(cl::Value, cl::Value), JitError> {
        let ptr = self.array_ptr(v)?;
        Ok((ptr, self.array_len(v)?))
    }

    pub(super) fn array_ptr(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Array {
                ptr: Ptr::Value(ptr),
                ..
            } => Ok(ptr),
            Slot::Array {
                ptr: Ptr::Split(var, ss),
                ..
            } => Ok(self.read_split(v, var, ss)),
            Slot::Scalar(_) | Slot::Split(..) => {
                Err(self.err(format!("{v} is a scalar, an array was expected")))
            }
        }
    }

    pub(super) fn array_len(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Array {
                len: ArrayLen::Of(n),
                ..
            } => self.scalar(n),
            Slot::Array {
                len: ArrayLen::Slot(ss),
                ..
            } => Ok(self.slot_load(cl::types::I64, ss, 0)),
            Slot::Scalar(_) | Slot::Split(..) => {
                Err(self.err(format!("{v} is a scalar, an array was expected")))
            }
        }
    }

    /// Defines the scalar value `v` as `x`: directly, or as a new version
    /// of its variable when `v` is split.
    pub(super) fn set_scalar(&mut self, v: IrValue, x: cl::Value) {
        let slot = if self.split.plan.is_split(v) {
            let ty = self.b.func.dfg.value_type(x);
            let (var, ss) = self.split_home(v, ty);
            self.b.def_var(var, x);
            self.split.defined(v);
            Slot::Split(var, ss)
        } else {
            Slot::Scalar(x)
        };
        self.vals[v] = Some(slot);
    }

    /// Defines the array value `v` with pointer `ptr`.
    pub(super) fn set_array(&mut self, v: IrValue, ptr: cl::Value, len: ArrayLen) {
        let ptr = if self.split.plan.is_split(v) {
            let (var, ss) = self.split_home(v, self.env.ptr);
            self.b.def_var(var, ptr);
            self.split.defined(v);
            Ptr::Split(var, ss)
        } else {
            Ptr::Value(ptr)
        };
        self.vals[v] = Some(Slot::Array { ptr, len });
    }

    /// Defines the (first) result of `inst` as `x`.
    pub(super) fn define(&mut self, inst: Inst, x: cl::Value) {
        let r = self.func.dfg.first_result(inst);
        self.set_scalar(r, x);
    }
}
