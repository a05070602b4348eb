//! Opcodes and instruction formats.
//!
//! [`Opcode`] is the one table of what each operation is: its text-format
//! name, its operand and result types, and whether it is a language intrinsic.
//! [`InstData`] is the storage format of an instruction; several opcodes share
//! a format (`Unary`, `Binary`, ...), as in Cranelift.

use crate::entities::{Block, FuncId, Value};
use crate::types::Type;
use std::fmt;

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal : [$($arg:ident),*] -> $res:tt ;)*) => {
        /// Every operation of the IR.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $( $(#[$doc])* $variant, )*
        }

        impl Opcode {
            /// All opcodes, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            /// The text-format mnemonic.
            pub fn name(self) -> &'static str {
                match self { $(Opcode::$variant => $name,)* }
            }

            /// Operand and result types for opcodes whose types are fixed.
            /// `None` for the polymorphic or variadic ones (constants carry an
            /// immediate; `select`, `call`, `autodiff` and terminators are
            /// checked by the verifier case by case).
            pub fn fixed_signature(self) -> Option<(&'static [Type], Option<Type>)> {
                match self {
                    $(Opcode::$variant => opcodes!(@sig [$($arg),*] $res),)*
                }
            }
        }
    };
    (@sig [] poly) => { None };
    (@sig [$($arg:ident),*] none) => { Some((&[$(Type::$arg),*], None)) };
    (@sig [$($arg:ident),*] $res:ident) => { Some((&[$(Type::$arg),*], Some(Type::$res))) };
}

opcodes! {
    /// `v = fconst 1.5`
    Fconst = "fconst": [] -> poly;
    /// `v = iconst 3`
    Iconst = "iconst": [] -> poly;
    /// `v = bconst true`
    Bconst = "bconst": [] -> poly;

    Fadd = "fadd": [F64, F64] -> F64;
    Fsub = "fsub": [F64, F64] -> F64;
    Fmul = "fmul": [F64, F64] -> F64;
    Fdiv = "fdiv": [F64, F64] -> F64;
    Fneg = "fneg": [F64] -> F64;
    /// `x ^ n` for an integer literal `n`: exact binary powering (see
    /// [`crate::semantics::powi`]); the exponent is an immediate.
    Powi = "powi": [F64] -> F64;

    /// Wrapping i64 arithmetic.
    Iadd = "iadd": [I64, I64] -> I64;
    Isub = "isub": [I64, I64] -> I64;
    Imul = "imul": [I64, I64] -> I64;
    /// Truncating division; division by zero and `i64::MIN / -1` trap.
    Idiv = "idiv": [I64, I64] -> I64;
    /// Remainder with the sign of the dividend; `x % 0` traps, `i64::MIN % -1` traps.
    Irem = "irem": [I64, I64] -> I64;
    Ineg = "ineg": [I64] -> I64;

    Not = "not": [Bool] -> Bool;
    /// i64 to f64, rounding to nearest.
    Sitof = "sitof": [I64] -> F64;
    /// The bits of an f64, as an i64 (no conversion). Not in the language:
    /// reverse mode keeps the trip counts of loops in the slots of an f64
    /// array, as bits.
    Tobits = "tobits": [F64] -> I64;
    /// The f64 with these bits (no conversion); see `tobits`.
    Frombits = "frombits": [I64] -> F64;

    Sin = "sin": [F64] -> F64;
    Cos = "cos": [F64] -> F64;
    Tan = "tan": [F64] -> F64;
    Asin = "asin": [F64] -> F64;
    Acos = "acos": [F64] -> F64;
    Atan = "atan": [F64] -> F64;
    Sinh = "sinh": [F64] -> F64;
    Cosh = "cosh": [F64] -> F64;
    Tanh = "tanh": [F64] -> F64;
    Exp = "exp": [F64] -> F64;
    Expm1 = "expm1": [F64] -> F64;
    Log = "log": [F64] -> F64;
    Log1p = "log1p": [F64] -> F64;
    Sqrt = "sqrt": [F64] -> F64;
    Cbrt = "cbrt": [F64] -> F64;
    Abs = "abs": [F64] -> F64;
    Floor = "floor": [F64] -> F64;
    Ceil = "ceil": [F64] -> F64;
    /// Rounds half away from zero.
    Round = "round": [F64] -> F64;
    /// -1, 0 or 1 (zero keeps its sign; NaN stays NaN).
    Sign = "sign": [F64] -> F64;
    Atan2 = "atan2": [F64, F64] -> F64;
    Pow = "pow": [F64, F64] -> F64;
    Hypot = "hypot": [F64, F64] -> F64;
    /// IEEE 754-2019 `minimum`: NaN if either operand is NaN, -0 < +0.
    Min = "min": [F64, F64] -> F64;
    /// IEEE 754-2019 `maximum`: NaN if either operand is NaN, -0 < +0.
    Max = "max": [F64, F64] -> F64;

    /// Ordered comparison of f64 (false when either is NaN, except `ne`).
    Fcmp = "fcmp": [F64, F64] -> Bool;
    /// Signed comparison of i64.
    Icmp = "icmp": [I64, I64] -> Bool;
    /// `v = select c, a, b`: `a` if `c` else `b`; `a` and `b` share a scalar type.
    Select = "select": [] -> poly;

    /// Length of an array, as i64.
    Len = "len": [Array] -> I64;
    /// `v = load a, i`: bounds-checked read.
    Load = "load": [Array, I64] -> F64;
    /// `store a, i, x`: bounds-checked write.
    Store = "store": [Array, I64, F64] -> none;
    /// `v = zeros n, "name"`: a zero-filled local array, freed when the
    /// function returns. `n` must be in `0..=MAX_ARRAY_LEN`.
    Zeros = "zeros": [I64] -> Array;
    /// `fill a, x`: sets every element.
    Fill = "fill": [Array, F64] -> none;
    /// `samelen a, da`: traps with `ShadowLengthMismatch` unless the array
    /// `a` and its shadow `da` have the same length. Derivatives check each
    /// `dup` pair on entry.
    SameLen = "samelen": [Array, Array] -> none;

    /// `push T, v`: pushes a scalar onto tape number `T`, one of
    /// [`MAX_TAPES`] last-in-first-out stacks that live for one outermost
    /// call. Reverse mode records values here in the forward sweep and reads
    /// them back in the reverse sweep; nested derivatives use distinct tapes
    /// so that their records never interleave.
    Push = "push": [] -> poly;
    /// `v = pop T, f64`: pops the value pushed last on tape `T`; its type is
    /// an immediate and must be the type that was pushed. Popping an empty
    /// tape traps.
    Pop = "pop": [] -> poly;

    /// `v1, v2 = call @f(args..)`
    Call = "call": [] -> poly;
    /// `vs = autodiff forward dual @f(dual v1, v2, const v3)`: a derivative
    /// request, replaced by a call to a derivative function by the AD passes.
    Autodiff = "autodiff": [] -> poly;

    /// `jump block1(args..)`
    Jump = "jump": [] -> poly;
    /// `brif c, block1(args..), block2(args..)`
    Brif = "brif": [] -> poly;
    /// `return args..`
    Return = "return": [] -> poly;
}

