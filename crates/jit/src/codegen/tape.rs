//! `push` and `pop`, inline, by groups: maximal runs of `push`es (or of
//! `pop`s) on one tape within a block, separated only by instructions
//! without effects. A group checks the tape once: one capacity check (and a
//! cold call to the reserve trampoline) for a run of pushes, one length
//! check and a combined tag check for a run of pops.

use super::{flags, Translator};
use crate::rt::{
    SiteKind, TAPES_OFFSET, TAPE_BITS, TAPE_CAP, TAPE_FAILED_OFFSET, TAPE_LEN, TAPE_SITE_OFFSET,
    TAPE_SIZE, TAPE_TYPES,
};
use crate::JitError;
use adze_ir::{Block as IrBlock, Function, Inst, InstData, Type, Value as IrValue};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self as cl, InstBuilder};
use cranelift_frontend::Variable;

/// The type byte of a tape entry, checked by `pop`.
fn type_code(ty: Type) -> i64 {
    match ty {
        Type::F64 => 0,
        Type::I64 => 1,
        Type::Bool => 2,
        Type::Array => 3,
        Type::IArray => 4,
        Type::F64x2 => 5,
    }
}

/// Can `data` run between two `push`es or `pop`s of one inline group? Only
/// the instructions without effects in the opcode table
/// ([`adze_ir::Opcode::effects`]: constants, arithmetic, comparisons,
/// `select`, `len`, intrinsics): they neither trap, nor call generated
/// code, nor touch a tape, so moving a group's tape accesses across them
/// is unobservable.
fn tape_neutral(data: &InstData) -> bool {
    !data.opcode().has_side_effects()
}

/// The tape groups of the function and the state of the group being
/// translated.
pub(super) struct Tapes {
    /// Each group's members, in order.
    groups: Vec<Vec<Inst>>,
    /// For each `push` and `pop`: its group and its position in it.
    group_of: SecondaryMap<Inst, Option<(usize, usize)>>,
    /// The current push group: the addresses of its first entry's bits and
    /// type byte, and the tape length before it.
    push_base: Option<(cl::Value, cl::Value, cl::Value)>,
    /// The current pop group and its results, emitted at its first pop.
    popped: Option<(usize, Vec<cl::Value>)>,
    /// The cold block that reports a tape mismatch and its trap site
    /// (`mismatch_block`), filled in by `Translator::finish`.
    pub(super) mismatch: Option<(cl::Block, i64)>,
    /// The tapes the function accesses, each with the variable that holds
    /// its length (`Translator::load_tape_lens`).
    lens: Vec<(u8, Option<Variable>)>,
}

impl Tapes {
    /// Splits the tape accesses of each block of `order` into groups:
    /// maximal runs of `push`es (or of `pop`s) on one tape separated only
    /// by [`tape_neutral`] instructions.
    pub(super) fn plan(func: &Function, order: &[IrBlock]) -> Tapes {
        let mut tapes = Tapes {
            groups: Vec::new(),
            group_of: SecondaryMap::new(),
            push_base: None,
            popped: None,
            mismatch: None,
            lens: Vec::new(),
        };
        let mut used = [false; 256];
        for &blk in order {
            for &i in func.layout.block_insts(blk) {
                match func.dfg.inst(i) {
                    InstData::Push { tape, .. }
                    | InstData::Pop { tape, .. }
                    | InstData::Tape { tape, .. } => used[usize::from(*tape)] = true,
                    _ => {}
                }
            }
        }
        tapes.lens = (0..=u8::MAX)
            .filter(|&t| used[usize::from(t)])
            .map(|t| (t, None))
            .collect();
        let key = |d: &InstData| match d {
            InstData::Push { tape, .. } => Some((true, *tape)),
            InstData::Pop { tape, .. } => Some((false, *tape)),
            _ => None,
        };
        for &blk in order {
            let insts = func.layout.block_insts(blk);
            let mut k = 0;
            while k < insts.len() {
                let Some(kind) = key(func.dfg.inst(insts[k])) else {
                    k += 1;
                    continue;
                };
                let mut members = vec![insts[k]];
                let mut last = k;
                for (q, &i) in insts.iter().enumerate().skip(k + 1) {
                    let d = func.dfg.inst(i);
                    if key(d) == Some(kind) {
                        members.push(i);
                        last = q;
                    } else if !tape_neutral(d) {
                        break;
                    }
                }
                let g = tapes.groups.len();
                for (j, &i) in members.iter().enumerate() {
                    tapes.group_of[i] = Some((g, j));
                }
                tapes.groups.push(members);
                k = last + 1;
            }
        }
        tapes
    }

