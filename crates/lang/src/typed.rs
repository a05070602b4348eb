//! The checked program: what [`crate::check`] produces and [`crate::lower`]
//! consumes. Names are resolved to [`LocalId`]s and function indices, every
//! expression has a [`Ty`], implicit conversions (integer literals used as
//! f64) are already applied, and each operator is the IR opcode it lowers to.

pub use crate::ast::Elem;
pub use crate::ast::{CheckpointAttr, LoopAttrs};
use crate::diagnostic::Span;
use adze_ir::{ArgActivity, CmpCond, InlineHint, Mode, Opcode, Param, RetActivity, Type};

/// A local variable of one function (parameters included), an index into
/// [`Func::locals`].
pub type LocalId = usize;

/// The type of an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    F64,
    I64,
    Bool,
    /// An array view; `writable` for `mut` parameters and `zeros` arrays.
    Array {
        writable: bool,
        elem: Elem,
    },
    /// No value: calls of functions without results, `fill`, `if` without
    /// `else`.
    Unit,
    /// Several scalar results.
    Tuple(Vec<Type>),
    /// Control never gets past it (an `if` whose branches all return).
    Never,
}

impl Ty {
    pub fn scalar(t: Type) -> Ty {
        match t {
            // The language has no two-lane type; only the optimizer, after
            // the front end, makes `f64x2` values, and no signature holds
            // one. Named as the f64 lanes it holds.
            Type::F64 | Type::F64x2 => Ty::F64,
            Type::I64 => Ty::I64,
            Type::Bool => Ty::Bool,
            Type::Array => Ty::Array {
                writable: false,
                elem: Elem::F64,
            },
            Type::IArray => Ty::Array {
                writable: false,
                elem: Elem::I64,
            },
        }
    }

    /// The type of a value of IR type `t` that the function owns: a call's
    /// array result is a new array, writable.
    pub fn owned(t: Type) -> Ty {
        match Ty::scalar(t) {
            Ty::Array { elem, .. } => Ty::Array {
                writable: true,
                elem,
            },
            t => t,
        }
    }

    /// The type of a list of results: nothing, one value, or a tuple.
    pub fn results(tys: &[Type]) -> Ty {
        match tys {
            [] => Ty::Unit,
            [t] => Ty::owned(*t),
            _ => Ty::Tuple(tys.to_vec()),
        }
    }

    /// The IR type of a scalar.
    pub fn ir_scalar(&self) -> Option<Type> {
        match self {
            Ty::F64 => Some(Type::F64),
            Ty::I64 => Some(Type::I64),
            Ty::Bool => Some(Type::Bool),
            _ => None,
        }
    }

    /// The IR types of the values an expression of this type lowers to.
    pub fn ir_values(&self) -> Vec<Type> {
        match self {
            Ty::Array { elem, .. } => vec![elem.array()],
            Ty::Unit | Ty::Never => Vec::new(),
            Ty::Tuple(tys) => tys.clone(),
            t => t.ir_scalar().into_iter().collect(),
        }
    }

    /// How the type is written in messages.
    pub fn describe(&self) -> String {
        match self {
            Ty::F64 => "f64".into(),
            Ty::I64 => "i64".into(),
            Ty::Bool => "bool".into(),
            Ty::Array {
                writable: true,
                elem,
            } => format!("mut [{}]", elem.name()),
            Ty::Array {
                writable: false,
                elem,
            } => format!("[{}]", elem.name()),
            Ty::Unit => "no value".into(),
            Ty::Tuple(tys) => {
                let tys: Vec<_> = tys.iter().map(|&t| Ty::scalar(t).describe()).collect();
                format!("({})", tys.join(", "))
            }
            Ty::Never => "no value (it always returns)".into(),
        }
    }
}

/// What kind of binding a local is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LocalKind {
    Param,
    Let,
    Var,
    /// The index of a `for` loop.
    LoopIndex,
    /// `let t = zeros(n);`
    Zeros,
}

