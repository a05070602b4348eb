//! Bounds checks of `load` and `store`, `samelen`, and the facts that
//! prove checks redundant: constant indices into arrays of constant length,
//! checks already made in the block, arrays of one length (`samelen`) and
//! the accesses the bounds of their loops prove
//! (`adze_ir::bounds::safe_accesses_below_start`).

use super::Translator;
use crate::rt::SiteKind;
use crate::JitError;
use adze_ir::bounds::LengthClasses;
use adze_ir::{Function, Inst, InstData, Value as IrValue};
use cranelift_codegen::entity::EntitySet;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self as cl, InstBuilder};
use std::collections::{HashMap, HashSet};

/// What the translator knows about the lengths of arrays and the indices
/// already checked.
///
/// The facts of one block are `HashMap`s and `HashSet`s rather than
/// entity maps: they are emptied at every block and hold the few arrays
/// (and indices) accessed there, and refilling a cleared `SecondaryMap`
/// costs up to the highest value number each time, the number of blocks
/// times the number of values in all.
pub(super) struct Bounds {
    /// Per array (the representative of its length class), the largest
    /// constant index proven in bounds in the current IR block.
    proven_max: HashMap<IrValue, i64>,
    /// (array's length class, index) pairs checked in the current IR block.
    proven_pairs: HashSet<(IrValue, IrValue)>,
    /// Arrays of equal length, as a `samelen` that has run proves: each
    /// array to a representative of its class. Facts of the entry block
    /// hold in every block (it dominates them all); others only in the
    /// rest of their own block. A check of `a[i]` then proves `b[i]`.
    same_len: LengthClasses,
    /// `same_len` as it was at the end of the entry block.
    entry_same_len: LengthClasses,
    /// Accesses that the bounds of their loop prove in bounds
    /// (`adze_ir::bounds::safe_accesses_below_start`).
    loop_safe: EntitySet<Inst>,
}

impl Bounds {
    pub(super) fn new(func: &Function) -> Bounds {
        let loop_safe = adze_ir::bounds::safe_accesses_below_start(func);
        Bounds {
            proven_max: HashMap::new(),
            proven_pairs: HashSet::new(),
            same_len: LengthClasses::default(),
            entry_same_len: LengthClasses::default(),
            loop_safe,
        }
    }

    /// Enters the `n`-th block of the order: only the entry block's
    /// `samelen` facts carry over.
    pub(super) fn enter_block(&mut self, n: usize) {
        self.proven_max.clear();
        self.proven_pairs.clear();
        if n == 1 {
            self.entry_same_len = self.same_len.clone();
        }
        self.same_len = self.entry_same_len.clone();
    }

    /// The representative of the arrays known to have `arr`'s length.
    pub(super) fn len_class(&self, arr: IrValue) -> IrValue {
        self.same_len.rep(arr)
    }
}

impl Translator<'_, '_> {
    /// The immediate of `v` if it is an `iconst`.
    fn const_of(&self, v: IrValue) -> Option<i64> {
        self.func.iconst_value(v)
    }

    /// The length of `arr` if it is a `zeros` of a constant length.
    fn const_len(&self, arr: IrValue) -> Option<i64> {
        match self.func.def_inst(arr)? {
            InstData::Zeros { len, .. } => self.const_of(*len),
            _ => None,
        }
    }

    /// Bounds-checks `idx` against `arr` and returns the element address.
    ///
    /// The check is left out when it cannot fail: a constant index below the
    /// constant length of a `zeros` array, a constant index at most one that
    /// an earlier check in the same IR block proved in bounds, an
    /// (array, index) pair already checked in the same IR block (array
    /// lengths never change), or an access that the bounds of its counted
    /// loop prove in bounds (`adze_ir::bounds::safe_accesses`).
    pub(super) fn element_addr(
        &mut self,
        arr: IrValue,
        idx: IrValue,
    ) -> Result<cl::Value, JitError> {
        let ptr = self.array_ptr(arr)?;
        let i = self.scalar(idx)?;
        let k = self.const_of(idx).filter(|&k| k >= 0);
        let bounds = &self.bounds;
        let safe = match k {
            Some(k) => {
                self.const_len(arr).is_some_and(|n| k < n)
                    || bounds
                        .proven_max
                        .get(&bounds.len_class(arr))
                        .is_some_and(|&m| k <= m)
            }
            None => false,
        } || bounds.proven_pairs.contains(&(bounds.len_class(arr), idx))
            || self.cur.is_some_and(|i| bounds.loop_safe.contains(i));
        if !safe {
            self.check_index(arr, i)?;
            let class = self.bounds.len_class(arr);
            self.bounds.proven_pairs.insert((class, idx));
            if let Some(k) = k {
                let m = self.bounds.proven_max.entry(class).or_insert(k);
                *m = (*m).max(k);
            }
        }
        let off = self.b.ins().ishl_imm_u(i, 3);
        Ok(self.b.ins().iadd(ptr, off))
    }

    /// The address of elements `idx` and `idx + 1` of `arr` (`vload`,
    /// `vstore`): checks `idx` as [`Translator::element_addr`] does, then
    /// `idx + 1`, each with the error of a scalar access there (the
    /// interpreter's order); neither when the bounds of the loop prove
    /// both (`adze_ir::bounds` proves a two-lane access only whole).
    pub(super) fn pair_addr(&mut self, arr: IrValue, idx: IrValue) -> Result<cl::Value, JitError> {
        let addr = self.element_addr(arr, idx)?;
        if !self.cur.is_some_and(|i| self.bounds.loop_safe.contains(i)) {
            let i = self.scalar(idx)?;
            let next = self.b.ins().iadd_imm_s(i, 1);
            self.check_index(arr, next)?;
        }
        Ok(addr)
    }

    /// Traps with `IndexOutOfBounds` unless `0 <= i < len(arr)`.
    fn check_index(&mut self, arr: IrValue, i: cl::Value) -> Result<(), JitError> {
        let len = self.array_len(arr)?;
        let oob = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
        let array = self.func.array_name(arr);
        self.trap_if(
            oob,
            SiteKind::IndexOutOfBounds { array },
            Some(i),
            Some(len),
        );
        Ok(())
    }

    /// `samelen a, b`: traps unless the arrays have one length, then
    /// records that they do. Nothing when an earlier `samelen` proved it.
    pub(super) fn same_len(&mut self, a: IrValue, b: IrValue) -> Result<(), JitError> {
        if self.bounds.len_class(a) == self.bounds.len_class(b) {
            // An earlier `samelen` already proved it.
            return Ok(());
        }
        let la = self.array_len(a)?;
        let lb = self.array_len(b)?;
        let differ = self.b.ins().icmp(IntCC::NotEqual, la, lb);
        let kind = SiteKind::ShadowLengthMismatch {
            array: self.func.array_name(a),
            shadow: self.func.array_name(b),
        };
        self.trap_if(differ, kind, None, None);
        self.bounds.same_len.join(a, b);
        Ok(())
    }
}
