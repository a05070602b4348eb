//! The text format, reading side: [`parse_module`] reads what [`crate::write`]
//! prints, and print → parse → print is the identity.
//!
//! The parser works in two passes over the lines of the text: the first
//! declares every function header (so a function may be called, named as a
//! rule or differentiated before it is defined), the second reads the bodies.
//!
//! Entity numbers are preserved: `v7` becomes `Value` 7 and `block3` `Block`
//! 3. Every number up to the largest one mentioned is reserved (gaps become
//! detached values and blocks outside the layout), then definitions are
//! attached. Result types come from [`Opcode::fixed_signature`], the callee's
//! signature (`call`), [`Module::autodiff_result_types`] (`autodiff`) and the
//! second operand (`select`).
//!
//! What is a parse error and what is left to [`crate::verify`]:
//! - Malformed text, unknown opcodes, functions or types, a value or block
//!   defined twice, a result count that differs from what the instruction
//!   produces, and regions not numbered `region0, region1, ...` in order are
//!   parse errors, reported with a 1-based line and column (in characters).
//! - A value that is used but never defined is parsed as a detached value
//!   (of type `f64` unless known) and a block that is branched to but has no
//!   header exists but is not in the layout; the verifier reports both.
//! - Lines may carry `;` comments; blank lines are ignored.
//! - An instruction may end in a source location `!LINE:COL` (both numbers
//!   from 1); anything else starting with `!` is a parse error. The module
//!   may start with `source "FILE"` (see [`crate::srcloc`]).
//!
//! No input makes the parser panic; entity numbers above [`MAX_ENTITY`] are
//! rejected so that garbage cannot reserve unbounded memory.

use crate::entities::{Block, FuncId, Inlined, Region, Value};
use crate::function::{
    FuncMeta, Function, InlineHint, InlinedData, Param, RegionData, Rules, Signature,
};
use crate::instructions::{
    ArgActivity, AutodiffSpec, BlockCall, CmpCond, InstData, Mode, Opcode, RetActivity,
};
use crate::module::Module;
use crate::srcloc::SourceLoc;
use crate::types::Type;
use std::collections::HashMap;

/// The largest entity number (`vN`, `blockN`, `regionN`, `inlinedN`) the
/// parser accepts.
pub const MAX_ENTITY: u32 = 1 << 20;

/// A syntax or name-resolution error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub col: usize,
    /// What is wrong, without the position.
    pub message: String,
}

/// Parses a module: zero or more functions.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    let mut module = Module::new();
    parse_into(&mut module, text)?;
    Ok(module)
}

/// Parses the functions of `text` and adds them to `module`; their bodies may
/// refer to functions already in `module`. On error `module` is unchanged.
/// Returns the ids of the new functions, in text order.
pub fn parse_into(module: &mut Module, text: &str) -> Result<Vec<FuncId>, ParseError> {
    let lines = lex(text)?;
    let mut work = module.clone();

    // The module's source file, before the first function.
    let mut i = 0;
    if let Some(line) = lines.first().filter(|l| l.starts_with_word("source")) {
        let (file, pos) = parse_source(line)?;
        match &work.source_file {
            Some(old) if *old != file => {
                return Err(err(
                    pos,
                    format!("the module's source file is already {old:?}, not {file:?}"),
                ))
            }
            _ => work.source_file = Some(file),
        }
        i = 1;
    }

    // Pass 1: declare every header.
    let mut funcs = Vec::new();
    while i < lines.len() {
        if lines[i].starts_with_word("source") {
            let pos = lines[i].toks[0].pos;
            return Err(err(
                pos,
                "`source \"FILE\"` must come once, before the first function",
            ));
        }
        let header = parse_header(&lines[i])?;
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].is_close() {
            if lines[end].starts_with_word("function") {
                break;
            }
            end += 1;
        }
        if end == lines.len() || !lines[end].is_close() {
            return Err(err(
                header.pos,
                format!("function @{} has no closing `}}`", header.name),
            ));
        }
        let id = work
            .declare(&header.name, header.sig)
            .map_err(|m| err(header.pos, m))?;
        work.func_mut(id).meta.inline = header.inline;
        funcs.push((id, header.rules, start..end));
        i = end + 1;
    }

    // Rules name functions, possibly later ones: resolve them now.
    for (id, rules, _) in &funcs {
        let rules = resolve_rules(&work, rules)?;
        work.func_mut(*id).meta.rules = rules;
    }

    // Pass 2: bodies.
    for (id, _, body) in &funcs {
        let mut parser = Body::new(&work);
        for line in &lines[body.clone()] {
            parser.line(line)?;
        }
        let func = parser.finish(work.func(*id));
        work.replace(*id, func);
    }

    *module = work;
    Ok(funcs.into_iter().map(|(id, _, _)| id).collect())
}

type Pos = (usize, usize);

fn err(pos: Pos, message: impl Into<String>) -> ParseError {
    ParseError {
        line: pos.0,
        col: pos.1,
        message: message.into(),
    }
}

