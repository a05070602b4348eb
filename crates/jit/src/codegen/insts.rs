//! The lowering of each instruction: [`Translator::inst`] dispatches on the
//! format; computations, memory and `zeros` are lowered here, tape accesses
//! in `tape`, branches, returns and calls in `control`.

use super::values::ArrayLen;
use super::{flags, Translator};
use crate::rt::SiteKind;
use crate::JitError;
use adze_ir::{CmpCond, Inst, InstData, Opcode, Value as IrValue};
use cranelift_codegen::ir::condcodes::{CondCode, FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{self as cl, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind};

/// From this many elements on, `fill` calls `adze_fill`.
const FILL_CALL_LEN: i64 = 64;

impl Translator<'_, '_> {
    /// Translates `inst` into the current Cranelift block.
    pub(super) fn inst(&mut self, inst: Inst) -> Result<(), JitError> {
        self.cur = Some(inst);
        let func = self.func;
        match func.dfg.inst(inst) {
            InstData::FConst { bits } => {
                let x = self.b.ins().f64const(Ieee64::with_bits(*bits));
                self.define(inst, x);
            }
            InstData::IConst { imm } => {
                let x = self.b.ins().iconst(cl::types::I64, *imm);
                self.define(inst, x);
            }
            InstData::BConst { imm } => {
                let x = self.b.ins().iconst(cl::types::I8, i64::from(*imm));
                self.define(inst, x);
            }
            InstData::Unary { op, arg } => self.unary(inst, *op, *arg)?,
            InstData::Binary { op, args } => self.binary(inst, *op, *args)?,
            InstData::Ternary { op, args } => self.ternary(inst, *op, *args)?,
            InstData::Powi { arg, exp, .. } => {
                let x = self.scalar(*arg)?;
                let r = self.powi(x, *exp);
                self.define(inst, r);
            }
            InstData::Cmp { op, cond, args } => {
                let r = self.compare(*op, *cond, args[0], args[1], false)?;
                self.define(inst, r);
            }
            InstData::Zeros { len, .. } => self.zeros(inst, *len)?,
            InstData::Push { tape, arg } => self.push(inst, *tape, *arg)?,
            InstData::Pop { tape, .. } => self.pop(inst, *tape)?,
            InstData::Tape { op, tape, arg } => self.tape_op(inst, *op, *tape, *arg)?,
            InstData::Call { func, args } => self.call(inst, *func, args)?,
            InstData::Autodiff { spec, .. } => {
                return Err(JitError::Unsupported {
                    func: func.name.clone(),
                    what: format!(
                        "an `autodiff` request ({} mode, of @{}) that no AD pass has lowered",
                        spec.mode,
                        self.env.module.func(spec.func).name
                    ),
                })
            }
            InstData::Jump { dest } => self.jump(dest)?,
            InstData::Brif {
                cond,
                then_dest,
                else_dest,
            } => self.brif(inst, *cond, then_dest, else_dest)?,
            InstData::Return { args } => self.ret(args)?,
        }
        Ok(())
    }

    /// A one-operand computation: a Cranelift instruction, or a call of
    /// the opcode's libcall.
    fn unary(&mut self, inst: Inst, op: Opcode, arg: IrValue) -> Result<(), JitError> {
        if op == Opcode::Checkpoint {
            // A hint to reverse mode; running it does nothing.
            return Ok(());
        }
        if matches!(op, Opcode::Len | Opcode::Ilen) {
            let len = self.array_len(arg)?;
            self.define(inst, len);
            return Ok(());
        }
        if op == Opcode::Ftosi {
            let r = self.ftosi(arg)?;
            self.define(inst, r);
            return Ok(());
        }
        let f64t = cl::types::F64;
        let x = self.scalar(arg)?;
        if matches!(op, Opcode::Fneg | Opcode::Vfneg) {
            let mask = (1u128 << 63) | (1u128 << 127);
            let c = self
                .b
                .func
                .dfg
                .constants
                .insert(cl::ConstantData::from(mask.to_le_bytes().as_slice()));
            let m = self.b.ins().vconst(cl::types::F64X2, c);
            let r = if op == Opcode::Vfneg {
                self.b.ins().bxor(x, m)
            } else {
                let v = self.b.ins().splat(cl::types::F64X2, x);
                let n = self.b.ins().bxor(v, m);
                self.b.ins().extractlane(n, 0)
            };
            self.define(inst, r);
            return Ok(());
        }
        let ins = self.b.ins();
        let r = match op {
            Opcode::Ineg => ins.ineg(x),
            Opcode::Not => ins.bxor_imm_u(x, 1),
            Opcode::Sitof => ins.fcvt_from_sint(f64t, x),
            Opcode::Tobits => ins.bitcast(cl::types::I64, MemFlagsData::new(), x),
            Opcode::Frombits => ins.bitcast(f64t, MemFlagsData::new(), x),
            Opcode::Sqrt | Opcode::Vsqrt => ins.sqrt(x),
            Opcode::Vfneg => unreachable!("negated above"),
            Opcode::Vsplat => ins.splat(cl::types::F64X2, x),
            Opcode::Vlane0 => ins.extractlane(x, 0),
            Opcode::Vlane1 => ins.extractlane(x, 1),
            Opcode::Abs => ins.fabs(x),
            Opcode::Floor => ins.floor(x),
            Opcode::Ceil => ins.ceil(x),
            _ => {
                let f = self.libcall(op)?;
                let c = self.b.ins().call(f, &[x]);
                self.b.inst_results(c)[0]
            }
        };
        self.define(inst, r);
        Ok(())
    }

    /// A two-operand instruction: `load`, `fill`, `samelen`, `idiv` and
    /// `irem`, or a computation (a Cranelift instruction, or a call of the
    /// opcode's libcall).
    fn binary(&mut self, inst: Inst, op: Opcode, args: [IrValue; 2]) -> Result<(), JitError> {
        match op {
            Opcode::Vload => {
                let addr = self.pair_addr(args[0], args[1])?;
                let x = self.b.ins().load(cl::types::F64X2, flags(), addr, 0);
                self.define(inst, x);
                return Ok(());
            }
            Opcode::Load | Opcode::Iload => {
                let addr = self.element_addr(args[0], args[1])?;
                let ty = if op == Opcode::Load {
                    cl::types::F64
                } else {
                    cl::types::I64
                };
                let x = self.b.ins().load(ty, flags(), addr, 0);
                self.define(inst, x);
                return Ok(());
            }
            Opcode::Fill | Opcode::Ifill => return self.fill(args[0], args[1]),
            Opcode::SameLen => return self.same_len(args[0], args[1]),
            Opcode::Disjoint => return self.disjoint(args[0], args[1]),
            Opcode::Apart => {
                let r = self.apart(args[0], args[1])?;
                self.pin(inst, r);
                return Ok(());
            }
            Opcode::Idiv | Opcode::Irem => {
                let r = self.idiv(op, args[0], args[1])?;
                self.define(inst, r);
                return Ok(());
            }
            Opcode::Ishl | Opcode::Sshr => {
                let r = self.shift(op, args[0], args[1])?;
                self.define(inst, r);
                return Ok(());
            }
            _ => {}
        }
        let (mut x, mut y) = (self.scalar(args[0])?, self.scalar(args[1])?);
        if matches!(op, Opcode::Fadd | Opcode::Fmul)
            && self.number_const(args[0])
            && !self.number_const(args[1])
        {
            // `c + x` as `x + c`: Cranelift reads a constant second operand
            // from the constant pool (`vmulsd (%rip), ..`) but builds a
            // first one in a general register (`movabs`, `vmovq`). Exact:
            // the sum or product is the same number, and with `c` not a
            // NaN, a NaN result can only be `x`'s, whichever side it is on.
            std::mem::swap(&mut x, &mut y);
        }
        let reciprocal = match op {
            Opcode::Fdiv => self.exact_reciprocal(args[1]),
            _ => None,
        };
        let ins = self.b.ins();
        let r = match op {
            Opcode::Fadd | Opcode::Vfadd => ins.fadd(x, y),
            Opcode::Fsub | Opcode::Vfsub => ins.fsub(x, y),
            Opcode::Fmul | Opcode::Vfmul => ins.fmul(x, y),
            Opcode::Vfdiv => ins.fdiv(x, y),
            Opcode::Vpack => {
                let v = ins.scalar_to_vector(cl::types::F64X2, x);
                self.b.ins().insertlane(v, y, 1)
            }
            Opcode::Vshift => {
                // `[x.1, y.0]`: bytes 8..24 of `x ++ y`, one `palignr`.
                let le = MemFlagsData::new().with_endianness(cl::Endianness::Little);
                let bx = ins.bitcast(cl::types::I8X16, le, x);
                let by = self.b.ins().bitcast(cl::types::I8X16, le, y);
                let lanes: Vec<u8> = (8..24).collect();
                let mask = self
                    .b
                    .func
                    .dfg
                    .immediates
                    .push(cl::ConstantData::from(lanes.as_slice()));
                let v = self.b.ins().shuffle(bx, by, mask);
                self.b.ins().bitcast(cl::types::F64X2, le, v)
            }
            Opcode::Fdiv => match reciprocal {
                Some(r) => {
                    let r = ins.f64const(r);
                    self.b.ins().fmul(x, r)
                }
                None => ins.fdiv(x, y),
            },
            Opcode::Iadd => ins.iadd(x, y),
            Opcode::Isub => ins.isub(x, y),
            Opcode::Imul => ins.imul(x, y),
            Opcode::Band => ins.band(x, y),
            Opcode::Bor => ins.bor(x, y),
            // Cranelift's fmin/fmax are IEEE 754-2019 minimum/maximum
            // (NaN-propagating, -0 < +0), the same as
            // `semantics::minimum/maximum`; tested bit for bit.
            Opcode::Min => ins.fmin(x, y),
            Opcode::Max => ins.fmax(x, y),
            _ => {
                let f = self.libcall(op)?;
                let c = self.b.ins().call(f, &[x, y]);
                self.b.inst_results(c)[0]
            }
        };
        self.define(inst, r);
        Ok(())
    }

    /// `1 / c` if `v` is a constant `c` whose reciprocal is exact: `±2^k`
    /// with `c` normal (then `2^-k` is representable, subnormal at worst).
    /// `x / c` and `x * (1 / c)` are then the same real number `x·2^-k`,
    /// rounded once by IEEE 754: the same bits for every `x`, zeros,
    /// infinities, subnormals and overflow included; a NaN `x` comes back
    /// quieted with its payload either way (x86-64 and AArch64 return the
    /// one NaN operand). A multiplication costs a fraction of a division
    /// (`x / 2.0` in a loop is bound by the divider).
    fn exact_reciprocal(&self, v: IrValue) -> Option<f64> {
        let InstData::FConst { bits } = self.func.def_inst(v)? else {
            return None;
        };
        let exponent = (bits >> 52) & 0x7ff;
        let fraction = bits & ((1 << 52) - 1);
        (fraction == 0 && (1..0x7ff).contains(&exponent)).then(|| 1.0 / f64::from_bits(*bits))
    }

    /// Is `v` an `fconst` that is not a NaN?
    fn number_const(&self, v: IrValue) -> bool {
        matches!(
            self.func.def_inst(v),
            Some(InstData::FConst { bits }) if !f64::from_bits(*bits).is_nan()
        )
    }

    /// `store`, `select` and `slice`.
    fn ternary(&mut self, inst: Inst, op: Opcode, args: [IrValue; 3]) -> Result<(), JitError> {
        match op {
            Opcode::Vstore => {
                let x = self.scalar(args[2])?;
                let addr = self.pair_addr(args[0], args[1])?;
                self.b.ins().store(flags(), x, addr, 0);
            }
            Opcode::Store | Opcode::Istore => {
                let x = self.scalar(args[2])?;
                let addr = self.element_addr(args[0], args[1])?;
                self.b.ins().store(flags(), x, addr, 0);
            }
            Opcode::Slice => return self.slice(inst, args, true),
            Opcode::View => return self.slice(inst, args, false),
            Opcode::Select => {
                let c = self.scalar(args[0])?;
                let (x, y) = (self.scalar(args[1])?, self.scalar(args[2])?);
                // Bools are 0 or 1 in an `i8`: `c && x` (`select c, x,
                // false`, the guards' conjunctions) is `band`, one `and`
                // instead of a `test` and a `cmov`; `c || y` is `bor`.
                let is_bconst = |v: IrValue, b: bool| matches!(self.func.def_inst(v), Some(InstData::BConst { imm }) if *imm == b);
                let r = if self.func.dfg.value_type(args[1]) == adze_ir::Type::Bool
                    && is_bconst(args[2], false)
                {
                    let r = self.b.ins().band(c, x);
                    if self.pinned.contains(args[0]) && self.pinned.contains(args[1]) {
                        // A conjunction of `apart`s (the lanes' guards
                        // join them before the loops): kept too, or
                        // Cranelift computes it again inside the loops.
                        self.pin(inst, r);
                        return Ok(());
                    }
                    r
                } else if self.func.dfg.value_type(args[1]) == adze_ir::Type::Bool
                    && is_bconst(args[1], true)
                {
                    self.b.ins().bor(c, y)
                } else {
                    self.b.ins().select(c, x, y)
                };
                self.define(inst, r);
            }
            _ => return Err(self.err(format!("unexpected three-operand opcode {op}"))),
        }
        Ok(())
    }

    /// The imported `extern "C"` symbol that computes `op`
    /// ([`Opcode::libcall`]).
    fn libcall(&mut self, op: Opcode) -> Result<cl::FuncRef, JitError> {
        let sym = op
            .libcall()
            .ok_or_else(|| self.err(format!("no translation for opcode `{op}`")))?;
        self.import(sym)
    }

    /// `x <cond> y` as Cranelift computes it (or its complement, `not`).
    pub(super) fn compare(
        &mut self,
        op: Opcode,
        cond: CmpCond,
        a: IrValue,
        b: IrValue,
        not: bool,
    ) -> Result<cl::Value, JitError> {
        let (x, y) = (self.scalar(a)?, self.scalar(b)?);
        Ok(if op == Opcode::Fcmp {
            let cc = match cond {
                CmpCond::Eq => FloatCC::Equal,
                // Unordered or not equal, like Rust's `!=`.
                CmpCond::Ne => FloatCC::NotEqual,
                CmpCond::Lt => FloatCC::LessThan,
                CmpCond::Le => FloatCC::LessThanOrEqual,
                CmpCond::Gt => FloatCC::GreaterThan,
                CmpCond::Ge => FloatCC::GreaterThanOrEqual,
            };
            // The complement of an ordered comparison is unordered-or-..:
            // exactly `!(x < y)` for NaNs too.
            let cc = if not { cc.complement() } else { cc };
            self.b.ins().fcmp(cc, x, y)
        } else {
            let cc = match cond {
                CmpCond::Eq => IntCC::Equal,
                CmpCond::Ne => IntCC::NotEqual,
                CmpCond::Lt => IntCC::SignedLessThan,
                CmpCond::Le => IntCC::SignedLessThanOrEqual,
                CmpCond::Gt => IntCC::SignedGreaterThan,
                CmpCond::Ge => IntCC::SignedGreaterThanOrEqual,
            };
            let cc = if not { cc.complement() } else { cc };
            self.b.ins().icmp(cc, x, y)
        })
    }

    /// `idiv` or `irem`, after the checks for a zero divisor and for
    /// `i64::MIN / -1`.
    fn idiv(&mut self, op: Opcode, a: IrValue, b: IrValue) -> Result<cl::Value, JitError> {
        let (x, y) = (self.scalar(a)?, self.scalar(b)?);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        self.trap_if(zero, SiteKind::DivisionByZero, None, None);
        let min = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
        let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let ovf = self.b.ins().band(min, m1);
        self.trap_if(ovf, SiteKind::DivisionOverflow, None, None);
        Ok(if op == Opcode::Idiv {
            self.b.ins().sdiv(x, y)
        } else {
            self.b.ins().srem(x, y)
        })
    }

    /// `ishl` or `sshr`, after the check that the amount is in `0..=63`
    /// (`semantics::shift_in_range`: one unsigned comparison with 63), so
    /// that Cranelift's masking of the amount never applies.
    fn shift(&mut self, op: Opcode, a: IrValue, b: IrValue) -> Result<cl::Value, JitError> {
        let (x, y) = (self.scalar(a)?, self.scalar(b)?);
        let bad = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, y, 63);
        self.trap_if(bad, SiteKind::ShiftOutOfRange, Some(y), Some(y));
        Ok(if op == Opcode::Ishl {
            self.b.ins().ishl(x, y)
        } else {
            self.b.ins().sshr(x, y)
        })
    }

    /// `ftosi`: traps unless `FTOSI_MIN <= x < FTOSI_END` (false for NaN),
    /// as `semantics::ftosi`, then truncates (in range, Cranelift's
    /// conversion cannot trap).
    fn ftosi(&mut self, arg: IrValue) -> Result<cl::Value, JitError> {
        let x = self.scalar(arg)?;
        let lo = self
            .b
            .ins()
            .f64const(Ieee64::with_bits(adze_ir::semantics::FTOSI_MIN.to_bits()));
        let hi = self
            .b
            .ins()
            .f64const(Ieee64::with_bits(adze_ir::semantics::FTOSI_END.to_bits()));
        let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, lo);
        let lt = self.b.ins().fcmp(FloatCC::LessThan, x, hi);
        let ok = self.b.ins().band(ge, lt);
        let bad = self.b.ins().bxor_imm_u(ok, 1);
        let bits = self.b.ins().bitcast(cl::types::I64, MemFlagsData::new(), x);
        self.trap_if(bad, SiteKind::ConversionOutOfRange, Some(bits), Some(bits));
        Ok(self.b.ins().fcvt_to_sint_sat(cl::types::I64, x))
    }

    /// `x ^ n` as the same square-and-multiply sequence as
    /// `semantics::powi`, unrolled for the immediate `n`.
    /// `1.0` of `x`'s type: an f64, or both lanes of an f64x2.
    fn one_like(&mut self, x: cl::Value) -> cl::Value {
        let one = self.b.ins().f64const(1.0);
        if self.b.func.dfg.value_type(x) == cl::types::F64X2 {
            self.b.ins().splat(cl::types::F64X2, one)
        } else {
            one
        }
    }

    fn powi(&mut self, x: cl::Value, n: i32) -> cl::Value {
        let mut e = n.unsigned_abs();
        let mut base = x;
        let mut acc: Option<cl::Value> = None;
        while e > 0 {
            if e & 1 == 1 {
                acc = Some(match acc {
                    None => base,
                    Some(a) => self.b.ins().fmul(a, base),
                });
            }
            e >>= 1;
            if e > 0 {
                base = self.b.ins().fmul(base, base);
            }
        }
        let p = match acc {
            Some(p) => p,
            None => self.one_like(x),
        };
        if n < 0 {
            let one = self.one_like(x);
            self.b.ins().fdiv(one, p)
        } else {
            p
        }
    }

    /// `slice a, lo, hi`: checks `hi <= len(a)`, then `lo <= hi` (unsigned,
    /// so negative bounds fail too; the interpreter checks in the same
    /// order), and defines the view: the element pointer of `lo` and the
    /// length `hi - lo`, kept in a stack slot as a parameter's is.
    /// `view` (`checked` false) does not trap: bounds outside the array
    /// (which the passes never make where the view is used, but a view
    /// hoisted out of a loop that does not run may have, and IR given
    /// through the API may hold) give an empty view, whose every access
    /// fails its bounds check. Compiled code never reads outside an array.
    fn slice(
        &mut self,
        inst: Inst,
        [a, lo, hi]: [IrValue; 3],
        checked: bool,
    ) -> Result<(), JitError> {
        let (ptr, len) = self.array(a)?;
        let (mut l, h) = (self.scalar(lo)?, self.scalar(hi)?);
        // Not 0 <= lo <= hi <= len: one unsigned test each.
        let end_out = self.b.ins().icmp(IntCC::UnsignedGreaterThan, h, len);
        let start_out = self.b.ins().icmp(IntCC::UnsignedGreaterThan, l, h);
        let mut n = self.b.ins().isub(h, l);
        if checked {
            let array = self.func.array_name(a);
            let kind = SiteKind::SliceEndOutOfBounds {
                array: array.clone(),
            };
            self.trap_if(end_out, kind, Some(h), Some(len));
            let kind = SiteKind::SliceStartOutOfBounds { array };
            self.trap_if(start_out, kind, Some(l), Some(h));
        } else {
            let bad = self.b.ins().bor(end_out, start_out);
            let zero = self.b.ins().iconst(cl::types::I64, 0);
            n = self.b.ins().select(bad, zero, n);
            l = self.b.ins().select(bad, zero, l);
        }
        let ss =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        self.b.ins().stack_store(self.env.ptr, n, ss, 0);
        let off = self.b.ins().ishl_imm_u(l, 3);
        let p = self.b.ins().iadd(ptr, off);
        let r = self.func.dfg.first_result(inst);
        self.set_array(r, p, ArrayLen::Slot(ss));
        Ok(())
    }

    /// Whether the views `a` and `b` share an element: both non-empty and
    /// their byte ranges meet (the interpreter: both of one array, both
    /// non-empty, their element ranges meet).
    fn overlap(&mut self, a: IrValue, b: IrValue) -> Result<cl::Value, JitError> {
        let (pa, la) = self.array(a)?;
        let (pb, lb) = self.array(b)?;
        let ba = self.b.ins().ishl_imm_u(la, 3);
        let ea = self.b.ins().iadd(pa, ba);
        let bb = self.b.ins().ishl_imm_u(lb, 3);
        let eb = self.b.ins().iadd(pb, bb);
        let a_before_eb = self.b.ins().icmp(IntCC::UnsignedLessThan, pa, eb);
        let b_before_ea = self.b.ins().icmp(IntCC::UnsignedLessThan, pb, ea);
        let meet = self.b.ins().band(a_before_eb, b_before_ea);
        let a_full = self.b.ins().icmp_imm_s(IntCC::NotEqual, la, 0);
        let b_full = self.b.ins().icmp_imm_s(IntCC::NotEqual, lb, 0);
        let full = self.b.ins().band(a_full, b_full);
        Ok(self.b.ins().band(meet, full))
    }

    /// `disjoint a, b`: traps when the views share an element.
    fn disjoint(&mut self, a: IrValue, b: IrValue) -> Result<(), JitError> {
        let overlap = self.overlap(a, b)?;
        let kind = SiteKind::OverlappingArrays {
            first: self.func.array_name(a),
            second: self.func.array_name(b),
        };
        self.trap_if(overlap, kind, None, None);
        Ok(())
    }

    /// Defines the bool result of `inst` as `x` stored to a stack slot and
    /// loaded back where the IR computes it. For `apart`, which the
    /// optimizer places before the loops whose lanes' guards test it: a
    /// pure computation, which Cranelift's elaboration would otherwise
    /// compute again where it is used, inside the loops (its loop-invariant
    /// code motion lifts the remat'd constants of `ptr + 8·len` one loop
    /// at most), about 14 instructions per pair of arrays per trip. The
    /// store and the load are effects, so they stay where they are.
    /// kmeans' `dir` (seven pairs per point and centroid): 24.2 → 19.3 ms.
    fn pin(&mut self, inst: Inst, x: cl::Value) {
        if self.split.plan.is_split(self.func.dfg.first_result(inst)) {
            self.define(inst, x);
            return;
        }
        let ss =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 1, 0));
        self.b.ins().stack_store(self.env.ptr, x, ss, 0);
        let l = self.slot_load(cl::types::I8, ss, 0);
        self.define(inst, l);
        self.pinned.insert(self.func.dfg.first_result(inst));
    }

    /// `apart a, b`: the views share no element, as `disjoint` decides.
    fn apart(&mut self, a: IrValue, b: IrValue) -> Result<cl::Value, JitError> {
        let overlap = self.overlap(a, b)?;
        Ok(self.b.ins().bxor_imm_u(overlap, 1))
    }

    /// `fill a, x`: an inline loop for a short array; from
    /// [`FILL_CALL_LEN`] elements on, the run-time routine `adze_fill`
    /// (`memset` for zeros: 8× faster than the loop on a million
    /// elements, measured in session 17).
    fn fill(&mut self, arr: IrValue, x: IrValue) -> Result<(), JitError> {
        let (ptr, len) = self.array(arr)?;
        let x = self.scalar(x)?;
        let head = self.b.create_block();
        let i = self.b.append_block_param(head, cl::types::I64);
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let long = self.b.create_block();
        let short = self.b.create_block();
        let big = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, len, FILL_CALL_LEN);
        self.b.ins().brif(big, long, &[], short, &[]);
        self.b.switch_to_block(long);
        let bits = if self.b.func.dfg.value_type(x) == cl::types::F64 {
            self.b.ins().bitcast(cl::types::I64, MemFlagsData::new(), x)
        } else {
            x
        };
        let f = self.import("adze_fill")?;
        self.b.ins().call(f, &[ptr, len, bits]);
        self.b.ins().jump(exit, &[]);
        self.b.switch_to_block(short);
        let zero = self.b.ins().iconst(cl::types::I64, 0);
        self.b.ins().jump(head, &[zero.into()]);
        self.b.switch_to_block(head);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, len);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        let off = self.b.ins().ishl_imm_u(i, 3);
        let addr = self.b.ins().iadd(ptr, off);
        self.b.ins().store(flags(), x, addr, 0);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(head, &[next.into()]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// `zeros n`: checks the length, then `adze_alloc` (which reuses the
    /// array this instruction made last in this frame) and a check that
    /// the memory could be had.
    fn zeros(&mut self, inst: Inst, len: IrValue) -> Result<(), JitError> {
        let n = self.scalar(len)?;
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        let big =
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThan, n, self.env.limits.max_array_len);
        let bad = self.b.ins().bor(neg, big);
        let max = self.env.limits.max_array_len;
        self.trap_if(bad, SiteKind::BadArrayLength { max }, Some(n), Some(n));
        let alloc = self.import("adze_alloc")?;
        let (ss, off) = self
            .frame
            .zeros_slot(self.func.dfg.first_result(inst))
            .ok_or_else(|| self.err("zeros without a slot".into()))?;
        let slot = self.b.ins().stack_addr(self.env.ptr, ss, off);
        let c = self.b.ins().call(alloc, &[self.ctx, n, slot]);
        let ptr = self.b.inst_results(c)[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::Equal, ptr, 0);
        self.trap_if(failed, SiteKind::OutOfMemory, Some(n), Some(n));
        let r = self.func.dfg.first_result(inst);
        self.set_array(r, ptr, ArrayLen::Of(len));
        Ok(())
    }
}
