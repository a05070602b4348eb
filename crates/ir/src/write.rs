//! The text format, printing side. [`crate::parse`] reads it back, and
//! print → parse → print is the identity.
//!
//! ```text
//! function @f_custom(x: arr) -> f64 inline(never) rules(reverse: @f_custom.rule.reverse) {
//! block0(v0: arr):
//!     v1 = fconst 0.0
//!     v2 = iconst 0
//!     v3 = len v0
//!     jump block1(v2, v1)
//! block1(v4: i64, v5: f64):
//!     v6 = icmp lt v4, v3
//!     brif v6, block2, block3
//! block2:
//!     v7 = load v0, v4
//!     ...
//! }
//! ```
//!
//! - A function header lists named parameters (`mut arr` for writable
//!   arrays), results (`-> f64`, `-> (f64, i64)`), then metadata: `inline(..)`
//!   when not `auto`, `rules(forward: @r1, reverse: @r2)` when present.
//! - Rule regions are listed right after the `{` line, one per line:
//!   `region0: @f(v1, v2) -> (v7) blocks(block3, block4) rules(reverse: @r)`,
//!   with ` parent(region1)` last when nested.
//! - Then the provenance of inlined code, one line per entry:
//!   `inlined0: @g blocks(block3, block4)`, with ` parent(inlined1)` when
//!   nested.
//! - Values are `vN`, blocks `blockN`, with their entity numbers; the
//!   parser preserves the numbers. Instructions are `results = opcode operands`.
//! - Floats print in Rust's shortest round-trip form (`0.1`, `1e-7`, `inf`,
//!   `NaN`); array names in `zeros` are quoted strings.
//! - A function with no blocks is a declaration: `function @f(x: f64) -> f64 {` `}`.
//! - An instruction with a source location ends in `!LINE:COL`
//!   (`v7 = load v0, v4 !3:14`); a module with a source file starts with
//!   `source "FILE"` (see [`crate::srcloc`]).

use crate::entities::FuncId;
use crate::function::{Function, InlineHint, Notes, Rules};
use crate::instructions::{BlockCall, InstData, RetActivity};
use crate::module::Module;
use crate::srcloc::SourceLoc;
use crate::Inst;
use std::fmt::{self, Write};

/// Resolves function names while printing; without a module, a callee prints
/// as `@fnN`.
struct Names<'a>(Option<&'a Module>);

impl Names<'_> {
    fn func(&self, id: FuncId) -> String {
        match self.0 {
            Some(m) if m.is_valid(id) => format!("@{}", m.func(id).name),
            _ => format!("@{id}"),
        }
    }
}

/// Writes one function in the text format.
pub fn write_function(w: &mut dyn Write, func: &Function, module: Option<&Module>) -> fmt::Result {
    write_function_noted(w, func, module, None)
}

