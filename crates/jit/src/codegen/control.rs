//! Branches, returns and calls between generated functions.

use super::values::Slot;
use super::{flags, Translator};
use crate::rt::SiteKind;
use crate::JitError;
use adze_ir::{
    Block as IrBlock, BlockCall, FuncId as IrFuncId, Inst, InstData, Type, Value as IrValue,
    ValueDef,
};
use cranelift_codegen::ir::{self as cl, BlockArg, InstBuilder};

/// Does `data` call out of the generated code (clobbering every vector
/// register)? Out-of-line intrinsics (those with a libcall), calls, and
/// `zeros` (its allocation).
pub(super) fn calls_out(data: &InstData) -> bool {
    match data {
        InstData::Call { .. } | InstData::Zeros { .. } => true,
        InstData::Unary { op, .. } | InstData::Binary { op, .. } => op.libcall().is_some(),
        _ => false,
    }
}

impl Translator<'_, '_> {
    fn block_args(&mut self, args: &[IrValue]) -> Result<Vec<BlockArg>, JitError> {
        args.iter()
            .map(|&v| self.scalar(v).map(BlockArg::from))
            .collect()
    }

    /// The Cranelift block of `blk`.
    pub(super) fn dest(&self, blk: IrBlock) -> Result<cl::Block, JitError> {
        self.blocks[blk].ok_or_else(|| self.err(format!("branch to unknown block {blk}")))
    }

    pub(super) fn jump(&mut self, dest: &BlockCall) -> Result<(), JitError> {
        let args = self.block_args(&dest.args)?;
        let target = self.dest(dest.block)?;
        self.b.ins().jump(target, &args);
        Ok(())
    }

    /// `brif cond, then, else`.
    ///
    /// A loop header that stays in the loop on `then`: branch on the
    /// complement, to the exit first. Cranelift lays blocks out in its
    /// reverse postorder, which visits a branch's first target first and so
    /// places the *second* right after the branch; this way the loop body
    /// follows the header and an iteration takes one jump (the back edge)
    /// instead of two.
    pub(super) fn brif(
        &mut self,
        inst: Inst,
        cond: IrValue,
        then_dest: &BlockCall,
        else_dest: &BlockCall,
    ) -> Result<(), JitError> {
        let func = self.func;
        let here = func.layout.inst_block(inst);
        let flip = here.is_some_and(|b| self.exit_first.contains(b));
        let flipped = match func.dfg.value_def(cond) {
            ValueDef::Result { inst: c, .. } if flip => match *func.dfg.inst(*c) {
                InstData::Cmp { op, cond, args } => {
                    Some(self.compare(op, cond, args[0], args[1], true)?)
                }
                _ => None,
            },
            _ => None,
        };
        let targs = self.block_args(&then_dest.args)?;
        let eargs = self.block_args(&else_dest.args)?;
        let (t, e) = (self.dest(then_dest.block)?, self.dest(else_dest.block)?);
        match flipped {
            Some(nc) => {
                self.b.ins().brif(nc, e, &eargs, t, &targs);
            }
            None => {
                let c = self.scalar(cond)?;
                self.b.ins().brif(c, t, &targs, e, &eargs);
            }
        }
        Ok(())
    }

    /// `return args`: stores the results at the out-pointer, then the
    /// epilogue and status 0.
    pub(super) fn ret(&mut self, args: &[IrValue]) -> Result<(), JitError> {
        let out = self.slot_load(self.env.ptr, self.frame.slot, 0);
        for (k, &v) in args.iter().enumerate() {
            if self.func.dfg.value_type(v).is_array() {
                // An array result (one this function owns, the verifier
                // says) goes to the caller: its length in the result slot,
                // the array itself through `adze_give`, before the
                // epilogue frees the frame's arrays.
                let (_, len) = self.array(v)?;
                self.store_slot(len, out, k);
                let (ss, off) = self
                    .frame
                    .zeros_slot(v)
                    .ok_or_else(|| self.err(format!("returns {v}, an array it does not own")))?;
                let idx = self.slot_load(cl::types::I64, ss, off);
                let give = self.import("adze_give")?;
                self.b.ins().call(give, &[self.ctx, idx]);
                continue;
            }
            let x = self.scalar(v)?;
            self.store_slot(x, out, k);
        }
        self.store_tape_lens();
        self.epilogue()?;
        let ok = self.b.ins().iconst(cl::types::I32, 0);
        self.b.ins().return_(&[ok]);
        Ok(())
    }

    /// Stores a scalar into 8-byte slot `k` at `base` (bool widened to i64).
    fn store_slot(&mut self, x: cl::Value, base: cl::Value, k: usize) {
        let x = if self.b.func.dfg.value_type(x) == cl::types::I8 {
            self.b.ins().uextend(cl::types::I64, x)
        } else {
            x
        };
        self.b.ins().store(flags(), x, base, (8 * k) as i32);
    }