// ---------------------------------------------------------------- lexing

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A run of characters other than whitespace and `(),:={}";`: names,
    /// keywords, entities, numbers, `@function` references.
    Word(String),
    /// A string literal with its escapes resolved.
    Str(String),
    Punct(char),
    Arrow,
}

struct Token {
    tok: Tok,
    pos: Pos,
}

/// The tokens of one non-blank line, and the position just past its end.
struct Line {
    toks: Vec<Token>,
    end: Pos,
}

impl Line {
    fn is_close(&self) -> bool {
        matches!(self.toks.as_slice(), [t] if t.tok == Tok::Punct('}'))
    }

    fn starts_with_word(&self, w: &str) -> bool {
        matches!(self.toks.first(), Some(Token { tok: Tok::Word(x), .. }) if x == w)
    }
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !"(),:={}\";".contains(c)
}

fn lex(text: &str) -> Result<Vec<Line>, ParseError> {
    let mut lines = Vec::new();
    for (n, src) in text.split('\n').enumerate() {
        let line = n + 1;
        let chars: Vec<char> = src.chars().collect();
        let mut toks = Vec::new();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            let pos = (line, j + 1);
            let arrow = c == '-' && chars.get(j + 1) == Some(&'>');
            if c.is_whitespace() {
                j += 1;
                continue;
            } else if c == ';' {
                break;
            } else if arrow {
                toks.push(Token {
                    tok: Tok::Arrow,
                    pos,
                });
                j += 2;
            } else if c == '"' {
                let (s, next) = lex_string(&chars, j, line)?;
                toks.push(Token {
                    tok: Tok::Str(s),
                    pos,
                });
                j = next;
            } else if "(),:={}".contains(c) {
                toks.push(Token {
                    tok: Tok::Punct(c),
                    pos,
                });
                j += 1;
            } else {
                let start = j;
                while j < chars.len()
                    && is_word_char(chars[j])
                    && !(chars[j] == '-' && chars.get(j + 1) == Some(&'>'))
                {
                    j += 1;
                }
                toks.push(Token {
                    tok: Tok::Word(chars[start..j].iter().collect()),
                    pos,
                });
            }
        }
        if !toks.is_empty() {
            lines.push(Line {
                toks,
                end: (line, chars.len() + 1),
            });
        }
    }
    Ok(lines)
}

/// Reads a string literal starting at the `"` at `chars[start]`, with the
/// escapes Rust's `Debug` produces (`\" \\ \' \n \r \t \0 \u{..}`) plus
/// `\xNN` for ASCII. Returns the string and the index after the closing `"`.
fn lex_string(chars: &[char], start: usize, line: usize) -> Result<(String, usize), ParseError> {
    let mut s = String::new();
    let mut j = start + 1;
    loop {
        let pos = (line, j + 1);
        match chars.get(j) {
            None => return Err(err((line, start + 1), "unterminated string")),
            Some('"') => return Ok((s, j + 1)),
            Some('\\') => {
                let esc = chars.get(j + 1).copied();
                j += 2;
                s.push(match esc {
                    Some('"') => '"',
                    Some('\\') => '\\',
                    Some('\'') => '\'',
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('0') => '\0',
                    Some('x') => {
                        let hex: String = chars.iter().skip(j).take(2).collect();
                        j += 2;
                        let ok = hex.len() == 2 && hex.chars().all(|c| c.is_ascii_hexdigit());
                        ok.then(|| u8::from_str_radix(&hex, 16).ok())
                            .flatten()
                            .filter(u8::is_ascii)
                            .map(char::from)
                            .ok_or_else(|| err(pos, "invalid `\\x` escape"))?
                    }
                    Some('u') => {
                        let close = chars[j..].iter().position(|&c| c == '}');
                        let code = match (chars.get(j), close) {
                            (Some('{'), Some(close)) => {
                                let hex: String = chars[j + 1..j + close].iter().collect();
                                j += close + 1;
                                let ok = (1..=6).contains(&hex.len())
                                    && hex.chars().all(|c| c.is_ascii_hexdigit());
                                ok.then(|| u32::from_str_radix(&hex, 16).ok())
                                    .flatten()
                                    .and_then(char::from_u32)
                            }
                            _ => None,
                        };
                        code.ok_or_else(|| err(pos, "invalid `\\u{..}` escape"))?
                    }
                    _ => return Err(err(pos, "unknown escape in string")),
                });
            }
            Some(&c) => {
                s.push(c);
                j += 1;
            }
        }
    }
}

// ---------------------------------------------------------------- cursor

/// Reads the tokens of one line.
struct Cursor<'a> {
    toks: &'a [Token],
    i: usize,
    end: Pos,
}

impl<'a> Cursor<'a> {
    fn new(line: &'a Line) -> Cursor<'a> {
        Cursor {
            toks: &line.toks,
            i: 0,
            end: line.end,
        }
    }

    fn peek(&self) -> Option<&'a Tok> {
        self.peek_at(0)
    }

    fn peek_at(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }

    fn pos(&self) -> Pos {
        self.toks.get(self.i).map_or(self.end, |t| t.pos)
    }

