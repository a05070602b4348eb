//! The frame of a generated function: its stack slots, the prologue and the
//! epilogue, trap sites with the cold paths that report them, and the time
//! limit's polls.

use super::{flags, Env, Shape, Translator, TRAPPED};
use crate::rt::{
    SiteKind, TrapSite, DEPTH_OFFSET, INTERRUPT_OFFSET, LIVE_OFFSET, STACK_LIMIT_OFFSET,
};
use crate::JitError;
use adze_ir::Function;
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self as cl, FuncRef, InstBuilder, StackSlotData, StackSlotKind};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::Module as _;

/// The stack slots of a frame, its trap exit and its cold paths.
pub(super) struct Frame {
    /// The out-pointer, the call depth on entry and (functions with
    /// `zeros`) the allocation mark, at offsets 0, 8 and 16: read only on
    /// return, so they live on the stack rather than in three registers
    /// through the whole function. At offset 24, the address of `results`
    /// (functions that call one with results), the out-pointer of those
    /// calls: read before each call, because a `stack_addr` is hoisted to
    /// the entry and would hold a callee-saved register through every loop
    /// (one that calls a function, a recursion's, then kept its counters in
    /// memory).
    pub(super) slot: cl::StackSlot,
    has_mark: bool,
    /// `adze_trap`.
    pub(super) trap_fn: FuncRef,
    /// The cold block that frees the frame's arrays and returns `TRAPPED`.
    pub(super) trap_exit: cl::Block,
    /// The 8-byte result slots of a call, as many as the call with the
    /// most results needs.
    pub(super) results: Option<cl::StackSlot>,
    /// One 8-byte slot per `zeros` instruction: the `Ctx::allocs` index of
    /// the array it made last in this frame, or -1 (see `rt::adze_alloc`).
    zeros_slot: Option<cl::StackSlot>,
    /// Offset of each `zeros` instruction's slot in `zeros_slot`.
    zeros: SecondaryMap<adze_ir::Value, Option<i32>>,
    /// How many `zeros` instructions there are.
    n_zeros: usize,
    /// The cold block of the time limit's polls and its trap site
    /// (`Translator::poll`), filled in by `Translator::finish`.
    timeout: Option<(cl::Block, i64)>,
}

impl Frame {
    /// Declares `adze_trap`, creates the trap exit and the frame's stack
    /// slots, and stores the out-pointer, the call depth (returned) and the
    /// allocation mark in the entry block, where `b` is.
    pub(super) fn enter(
        b: &mut FunctionBuilder<'_>,
        env: &Env<'_>,
        jm: &mut JITModule,
        func: &Function,
        shape: &Shape,
        params: &[cl::Value],
    ) -> Result<(Frame, cl::Value), JitError> {
        let (ctx, out) = (params[0], params[params.len() - 1]);
        let trap_id = *env
            .imports
            .get("adze_trap")
            .ok_or_else(|| JitError::Codegen {
                func: func.name.clone(),
                message: "symbol `adze_trap` is not registered".into(),
            })?;
        let trap_fn = jm.declare_func_in_func(trap_id, b.func);
        let trap_exit = b.create_block();
        b.set_cold_block(trap_exit);

        let has_zeros = !shape.zeros.is_empty();
        let depth = b.ins().load(cl::types::I64, flags(), ctx, DEPTH_OFFSET);
        let mark = has_zeros.then(|| b.ins().load(cl::types::I64, flags(), ctx, LIVE_OFFSET));
        let slot =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 32, 3));
        b.ins().stack_store(env.ptr, out, slot, 0);
        b.ins().stack_store(env.ptr, depth, slot, 8);
        if let Some(mark) = mark {
            b.ins().stack_store(env.ptr, mark, slot, 16);
        }
        let mut slots = |n: usize| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                8 * n as u32,
                3,
            ))
        };
        let results = (shape.max_results > 0).then(|| slots(shape.max_results));
        let zeros_slot = has_zeros.then(|| slots(shape.zeros.len()));
        if let Some(ss) = results {
            let addr = b.ins().stack_addr(env.ptr, ss, 0);
            b.ins().stack_store(env.ptr, addr, slot, 24);
        }
        let mut zeros = SecondaryMap::new();
        for (k, &v) in shape.zeros.iter().enumerate() {
            zeros[v] = Some(8 * k as i32);
        }
        let frame = Frame {
            slot,
            has_mark: mark.is_some(),
            trap_fn,
            trap_exit,
            results,
            zeros_slot,
            zeros,
            n_zeros: shape.zeros.len(),
            timeout: None,
        };
        Ok((frame, depth))
    }

    /// The slot of the array `v` the function owns (made by `zeros` or
    /// returned by a call) and its offset.
    pub(super) fn zeros_slot(&self, v: adze_ir::Value) -> Option<(cl::StackSlot, i32)> {
        Some((self.zeros_slot?, self.zeros[v]?))
    }
}

