//! A builder with one method per opcode, so that code that emits IR (the
//! front end, the AD passes, tests) reads like the IR it produces.
//!
//! ```
//! use adze_ir::{Function, FuncBuilder, Param, Signature, Type};
//! let sig = Signature { params: vec![Param::new("x", Type::F64)], results: vec![Type::F64] };
//! let mut func = Function::new("square", sig);
//! let mut b = FuncBuilder::new(&mut func);
//! let entry = b.create_entry_block();
//! b.switch_to_block(entry);
//! let x = b.func.params()[0];
//! let y = b.fmul(x, x);
//! b.ret(&[y]);
//! assert_eq!(func.to_string().lines().count(), 5);
//! ```

use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::Function;
use crate::instructions::{AutodiffSpec, BlockCall, CmpCond, InstData, Opcode};
use crate::srcloc::SourceLoc;
use crate::types::Type;

/// Appends instructions at the end of the current block, each with the
/// builder's current source location (none until [`FuncBuilder::set_srcloc`]).
pub struct FuncBuilder<'f> {
    /// The function being built; free to use between instructions.
    pub func: &'f mut Function,
    block: Option<Block>,
    srcloc: SourceLoc,
}

impl<'f> FuncBuilder<'f> {
    /// A builder of `func`, with no current block and no location.
    pub fn new(func: &'f mut Function) -> FuncBuilder<'f> {
        FuncBuilder {
            func,
            block: None,
            srcloc: SourceLoc::NONE,
        }
    }

    /// The location given to the instructions built from now on.
    pub fn set_srcloc(&mut self, loc: SourceLoc) {
        self.srcloc = loc;
    }

    /// The location given to the instructions built now.
    pub fn srcloc(&self) -> SourceLoc {
        self.srcloc
    }

    /// Creates the entry block with one parameter per signature parameter and
    /// places it first in the layout.
    pub fn create_entry_block(&mut self) -> Block {
        let block = self.func.dfg.make_block();
        let tys: Vec<Type> = self.func.sig.param_types().collect();
        for ty in tys {
            self.func.dfg.append_block_param(block, ty);
        }
        self.func.layout.append_block(block);
        block
    }

    /// Creates a block and appends it to the layout.
    pub fn create_block(&mut self) -> Block {
        let block = self.func.dfg.make_block();
        self.func.layout.append_block(block);
        block
    }

    /// Appends a parameter of type `ty` to `block`.
    pub fn append_block_param(&mut self, block: Block, ty: Type) -> Value {
        self.func.dfg.append_block_param(block, ty)
    }

    /// Makes `block` the current block: instructions are appended to it.
    pub fn switch_to_block(&mut self, block: Block) {
        self.block = Some(block);
    }

    /// The block instructions are appended to; `None` before the first
    /// [`FuncBuilder::switch_to_block`].
    pub fn current_block(&self) -> Option<Block> {
        self.block
    }

    /// Has the current block been terminated?
    pub fn is_terminated(&self) -> bool {
        self.block
            .and_then(|b| self.func.layout.last_inst(b))
            .is_some_and(|i| self.func.dfg.inst(i).opcode().is_terminator())
    }

    /// Appends an instruction with the given result types. Panics without a
    /// current block. Nothing is checked: appending after a terminator, or
    /// wrong types, is left to the verifier.
    pub fn build(&mut self, data: InstData, result_types: &[Type]) -> Inst {
        let block = self.block.expect("no current block");
        let inst = self.func.dfg.make_inst(data, result_types);
        self.func.dfg.set_srcloc(inst, self.srcloc);
        self.func.layout.append_inst(inst, block);
        inst
    }

    fn build1(&mut self, data: InstData, ty: Type) -> Value {
        let inst = self.build(data, &[ty]);
        self.func.dfg.first_result(inst)
    }

    /// `fconst x`.
    pub fn fconst(&mut self, x: f64) -> Value {
        self.build1(InstData::fconst(x), Type::F64)
    }

    /// `iconst x`.
    pub fn iconst(&mut self, x: i64) -> Value {
        self.build1(InstData::IConst { imm: x }, Type::I64)
    }

    /// `bconst x`.
    pub fn bconst(&mut self, x: bool) -> Value {
        self.build1(InstData::BConst { imm: x }, Type::Bool)
    }

    /// A one-operand opcode with a fixed signature (`fneg`, `sin`, `len`, ...).
    /// Panics if `op` has no fixed single result.
    pub fn unary(&mut self, op: Opcode, arg: Value) -> Value {
        let ty = fixed_result(op);
        self.build1(InstData::Unary { op, arg }, ty)
    }

    /// A two-operand opcode with a fixed signature (`fadd`, `pow`, `load`, ...).
    /// Panics if `op` has no fixed single result (`fill`, `samelen`: see
    /// their own methods).
    pub fn binary(&mut self, op: Opcode, a: Value, b: Value) -> Value {
        let ty = fixed_result(op);
        self.build1(InstData::Binary { op, args: [a, b] }, ty)
    }

    /// `fadd a, b`: `a + b`.
    pub fn fadd(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Fadd, a, b)
    }