    /// Enters a block: no group is open.
    pub(super) fn enter_block(&mut self) {
        self.push_base = None;
        self.popped = None;
    }
}

impl Translator<'_, '_> {
    /// Loads the length of each tape the function accesses into a
    /// variable, in the entry block. Within the function the variable is
    /// the length: pushes and pops update it, not `Ctx`, so a loop that
    /// pushes (or pops) an entry per iteration does not carry the length
    /// through a store and a load (a store-forwarding delay on the chain
    /// of every iteration). `Ctx` holds it again wherever other code can
    /// read or change it: around calls of generated code and of the
    /// reserve trampoline ([`Self::store_tape_lens`],
    /// [`Self::load_tape_lens`]) and at a return. After a trap nothing
    /// reads it (the run's tapes are cleared).
    pub(super) fn enter_tape_lens(&mut self) {
        for k in 0..self.tapes.lens.len() {
            let var = self.b.declare_var(cl::types::I64);
            self.tapes.lens[k].1 = Some(var);
        }
        self.load_tape_lens();
    }

    /// Reloads every tape length variable from `Ctx` (after a call).
    pub(super) fn load_tape_lens(&mut self) {
        for k in 0..self.tapes.lens.len() {
            if let (tape, Some(var)) = self.tapes.lens[k] {
                let len = self.b.ins().load(
                    cl::types::I64,
                    flags(),
                    self.ctx,
                    tape_field(tape, TAPE_LEN),
                );
                self.b.def_var(var, len);
            }
        }
    }

    /// Stores every tape length variable to `Ctx` (before a call or a
    /// return).
    pub(super) fn store_tape_lens(&mut self) {
        for k in 0..self.tapes.lens.len() {
            if let (tape, Some(var)) = self.tapes.lens[k] {
                let len = self.b.use_var(var);
                self.b
                    .ins()
                    .store(flags(), len, self.ctx, tape_field(tape, TAPE_LEN));
            }
        }
    }

    /// The variable holding the length of `tape`.
    fn tape_len_var(&self, tape: u8) -> Result<Variable, JitError> {
        self.tapes
            .lens
            .iter()
            .find(|(t, _)| *t == tape)
            .and_then(|(_, v)| *v)
            .ok_or_else(|| self.err(format!("tape {tape} has no length variable")))
    }

    /// The group of the tape access `inst`, its position in it and the
    /// group's size.
    fn tape_group(&self, inst: Inst) -> Result<(usize, usize, usize), JitError> {
        let (g, j) = self.tapes.group_of[inst]
            .ok_or_else(|| self.err(format!("{inst}: tape access without a group")))?;
        Ok((g, j, self.tapes.groups[g].len()))
    }

    /// The addresses of the bits and type buffers of tape `tape`.
    fn tape_buffers(&mut self, tape: u8) -> (cl::Value, cl::Value) {
        let p = self.env.ptr;
        let bits = self
            .b
            .ins()
            .load(p, flags(), self.ctx, tape_field(tape, TAPE_BITS));
        let types = self
            .b
            .ins()
            .load(p, flags(), self.ctx, tape_field(tape, TAPE_TYPES));
        (bits, types)
    }

    /// `push tape, arg`, inline: the first push of a group makes room for
    /// the whole group; each push writes its entry; the last sets the
    /// tape's length.
    pub(super) fn push(&mut self, inst: Inst, tape: u8, arg: IrValue) -> Result<(), JitError> {
        let i64t = cl::types::I64;
        let (_, j, m) = self.tape_group(inst)?;
        if j == 0 {
            self.reserve(tape, m)?;
        }
        let (bits, types, len) = self
            .tapes
            .push_base
            .ok_or_else(|| self.err(format!("{inst}: push outside its group")))?;
        let x = self.scalar(arg)?;
        let ty = self.func.dfg.value_type(arg);
        let x = if ty == Type::Bool {
            self.b.ins().uextend(i64t, x)
        } else {
            x
        };
        self.b.ins().store(flags(), x, bits, 8 * j as i32);
        let code = self.b.ins().iconst(cl::types::I8, type_code(ty));
        self.b.ins().store(flags(), code, types, j as i32);
        if j + 1 == m {
            let new_len = self.b.ins().iadd_imm_s(len, m as i64);
            let var = self.tape_len_var(tape)?;
            self.b.def_var(var, new_len);
            self.tapes.push_base = None;
        }
        Ok(())
    }