impl Translator<'_, '_> {
    /// The rest of the prologue, after `Frame::enter`: the call depth and
    /// native stack checks, the time limit's poll, `depth + 1` and the
    /// `zeros` slots.
    pub(super) fn prologue(&mut self, depth: cl::Value) {
        let limit = self.env.limits.max_call_depth;
        let over =
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, depth, i64::from(limit));
        let zero = self.b.ins().iconst(cl::types::I64, 0);
        self.trap_if(
            over,
            SiteKind::CallDepthExceeded { limit },
            Some(zero),
            Some(zero),
        );
        // Native stack check (see `Compiled::call`).
        let ptr = self.env.ptr;
        let sp = self.b.ins().get_stack_pointer(ptr);
        let lim = self
            .b
            .ins()
            .load(ptr, flags(), self.ctx, STACK_LIMIT_OFFSET);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, lim);
        self.trap_if(low, SiteKind::StackExhausted, Some(zero), Some(zero));
        // The time limit: a recursion without loops polls here.
        if self.env.limits.timeout.is_some() {
            self.poll();
        }
        let d1 = self.b.ins().iadd_imm_s(depth, 1);
        self.b.ins().store(flags(), d1, self.ctx, DEPTH_OFFSET);
        if let Some(ss) = self.frame.zeros_slot {
            let none = self.b.ins().iconst(cl::types::I64, -1);
            for k in 0..self.frame.n_zeros {
                self.b.ins().stack_store(ptr, none, ss, 8 * k as i32);
            }
        }
    }

    /// Frees this frame's arrays and restores the call depth.
    pub(super) fn epilogue(&mut self) -> Result<(), JitError> {
        if self.frame.has_mark {
            let free = self.import("adze_free_to")?;
            let mark = self.slot_load(cl::types::I64, self.frame.slot, 16);
            self.b.ins().call(free, &[self.ctx, mark]);
        }
        let depth = self.slot_load(cl::types::I64, self.frame.slot, 8);
        self.b.ins().store(flags(), depth, self.ctx, DEPTH_OFFSET);
        Ok(())
    }

    /// The shared cold paths (tape mismatch, time limit) and the trap exit;
    /// then seals and finalizes the function.
    pub(super) fn finish(mut self) -> Result<(), JitError> {
        let trap_exit = self.frame.trap_exit;
        for (block, site) in self.tapes.mismatch.into_iter().chain(self.frame.timeout) {
            self.b.switch_to_block(block);
            let site = self.b.ins().iconst(cl::types::I64, site);
            let trap_fn = self.frame.trap_fn;
            self.b.ins().call(trap_fn, &[self.ctx, site, site, site]);
            self.b.ins().jump(trap_exit, &[]);
        }
        self.b.switch_to_block(trap_exit);
        self.epilogue()?;
        let status = self.b.ins().iconst(cl::types::I32, TRAPPED);
        self.b.ins().return_(&[status]);

        self.b.seal_all_blocks();
        let cfg = self.jm.target_config();
        self.b.finalize(cfg);
        Ok(())
    }

    /// A new trap site of `kind` at the current instruction.
    pub(super) fn new_site(&mut self, kind: SiteKind) -> i64 {
        // The inlined code the current instruction comes from; the error
        // keeps it only for faults of one instruction
        // (`TrapKind::is_at_instruction`), as the interpreter does.
        let inlined = self
            .cur
            .and_then(|i| self.func.layout.inst_block(i))
            .and_then(|b| self.inlined_owner[b])
            .map_or_else(Vec::new, |i| self.func.inlined_callees(i));
        let loc = self
            .cur
            .and_then(|i| self.env.module.location(self.func.dfg.srcloc(i)));
        self.sites.push(TrapSite {
            func: self.func.error_name().to_string(),
            inlined,
            loc,
            kind,
        });
        (self.sites.len() - 1) as i64
    }

    /// Branches to a cold block that records trap site `kind` (with run-time
    /// operands `a`, `b`) and leaves through `trap_exit` when `cond` is
    /// nonzero; continues in a fresh block otherwise.
    pub(super) fn trap_if(
        &mut self,
        cond: cl::Value,
        kind: SiteKind,
        a: Option<cl::Value>,
        b: Option<cl::Value>,
    ) {
        let site = self.new_site(kind);
        let cont = self.b.create_block();
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let s = self.b.ins().iconst(cl::types::I64, site);
        let a = a.unwrap_or(s);
        let b = b.unwrap_or(s);
        let trap_fn = self.frame.trap_fn;
        self.b.ins().call(trap_fn, &[self.ctx, s, a, b]);
        self.b.ins().jump(self.frame.trap_exit, &[]);
        self.b.switch_to_block(cont);
    }

    /// Polls the time limit's flag (`Ctx::interrupt`): an atomic load
    /// (a plain load on x86-64 that Cranelift never hoists or merges),
    /// branching to the function's cold timeout block when it is set.
    pub(super) fn poll(&mut self) {
        let block = match self.frame.timeout {
            Some((b, _)) => b,
            None => {
                let block = self.b.create_block();
                self.b.set_cold_block(block);
                let limit = self.env.limits.timeout.unwrap_or_default();
                let site = self.new_site(SiteKind::Timeout { limit });
                self.frame.timeout = Some((block, site));
                block
            }
        };
        let flag = self
            .b
            .ins()
            .load(self.env.ptr, flags(), self.ctx, INTERRUPT_OFFSET);
        let set = self.b.ins().atomic_load(cl::types::I8, flags(), flag);
        let cont = self.b.create_block();
        self.b.ins().brif(set, block, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }
}