/// Writes one function in the text format with `notes` as comments: a
/// block's after its header line (`    ; note`), an instruction's at the
/// end of its line (`  ; note; note`). The parser skips comments, so the
/// text still reads back as the same function.
pub fn write_function_noted(
    w: &mut dyn Write,
    func: &Function,
    module: Option<&Module>,
    notes: Option<&Notes>,
) -> fmt::Result {
    let names = Names(module);
    write!(w, "function @{}(", func.name)?;
    for (i, p) in func.sig.params.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write!(
            w,
            "{}: {}{}",
            p.name,
            if p.mutable { "mut " } else { "" },
            p.ty
        )?;
    }
    w.write_str(")")?;
    match func.sig.results.as_slice() {
        [] => {}
        [ty] => write!(w, " -> {ty}")?,
        tys => {
            w.write_str(" -> (")?;
            for (i, ty) in tys.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                write!(w, "{ty}")?;
            }
            w.write_str(")")?;
        }
    }
    if func.meta.inline != InlineHint::Auto {
        write!(w, " inline({})", func.meta.inline.name())?;
    }
    write_rules(w, &func.meta.rules, &names)?;
    w.write_str(" {\n")?;
    for (region, data) in func.regions.iter() {
        write!(w, "    {region}: {}(", names.func(data.callee))?;
        write_list(w, &data.args)?;
        w.write_str(") -> (")?;
        write_list(w, &data.results)?;
        w.write_str(") blocks(")?;
        write_list(w, &data.blocks)?;
        w.write_str(")")?;
        write_rules(w, &data.rules, &names)?;
        if let Some(parent) = data.parent {
            write!(w, " parent({parent})")?;
        }
        w.write_str("\n")?;
    }
    for (i, data) in func.inlined.iter() {
        write!(w, "    {i}: @{} blocks(", data.callee)?;
        write_list(w, &data.blocks)?;
        w.write_str(")")?;
        if let Some(parent) = data.parent {
            write!(w, " parent({parent})")?;
        }
        w.write_str("\n")?;
    }
    for &block in func.layout.blocks() {
        write!(w, "{block}")?;
        let params = func.dfg.block_params(block);
        if !params.is_empty() {
            w.write_str("(")?;
            for (i, &p) in params.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                write!(w, "{p}: {}", func.dfg.value_type(p))?;
            }
            w.write_str(")")?;
        }
        w.write_str(":\n")?;
        for note in notes
            .and_then(|n| n.blocks.get(&block))
            .into_iter()
            .flatten()
        {
            writeln!(w, "    ; {}", one_line(note))?;
        }
        for &inst in func.layout.block_insts(block) {
            w.write_str("    ")?;
            write_inst(w, func, inst, module)?;
            write_srcloc(w, func.dfg.srcloc(inst))?;
            if let Some(ns) = notes.and_then(|n| n.insts.get(&inst)) {
                let ns: Vec<String> = ns.iter().map(|n| one_line(n)).collect();
                write!(w, "  ; {}", ns.join("; "))?;
            }
            w.write_str("\n")?;
        }
    }
    w.write_str("}\n")
}

/// A note on one line (a comment runs to the end of its line).
fn one_line(note: &str) -> String {
    note.replace(['\n', '\r'], " ")
}

/// ` !LINE:COL` after an instruction that has a location; nothing otherwise.
pub fn write_srcloc(w: &mut dyn Write, loc: SourceLoc) -> fmt::Result {
    match loc.expand() {
        Some((line, col)) => write!(w, " !{line}:{col}"),
        None => Ok(()),
    }
}

fn write_rules(w: &mut dyn Write, rules: &Rules, names: &Names) -> fmt::Result {
    if rules.is_empty() {
        return Ok(());
    }
    w.write_str(" rules(")?;
    for (i, (mode, rule)) in rules.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write!(w, "{mode}: {}", names.func(rule))?;
    }
    w.write_str(")")
}

fn write_list<T: fmt::Display>(w: &mut dyn Write, items: &[T]) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write!(w, "{x}")?;
    }
    Ok(())
}

fn write_block_call(w: &mut dyn Write, call: &BlockCall) -> fmt::Result {
    write!(w, "{}", call.block)?;
    if !call.args.is_empty() {
        w.write_str("(")?;
        write_list(w, &call.args)?;
        w.write_str(")")?;
    }
    Ok(())
}

