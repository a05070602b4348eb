//! The parser: recursive descent from [`Token`]s to the [`ast`](crate::ast).
//!
//! Grammar (loosest precedence first; `^` is right-associative and its right
//! operand may be a unary minus; comparisons do not chain):
//!
//! ```text
//! file    = (item | const)*
//! item    = ("#" "[" "inline" "(" ("always"|"never") ")" "]")*
//!           ("fn" NAME | "rule" ("forward"|"reverse") NAME) "(" params ")" ("->" results)? block
//! const   = "const" NAME ":" ("f64"|"i64"|"bool") "=" expr ";"
//! params  = (NAME ":" type ("," NAME ":" type)* ","?)?
//! type    = "f64" | "i64" | "bool" | "[" "f64" "]" | "mut" "[" "f64" "]"
//! results = type | "(" type ("," type)+ ")"
//! block   = "{" stmt* expr? "}"
//! stmt    = "let" NAME "=" expr ";" | "let" "(" NAME ("," NAME)+ ")" "=" expr ";"
//!         | "var" NAME "=" expr ";" | "return" expr? ";" | ";"
//!         | "for" NAME "in" expr ".." expr block | "while" expr block
//!         | NAME "=" expr ";" | NAME "[" expr "]" "=" expr ";"
//!         | expr ";" | if-expr
//! expr    = or;  or = and ("||" and)*;  and = cmp ("&&" cmp)*
//! cmp     = bor (("=="|"!="|"<"|"<="|">"|">=") bor)?
//! bor     = band ("|" band)*;  band = shift ("&" shift)*;  shift = add (("<<"|">>") add)*
//! add     = mul (("+"|"-") mul)*;  mul = unary (("*"|"/"|"%") unary)*
//! unary   = ("-"|"!") unary | power;  power = primary ("^" unary)?
//! primary = INT | FLOAT | "true" | "false" | NAME | NAME "(" args ")" | NAME "[" expr "]"
//!         | "(" expr ")" | "(" expr ("," expr)+ ")" | if-expr
//! if-expr = "if" expr block ("else" (if-expr | block))?
//! ```
//!
//! Nesting is bounded by [`MAX_DEPTH`] (parentheses, unary operators, blocks
//! and the operators of one left-associative chain all count), so that no
//! input can overflow the stack here or in the later stages, which recurse
//! over the tree. After an error the parser skips to the next item, so each
//! item reports at most its first syntax error.

use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::lexer::{Token, TokenKind};
use adze_ir::{InlineHint, Mode};

/// The deepest nesting of expressions and blocks the parser accepts.
pub const MAX_DEPTH: usize = 256;

/// The error has been recorded in [`Parser::errors`].
struct Reported;

type PResult<T> = Result<T, Reported>;

/// Parses a token stream (ending in `Eof`) into a file.
pub fn parse(src: &str, tokens: &[Token]) -> Result<File, Vec<Diagnostic>> {
    let mut p = Parser {
        src,
        tokens,
        pos: 0,
        depth: 0,
        errors: Vec::new(),
    };
    let mut items = Vec::new();
    let mut consts = Vec::new();
    while p.peek() != TokenKind::Eof {
        p.depth = 0;
        if p.at_const() {
            match p.const_item() {
                Ok(c) => consts.push(c),
                Err(Reported) => p.skip_to_item(),
            }
            continue;
        }
        match p.item() {
            Ok(item) => items.push(item),
            Err(Reported) => p.skip_to_item(),
        }
    }
    if p.errors.is_empty() {
        Ok(File { items, consts })
    } else {
        Err(p.errors)
    }
}

struct Parser<'a> {
    src: &'a str,
    tokens: &'a [Token],
    pos: usize,
    depth: usize,
    errors: Vec<Diagnostic>,
}

impl<'a> Parser<'a> {
    // ---- token access ----

    fn tok(&self) -> Token {
        // The stream ends with Eof and `bump` never moves past it.
        self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek(&self) -> TokenKind {
        self.tok().kind
    }

    fn bump(&mut self) -> Token {
        let t = self.tok();
        if t.kind != TokenKind::Eof {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, kind: TokenKind) -> bool {
        if self.peek() == kind {
            self.bump();
            true
        } else {
            false
        }
    }

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.span.start..t.span.end]
    }

    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn error<T>(&mut self, d: Diagnostic) -> PResult<T> {
        self.errors.push(d);
        Err(Reported)
    }