    fn at_end(&self) -> bool {
        self.i >= self.toks.len()
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "end of line".to_string(),
            Some(Tok::Word(w)) => format!("`{w}`"),
            Some(Tok::Str(_)) => "a string".to_string(),
            Some(Tok::Punct(c)) => format!("`{c}`"),
            Some(Tok::Arrow) => "`->`".to_string(),
        }
    }

    fn unexpected(&self, what: &str) -> ParseError {
        err(
            self.pos(),
            format!("expected {what}, found {}", self.describe()),
        )
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(&Tok::Punct(c));
        self.i += usize::from(hit);
        hit
    }

    fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{c}`")))
        }
    }

    /// The `,` between list items (the caller has tried `)` first).
    fn expect_sep(&mut self) -> Result<(), ParseError> {
        if self.eat(',') {
            Ok(())
        } else {
            Err(self.unexpected("`,` or `)`"))
        }
    }

    fn eat_arrow(&mut self) -> bool {
        let hit = self.peek() == Some(&Tok::Arrow);
        self.i += usize::from(hit);
        hit
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x == w)
    }

    fn word(&mut self, what: &str) -> Result<(&'a str, Pos), ParseError> {
        match self.toks.get(self.i) {
            Some(Token {
                tok: Tok::Word(w),
                pos,
            }) => {
                self.i += 1;
                Ok((w, *pos))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.is_word(kw) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{kw}`")))
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                self.i += 1;
                Ok(s.clone())
            }
            _ => Err(self.unexpected("a string")),
        }
    }

    fn finish(&self) -> Result<(), ParseError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(err(
                self.pos(),
                format!("unexpected {} at end of line", self.describe()),
            ))
        }
    }

    /// `prefix` followed by a decimal number without leading zeros.
    fn entity(&mut self, prefix: &str, what: &str) -> Result<u32, ParseError> {
        let at = self.pos();
        let (w, _) = self.word(what)?;
        let n = w
            .strip_prefix(prefix)
            .filter(|d| {
                !d.is_empty()
                    && d.bytes().all(|b| b.is_ascii_digit())
                    && (d.len() == 1 || !d.starts_with('0'))
            })
            .ok_or_else(|| err(at, format!("expected {what}, found `{w}`")))?;
        match n.parse::<u32>() {
            Ok(n) if n <= MAX_ENTITY => Ok(n),
            _ => Err(err(
                at,
                format!("`{w}`: entity numbers above {MAX_ENTITY} are not supported"),
            )),
        }
    }

    fn ty(&mut self) -> Result<Type, ParseError> {
        let (w, pos) = self.word("a type")?;
        Type::from_name(w).ok_or_else(|| err(pos, format!("unknown type `{w}`")))
    }

    /// `@name`, with the name made of `[A-Za-z0-9_.]`.
    fn func_name(&mut self) -> Result<(&'a str, Pos), ParseError> {
        let at = self.pos();
        let (w, pos) = self.word("a function name `@name`")?;
        match w.strip_prefix('@') {
            Some(name)
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') =>
            {
                Ok((name, pos))
            }
            _ => Err(err(
                at,
                format!("expected a function name `@name`, found `{w}`"),
            )),
        }
    }

    /// `(mode: @f, ...)` after the keyword `rules`.
    fn rules(&mut self) -> Result<Vec<(Mode, String, Pos)>, ParseError> {
        self.expect('(')?;
        let mut rules: Vec<(Mode, String, Pos)> = Vec::new();
        loop {
            let (m, pos) = self.word("`forward` or `reverse`")?;
            let mode = Mode::from_name(m)
                .ok_or_else(|| err(pos, format!("expected `forward` or `reverse`, found `{m}`")))?;
            if rules.iter().any(|r| r.0 == mode) {
                return Err(err(pos, format!("the {mode} rule is given twice")));
            }
            self.expect(':')?;
            let (name, pos) = self.func_name()?;
            rules.push((mode, name.to_string(), pos));
            if self.eat(')') {
                return Ok(rules);
            }
            self.expect_sep()?;
        }
    }
}

// ---------------------------------------------------------------- headers

/// `source "FILE"`: the file the source locations refer to.
fn parse_source(line: &Line) -> Result<(String, Pos), ParseError> {
    let mut c = Cursor::new(line);
    let pos = c.pos();
    c.keyword("source")?;
    let file = c.string()?;
    c.finish()?;
    Ok((file, pos))
}