impl Opcode {
    /// Parses a text-format mnemonic.
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// Does this opcode end a block?
    pub fn is_terminator(self) -> bool {
        matches!(self, Opcode::Jump | Opcode::Brif | Opcode::Return)
    }

    /// Is this one of the language's math intrinsics (`sin`, `pow`, ...)? The
    /// language names them exactly as the IR does.
    pub fn is_intrinsic(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Sin | Cos
                | Tan
                | Asin
                | Acos
                | Atan
                | Sinh
                | Cosh
                | Tanh
                | Exp
                | Expm1
                | Log
                | Log1p
                | Sqrt
                | Cbrt
                | Abs
                | Floor
                | Ceil
                | Round
                | Sign
                | Atan2
                | Pow
                | Hypot
                | Min
                | Max
        )
    }

    /// The intrinsic of this language name, if any (`"sin"` -> `Sin`).
    pub fn intrinsic(name: &str) -> Option<Opcode> {
        Opcode::from_name(name).filter(|op| op.is_intrinsic())
    }

    /// Does this opcode touch memory or control flow, or may it trap? Such
    /// instructions are never removed or reordered as pure computations.
    pub fn has_side_effects(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Idiv | Irem
                | Load
                | Store
                | Zeros
                | Fill
                | SameLen
                | Push
                | Pop
                | Call
                | Autodiff
                | Jump
                | Brif
                | Return
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many tapes (`push`/`pop` stacks) there are: tape numbers are
/// `0..MAX_TAPES`.
pub const MAX_TAPES: u8 = 16;

/// The condition of an `fcmp` or `icmp`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CmpCond {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpCond {
    pub const ALL: [CmpCond; 6] = [
        CmpCond::Eq,
        CmpCond::Ne,
        CmpCond::Lt,
        CmpCond::Le,
        CmpCond::Gt,
        CmpCond::Ge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CmpCond::Eq => "eq",
            CmpCond::Ne => "ne",
            CmpCond::Lt => "lt",
            CmpCond::Le => "le",
            CmpCond::Gt => "gt",
            CmpCond::Ge => "ge",
        }
    }

    pub fn from_name(s: &str) -> Option<CmpCond> {
        CmpCond::ALL.into_iter().find(|c| c.name() == s)
    }
}