    /// The start of a push group of `m` entries: makes room for them (on a
    /// cold path through the reserve trampoline) and sets `push_base`.
    fn reserve(&mut self, tape: u8, m: usize) -> Result<(), JitError> {
        let i64t = cl::types::I64;
        let var = self.tape_len_var(tape)?;
        let len = self.b.use_var(var);
        let cap = self
            .b
            .ins()
            .load(i64t, flags(), self.ctx, tape_field(tape, TAPE_CAP));
        let need = self.b.ins().iadd_imm_s(len, m as i64);
        let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, need, cap);
        let grow = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(grow);
        self.b.ins().brif(short, grow, &[], cont, &[]);
        self.b.switch_to_block(grow);
        // The trampoline preserves every register, so that the values
        // live across this (cold) call stay in registers in the hot path.
        let reserve = self.func_ref(self.env.reserve);
        let t = self.b.ins().iconst(i64t, i64::from(tape));
        let n = self.b.ins().iconst(i64t, m as i64);
        // The trap site goes through the context, not a fourth
        // argument: an argument register (`rcx`) fixed on this path
        // changed the register allocation of hot loops elsewhere in the
        // function.
        let site = self.new_site(SiteKind::TapeOutOfMemory {
            limit: self.env.limits.tape_limit,
        });
        let site = self.b.ins().iconst(i64t, site);
        self.b
            .ins()
            .store(flags(), site, self.ctx, TAPE_SITE_OFFSET);
        // `adze_reserve` reads the lengths (the budget counts every tape).
        self.store_tape_lens();
        self.b.ins().call(reserve, &[self.ctx, t, n]);
        // A tape that cannot grow: `adze_reserve` recorded the error
        // of `site` and set `tape_failed`, and the frame leaves through
        // its trap exit, as after a call that trapped. Checked on the
        // growth path only, with no call of its own.
        let failed = self
            .b
            .ins()
            .load(i64t, flags(), self.ctx, TAPE_FAILED_OFFSET);
        self.b
            .ins()
            .brif(failed, self.frame.trap_exit, &[], cont, &[]);
        self.b.switch_to_block(cont);
        let (bits, types) = self.tape_buffers(tape);
        let off = self.b.ins().ishl_imm_u(len, 3);
        let bits = self.b.ins().iadd(bits, off);
        let types = self.b.ins().iadd(types, len);
        self.tapes.push_base = Some((bits, types, len));
        Ok(())
    }

    /// `v = pop tape, ty`: the first pop of a group emits the group
    /// (`pop_group`); each pop then takes its result.
    pub(super) fn pop(&mut self, inst: Inst, tape: u8) -> Result<(), JitError> {
        let (g, j, _) = self.tape_group(inst)?;
        if j == 0 {
            self.pop_group(g, tape)?;
        }
        let x = match &self.tapes.popped {
            Some((open, xs)) if *open == g => xs.get(j).copied(),
            _ => None,
        }
        .ok_or_else(|| self.err(format!("{inst}: pop outside its group")))?;
        self.define(inst, x);
        Ok(())
    }

    /// The pops of group `g`, inline: if the tape holds enough entries and
    /// every tag matches, read them and lower the length once; otherwise
    /// branch to the function's cold mismatch block (`mismatch_block`).
    /// Records the results in `popped`.
    fn pop_group(&mut self, g: usize, tape: u8) -> Result<(), JitError> {
        let i64t = cl::types::I64;
        let m = self.tapes.groups[g].len();
        let mut tys = Vec::with_capacity(m);
        for &i in &self.tapes.groups[g] {
            match self.func.dfg.inst(i) {
                InstData::Pop { ty, .. } => tys.push(*ty),
                _ => return Err(self.err(format!("{i} in a pop group"))),
            }
        }
        let slow = self.mismatch_block();
        let check = self.b.create_block();
        let fast = self.b.create_block();

        let var = self.tape_len_var(tape)?;
        let len = self.b.use_var(var);
        let enough = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, len, m as i64);
        self.b.ins().brif(enough, check, &[], slow, &[]);

        // The entry popped j-th is at index len - 1 - j.
        self.b.switch_to_block(check);
        let (bits, types) = self.tape_buffers(tape);
        let rest = self.b.ins().iadd_imm_s(len, -(m as i64));
        let off = self.b.ins().ishl_imm_u(rest, 3);
        let base = self.b.ins().iadd(bits, off);
        let types = self.b.ins().iadd(types, rest);
        let at = |j: usize| (m - 1 - j) as i32;
        let mut bad: Option<cl::Value> = None;
        for (j, &ty) in tys.iter().enumerate() {
            let t = self.b.ins().load(cl::types::I8, flags(), types, at(j));
            let ne = self.b.ins().icmp_imm_s(IntCC::NotEqual, t, type_code(ty));
            bad = Some(match bad {
                None => ne,
                Some(b) => self.b.ins().bor(b, ne),
            });
        }
        let bad = bad.ok_or_else(|| self.err("an empty pop group".into()))?;
        self.b.ins().brif(bad, slow, &[], fast, &[]);

        self.b.switch_to_block(fast);
        let mut xs = Vec::with_capacity(m);
        for (j, &ty) in tys.iter().enumerate() {
            xs.push(match ty {
                Type::F64 => self.b.ins().load(cl::types::F64, flags(), base, 8 * at(j)),
                Type::Bool => {
                    let w = self.b.ins().load(i64t, flags(), base, 8 * at(j));
                    self.b.ins().ireduce(cl::types::I8, w)
                }
                _ => self.b.ins().load(i64t, flags(), base, 8 * at(j)),
            });
        }
        self.tapes.popped = Some((g, xs));
        self.b.def_var(var, rest);
        Ok(())
    }

    /// `tapelen`, `tapeover` (a load and a compare with the run's
    /// checkpoint segment, a constant of the compilation) and `tapecut` (a
    /// store of the length; a bad mark is a `TapeMismatch`), inline: no
    /// call in the loops they are in.
    pub(super) fn tape_op(
        &mut self,
        inst: Inst,
        op: adze_ir::Opcode,
        tape: u8,
        arg: Option<IrValue>,
    ) -> Result<(), JitError> {
        let mark = match arg {
            Some(m) => Some(self.scalar(m)?),
            None => None,
        };
        let var = self.tape_len_var(tape)?;
        let r = match (op, mark) {
            (adze_ir::Opcode::Tapelen, None) => self.b.use_var(var),
            (adze_ir::Opcode::Tapeover, Some(m)) => {
                let len = self.b.use_var(var);
                let grown = self.b.ins().isub(len, m);
                let seg = i64::try_from(self.env.limits.segment_entries()).unwrap_or(i64::MAX);
                self.b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, grown, seg)
            }
            (adze_ir::Opcode::Tapecut, Some(m)) => {
                // Inline: a mark past the length (or negative: unsigned)
                // is a mismatch; otherwise the length becomes the mark (the
                // entries above it are dropped, their buffers kept).
                let len = self.b.use_var(var);
                let bad = self.b.ins().icmp(IntCC::UnsignedGreaterThan, m, len);
                let slow = self.mismatch_block();
                let ok = self.b.create_block();
                self.b.ins().brif(bad, slow, &[], ok, &[]);
                self.b.switch_to_block(ok);
                self.b.def_var(var, m);
                return Ok(());
            }
            _ => return Err(self.err(format!("{inst}: `{op}` with the wrong operands"))),
        };
        self.define(inst, r);
        Ok(())
    }

    /// The function's one cold block for an empty tape or a mismatched
    /// entry: the run stops with `TapeMismatch` in this function, whichever
    /// pop it was (every pop of a function reports the same error), as the
    /// interpreter stops at the first pop that finds an empty tape or an
    /// entry of another type.
    fn mismatch_block(&mut self) -> cl::Block {
        if let Some((b, _)) = self.tapes.mismatch {
            return b;
        }
        let block = self.b.create_block();
        self.b.set_cold_block(block);
        let site = self.new_site(SiteKind::TapeMismatch);
        self.tapes.mismatch = Some((block, site));
        block
    }
}

/// Offset in `Ctx` of a field of tape `tape`.
fn tape_field(tape: u8, field: i32) -> i32 {
    TAPES_OFFSET + TAPE_SIZE * i32::from(tape) + field
}