    /// A call of a generated function: the call, the test of its status
    /// (a trap leaves through this frame's trap exit) and its results.
    pub(super) fn call(
        &mut self,
        inst: Inst,
        callee: IrFuncId,
        args: &[IrValue],
    ) -> Result<(), JitError> {
        let id = self.env.funcs[callee].ok_or_else(|| {
            self.err(format!(
                "call to @{} which was not compiled",
                self.env.module.func(callee).name
            ))
        })?;
        let mut cargs = vec![self.ctx];
        for &a in args {
            match self.slot(a)? {
                Slot::Array { .. } => {
                    let (ptr, len) = self.array(a)?;
                    cargs.push(ptr);
                    cargs.push(len);
                }
                Slot::Scalar(_) | Slot::Split(..) => {
                    let x = self.scalar(a)?;
                    cargs.push(x);
                }
            }
        }
        let func = self.func;
        let results = func.dfg.inst_results(inst);
        let out = match self.frame.results {
            Some(_) if !results.is_empty() => self.slot_load(self.env.ptr, self.frame.slot, 24),
            _ => self.b.ins().iconst(self.env.ptr, 0),
        };
        cargs.push(out);
        let f = self.func_ref(id);
        // The callee pushes and pops through `Ctx` (`enter_tape_lens`).
        self.store_tape_lens();
        let c = self.b.ins().call(f, &cargs);
        let status = self.b.inst_results(c)[0];
        self.after_call(inst, status);
        self.load_tape_lens();
        self.call_results(results)
    }

    /// Branches on the status of the call `inst`: a callee that trapped
    /// leaves through the trap exit, first through a cold block that gives
    /// a call-depth fault of its entry this call's location (`adze_trap`
    /// with a `Call` site) when the call has one.
    fn after_call(&mut self, inst: Inst, status: cl::Value) {
        let cont = self.b.create_block();
        if self.func.dfg.srcloc(inst).is_some() {
            let site = self.new_site(SiteKind::Call);
            let cold = self.b.create_block();
            self.b.set_cold_block(cold);
            self.b.ins().brif(status, cold, &[], cont, &[]);
            self.b.switch_to_block(cold);
            let s = self.b.ins().iconst(cl::types::I64, site);
            let trap_fn = self.frame.trap_fn;
            self.b.ins().call(trap_fn, &[self.ctx, s, s, s]);
            self.b.ins().jump(self.frame.trap_exit, &[]);
        } else {
            self.b
                .ins()
                .brif(status, self.frame.trap_exit, &[], cont, &[]);
        }
        self.b.switch_to_block(cont);
    }

    /// Defines the `results` of a call from their 8-byte slots in
    /// `Frame::results`; an array result from the arrays the callee handed
    /// over (last first, `adze_adopt`), with its length from its slot.
    fn call_results(&mut self, results: &[IrValue]) -> Result<(), JitError> {
        let Some(out) = self.frame.results else {
            return Ok(());
        };
        for (k, &r) in results.iter().enumerate().rev() {
            if !self.func.dfg.value_type(r).is_array() {
                continue;
            }
            let off = (8 * k) as i32;
            let len = self.slot_load(cl::types::I64, out, off);
            let (ss, soff) = self
                .frame
                .zeros_slot(r)
                .ok_or_else(|| self.err(format!("call result {r} has no slot")))?;
            let slot = self.b.ins().stack_addr(self.env.ptr, ss, soff);
            let adopt = self.import("adze_adopt")?;
            let c = self.b.ins().call(adopt, &[self.ctx, slot]);
            let ptr = self.b.inst_results(c)[0];
            let failed =
                self.b
                    .ins()
                    .icmp_imm_s(cranelift_codegen::ir::condcodes::IntCC::Equal, ptr, 0);
            self.trap_if(failed, SiteKind::OutOfMemory, Some(len), Some(len));
            let lss = self.b.create_sized_stack_slot(cl::StackSlotData::new(
                cl::StackSlotKind::ExplicitSlot,
                8,
                3,
            ));
            self.b.ins().stack_store(self.env.ptr, len, lss, 0);
            self.set_array(r, ptr, super::values::ArrayLen::Slot(lss));
        }
        for (k, &r) in results.iter().enumerate() {
            let off = (8 * k) as i32;
            let x = match self.func.dfg.value_type(r) {
                Type::F64x2 => return Err(self.err("a call with an f64x2 result".into())),
                Type::F64 => self.slot_load(cl::types::F64, out, off),
                Type::I64 => self.slot_load(cl::types::I64, out, off),
                Type::Bool => {
                    let w = self.slot_load(cl::types::I64, out, off);
                    self.b.ins().ireduce(cl::types::I8, w)
                }
                Type::Array | Type::IArray => continue,
            };
            self.set_scalar(r, x);
        }
        Ok(())
    }
}