#[derive(Clone, Debug)]
pub struct Local {
    pub name: String,
    pub ty: Ty,
    pub kind: LocalKind,
}

/// One function of the module: a `fn` or a rule.
#[derive(Clone, Debug)]
pub struct Func {
    pub name: String,
    pub params: Vec<Param>,
    pub results: Vec<Type>,
    pub inline: InlineHint,
    /// Indices into [`Program::funcs`] of this function's rules.
    pub forward_rule: Option<usize>,
    pub reverse_rule: Option<usize>,
    /// Locals `0..params.len()` are the parameters.
    pub locals: Vec<Local>,
    pub body: Block,
    /// The signature (`fn f(..) -> ..`): the location of what belongs to no
    /// expression or statement of the body (the final `return`).
    pub span: Span,
}

/// The whole program, functions in module order.
#[derive(Clone, Debug)]
pub struct Program {
    pub funcs: Vec<Func>,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
    pub ty: Ty,
}

/// Statements. Those that lower to instructions of their own carry the
/// [`Span`] of their source (for the instructions' locations): the
/// `zeros(n)` call, the whole `a[i] = e;`, `return`, `for` and `while`.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let x = e;`, `var x = e;`, `let (a, b) = e;`: one local per value.
    Let(Vec<LocalId>, Expr),
    /// `let t = zeros(n);`
    Zeros(LocalId, Expr, Span),
    /// `x = e;` on a `var`.
    Assign(LocalId, Expr),
    /// `(a, b) = e;` on `var`s.
    AssignTuple(Vec<LocalId>, Expr),
    /// `a[i] = e;`
    Store(LocalId, Expr, Expr, Span),
    Expr(Expr),
    Return(Option<Expr>, Span),
    /// A `for` loop, with its `#[checkpoint]`.
    For(LocalId, Expr, Expr, Block, Span, LoopAttrs),
    /// A `while` loop, with its `#[checkpoint]`.
    While(Expr, Block, Span, LoopAttrs),
    /// `break;` and `continue;` of the innermost loop.
    Break(Span),
    Continue(Span),
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Ty,
    /// Built only from integer or float literals and `+ - * /` and unary
    /// minus; an i64 one becomes an f64 where an f64 is expected.
    pub literal: bool,
    /// The source expression (`Span::default()` for one made by the checker
    /// that has none of its own: its instructions take the enclosing
    /// expression's location).
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    F64(f64),
    I64(i64),
    Bool(bool),
    Local(LocalId),
    /// `fneg`, `ineg`, `not`, `sitof`, `len` and unary intrinsics.
    Unary(Opcode, Box<Expr>),
    /// Arithmetic, binary intrinsics and `load`.
    Binary(Opcode, Box<Expr>, Box<Expr>),
    Powi(Box<Expr>, i32),
    /// `fcmp` or `icmp`.
    Cmp(Opcode, CmpCond, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Fill(Box<Expr>, Box<Expr>),
    /// `slice a, lo, hi`: a view of an array local.
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A user function (index into [`Program::funcs`]), its arguments, and
    /// the pairs of array arguments (by index) to check `disjoint` first:
    /// a `mut` view and another view of the same array that the checker
    /// could not prove apart.
    Call(usize, Vec<Expr>, Vec<(usize, usize)>),
    /// Arguments flattened: one expression per IR value.
    Autodiff(Box<AutodiffReq>, Vec<Expr>),
    If(Box<Expr>, Block, Option<Block>),
    Tuple(Vec<Expr>),
}

/// The static part of an `autodiff` request.
#[derive(Clone, Debug)]
pub struct AutodiffReq {
    pub mode: Mode,
    pub func: usize,
    pub ret: RetActivity,
    pub args: Vec<ArgActivity>,
    /// Tangents per `dual` and shadows per `dup`: `forward(N)`'s N, else 1.
    pub width: usize,
    /// Pairs of flattened argument values to check `disjoint` first, as
    /// [`ExprKind::Call`]'s.
    pub disjoint: Vec<(usize, usize)>,
}
