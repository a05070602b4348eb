//! The syntax tree the parser builds: items, statements and expressions,
//! each with the byte [`Span`] it came from. Names are not resolved and
//! nothing is typed yet; that is [`crate::check`]'s job.

pub use crate::diagnostic::Span;
use adze_ir::{InlineHint, Mode};

/// A name and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole `.adz` file.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub items: Vec<FuncDecl>,
    /// The top-level `const` items, in file order.
    pub consts: Vec<ConstDecl>,
}

/// `const NAME: T = EXPR;`: a named scalar evaluated at compile time.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstDecl {
    pub name: Ident,
    /// A scalar type (the parser rejects arrays).
    pub ty: TypeExpr,
    pub value: Expr,
    /// From `const` to the `;`.
    pub span: Span,
}

/// `fn` or `rule`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FuncKind {
    Fn,
    /// `rule forward f(..)` / `rule reverse f(..)`; the [`FuncDecl::name`] is
    /// the function the rule belongs to.
    Rule(Mode),
}

/// A function or a rule.
#[derive(Clone, Debug, PartialEq)]
pub struct FuncDecl {
    /// `#[inline(..)]`, with the attribute's span.
    pub inline: Option<(InlineHint, Span)>,
    pub kind: FuncKind,
    pub name: Ident,
    pub params: Vec<ParamDecl>,
    pub results: Option<Results>,
    pub body: Block,
    /// From the `fn`/`rule` keyword to the end of the signature.
    pub sig_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: Ident,
    pub ty: TypeExpr,
}

/// A written type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TypeExpr {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TypeKind {
    F64,
    I64,
    Bool,
    /// `[f64]`, `mut [f64]`, `[i64]` or `mut [i64]`.
    Array {
        mutable: bool,
        elem: Elem,
    },
}

/// The element type of an array.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    F64,
    I64,
}

impl Elem {
    /// The IR type of an array of this element type.
    pub fn array(self) -> adze_ir::Type {
        match self {
            Elem::F64 => adze_ir::Type::Array,
            Elem::I64 => adze_ir::Type::IArray,
        }
    }

    /// The IR type of one element.
    pub fn scalar(self) -> adze_ir::Type {
        match self {
            Elem::F64 => adze_ir::Type::F64,
            Elem::I64 => adze_ir::Type::I64,
        }
    }

    /// The element type of an IR array type.
    pub fn of(t: adze_ir::Type) -> Option<Elem> {
        match t {
            adze_ir::Type::Array => Some(Elem::F64),
            adze_ir::Type::IArray => Some(Elem::I64),
            _ => None,
        }
    }

    /// `f64` or `i64`.
    pub fn name(self) -> &'static str {
        match self {
            Elem::F64 => "f64",
            Elem::I64 => "i64",
        }
    }
}

/// `-> T` or `-> (T, U, ..)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    pub types: Vec<TypeExpr>,
    pub span: Span,
}

/// `{ stmts.. tail }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    /// The final expression without `;`: the block's value.
    pub tail: Option<Box<Expr>>,
    /// Braces included.
    pub span: Span,
}

/// `#[checkpoint]` or `#[checkpoint(snapshots = K)]` on a loop: reverse
/// mode checkpoints it (docs/ad-reverse.md, "Checkpointing").
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointAttr {
    /// `snapshots = K` (a `for` loop only): at most `K` snapshots.
    pub snapshots: Option<i64>,
    pub span: Span,
}

/// The attributes of a loop, each at most once, in any order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopAttrs {
    /// `#[checkpoint]` or `#[checkpoint(snapshots = K)]`.
    pub checkpoint: Option<CheckpointAttr>,
    /// `#[ordered]`: the loop's sums add their terms in the written order
    /// (docs/language.md, "The order of a sum"); its span.
    pub ordered: Option<Span>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `let x = e;`
    Let(Ident, Expr),
    /// `let (a, b) = e;`
    LetTuple(Vec<Ident>, Expr),
    /// `var (a, b) = e;`
    VarTuple(Vec<Ident>, Expr),
    /// `(a, b) = e;` on `var`s.
    AssignTuple(Vec<Ident>, Expr),
    /// `var x = e;`
    Var(Ident, Expr),
    /// `x = e;`
    Assign(Ident, Expr),
    /// `a[i] = e;`
    Store(Ident, Expr, Expr),
    /// `e;`, or an `if` without `;`.
    Expr(Expr),
    /// `return;` / `return e;`
    Return(Option<Expr>),
    /// `for i in lo..hi { .. }`, maybe under `#[checkpoint(..)]`.
    For(Ident, Expr, Expr, Block, LoopAttrs),
    /// `while c { .. }`, maybe under `#[checkpoint]`.
    While(Expr, Block, LoopAttrs),
    /// `break;`: leaves the innermost loop.
    Break,
    /// `continue;`: goes on with the innermost loop's next iteration.
    Continue,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    /// `&`, bitwise, on i64.
    BitAnd,
    /// `|`, bitwise, on i64.
    BitOr,
    Shl,
    Shr,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Pow => "^",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    /// `& | << >>`: i64 operands only.
    pub fn is_bitwise(self) -> bool {
        matches!(self, BinOp::BitAnd | BinOp::BitOr | BinOp::Shl | BinOp::Shr)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A non-negative integer literal (it fits in i64; the lexer checks).
    Int(i64),
    Float(f64),
    Bool(bool),
    Name(Ident),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `f(args..)`: user functions, intrinsics, builtins and `autodiff`
    /// (whose arguments `forward`, `dup(a, da)`, ... are parsed as names and
    /// calls, and interpreted by the checker).
    Call(Ident, Vec<Expr>),
    /// `a[i]`
    Index(Ident, Box<Expr>),
    /// `a[lo..hi]`, `a[lo..]`, `a[..hi]`, `a[..]`: a view of `a`.
    Slice(Ident, Option<Box<Expr>>, Option<Box<Expr>>),
    /// `if c { .. } else { .. }`; `else if` is an `else` block whose tail is
    /// the inner `if`.
    If(Box<Expr>, Block, Option<Block>),
    /// `(a, b, ..)`, at least two elements.
    Tuple(Vec<Expr>),
}