    /// Reports "expected X, found Y" at the current token.
    fn expected<T>(&mut self, what: &str, help: &str) -> PResult<T> {
        let t = self.tok();
        let found = match t.kind {
            TokenKind::Ident => format!("`{}`", self.text(t)),
            k => k.describe().to_string(),
        };
        self.error(
            Diagnostic::new(t.span, format!("expected {what}, found {found}"), help)
                .label(format!("expected {what}")),
        )
    }

    fn expect(&mut self, kind: TokenKind, help: &str) -> PResult<Token> {
        if self.peek() == kind {
            Ok(self.bump())
        } else {
            self.expected(kind.describe(), help)
        }
    }

    fn ident(&mut self, help: &str) -> PResult<Ident> {
        let t = self.expect(TokenKind::Ident, help)?;
        Ok(Ident {
            name: self.text(t).to_string(),
            span: t.span,
        })
    }

    fn skip_to_item(&mut self) {
        // At least one token, so that a `const` item in error moves on.
        if self.at_const() {
            self.bump();
        }
        while !matches!(
            self.peek(),
            TokenKind::Fn | TokenKind::Rule | TokenKind::Hash | TokenKind::Eof
        ) && !self.at_const()
        {
            self.bump();
        }
    }

    /// Is this the start of a `const` item: the contextual word `const`
    /// followed by a name? (`const(x)` in an `autodiff` is not.)
    fn at_const(&self) -> bool {
        let t = self.tok();
        t.kind == TokenKind::Ident
            && self.text(t) == "const"
            && self
                .tokens
                .get(self.pos + 1)
                .is_some_and(|n| n.kind == TokenKind::Ident)
    }

    /// `const NAME: T = EXPR;`
    fn const_item(&mut self) -> PResult<ConstDecl> {
        const HELP: &str = "write `const NAME: f64 = EXPR;` (or `i64`, `bool`)";
        let start = self.bump().span;
        let name = self.ident(HELP)?;
        self.expect(TokenKind::Colon, HELP)?;
        let ty = self.ty()?;
        if let TypeKind::Array { .. } = ty.kind {
            return self.error(
                Diagnostic::new(
                    ty.span,
                    "a constant cannot be an array",
                    "constants are `f64`, `i64` or `bool`",
                )
                .label("array type"),
            );
        }
        self.expect(TokenKind::Assign, HELP)?;
        let value = self.expr()?;
        self.expect(TokenKind::Semi, "end the constant with `;`")?;
        Ok(ConstDecl {
            name,
            ty,
            value,
            span: start.to(self.prev_span()),
        })
    }