/// The source location that ends an instruction line, `!LINE:COL` (three
/// tokens: `!LINE`, `:`, `COL`), if there is one: the number of tokens
/// before it, and the location. Any other word starting with `!` is a
/// malformed location.
fn split_srcloc(line: &Line) -> Result<(usize, SourceLoc), ParseError> {
    let toks = &line.toks;
    let Some(k) = toks
        .iter()
        .position(|t| matches!(&t.tok, Tok::Word(w) if w.starts_with('!')))
    else {
        return Ok((toks.len(), SourceLoc::NONE));
    };
    // A decimal number from 1, without sign or leading zeros.
    let number = |t: Option<&Token>, bang: bool| match t.map(|t| &t.tok) {
        Some(Tok::Word(w)) => {
            let d = if bang {
                w.strip_prefix('!')?
            } else {
                w.as_str()
            };
            let ok = !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0');
            ok.then(|| d.parse::<u32>().ok()).flatten()
        }
        _ => None,
    };
    let line_no = number(toks.get(k), true);
    let colon = toks.get(k + 1).map(|t| &t.tok) == Some(&Tok::Punct(':'));
    let col = if colon {
        number(toks.get(k + 2), false)
    } else {
        None
    };
    match (line_no, col) {
        (Some(l), Some(c)) if k + 3 == toks.len() => Ok((k, SourceLoc::new(l, c))),
        (Some(_), Some(_)) => Err(err(
            toks[k + 3].pos,
            "a source location `!LINE:COL` must end the instruction",
        )),
        _ => {
            let text: String = toks[k..]
                .iter()
                .take(3)
                .map(|t| match &t.tok {
                    Tok::Word(w) => w.clone(),
                    Tok::Punct(c) => c.to_string(),
                    Tok::Str(s) => format!("{s:?}"),
                    Tok::Arrow => "->".to_string(),
                })
                .collect();
            Err(err(
                toks[k].pos,
                format!(
                    "malformed source location `{text}`: expected `!LINE:COL`, two numbers from 1 (`!3:14`)"
                ),
            ))
        }
    }
}

struct Header {
    name: String,
    pos: Pos,
    sig: Signature,
    inline: InlineHint,
    rules: Vec<(Mode, String, Pos)>,
}

/// `function @f(x: f64, y: mut arr) -> (f64, i64) inline(never) rules(..) {`
fn parse_header(line: &Line) -> Result<Header, ParseError> {
    let mut c = Cursor::new(line);
    c.keyword("function")?;
    let (name, pos) = c.func_name()?;
    let mut sig = Signature::default();
    c.expect('(')?;
    if !c.eat(')') {
        loop {
            let (pname, _) = c.word("a parameter name")?;
            c.expect(':')?;
            let mutable = c.is_word("mut") && matches!(c.peek_at(1), Some(Tok::Word(_)));
            if mutable {
                c.keyword("mut")?;
            }
            let ty = c.ty()?;
            sig.params.push(Param {
                name: pname.to_string(),
                ty,
                mutable,
            });
            if c.eat(')') {
                break;
            }
            c.expect_sep()?;
        }
    }
    if c.eat_arrow() {
        if c.eat('(') {
            if !c.eat(')') {
                loop {
                    sig.results.push(c.ty()?);
                    if c.eat(')') {
                        break;
                    }
                    c.expect_sep()?;
                }
            }
        } else {
            sig.results.push(c.ty()?);
        }
    }
    let mut inline = None;
    let mut rules = None;
    loop {
        if c.eat('{') {
            c.finish()?;
            break;
        }
        let (kw, kpos) = c.word("`inline(..)`, `rules(..)` or `{`")?;
        match kw {
            "inline" if inline.is_none() => {
                c.expect('(')?;
                let (h, hpos) = c.word("an inline hint")?;
                inline = Some(
                    InlineHint::from_name(h)
                        .ok_or_else(|| err(hpos, format!("unknown inline hint `{h}`")))?,
                );
                c.expect(')')?;
            }
            "rules" if rules.is_none() => rules = Some(c.rules()?),
            "inline" | "rules" => return Err(err(kpos, format!("`{kw}` is given twice"))),
            _ => {
                return Err(err(
                    kpos,
                    format!("expected `inline(..)`, `rules(..)` or `{{`, found `{kw}`"),
                ))
            }
        }
    }
    Ok(Header {
        name: name.to_string(),
        pos,
        sig,
        inline: inline.unwrap_or_default(),
        rules: rules.unwrap_or_default(),
    })
}

fn lookup(module: &Module, name: &str, pos: Pos) -> Result<FuncId, ParseError> {
    module
        .get(name)
        .ok_or_else(|| err(pos, format!("unknown function @{name}")))
}

fn resolve_rules(module: &Module, rules: &[(Mode, String, Pos)]) -> Result<Rules, ParseError> {
    let mut out = Rules::default();
    for (mode, name, pos) in rules {
        out.set(*mode, Some(lookup(module, name, *pos)?));
    }
    Ok(out)
}

// ---------------------------------------------------------------- bodies

/// How the result types of a parsed instruction are found.
enum ResultTypes {
    Known(Vec<Type>),
    /// `select`: the type of this operand, known once every line is read.
    SameAs(Value),
}

struct ParsedInst {
    data: InstData,
    results: Vec<Value>,
    types: ResultTypes,
    srcloc: SourceLoc,
}

struct ParsedBlock {
    block: Block,
    params: Vec<(Value, Type)>,
    insts: Vec<ParsedInst>,
}

/// The body of one function, read line by line, then built by `finish`.
struct Body<'m> {
    module: &'m Module,
    num_values: u32,
    num_blocks: u32,
    blocks: Vec<ParsedBlock>,
    regions: Vec<RegionData>,
    inlined: Vec<InlinedData>,
    value_defs: HashMap<Value, Pos>,
    block_defs: HashMap<Block, Pos>,
}