impl fmt::Display for CmpCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A branch destination with its block arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockCall {
    pub block: Block,
    pub args: Vec<Value>,
}

/// Derivative mode of an `autodiff` request or a custom rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Forward,
    Reverse,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Forward => "forward",
            Mode::Reverse => "reverse",
        }
    }

    pub fn from_name(s: &str) -> Option<Mode> {
        match s {
            "forward" => Some(Mode::Forward),
            "reverse" => Some(Mode::Reverse),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an `autodiff` request treats the callee's result.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RetActivity {
    /// Forward: return the primal results followed by their tangents.
    Dual,
    /// Reverse: seed the result's cotangent with 1.0.
    Active,
    /// Forward: return nothing. Reverse: seed nothing.
    Const,
}

impl RetActivity {
    pub fn name(self) -> &'static str {
        match self {
            RetActivity::Dual => "dual",
            RetActivity::Active => "active",
            RetActivity::Const => "const",
        }
    }

    pub fn from_name(s: &str) -> Option<RetActivity> {
        match s {
            "dual" => Some(RetActivity::Dual),
            "active" => Some(RetActivity::Active),
            "const" => Some(RetActivity::Const),
            _ => None,
        }
    }
}

/// How an `autodiff` request treats one argument of the callee.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgActivity {
    /// One value: the argument, not differentiated.
    Const,
    /// Forward, scalar: the value and its tangent.
    Dual,
    /// Reverse, scalar: the value; its adjoint is a result of the request.
    Active,
    /// Array: the array and its shadow (tangent or adjoint accumulator).
    Dup,
}

impl ArgActivity {
    pub fn name(self) -> &'static str {
        match self {
            ArgActivity::Const => "const",
            ArgActivity::Dual => "dual",
            ArgActivity::Active => "active",
            ArgActivity::Dup => "dup",
        }
    }

    pub fn from_name(s: &str) -> Option<ArgActivity> {
        match s {
            "const" => Some(ArgActivity::Const),
            "dual" => Some(ArgActivity::Dual),
            "active" => Some(ArgActivity::Active),
            "dup" => Some(ArgActivity::Dup),
            _ => None,
        }
    }

    /// How many IR values this activity takes.
    pub fn arity(self) -> usize {
        match self {
            ArgActivity::Const | ArgActivity::Active => 1,
            ArgActivity::Dual | ArgActivity::Dup => 2,
        }
    }
}

/// The static part of an `autodiff` instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AutodiffSpec {
    pub mode: Mode,
    pub func: FuncId,
    pub ret: RetActivity,
    /// One entry per parameter of `func`.
    pub args: Vec<ArgActivity>,
}

/// Instruction storage. The variants are formats; each names its opcode where
/// several opcodes share it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstData {
    /// `fconst`, stored as IEEE bits so that instructions can be hashed.
    FConst {
        bits: u64,
    },
    IConst {
        imm: i64,
    },
    BConst {
        imm: bool,
    },
    /// One operand: `fneg`, `ineg`, `not`, `sitof`, `len`, unary intrinsics.
    Unary {
        op: Opcode,
        arg: Value,
    },
    /// Two operands: arithmetic, binary intrinsics, `load`, `fill`.
    Binary {
        op: Opcode,
        args: [Value; 2],
    },
    /// Three operands: `select`, `store`.
    Ternary {
        op: Opcode,
        args: [Value; 3],
    },
    Powi {
        arg: Value,
        exp: i32,
    },
    /// `fcmp` or `icmp`.
    Cmp {
        op: Opcode,
        cond: CmpCond,
        args: [Value; 2],
    },
    /// `zeros n, "name"`; the name is the array's source-level name, used in
    /// error messages.
    Zeros {
        len: Value,
        name: String,
    },
    /// `push tape, v`
    Push {
        tape: u8,
        arg: Value,
    },
    /// `v = pop tape, ty`
    Pop {
        tape: u8,
        ty: Type,
    },
    Call {
        func: FuncId,
        args: Vec<Value>,
    },
    Autodiff {
        spec: Box<AutodiffSpec>,
        args: Vec<Value>,
    },
    Jump {
        dest: BlockCall,
    },
    Brif {
        cond: Value,
        then_dest: BlockCall,
        else_dest: BlockCall,
    },
    Return {
        args: Vec<Value>,
    },
}