/// Writes one instruction (without indentation or newline).
pub fn write_inst(
    w: &mut dyn Write,
    func: &Function,
    inst: Inst,
    module: Option<&Module>,
) -> fmt::Result {
    let names = Names(module);
    let results = func.dfg.inst_results(inst);
    if !results.is_empty() {
        write_list(w, results)?;
        w.write_str(" = ")?;
    }
    let data = func.dfg.inst(inst);
    let op = data.opcode();
    match data {
        // A NaN other than the default one (its sign, quiet bit or
        // payload) prints as its bits, which the parser reads back.
        InstData::FConst { bits }
            if f64::from_bits(*bits).is_nan() && *bits != f64::NAN.to_bits() =>
        {
            write!(w, "{op} 0x{bits:016x}")
        }
        InstData::FConst { bits } => write!(w, "{op} {:?}", f64::from_bits(*bits)),
        InstData::IConst { imm } => write!(w, "{op} {imm}"),
        InstData::BConst { imm } => write!(w, "{op} {imm}"),
        InstData::Unary { arg, .. } => write!(w, "{op} {arg}"),
        InstData::Binary { args, .. } => write!(w, "{op} {}, {}", args[0], args[1]),
        InstData::Ternary { args, .. } => {
            write!(w, "{op} {}, {}, {}", args[0], args[1], args[2])
        }
        InstData::Powi { arg, exp, .. } => write!(w, "{op} {arg}, {exp}"),
        InstData::Cmp { cond, args, .. } => write!(w, "{op} {cond} {}, {}", args[0], args[1]),
        InstData::Zeros { len, name, .. } => write!(w, "{op} {len}, {name:?}"),
        InstData::Push { tape, arg } => write!(w, "{op} {tape}, {arg}"),
        InstData::Pop { tape, ty, varies } => {
            write!(w, "{op} {tape}, {ty}")?;
            if let Some(vs) = varies {
                w.write_str(" varies(")?;
                write_list(w, vs)?;
                w.write_str(")")?;
            }
            Ok(())
        }
        InstData::Tape { tape, arg, .. } => match arg {
            Some(m) => write!(w, "{op} {tape}, {m}"),
            None => write!(w, "{op} {tape}"),
        },
        InstData::Call { func: callee, args } => {
            write!(w, "{op} {}(", names.func(*callee))?;
            write_list(w, args)?;
            w.write_str(")")
        }
        InstData::Autodiff { spec, args } => {
            write!(w, "{op} {}", spec.mode)?;
            if spec.width != 1 {
                write!(w, "({})", spec.width)?;
            }
            write!(w, " {}", spec.ret.name())?;
            // The cotangents of a `dup` return are the last values.
            let arity: usize = spec.args.iter().map(|a| a.arity_at(spec.width)).sum();
            let (mut rest, seeds) = args.split_at(arity.min(args.len()));
            if spec.ret == RetActivity::Dup {
                w.write_str("(")?;
                write_list(w, seeds)?;
                w.write_str(")")?;
            }
            write!(w, " {}(", names.func(spec.func))?;
            for (i, act) in spec.args.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                let n = act.arity_at(spec.width).min(rest.len());
                write!(w, "{} ", act.name())?;
                write_list(w, &rest[..n])?;
                rest = &rest[n..];
            }
            w.write_str(")")
        }
        InstData::Jump { dest } => {
            write!(w, "{op} ")?;
            write_block_call(w, dest)
        }
        InstData::Brif {
            cond,
            then_dest,
            else_dest,
        } => {
            write!(w, "{op} {cond}, ")?;
            write_block_call(w, then_dest)?;
            w.write_str(", ")?;
            write_block_call(w, else_dest)
        }
        InstData::Return { args } => {
            w.write_str("return")?;
            if !args.is_empty() {
                w.write_str(" ")?;
                write_list(w, args)?;
            }
            Ok(())
        }
    }
}

impl fmt::Display for Function {
    /// Prints without a module: callees appear as `@fnN`. Prefer
    /// [`Module::display_function`] where a module is at hand.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_function(f, self, None)
    }
}

impl fmt::Display for Module {
    /// The source file directive, if the module has a source file, then
    /// every function in module order, separated by blank lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.source_file {
            writeln!(f, "source {file:?}")?;
            if !self.is_empty() {
                f.write_str("\n")?;
            }
        }
        for (i, (_, func)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write_function(f, func, Some(self))?;
        }
        Ok(())
    }
}

/// A function displayed with callee names resolved through its module.
pub struct DisplayFunction<'a>(&'a Module, FuncId);

impl fmt::Display for DisplayFunction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_function(f, self.0.func(self.1), Some(self.0))
    }
}

impl Module {
    /// Displays one function with callee names resolved.
    pub fn display_function(&self, id: FuncId) -> DisplayFunction<'_> {
        DisplayFunction(self, id)
    }
}