impl<'m> Body<'m> {
    fn new(module: &'m Module) -> Body<'m> {
        Body {
            module,
            num_values: 0,
            num_blocks: 0,
            blocks: Vec::new(),
            regions: Vec::new(),
            inlined: Vec::new(),
            value_defs: HashMap::new(),
            block_defs: HashMap::new(),
        }
    }

    fn value(&mut self, c: &mut Cursor) -> Result<Value, ParseError> {
        let n = c.entity("v", "a value `vN`")?;
        self.num_values = self.num_values.max(n + 1);
        Ok(Value::from_u32(n))
    }

    fn block(&mut self, c: &mut Cursor) -> Result<Block, ParseError> {
        let n = c.entity("block", "a block `blockN`")?;
        self.num_blocks = self.num_blocks.max(n + 1);
        Ok(Block::from_u32(n))
    }

    fn define(&mut self, v: Value, pos: Pos) -> Result<(), ParseError> {
        match self.value_defs.insert(v, pos) {
            Some(first) => Err(err(
                pos,
                format!("{v} is defined twice (first at {}:{})", first.0, first.1),
            )),
            None => Ok(()),
        }
    }

    /// Values up to the closing `)`, the `(` already read.
    fn value_list(&mut self, c: &mut Cursor) -> Result<Vec<Value>, ParseError> {
        let mut vs = Vec::new();
        if c.eat(')') {
            return Ok(vs);
        }
        loop {
            vs.push(self.value(c)?);
            if c.eat(')') {
                return Ok(vs);
            }
            c.expect_sep()?;
        }
    }

    /// `n` values separated by commas.
    fn operands(&mut self, c: &mut Cursor, n: usize) -> Result<Vec<Value>, ParseError> {
        let mut vs = Vec::with_capacity(n);
        for i in 0..n {
            if i > 0 {
                c.expect(',')?;
            }
            vs.push(self.value(c)?);
        }
        Ok(vs)
    }

    fn block_call(&mut self, c: &mut Cursor) -> Result<BlockCall, ParseError> {
        let block = self.block(c)?;
        let args = if c.eat('(') {
            self.value_list(c)?
        } else {
            Vec::new()
        };
        Ok(BlockCall { block, args })
    }

    fn line(&mut self, line: &Line) -> Result<(), ParseError> {
        let c = Cursor::new(line);
        let head = match c.peek() {
            Some(Tok::Word(w)) => w.as_str(),
            _ => "",
        };
        let next = c.peek_at(1);
        if head.starts_with("block") && matches!(next, Some(Tok::Punct('(' | ':'))) {
            self.block_header(c)
        } else if head.starts_with("region") && next == Some(&Tok::Punct(':')) {
            self.region(c)
        } else if head.starts_with("inlined") && next == Some(&Tok::Punct(':')) {
            self.inlined(c)
        } else {
            self.inst(line)
        }
    }

    /// `block3(v4: i64, v5: f64):`
    fn block_header(&mut self, mut c: Cursor) -> Result<(), ParseError> {
        let pos = c.pos();
        let block = self.block(&mut c)?;
        if let Some(first) = self.block_defs.insert(block, pos) {
            return Err(err(
                pos,
                format!(
                    "{block} is defined twice (first at {}:{})",
                    first.0, first.1
                ),
            ));
        }
        let mut params = Vec::new();
        if c.eat('(') && !c.eat(')') {
            loop {
                let vpos = c.pos();
                let v = self.value(&mut c)?;
                self.define(v, vpos)?;
                c.expect(':')?;
                params.push((v, c.ty()?));
                if c.eat(')') {
                    break;
                }
                c.expect_sep()?;
            }
        }
        c.expect(':')?;
        c.finish()?;
        self.blocks.push(ParsedBlock {
            block,
            params,
            insts: Vec::new(),
        });
        Ok(())
    }

    /// `region0: @f(v1, v2) -> (v7) blocks(block3, block4) rules(..) parent(region1)`
    fn region(&mut self, mut c: Cursor) -> Result<(), ParseError> {
        let pos = c.pos();
        let n = c.entity("region", "a region `regionN`")?;
        if n as usize != self.regions.len() {
            return Err(err(
                pos,
                format!(
                    "expected region{}: regions are numbered in order from 0",
                    self.regions.len()
                ),
            ));
        }
        c.expect(':')?;
        let (name, fpos) = c.func_name()?;
        let callee = lookup(self.module, name, fpos)?;
        c.expect('(')?;
        let args = self.value_list(&mut c)?;
        if !c.eat_arrow() {
            return Err(c.unexpected("`->`"));
        }
        c.expect('(')?;
        let results = self.value_list(&mut c)?;
        c.keyword("blocks")?;
        c.expect('(')?;
        let mut blocks = Vec::new();
        if !c.eat(')') {
            loop {
                blocks.push(self.block(&mut c)?);
                if c.eat(')') {
                    break;
                }
                c.expect_sep()?;
            }
        }
        let mut rules = Rules::default();
        if c.is_word("rules") {
            c.keyword("rules")?;
            rules = resolve_rules(self.module, &c.rules()?)?;
        }
        let mut parent = None;
        if c.is_word("parent") {
            c.keyword("parent")?;
            c.expect('(')?;
            parent = Some(Region::from_u32(c.entity("region", "a region `regionN`")?));
            c.expect(')')?;
        }
        c.finish()?;
        self.regions.push(RegionData {
            callee,
            rules,
            args,
            results,
            blocks,
            parent,
        });
        Ok(())
    }

    /// `inlined0: @g blocks(block3, block4) parent(inlined1)`. The callee is
    /// a name only: it need not be a function of the module.
    fn inlined(&mut self, mut c: Cursor) -> Result<(), ParseError> {
        let pos = c.pos();
        let n = c.entity("inlined", "an inlined entry `inlinedN`")?;
        if n as usize != self.inlined.len() {
            return Err(err(
                pos,
                format!(
                    "expected inlined{}: inlined entries are numbered in order from 0",
                    self.inlined.len()
                ),
            ));
        }
        c.expect(':')?;
        let (name, _) = c.func_name()?;
        let callee = name.to_string();
        c.keyword("blocks")?;
        c.expect('(')?;
        let mut blocks = Vec::new();
        if !c.eat(')') {
            loop {
                blocks.push(self.block(&mut c)?);
                if c.eat(')') {
                    break;
                }
                c.expect_sep()?;
            }
        }
        let mut parent = None;
        if c.is_word("parent") {
            c.keyword("parent")?;
            c.expect('(')?;
            parent = Some(Inlined::from_u32(
                c.entity("inlined", "an inlined entry `inlinedN`")?,
            ));
            c.expect(')')?;
        }
        c.finish()?;
        self.inlined.push(InlinedData {
            callee,
            blocks,
            parent,
        });
        Ok(())
    }

    /// `v1, v2 = opcode operands`, then an optional `!LINE:COL`.
    fn inst(&mut self, line: &Line) -> Result<(), ParseError> {
        let (n, srcloc) = split_srcloc(line)?;
        let mut c = Cursor {
            toks: &line.toks[..n],
            i: 0,
            end: line.toks.get(n).map_or(line.end, |t| t.pos),
        };
        if self.blocks.is_empty() {
            return Err(err(
                c.pos(),
                format!(
                    "expected a block header or a region, found {}",
                    c.describe()
                ),
            ));
        }
        let mut results = Vec::new();
        if c.toks.iter().any(|t| t.tok == Tok::Punct('=')) {
            loop {
                let pos = c.pos();
                let v = self.value(&mut c)?;
                self.define(v, pos)?;
                results.push(v);
                if c.eat('=') {
                    break;
                }
                c.expect(',')?;
            }
        }
        let (name, opos) = c.word("an opcode")?;
        let op =
            Opcode::from_name(name).ok_or_else(|| err(opos, format!("unknown opcode `{name}`")))?;
        let (data, types) = self.operands_of(op, &mut c)?;
        c.finish()?;
        let expected = match &types {
            ResultTypes::Known(tys) => tys.len(),
            ResultTypes::SameAs(_) => 1,
        };
        if results.len() != expected {
            return Err(err(
                opos,
                format!(
                    "`{op}` here produces {expected} result(s), but {} value(s) are defined",
                    results.len()
                ),
            ));
        }
        if let Some(block) = self.blocks.last_mut() {
            block.insts.push(ParsedInst {
                data,
                results,
                types,
                srcloc,
            });
        }
        Ok(())
    }

    fn operands_of(
        &mut self,
        op: Opcode,
        c: &mut Cursor,
    ) -> Result<(InstData, ResultTypes), ParseError> {
        use ResultTypes::Known;
        Ok(match op {
            Opcode::Fconst => {
                let (w, pos) = c.word("a float")?;
                // `0x..`: the bits themselves (how a NaN other than the
                // default one prints).
                let data = match w.strip_prefix("0x") {
                    Some(hex) => InstData::FConst {
                        bits: u64::from_str_radix(hex, 16)
                            .map_err(|_| err(pos, format!("invalid float bits `{w}`")))?,
                    },
                    None => InstData::fconst(
                        w.parse()
                            .map_err(|_| err(pos, format!("invalid float `{w}`")))?,
                    ),
                };
                (data, Known(vec![Type::F64]))
            }
            Opcode::Iconst => {
                let (w, pos) = c.word("an integer")?;
                let imm = w
                    .parse()
                    .map_err(|_| err(pos, format!("invalid i64 `{w}`")))?;
                (InstData::IConst { imm }, Known(vec![Type::I64]))
            }
            Opcode::Bconst => {
                let (w, pos) = c.word("`true` or `false`")?;
                let imm = match w {
                    "true" => true,
                    "false" => false,
                    _ => return Err(err(pos, format!("expected `true` or `false`, found `{w}`"))),
                };
                (InstData::BConst { imm }, Known(vec![Type::Bool]))
            }
            Opcode::Powi | Opcode::Vpowi => {
                let arg = self.value(c)?;
                c.expect(',')?;
                let (w, pos) = c.word("an i32 exponent")?;
                let exp = w
                    .parse()
                    .map_err(|_| err(pos, format!("invalid i32 exponent `{w}`")))?;
                let ty = if op == Opcode::Powi {
                    Type::F64
                } else {
                    Type::F64x2
                };
                (InstData::Powi { op, arg, exp }, Known(vec![ty]))
            }
            Opcode::Fcmp | Opcode::Icmp => {
                let (w, pos) = c.word("a condition")?;
                let cond = CmpCond::from_name(w)
                    .ok_or_else(|| err(pos, format!("unknown condition `{w}`")))?;
                let args = self.operands(c, 2)?;
                let data = InstData::Cmp {
                    op,
                    cond,
                    args: [args[0], args[1]],
                };
                (data, Known(vec![Type::Bool]))
            }
            Opcode::Select
            | Opcode::Store
            | Opcode::Istore
            | Opcode::Vstore
            | Opcode::Slice
            | Opcode::View => {
                let a = self.operands(c, 3)?;
                let types = match op {
                    Opcode::Select => ResultTypes::SameAs(a[1]),
                    Opcode::Slice | Opcode::View => ResultTypes::SameAs(a[0]),
                    _ => Known(Vec::new()),
                };
                let data = InstData::Ternary {
                    op,
                    args: [a[0], a[1], a[2]],
                };
                (data, types)
            }
            Opcode::Zeros | Opcode::Izeros => {
                let len = self.value(c)?;
                c.expect(',')?;
                let name = c.string()?;
                let ty = if op == Opcode::Zeros {
                    Type::Array
                } else {
                    Type::IArray
                };
                (InstData::Zeros { op, len, name }, Known(vec![ty]))
            }
            Opcode::Push => {
                let tape = tape_number(c)?;
                c.expect(',')?;
                let arg = self.value(c)?;
                (InstData::Push { tape, arg }, Known(Vec::new()))
            }
            Opcode::Pop => {
                let tape = tape_number(c)?;
                c.expect(',')?;
                let (w, pos) = c.word("a type")?;
                let ty = Type::from_name(w)
                    .filter(|t| t.is_scalar())
                    .ok_or_else(|| err(pos, format!("`pop` needs a scalar type, found `{w}`")))?;
                let varies = if c.is_word("varies") {
                    c.keyword("varies")?;
                    c.expect('(')?;
                    Some(self.value_list(c)?)
                } else {
                    None
                };
                (InstData::Pop { tape, ty, varies }, Known(vec![ty]))
            }
            Opcode::Tapelen | Opcode::Tapecut | Opcode::Tapeover => {
                let tape = tape_number(c)?;
                let arg = if op == Opcode::Tapelen {
                    None
                } else {
                    c.expect(',')?;
                    Some(self.value(c)?)
                };
                let tys = match op {
                    Opcode::Tapeover => vec![Type::Bool],
                    Opcode::Tapecut => vec![],
                    _ => vec![Type::I64],
                };
                (InstData::Tape { op, tape, arg }, Known(tys))
            }
            Opcode::Call => {
                let (name, pos) = c.func_name()?;
                let func = lookup(self.module, name, pos)?;
                c.expect('(')?;
                let args = self.value_list(c)?;
                let tys = self.module.func(func).sig.results.clone();
                (InstData::Call { func, args }, Known(tys))
            }
            Opcode::Autodiff => self.autodiff(c)?,
            Opcode::Jump => {
                let dest = self.block_call(c)?;
                (InstData::Jump { dest }, Known(Vec::new()))
            }
            Opcode::Brif => {
                let cond = self.value(c)?;
                c.expect(',')?;
                let then_dest = self.block_call(c)?;
                c.expect(',')?;
                let else_dest = self.block_call(c)?;
                let data = InstData::Brif {
                    cond,
                    then_dest,
                    else_dest,
                };
                (data, Known(Vec::new()))
            }
            Opcode::Return => {
                let mut args = Vec::new();
                while !c.at_end() {
                    if !args.is_empty() {
                        c.expect(',')?;
                    }
                    args.push(self.value(c)?);
                }
                (InstData::Return { args }, Known(Vec::new()))
            }
            Opcode::Disjoint => {
                let a = self.operands(c, 2)?;
                let data = InstData::Binary {
                    op,
                    args: [a[0], a[1]],
                };
                (data, Known(Vec::new()))
            }
            _ => {
                let (arg_tys, res) = op.fixed_signature().unwrap_or((&[], None));
                let a = self.operands(c, arg_tys.len())?;
                let data = match *a.as_slice() {
                    [arg] => InstData::Unary { op, arg },
                    [x, y] => InstData::Binary { op, args: [x, y] },
                    _ => return Err(err(c.pos(), format!("cannot parse `{op}`"))),
                };
                (data, Known(res.into_iter().collect()))
            }
        })
    }

    /// `autodiff forward dual @f(dual v1, v2, const v3, dup v4, v5)`; in
    /// vector mode `autodiff forward(2) dual @f(dual v1, v2, v3)`.
    fn autodiff(&mut self, c: &mut Cursor) -> Result<(InstData, ResultTypes), ParseError> {
        let (m, pos) = c.word("`forward` or `reverse`")?;
        let mode = Mode::from_name(m)
            .ok_or_else(|| err(pos, format!("expected `forward` or `reverse`, found `{m}`")))?;
        let mut width = 1;
        if c.eat('(') {
            let (n, pos) = c.word("a width")?;
            width =
                n.parse::<usize>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    err(pos, format!("expected a width of at least 1, found `{n}`"))
                })?;
            c.expect(')')?;
        }
        let (r, pos) = c.word("a return activity")?;
        let ret = RetActivity::from_name(r).ok_or_else(|| {
            err(
                pos,
                format!("expected `dual`, `active`, `const` or `dup`, found `{r}`"),
            )
        })?;
        // `dup(v1, v2)`: the cotangents, kept after the arguments.
        let mut seeds = Vec::new();
        if ret == RetActivity::Dup {
            c.expect('(')?;
            if !c.eat(')') {
                loop {
                    seeds.push(self.value(c)?);
                    if c.eat(')') {
                        break;
                    }
                    c.expect_sep()?;
                }
            }
        }
        let (name, pos) = c.func_name()?;
        let func = lookup(self.module, name, pos)?;
        c.expect('(')?;
        let mut acts = Vec::new();
        let mut args = Vec::new();
        if !c.eat(')') {
            loop {
                let act = match c.peek() {
                    Some(Tok::Word(w)) => ArgActivity::from_name(w),
                    _ => None,
                };
                if let Some(act) = act {
                    c.i += 1;
                    acts.push(act);
                    if matches!(c.peek(), Some(Tok::Word(_))) {
                        args.push(self.value(c)?);
                    }
                } else if acts.is_empty() {
                    return Err(c.unexpected("an argument activity"));
                } else {
                    args.push(self.value(c)?);
                }
                if c.eat(')') {
                    break;
                }
                c.expect_sep()?;
            }
        }
        args.extend(seeds);
        let spec = AutodiffSpec {
            mode,
            func,
            ret,
            args: acts,
            width,
        };
        let tys = self.module.autodiff_result_types(&spec);
        let data = InstData::Autodiff {
            spec: Box::new(spec),
            args,
        };
        Ok((data, ResultTypes::Known(tys)))
    }

    /// Builds the function: reserves every entity number, then attaches the
    /// definitions in text order.
    fn finish(self, decl: &Function) -> Function {
        let mut func = Function::new(decl.name.clone(), decl.sig.clone());
        func.meta = FuncMeta {
            inline: decl.meta.inline,
            rules: decl.meta.rules,
        };
        for _ in 0..self.num_blocks {
            func.dfg.make_block();
        }
        for _ in 0..self.num_values {
            func.dfg.make_detached_value(Type::F64);
        }
        let mut types: HashMap<Value, Type> = HashMap::new();
        for b in &self.blocks {
            types.extend(b.params.iter().copied());
            for inst in &b.insts {
                if let ResultTypes::Known(tys) = &inst.types {
                    types.extend(inst.results.iter().copied().zip(tys.iter().copied()));
                }
            }
        }
        // `select` takes its operand's type, which may itself be a select's.
        let mut changed = true;
        while changed {
            changed = false;
            for inst in self.blocks.iter().flat_map(|b| &b.insts) {
                if let (ResultTypes::SameAs(a), [r]) = (&inst.types, inst.results.as_slice()) {
                    if !types.contains_key(r) {
                        if let Some(&ty) = types.get(a) {
                            types.insert(*r, ty);
                            changed = true;
                        }
                    }
                }
            }
        }
        for b in self.blocks {
            func.layout.append_block(b.block);
            for (v, ty) in b.params {
                func.dfg.attach_block_param(b.block, v, ty);
            }
            for inst in b.insts {
                let results: Vec<(Value, Type)> = inst
                    .results
                    .iter()
                    .map(|v| (*v, types.get(v).copied().unwrap_or(Type::F64)))
                    .collect();
                let i = func.dfg.make_inst_with_results(inst.data, &results);
                func.dfg.set_srcloc(i, inst.srcloc);
                func.layout.append_inst(i, b.block);
            }
        }
        for r in self.regions {
            func.regions.push(r);
        }
        for i in self.inlined {
            func.inlined.push(i);
        }
        func
    }
}

/// A tape number: an integer below [`crate::MAX_TAPES`].
fn tape_number(c: &mut Cursor) -> Result<u8, ParseError> {
    let (w, pos) = c.word("a tape number")?;
    w.parse::<u8>()
        .ok()
        .filter(|&t| t < crate::MAX_TAPES)
        .ok_or_else(|| {
            err(
                pos,
                format!(
                    "expected a tape number below {}, found `{w}`",
                    crate::MAX_TAPES
                ),
            )
        })
}