    /// `fsub a, b`: `a - b`.
    pub fn fsub(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Fsub, a, b)
    }

    /// `fmul a, b`: `a * b`.
    pub fn fmul(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Fmul, a, b)
    }

    /// `fdiv a, b`: `a / b`.
    pub fn fdiv(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Fdiv, a, b)
    }

    /// `fneg a`: `-a`.
    pub fn fneg(&mut self, a: Value) -> Value {
        self.unary(Opcode::Fneg, a)
    }

    /// `iadd a, b`: `a + b`, wrapping.
    pub fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Iadd, a, b)
    }

    /// `isub a, b`: `a - b`, wrapping.
    pub fn isub(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Isub, a, b)
    }

    /// `imul a, b`: `a * b`, wrapping.
    pub fn imul(&mut self, a: Value, b: Value) -> Value {
        self.binary(Opcode::Imul, a, b)
    }

    /// `sitof a`: the i64 `a` as an f64.
    pub fn sitof(&mut self, a: Value) -> Value {
        self.unary(Opcode::Sitof, a)
    }

    /// `ftosi a`: the f64 `a` truncated to an i64 (traps for NaN and out
    /// of range).
    pub fn ftosi(&mut self, a: Value) -> Value {
        self.unary(Opcode::Ftosi, a)
    }

    /// `tobits a`: the bits of the f64 `a`, as an i64.
    pub fn tobits(&mut self, a: Value) -> Value {
        self.unary(Opcode::Tobits, a)
    }

    /// `frombits a`: the f64 whose bits are the i64 `a`.
    pub fn frombits(&mut self, a: Value) -> Value {
        self.unary(Opcode::Frombits, a)
    }

    /// `not a`: the negation of the bool `a`.
    pub fn not(&mut self, a: Value) -> Value {
        self.unary(Opcode::Not, a)
    }

    /// `powi arg, exp`: `arg ^ exp` for an immediate `exp`.
    pub fn powi(&mut self, arg: Value, exp: i32) -> Value {
        let op = Opcode::Powi;
        self.build1(InstData::Powi { op, arg, exp }, Type::F64)
    }

    /// `vpowi arg, exp`: `powi` on both lanes of the f64x2 `arg`.
    pub fn vpowi(&mut self, arg: Value, exp: i32) -> Value {
        let op = Opcode::Vpowi;
        self.build1(InstData::Powi { op, arg, exp }, Type::F64x2)
    }

    /// `fcmp cond a, b`: the bool `a cond b` (ordered).
    pub fn fcmp(&mut self, cond: CmpCond, a: Value, b: Value) -> Value {
        self.build1(
            InstData::Cmp {
                op: Opcode::Fcmp,
                cond,
                args: [a, b],
            },
            Type::Bool,
        )
    }

    /// `icmp cond a, b`: the bool `a cond b` (signed).
    pub fn icmp(&mut self, cond: CmpCond, a: Value, b: Value) -> Value {
        self.build1(
            InstData::Cmp {
                op: Opcode::Icmp,
                cond,
                args: [a, b],
            },
            Type::Bool,
        )
    }

    /// `select c, a, b`: `a` if `c` else `b`; the result has `a`'s type.
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ty = self.func.dfg.value_type(a);
        self.build1(
            InstData::Ternary {
                op: Opcode::Select,
                args: [c, a, b],
            },
            ty,
        )
    }

    /// `len array`: its length, as an i64.
    pub fn len(&mut self, array: Value) -> Value {
        match self.func.dfg.value_type(array) {
            Type::IArray => self.unary(Opcode::Ilen, array),
            _ => self.unary(Opcode::Len, array),
        }
    }

    /// `load array, index`: the element, bounds-checked (`iload` when
    /// `array` is an i64 array).
    pub fn load(&mut self, array: Value, index: Value) -> Value {
        match self.func.dfg.value_type(array) {
            Type::IArray => self.binary(Opcode::Iload, array, index),
            _ => self.binary(Opcode::Load, array, index),
        }
    }

    /// `store array, index, x`: sets the element, bounds-checked
    /// (`istore` when `array` is an i64 array).
    pub fn store(&mut self, array: Value, index: Value, x: Value) -> Inst {
        let op = match self.func.dfg.value_type(array) {
            Type::IArray => Opcode::Istore,
            _ => Opcode::Store,
        };
        self.build(
            InstData::Ternary {
                op,
                args: [array, index, x],
            },
            &[],
        )
    }

    /// `zeros len, "name"`: a fresh zero-filled array; `name` is its
    /// source-level name, for error messages.
    pub fn zeros(&mut self, len: Value, name: impl Into<String>) -> Value {
        self.build1(
            InstData::Zeros {
                op: Opcode::Zeros,
                len,
                name: name.into(),
            },
            Type::Array,
        )
    }

    /// A new array (`zeros` or `izeros`, named `name`) with the elements
    /// of `src`, copied by a loop; leaves the builder in the loop's exit
    /// block. How an array that a function does not own is returned.
    pub fn copy_of(&mut self, src: Value, name: impl Into<String>) -> Value {
        let n = self.len(src);
        let dst = match self.func.dfg.value_type(src) {
            Type::IArray => self.izeros(n, name),
            _ => self.zeros(n, name),
        };
        self.copy_loop(src, dst, n);
        dst
    }

    /// `dst[i] = src[i]` for `i` in `0..n`, as a loop; leaves the builder
    /// in the loop's exit block.
    pub fn copy_loop(&mut self, src: Value, dst: Value, n: Value) {
        self.count_up(n, |b, i| {
            let x = b.load(src, i);
            b.store(dst, i, x);
        });
    }

    /// A loop running `body` for `i` in `0..n` (emitted in the loop's body
    /// block, `i` its counter); leaves the builder in the loop's exit block.
    pub fn count_up(&mut self, n: Value, body: impl FnOnce(&mut Self, Value)) {
        let zero = self.iconst(0);
        let (header, body_block, exit) = (
            self.create_block(),
            self.create_block(),
            self.create_block(),
        );
        self.jump(header, &[zero]);
        self.switch_to_block(header);
        let i = self.append_block_param(header, Type::I64);
        let c = self.icmp(CmpCond::Lt, i, n);
        self.brif(c, body_block, &[], exit, &[]);
        self.switch_to_block(body_block);
        body(self, i);
        let one = self.iconst(1);
        let i1 = self.iadd(i, one);
        self.jump(header, &[i1]);
        self.switch_to_block(exit);
    }

    /// `izeros len, "name"`: a fresh zero-filled i64 array.
    pub fn izeros(&mut self, len: Value, name: impl Into<String>) -> Value {
        self.build1(
            InstData::Zeros {
                op: Opcode::Izeros,
                len,
                name: name.into(),
            },
            Type::IArray,
        )
    }

    /// `samelen a, b`: traps unless the two arrays have the same length.
    pub fn samelen(&mut self, a: Value, b: Value) -> Inst {
        self.build(
            InstData::Binary {
                op: Opcode::SameLen,
                args: [a, b],
            },
            &[],
        )
    }

    /// `slice array, lo, hi`: the view of elements `lo..hi` of `array`,
    /// of its type; bounds-checked.
    pub fn slice(&mut self, array: Value, lo: Value, hi: Value) -> Value {
        let ty = self.func.dfg.value_type(array);
        self.build1(
            InstData::Ternary {
                op: Opcode::Slice,
                args: [array, lo, hi],
            },
            ty,
        )
    }

    /// `view array, lo, hi`: [`FuncBuilder::slice`] without the check, for a
    /// view whose bounds a `slice` already checked (see [`Opcode::View`]).
    pub fn view(&mut self, array: Value, lo: Value, hi: Value) -> Value {
        let ty = self.func.dfg.value_type(array);
        self.build1(
            InstData::Ternary {
                op: Opcode::View,
                args: [array, lo, hi],
            },
            ty,
        )
    }

    /// `disjoint a, b`: traps when the two views share an element.
    pub fn disjoint(&mut self, a: Value, b: Value) -> Inst {
        self.build(
            InstData::Binary {
                op: Opcode::Disjoint,
                args: [a, b],
            },
            &[],
        )
    }

    /// `fill array, x`: sets every element to `x`.
    pub fn fill(&mut self, array: Value, x: Value) -> Inst {
        let op = match self.func.dfg.value_type(array) {
            Type::IArray => Opcode::Ifill,
            _ => Opcode::Fill,
        };
        self.build(
            InstData::Binary {
                op,
                args: [array, x],
            },
            &[],
        )
    }

    /// Pushes a scalar onto tape number `tape`.
    pub fn push(&mut self, tape: u8, x: Value) -> Inst {
        self.build(InstData::Push { tape, arg: x }, &[])
    }

    /// Pops a scalar of type `ty` from tape number `tape`.
    pub fn pop(&mut self, tape: u8, ty: Type) -> Value {
        self.pop_varying(tape, ty, None)
    }

    /// Pops a scalar of type `ty` from tape number `tape` that varies only
    /// with `varies` (see [`InstData::Pop`]; `None`: with anything).
    pub fn pop_varying(&mut self, tape: u8, ty: Type, varies: Option<Vec<Value>>) -> Value {
        self.build1(InstData::Pop { tape, ty, varies }, ty)
    }

    /// `tapelen tape`: the entries on the tape, a mark.
    pub fn tapelen(&mut self, tape: u8) -> Value {
        let data = InstData::Tape {
            op: Opcode::Tapelen,
            tape,
            arg: None,
        };
        self.build1(data, Type::I64)
    }

    /// `tapecut tape, mark`: drops what was pushed since `mark`.
    pub fn tapecut(&mut self, tape: u8, mark: Value) -> Inst {
        let data = InstData::Tape {
            op: Opcode::Tapecut,
            tape,
            arg: Some(mark),
        };
        self.build(data, &[])
    }

    /// `tapeover tape, mark`: has the tape grown by a checkpoint segment
    /// since `mark`?
    pub fn tapeover(&mut self, tape: u8, mark: Value) -> Value {
        let data = InstData::Tape {
            op: Opcode::Tapeover,
            tape,
            arg: Some(mark),
        };
        self.build1(data, Type::Bool)
    }

    /// `checkpoint n`: a hint that reverse mode checkpoints the loop the
    /// jump ending this block enters, in segments of `n` iterations (`n >
    /// 0`) or of the run's segment size.
    pub fn checkpoint(&mut self, n: Value) -> Inst {
        self.build(
            InstData::Unary {
                op: Opcode::Checkpoint,
                arg: n,
            },
            &[],
        )
    }

    /// A call; the caller supplies the callee's result types.
    pub fn call(&mut self, func: FuncId, args: &[Value], result_types: &[Type]) -> Inst {
        self.build(
            InstData::Call {
                func,
                args: args.to_vec(),
            },
            result_types,
        )
    }

    /// An `autodiff` request; see [`crate::Module::autodiff_result_types`].
    pub fn autodiff(&mut self, spec: AutodiffSpec, args: &[Value], result_types: &[Type]) -> Inst {
        self.build(
            InstData::Autodiff {
                spec: Box::new(spec),
                args: args.to_vec(),
            },
            result_types,
        )
    }

    /// `jump block(args)`.
    pub fn jump(&mut self, block: Block, args: &[Value]) -> Inst {
        self.build(
            InstData::Jump {
                dest: BlockCall {
                    block,
                    args: args.to_vec(),
                },
            },
            &[],
        )
    }

    /// `brif cond, then_block(then_args), else_block(else_args)`.
    pub fn brif(
        &mut self,
        cond: Value,
        then_block: Block,
        then_args: &[Value],
        else_block: Block,
        else_args: &[Value],
    ) -> Inst {
        self.build(
            InstData::Brif {
                cond,
                then_dest: BlockCall {
                    block: then_block,
                    args: then_args.to_vec(),
                },
                else_dest: BlockCall {
                    block: else_block,
                    args: else_args.to_vec(),
                },
            },
            &[],
        )
    }

    /// `return values`.
    pub fn ret(&mut self, values: &[Value]) -> Inst {
        self.build(
            InstData::Return {
                args: values.to_vec(),
            },
            &[],
        )
    }
}

fn fixed_result(op: Opcode) -> Type {
    match op.fixed_signature() {
        Some((_, Some(ty))) => ty,
        _ => panic!("{op} has no fixed single result"),
    }
}