    /// Enters one level of nesting; fails past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.tok().span;
            return self.error(
                Diagnostic::new(
                    span,
                    format!("expression nested too deeply (more than {MAX_DEPTH} levels)"),
                    "split the expression into several `let` statements",
                )
                .label("nesting limit reached here"),
            );
        }
        Ok(())
    }

    fn leave(&mut self, levels: usize) {
        self.depth = self.depth.saturating_sub(levels);
    }

    // ---- items ----

    fn item(&mut self) -> PResult<FuncDecl> {
        let mut inline = None;
        while self.peek() == TokenKind::Hash {
            let attr = self.attribute()?;
            if let Some((_, first)) = inline {
                return self.error(
                    Diagnostic::new(
                        attr.1,
                        "duplicate `#[inline]` attribute",
                        "keep one `#[inline(always)]` or `#[inline(never)]`",
                    )
                    .secondary(first, "first attribute here"),
                );
            }
            inline = Some(attr);
        }
        let start = self.tok().span;
        let kind = match self.peek() {
            TokenKind::Fn => {
                self.bump();
                FuncKind::Fn
            }
            TokenKind::Rule => {
                self.bump();
                let t = self.tok();
                let mode = match (t.kind, self.text(t)) {
                    (TokenKind::Ident, "forward") => Mode::Forward,
                    (TokenKind::Ident, "reverse") => Mode::Reverse,
                    _ => {
                        return self.expected(
                            "`forward` or `reverse`",
                            "write `rule forward f(..)` or `rule reverse f(..)`",
                        )
                    }
                };
                self.bump();
                FuncKind::Rule(mode)
            }
            _ => {
                return self.expected(
                    "`fn`, `rule` or `const`",
                    "a file holds `fn`, `rule` and `const` definitions only",
                )
            }
        };
        let name = self.ident("write the function's name")?;
        self.expect(
            TokenKind::LParen,
            "parameters go in parentheses: `f(x: f64)`",
        )?;
        let mut params = Vec::new();
        while self.peek() != TokenKind::RParen {
            let pname = self.ident("parameters are written `name: type`")?;
            self.expect(TokenKind::Colon, "parameters are written `name: type`")?;
            let ty = self.ty()?;
            params.push(ParamDecl { name: pname, ty });
            if !self.eat(TokenKind::Comma) {
                break;
            }
        }
        self.expect(TokenKind::RParen, "separate parameters with `,`")?;
        let results = if self.eat(TokenKind::Arrow) {
            Some(self.results()?)
        } else {
            None
        };
        let sig_span = start.to(self.prev_span());
        let body = self.block()?;
        Ok(FuncDecl {
            inline,
            kind,
            name,
            params,
            results,
            body,
            sig_span,
        })
    }

    fn attribute(&mut self) -> PResult<(InlineHint, Span)> {
        const HELP: &str = "a function takes `#[inline(always)]` or `#[inline(never)]` \
                            (and a loop `#[checkpoint]` or `#[ordered]`)";
        let start = self.bump().span;
        self.expect(TokenKind::LBracket, HELP)?;
        let name = self.ident(HELP)?;
        if name.name != "inline" {
            let help = if name.name == "checkpoint" || name.name == "ordered" {
                "`#[checkpoint]` and `#[ordered]` go on a `for` or `while` loop, inside a function"
            } else {
                HELP
            };
            return self.error(
                Diagnostic::new(
                    name.span,
                    format!("unknown attribute `{}`", name.name),
                    help,
                )
                .label("unknown attribute"),
            );
        }
        self.expect(TokenKind::LParen, HELP)?;
        let arg = self.ident(HELP)?;
        let hint = match arg.name.as_str() {
            "always" => InlineHint::Always,
            "never" => InlineHint::Never,
            _ => {
                return self.error(
                    Diagnostic::new(
                        arg.span,
                        format!("unknown inline hint `{}`", arg.name),
                        HELP,
                    )
                    .label("expected `always` or `never`"),
                )
            }
        };
        self.expect(TokenKind::RParen, HELP)?;
        self.expect(TokenKind::RBracket, HELP)?;
        Ok((hint, start.to(self.prev_span())))
    }

    /// `for i in lo..hi { .. }` or `while c { .. }`, under `attrs`.
    fn loop_stmt(&mut self, attrs: LoopAttrs) -> PResult<StmtKind> {
        if !matches!(self.peek(), TokenKind::For | TokenKind::While) {
            return self.expected(
                "a `for` or `while` loop",
                "`#[checkpoint]` and `#[ordered]` go on a `for` or `while` loop",
            );
        }
        if self.eat(TokenKind::For) {
            let var = self.ident("write `for i in lo..hi { .. }`")?;
            self.expect(TokenKind::In, "write `for i in lo..hi { .. }`")?;
            let lo = self.expr()?;
            self.expect(TokenKind::DotDot, "write `for i in lo..hi { .. }`")?;
            let hi = self.expr()?;
            let body = self.block()?;
            return Ok(StmtKind::For(var, lo, hi, body, attrs));
        }
        if let Some(
            a @ CheckpointAttr {
                snapshots: Some(_), ..
            },
        ) = attrs.checkpoint
        {
            if self.peek() == TokenKind::While {
                return self.error(
                    Diagnostic::new(
                        a.span,
                        "`snapshots = K` needs a `for` loop",
                        "a `while` loop's trip count is not known when it starts: \
                         write `#[checkpoint]`, whose segments follow the tape budget",
                    )
                    .label("on a `while` loop"),
                );
            }
        }
        self.expect(
            TokenKind::While,
            "`#[checkpoint]` and `#[ordered]` go on a `for` or `while` loop",
        )?;
        let cond = self.expr()?;
        let body = self.block()?;
        Ok(StmtKind::While(cond, body, attrs))
    }

    /// One attribute before a loop, added to `attrs`: `#[ordered]`,
    /// `#[checkpoint]` or `#[checkpoint(snapshots = K)]`, each at most once.
    fn loop_attr(&mut self, attrs: &mut LoopAttrs) -> PResult<()> {
        const HELP: &str = "a loop takes `#[ordered]`, `#[checkpoint]` or \
                            `#[checkpoint(snapshots = K)]` (K a positive integer)";
        let start = self.bump().span;
        self.expect(TokenKind::LBracket, HELP)?;
        let name = self.ident(HELP)?;
        let twice = match name.name.as_str() {
            "ordered" => attrs.ordered.is_some(),
            "checkpoint" => attrs.checkpoint.is_some(),
            _ => false,
        };
        if twice {
            return self.error(
                Diagnostic::new(
                    name.span,
                    format!("`#[{}]` given twice", name.name),
                    "a loop takes each attribute at most once",
                )
                .label("repeated attribute"),
            );
        }
        if name.name == "ordered" {
            self.expect(TokenKind::RBracket, HELP)?;
            attrs.ordered = Some(start.to(self.prev_span()));
            return Ok(());
        }
        if name.name != "checkpoint" {
            let help = if name.name == "inline" {
                "`#[inline(..)]` goes on a function"
            } else {
                HELP
            };
            return self.error(
                Diagnostic::new(
                    name.span,
                    format!("unknown loop attribute `{}`", name.name),
                    help,
                )
                .label("unknown attribute"),
            );
        }
        let mut snapshots = None;
        if self.eat(TokenKind::LParen) {
            let key = self.ident(HELP)?;
            if key.name != "snapshots" {
                return self.error(
                    Diagnostic::new(
                        key.span,
                        format!("unknown `#[checkpoint]` argument `{}`", key.name),
                        HELP,
                    )
                    .label("expected `snapshots`"),
                );
            }
            self.expect(TokenKind::Assign, HELP)?;
            let t = self.tok();
            let k = match (t.kind, self.text(t).parse::<i64>()) {
                (TokenKind::Int, Ok(k)) if k >= 1 => k,
                _ => return self.expected("a positive integer", HELP),
            };
            self.bump();
            snapshots = Some(k);
            self.expect(TokenKind::RParen, HELP)?;
        }
        self.expect(TokenKind::RBracket, HELP)?;
        attrs.checkpoint = Some(CheckpointAttr {
            snapshots,
            span: start.to(self.prev_span()),
        });
        Ok(())
    }

    fn ty(&mut self) -> PResult<TypeExpr> {
        const HELP: &str = "the types are `f64`, `i64`, `bool`, `[f64]` and `mut [f64]`";
        let start = self.tok().span;
        let mutable = self.eat(TokenKind::Mut);
        let kind = if self.eat(TokenKind::LBracket) {
            let elem = self.ident(HELP)?;
            let elem = match elem.name.as_str() {
                "f64" => Elem::F64,
                "i64" => Elem::I64,
                other => {
                    return self.error(
                        Diagnostic::new(
                            elem.span,
                            format!("arrays of `{other}` are not supported"),
                            "arrays hold f64 or i64: write `[f64]`, `[i64]`, `mut [f64]` or `mut [i64]`",
                        )
                        .label("expected `f64` or `i64`"),
                    );
                }
            };
            self.expect(TokenKind::RBracket, HELP)?;
            TypeKind::Array { mutable, elem }
        } else {
            let name = self.ident(HELP)?;
            let kind = match name.name.as_str() {
                "f64" => TypeKind::F64,
                "i64" => TypeKind::I64,
                "bool" => TypeKind::Bool,
                other => {
                    return self.error(
                        Diagnostic::new(name.span, format!("unknown type `{other}`"), HELP)
                            .label("unknown type"),
                    )
                }
            };
            if mutable {
                return self.error(
                    Diagnostic::new(
                        start.to(name.span),
                        "only arrays can be `mut`",
                        "scalar parameters are values; copy one into a `var` to change it",
                    )
                    .label("`mut` on a scalar type"),
                );
            }
            kind
        };
        Ok(TypeExpr {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    fn results(&mut self) -> PResult<Results> {
        let start = self.tok().span;
        let mut types = Vec::new();
        if self.eat(TokenKind::LParen) {
            loop {
                types.push(self.ty()?);
                if !self.eat(TokenKind::Comma) || self.peek() == TokenKind::RParen {
                    break;
                }
            }
            self.expect(TokenKind::RParen, "separate result types with `,`")?;
            if types.len() < 2 {
                let span = start.to(self.prev_span());
                return self.error(
                    Diagnostic::new(
                        span,
                        "a tuple result needs at least two types",
                        "write a single result without parentheses: `-> f64`",
                    )
                    .label("one-element tuple"),
                );
            }
        } else {
            types.push(self.ty()?);
        }
        for t in &types {
            if let TypeKind::Array { mutable: true, .. } = t.kind {
                let span = t.span;
                return self.error(
                    Diagnostic::new(
                        span,
                        "a result cannot be `mut`",
                        "drop the `mut`: the caller owns an array result and may write it",
                    )
                    .label("`mut` result"),
                );
            }
        }
        Ok(Results {
            types,
            span: start.to(self.prev_span()),
        })
    }

    // ---- blocks and statements ----

    fn block(&mut self) -> PResult<Block> {
        self.enter()?;
        let open = self.expect(TokenKind::LBrace, "a block starts with `{`")?;
        let mut stmts = Vec::new();
        let mut tail = None;
        loop {
            let start = self.tok().span;
            let kind = match self.peek() {
                TokenKind::RBrace => break,
                TokenKind::Eof => {
                    return self.expected("`}`", "close the block with `}`");
                }
                TokenKind::Semi => {
                    self.bump();
                    continue;
                }
                TokenKind::Let => self.let_stmt()?,
                TokenKind::Var => {
                    self.bump();
                    if self.eat(TokenKind::LParen) {
                        let help = "write `var name = value;` or `var (a, b) = f(..);`";
                        let (names, value) = self.tuple_pattern(help)?;
                        StmtKind::VarTuple(names, value)
                    } else {
                        let name = self.ident("write `var name = value;`")?;
                        self.expect(TokenKind::Assign, "write `var name = value;`")?;
                        let value = self.expr()?;
                        self.semi()?;
                        StmtKind::Var(name, value)
                    }
                }
                TokenKind::Return => {
                    self.bump();
                    let value = if self.peek() == TokenKind::Semi {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    self.semi()?;
                    StmtKind::Return(value)
                }
                TokenKind::For | TokenKind::While => self.loop_stmt(LoopAttrs::default())?,
                TokenKind::Hash => {
                    let mut attrs = LoopAttrs::default();
                    while self.peek() == TokenKind::Hash {
                        self.loop_attr(&mut attrs)?;
                    }
                    self.loop_stmt(attrs)?
                }
                TokenKind::Break | TokenKind::Continue => {
                    let kind = if self.bump().kind == TokenKind::Break {
                        StmtKind::Break
                    } else {
                        StmtKind::Continue
                    };
                    // As in Rust, the `;` may be left out before `}`.
                    if self.peek() != TokenKind::RBrace {
                        self.semi()?;
                    }
                    kind
                }
                TokenKind::If => {
                    // A statement-level `if` ends at its closing brace, as
                    // in Rust: `if c { .. } -x` is two statements.
                    self.enter()?;
                    let e = self.if_expr()?;
                    self.leave(1);
                    if self.peek() == TokenKind::RBrace {
                        tail = Some(Box::new(e));
                        break;
                    }
                    self.eat(TokenKind::Semi);
                    StmtKind::Expr(e)
                }
                _ => {
                    let e = self.expr()?;
                    if self.eat(TokenKind::Assign) {
                        let value = self.expr()?;
                        self.semi()?;
                        match e.kind {
                            ExprKind::Name(name) => StmtKind::Assign(name, value),
                            ExprKind::Index(name, index) => StmtKind::Store(name, *index, value),
                            ExprKind::Tuple(ref items)
                                if items.iter().all(|x| matches!(x.kind, ExprKind::Name(_))) =>
                            {
                                let names = items
                                    .iter()
                                    .filter_map(|x| match &x.kind {
                                        ExprKind::Name(n) => Some(n.clone()),
                                        _ => None,
                                    })
                                    .collect();
                                StmtKind::AssignTuple(names, value)
                            }
                            _ => {
                                return self.error(
                                    Diagnostic::new(
                                        e.span,
                                        "cannot assign to this expression",
                                        "assign to a `var` (`x = e;`), to `var`s (`(a, b) = f(..);`) or to an array element (`a[i] = e;`)",
                                    )
                                    .label("not a variable or an array element"),
                                )
                            }
                        }
                    } else if self.eat(TokenKind::Semi) {
                        StmtKind::Expr(e)
                    } else if self.peek() == TokenKind::RBrace {
                        tail = Some(Box::new(e));
                        break;
                    } else {
                        return self.expected(
                            "`;` or `}`",
                            "end the statement with `;`, or make this the block's last expression",
                        );
                    }
                }
            };
            stmts.push(Stmt {
                kind,
                span: start.to(self.prev_span()),
            });
        }
        let close = self.bump();
        self.leave(1);
        Ok(Block {
            stmts,
            tail,
            span: open.span.to(close.span),
        })
    }

    fn semi(&mut self) -> PResult<()> {
        self.expect(TokenKind::Semi, "end the statement with `;`")
            .map(|_| ())
    }

    fn let_stmt(&mut self) -> PResult<StmtKind> {
        const HELP: &str = "write `let name = value;` or `let (a, b) = f(..);`";
        self.bump();
        if self.eat(TokenKind::LParen) {
            let (names, value) = self.tuple_pattern(HELP)?;
            Ok(StmtKind::LetTuple(names, value))
        } else {
            let name = self.ident(HELP)?;
            self.expect(TokenKind::Assign, HELP)?;
            let value = self.expr()?;
            self.semi()?;
            Ok(StmtKind::Let(name, value))
        }
    }

    /// `a, b) = value;` after the `(` of a `let` or `var` pattern.
    fn tuple_pattern(&mut self, help: &str) -> PResult<(Vec<Ident>, Expr)> {
        let mut names = vec![self.ident(help)?];
        while self.eat(TokenKind::Comma) {
            if self.peek() == TokenKind::RParen {
                break;
            }
            names.push(self.ident(help)?);
        }
        self.expect(TokenKind::RParen, help)?;
        self.expect(TokenKind::Assign, help)?;
        let value = self.expr()?;
        self.semi()?;
        Ok((names, value))
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.binary(0)?;
        self.leave(1);
        Ok(e)
    }

    /// Binary operators of precedence `min_level` and tighter, by
    /// precedence climbing (levels, as Rust's: 0 = `||`, 1 = `&&`, 2 =
    /// comparisons, 3 = `|`, 4 = `&`, 5 = `<< >>`, 6 = `+ -`, 7 = `* / %`).
    fn binary(&mut self, min_level: usize) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        let mut chain = 0;
        while let Some((op, level)) = self.binop().filter(|&(_, l)| l >= min_level) {
            let op_span = self.bump().span;
            chain += 1;
            self.enter()?;
            let rhs = self.binary(level + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
            if level == 2 && self.binop().is_some_and(|(_, l)| l == 2) {
                let next = self.tok().span;
                return self.error(
                    Diagnostic::new(
                        next,
                        "comparison operators cannot be chained",
                        "write `a < b && b < c`",
                    )
                    .label("second comparison")
                    .secondary(op_span, "first comparison"),
                );
            }
        }
        self.leave(chain);
        Ok(lhs)
    }

    fn binop(&self) -> Option<(BinOp, usize)> {
        use TokenKind as T;
        Some(match self.peek() {
            T::OrOr => (BinOp::Or, 0),
            T::AndAnd => (BinOp::And, 1),
            T::EqEq => (BinOp::Eq, 2),
            T::NotEq => (BinOp::Ne, 2),
            T::Lt => (BinOp::Lt, 2),
            T::Le => (BinOp::Le, 2),
            T::Gt => (BinOp::Gt, 2),
            T::Ge => (BinOp::Ge, 2),
            T::Pipe => (BinOp::BitOr, 3),
            T::Amp => (BinOp::BitAnd, 4),
            T::Shl => (BinOp::Shl, 5),
            T::Shr => (BinOp::Shr, 5),
            T::Plus => (BinOp::Add, 6),
            T::Minus => (BinOp::Sub, 6),
            T::Star => (BinOp::Mul, 7),
            T::Slash => (BinOp::Div, 7),
            T::Percent => (BinOp::Rem, 7),
            _ => return None,
        })
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            TokenKind::Minus => UnOp::Neg,
            TokenKind::Bang => UnOp::Not,
            _ => return self.power(),
        };
        let start = self.bump().span;
        self.enter()?;
        let arg = self.unary()?;
        self.leave(1);
        Ok(Expr {
            span: start.to(arg.span),
            kind: ExprKind::Unary(op, Box::new(arg)),
        })
    }

    fn power(&mut self) -> PResult<Expr> {
        let base = self.primary()?;
        if !self.eat(TokenKind::Caret) {
            return Ok(base);
        }
        self.enter()?;
        let exp = self.unary()?;
        self.leave(1);
        Ok(Expr {
            span: base.span.to(exp.span),
            kind: ExprKind::Binary(BinOp::Pow, Box::new(base), Box::new(exp)),
        })
    }

    fn primary(&mut self) -> PResult<Expr> {
        let t = self.tok();
        let kind = match t.kind {
            TokenKind::Int => {
                self.bump();
                match self.text(t).parse() {
                    Ok(n) => ExprKind::Int(n),
                    // The lexer rejects literals that overflow.
                    Err(_) => return self.expected("an i64 literal", "use a smaller literal"),
                }
            }
            TokenKind::Float => {
                self.bump();
                ExprKind::Float(self.text(t).parse().unwrap_or(f64::NAN))
            }
            TokenKind::True | TokenKind::False => {
                self.bump();
                ExprKind::Bool(t.kind == TokenKind::True)
            }
            TokenKind::Ident => {
                let name = self.ident("")?;
                if self.eat(TokenKind::LParen) {
                    let mut args = Vec::new();
                    while self.peek() != TokenKind::RParen {
                        args.push(self.expr()?);
                        if !self.eat(TokenKind::Comma) {
                            break;
                        }
                    }
                    self.expect(TokenKind::RParen, "separate arguments with `,`")?;
                    ExprKind::Call(name, args)
                } else if self.eat(TokenKind::LBracket) {
                    let lo = if self.peek() == TokenKind::DotDot {
                        None
                    } else {
                        Some(Box::new(self.expr()?))
                    };
                    if self.eat(TokenKind::DotDot) {
                        let hi = if self.peek() == TokenKind::RBracket {
                            None
                        } else {
                            Some(Box::new(self.expr()?))
                        };
                        self.expect(TokenKind::RBracket, "close the slice with `]`")?;
                        ExprKind::Slice(name, lo, hi)
                    } else {
                        self.expect(TokenKind::RBracket, "close the index with `]`")?;
                        match lo {
                            Some(index) => ExprKind::Index(name, index),
                            None => {
                                return self.error(
                                    Diagnostic::new(t.span, "expected an index", "write `a[i]`")
                                        .label("here"),
                                )
                            }
                        }
                    }
                } else {
                    ExprKind::Name(name)
                }
            }
            TokenKind::LParen => {
                self.bump();
                let first = self.expr()?;
                if self.eat(TokenKind::RParen) {
                    // Parentheses only group: keep the inner expression,
                    // spanning the parentheses.
                    return Ok(Expr {
                        kind: first.kind,
                        span: t.span.to(self.prev_span()),
                    });
                }
                let mut elems = vec![first];
                while self.eat(TokenKind::Comma) {
                    if self.peek() == TokenKind::RParen {
                        break;
                    }
                    elems.push(self.expr()?);
                }
                self.expect(TokenKind::RParen, "close the parenthesis with `)`")?;
                ExprKind::Tuple(elems)
            }
            TokenKind::If => return self.if_expr(),
            _ => {
                return self.expected(
                    "an expression",
                    "write a number, a name, a call, `(..)` or `if .. { .. } else { .. }`",
                )
            }
        };
        Ok(Expr {
            kind,
            span: t.span.to(self.prev_span()),
        })
    }

    fn if_expr(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        let cond = self.expr()?;
        let then = self.block()?;
        let els = if self.eat(TokenKind::Else) {
            if self.peek() == TokenKind::If {
                self.enter()?;
                let inner = self.if_expr()?;
                self.leave(1);
                Some(Block {
                    stmts: Vec::new(),
                    span: inner.span,
                    tail: Some(Box::new(inner)),
                })
            } else {
                Some(self.block()?)
            }
        } else {
            None
        };
        let end = els.as_ref().map_or(then.span, |b| b.span);
        Ok(Expr {
            kind: ExprKind::If(Box::new(cond), then, els),
            span: start.to(end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    fn parse_src(src: &str) -> Result<File, Vec<Diagnostic>> {
        parse(src, &lex(src).unwrap())
    }

    /// Parses `fn f() { e }` and prints the tail with explicit parentheses.
    fn show(e: &str) -> String {
        let file = parse_src(&format!("fn f() {{ {e} }}")).unwrap();
        fmt(file.items[0].body.tail.as_ref().unwrap())
    }

    fn fmt(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int(n) => n.to_string(),
            ExprKind::Float(x) => format!("{x:?}"),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Name(n) => n.name.clone(),
            ExprKind::Unary(UnOp::Neg, a) => format!("(-{})", fmt(a)),
            ExprKind::Unary(UnOp::Not, a) => format!("(!{})", fmt(a)),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", fmt(a), op.symbol(), fmt(b)),
            ExprKind::Call(n, args) => {
                let args: Vec<_> = args.iter().map(fmt).collect();
                format!("{}({})", n.name, args.join(", "))
            }
            ExprKind::Index(n, i) => format!("{}[{}]", n.name, fmt(i)),
            ExprKind::Slice(n, lo, hi) => {
                let part = |x: &Option<Box<Expr>>| x.as_deref().map(fmt).unwrap_or_default();
                format!("{}[{}..{}]", n.name, part(lo), part(hi))
            }
            ExprKind::If(..) => "if".into(),
            ExprKind::Tuple(es) => {
                let es: Vec<_> = es.iter().map(fmt).collect();
                format!("({})", es.join(", "))
            }
        }
    }

    #[test]
    fn precedence() {
        assert_eq!(show("-x ^ 2"), "(-(x ^ 2))");
        assert_eq!(show("2 * x ^ 3"), "(2 * (x ^ 3))");
        assert_eq!(show("x ^ -2"), "(x ^ (-2))");
        assert_eq!(show("a ^ b ^ c"), "(a ^ (b ^ c))");
        assert_eq!(show("a - b - c"), "((a - b) - c)");
        assert_eq!(
            show("a || b && c < d + e * f % g"),
            "(a || (b && (c < (d + ((e * f) % g)))))"
        );
        assert_eq!(
            show("!a && -b[i] == f(x, 1.5)"),
            "((!a) && ((-b[i]) == f(x, 1.5)))"
        );
        assert_eq!(
            show("a | b & c << d + e == f"),
            "((a | (b & (c << (d + e)))) == f)"
        );
        assert_eq!(show("a & b | c >> 1 * d"), "((a & b) | (c >> (1 * d)))");
        assert_eq!(show("a << b << c"), "((a << b) << c)");
        assert_eq!(show("a < b | c && d"), "((a < (b | c)) && d)");
        assert_eq!(show("(a, b + 1)"), "(a, (b + 1))");
        assert_eq!(show("(a)"), "a");
    }

    #[test]
    fn statements_and_items() {
        let src = "#[inline(never)] fn f(x: [f64], y: mut [f64], n: i64) -> (f64, bool) {
            let a = 1; var b = 2.0; let (c, d) = g(a); b = 3.0; y[0] = 1.0;
            for i in 0..len(x) - 1 { } while b < 1.0 { b = b + 1.0; }
            if a < 2 { } else if a > 3 { } else { }
            return (b, true);
        }
        rule reverse f(x: f64, dret: f64) -> f64 { dret }";
        let file = parse_src(src).unwrap();
        assert_eq!(file.items.len(), 2);
        let f = &file.items[0];
        assert_eq!(f.inline.map(|a| a.0), Some(InlineHint::Never));
        assert_eq!(
            f.params[1].ty.kind,
            TypeKind::Array {
                mutable: true,
                elem: Elem::F64
            }
        );
        assert_eq!(f.results.as_ref().unwrap().types.len(), 2);
        assert_eq!(f.body.stmts.len(), 9);
        assert!(f.body.tail.is_none());
        assert_eq!(file.items[1].kind, FuncKind::Rule(Mode::Reverse));
    }

    #[test]
    fn errors() {
        let first = |src: &str| parse_src(src).unwrap_err()[0].message.clone();
        assert_eq!(
            first("fn f() { a < b < c }"),
            "comparison operators cannot be chained"
        );
        assert_eq!(
            first("fn f() { let x = ; }"),
            "expected an expression, found `;`"
        );
        assert_eq!(
            first("fn f() { x }  struct"),
            "expected `fn`, `rule` or `const`, found `struct`"
        );
        assert_eq!(
            first("const N: i64 = 1 fn f() {}"),
            "expected `;`, found `fn`"
        );
        // After an error in a constant, the next item parses.
        assert_eq!(
            parse_src("const N: = 1; fn f() { ) }").unwrap_err().len(),
            2
        );
        assert_eq!(first("fn f(x: f32) {}"), "unknown type `f32`");
        assert_eq!(first("fn f() -> mut [f64] {}"), "a result cannot be `mut`");
        assert_eq!(
            first("fn f() { 1 + 2 = 3; }"),
            "cannot assign to this expression"
        );
        // One error per item: both items report.
        assert_eq!(parse_src("fn f() { ) } fn g() { ( }").unwrap_err().len(), 2);
    }

    #[test]
    fn deep_nesting_is_an_error() {
        // The front end runs on its own large stack (see `crate::compile`).
        let big = std::thread::Builder::new().stack_size(crate::STACK_SIZE);
        big.spawn(deep_nesting).unwrap().join().unwrap();
    }

    fn deep_nesting() {
        for (open, close) in [("(", ")"), ("-", ""), ("if c { ", " } else { 1 }")] {
            let e = format!("{}x{}", open.repeat(100_000), close.repeat(100_000));
            let errs = parse_src(&format!("fn f() {{ {e} }}")).unwrap_err();
            assert!(errs[0].message.contains("nested too deeply"), "{open}");
        }
        let long = vec!["x"; 300].join(" + ");
        assert!(parse_src(&format!("fn f() {{ {long} }}")).is_err());
        let ok = format!("{}x{}", "(".repeat(200), ")".repeat(200));
        assert!(parse_src(&format!("fn f() {{ {ok} }}")).is_ok());
    }
}