impl InstData {
    pub fn fconst(x: f64) -> InstData {
        InstData::FConst { bits: x.to_bits() }
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            InstData::FConst { .. } => Opcode::Fconst,
            InstData::IConst { .. } => Opcode::Iconst,
            InstData::BConst { .. } => Opcode::Bconst,
            InstData::Unary { op, .. }
            | InstData::Binary { op, .. }
            | InstData::Ternary { op, .. }
            | InstData::Cmp { op, .. } => *op,
            InstData::Powi { .. } => Opcode::Powi,
            InstData::Zeros { .. } => Opcode::Zeros,
            InstData::Push { .. } => Opcode::Push,
            InstData::Pop { .. } => Opcode::Pop,
            InstData::Call { .. } => Opcode::Call,
            InstData::Autodiff { .. } => Opcode::Autodiff,
            InstData::Jump { .. } => Opcode::Jump,
            InstData::Brif { .. } => Opcode::Brif,
            InstData::Return { .. } => Opcode::Return,
        }
    }

    /// The value operands, in order, excluding block-call arguments.
    pub fn args(&self) -> &[Value] {
        match self {
            InstData::FConst { .. }
            | InstData::IConst { .. }
            | InstData::BConst { .. }
            | InstData::Pop { .. }
            | InstData::Jump { .. } => &[],
            InstData::Unary { arg, .. } | InstData::Powi { arg, .. } => std::slice::from_ref(arg),
            InstData::Binary { args, .. } | InstData::Cmp { args, .. } => args,
            InstData::Ternary { args, .. } => args,
            InstData::Zeros { len, .. } => std::slice::from_ref(len),
            InstData::Push { arg, .. } => std::slice::from_ref(arg),
            InstData::Brif { cond, .. } => std::slice::from_ref(cond),
            InstData::Call { args, .. }
            | InstData::Autodiff { args, .. }
            | InstData::Return { args } => args,
        }
    }

    /// Mutable access to the value operands (excluding block-call arguments).
    pub fn args_mut(&mut self) -> &mut [Value] {
        match self {
            InstData::FConst { .. }
            | InstData::IConst { .. }
            | InstData::BConst { .. }
            | InstData::Pop { .. }
            | InstData::Jump { .. } => &mut [],
            InstData::Unary { arg, .. } | InstData::Powi { arg, .. } => std::slice::from_mut(arg),
            InstData::Binary { args, .. } | InstData::Cmp { args, .. } => args,
            InstData::Ternary { args, .. } => args,
            InstData::Zeros { len, .. } => std::slice::from_mut(len),
            InstData::Push { arg, .. } => std::slice::from_mut(arg),
            InstData::Brif { cond, .. } => std::slice::from_mut(cond),
            InstData::Call { args, .. }
            | InstData::Autodiff { args, .. }
            | InstData::Return { args } => args,
        }
    }

    /// `(array, index)` when the instruction is a `load` or a `store`.
    pub fn array_access(&self) -> Option<(Value, Value)> {
        match self {
            InstData::Binary {
                op: Opcode::Load,
                args,
            } => Some((args[0], args[1])),
            InstData::Ternary {
                op: Opcode::Store,
                args,
            } => Some((args[0], args[1])),
            _ => None,
        }
    }

    /// Calls `f` on every value the instruction reads, block-call arguments
    /// included.
    pub fn for_each_use(&self, mut f: impl FnMut(Value)) {
        for &v in self.args() {
            f(v);
        }
        for dest in self.destinations() {
            for &v in &dest.args {
                f(v);
            }
        }
    }

    /// Rewrites every value the instruction reads, block-call arguments
    /// included.
    pub fn map_uses(&mut self, mut f: impl FnMut(Value) -> Value) {
        for v in self.args_mut() {
            *v = f(*v);
        }
        for dest in self.destinations_mut() {
            for v in &mut dest.args {
                *v = f(*v);
            }
        }
    }

    /// Branch destinations as a small vector (0, 1 or 2 entries).
    pub fn destinations(&self) -> Vec<&BlockCall> {
        match self {
            InstData::Jump { dest } => vec![dest],
            InstData::Brif {
                then_dest,
                else_dest,
                ..
            } => vec![then_dest, else_dest],
            _ => Vec::new(),
        }
    }

    /// Mutable branch destinations (0, 1 or 2 entries).
    pub fn destinations_mut(&mut self) -> Vec<&mut BlockCall> {
        match self {
            InstData::Jump { dest } => vec![dest],
            InstData::Brif {
                then_dest,
                else_dest,
                ..
            } => vec![then_dest, else_dest],
            _ => Vec::new(),
        }
    }
}
