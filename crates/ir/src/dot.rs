//! Graphviz pictures of functions (`adze dump --format dot`).
//!
//! One `digraph` per function: each block is a node whose label is its
//! header and instructions in the text format ([`crate::write`]), left
//! aligned; each branch an edge (`brif`'s first destination labelled `T`,
//! its second `F`, with the arguments passed). Inlined code is a cluster
//! labelled with the function it came from, nested as the inlining was
//! ([`Function::inlined`]); a rule region (a callee with rules, inlined)
//! is marked in its cluster's label and shaded. Tape pushes are blue, pops
//! red, and a block that pushes or pops is filled accordingly, so the tape
//! traffic of a derivative stands out.
//!
//! The output is plain `dot` text: every identifier is quoted, every label
//! an HTML-like label with `&`, `<`, `>` and `"` escaped.

use crate::entities::{Block, Inlined};
use crate::function::Function;
use crate::instructions::{InstData, Opcode};
use crate::module::Module;
use crate::write::write_inst;
use std::collections::HashMap;
use std::fmt::Write;

/// Every function of `module` (or the one named `only`), one graph each.
pub fn module_to_dot(module: &Module, only: Option<&str>) -> String {
    let mut out = String::new();
    for (_, f) in module.iter() {
        if only.is_some_and(|n| n != f.name) || f.is_declaration() {
            continue;
        }
        out.push_str(&function_to_dot(f, Some(module)));
    }
    out
}

/// `func` as one `digraph`.
pub fn function_to_dot(func: &Function, module: Option<&Module>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", quote(&func.name));
    // `newrank`: Graphviz's ranking that handles clusters as a whole; the
    // old one (2.43 here) corrupted its heap on some adjoints with inlined
    // checkpoint runners (`ir-examples/checkpoint_hints.adz`).
    out.push_str("    newrank=true;\n");
    out.push_str("    node [shape=plaintext, fontname=\"monospace\", fontsize=10];\n");
    out.push_str("    edge [fontname=\"monospace\", fontsize=9];\n");
    let _ = writeln!(
        out,
        "    label=\"@{}\"; labelloc=t; fontname=\"monospace\";",
        quote(&func.name)
    );
    // Each block in its innermost inlined body; the clusters nest as their
    // entries do.
    let mut members: HashMap<Option<Inlined>, Vec<Block>> = HashMap::new();
    for &b in func.layout.blocks() {
        members
            .entry(func.innermost_inlined(b))
            .or_default()
            .push(b);
    }
    let mut children: HashMap<Option<Inlined>, Vec<Inlined>> = HashMap::new();
    for (i, data) in func.inlined.iter() {
        children.entry(data.parent).or_default().push(i);
    }
    cluster(&mut out, func, module, None, &members, &children, 1);
    for &b in func.layout.blocks() {
        let Some(last) = func.layout.last_inst(b) else {
            continue;
        };
        let data = func.dfg.inst(last);
        let dests = data.destinations();
        for (k, d) in dests.iter().enumerate() {
            let mut label = String::new();
            if matches!(data, InstData::Brif { .. }) {
                label.push_str(if k == 0 { "T" } else { "F" });
            }
            if !d.args.is_empty() {
                let args: Vec<String> = d.args.iter().map(|v| v.to_string()).collect();
                let _ = write!(label, "({})", args.join(", "));
            }
            let _ = writeln!(
                out,
                "    \"{b}\" -> \"{}\" [label=\"{}\"];",
                d.block,
                quote(&label)
            );
        }
    }
    out.push_str("}\n");
    out
}

/// The blocks of inlined entry `at` (`None`: the function's own) and its
/// nested entries, as a cluster.
fn cluster(
    out: &mut String,
    func: &Function,
    module: Option<&Module>,
    at: Option<Inlined>,
    members: &HashMap<Option<Inlined>, Vec<Block>>,
    children: &HashMap<Option<Inlined>, Vec<Inlined>>,
    depth: usize,
) {
    // An inlined entry whose blocks are all gone (removed as unreachable,
    // or left behind when a checkpoint runner was built) draws nothing.
    if at.is_some() && !has_blocks(at, members, children) {
        return;
    }
    let pad = "    ".repeat(depth);
    if let Some(i) = at {
        let data = &func.inlined[i];
        // A rule region whose body is this inlined code.
        let region = func.regions.values().find(|r| {
            r.blocks
                .first()
                .is_some_and(|b| data.blocks.first() == Some(b))
        });
        let (what, fill) = match region {
            Some(_) => ("rule region of", "#fff3d6"),
            None => ("inlined", "#f4f4f4"),
        };
        let _ = writeln!(out, "{pad}subgraph \"cluster_{i}\" {{");
        let _ = writeln!(
            out,
            "{pad}    label=\"{what} @{}\"; style=\"filled,dashed\"; fillcolor=\"{fill}\";",
            quote(&data.callee)
        );
    }
    for &b in members.get(&at).map_or(&[][..], Vec::as_slice) {
        let _ = writeln!(
            out,
            "{pad}    \"{b}\" [label=<{}>];",
            block_label(func, module, b)
        );
    }
    for &c in children.get(&at).map_or(&[][..], Vec::as_slice) {
        cluster(out, func, module, Some(c), members, children, depth + 1);
    }
    if at.is_some() {
        let _ = writeln!(out, "{pad}}}");
    }
}

/// Does inlined entry `at`, or one nested in it, hold a block?
fn has_blocks(
    at: Option<Inlined>,
    members: &HashMap<Option<Inlined>, Vec<Block>>,
    children: &HashMap<Option<Inlined>, Vec<Inlined>>,
) -> bool {
    members.get(&at).is_some_and(|m| !m.is_empty())
        || children
            .get(&at)
            .is_some_and(|cs| cs.iter().any(|&c| has_blocks(Some(c), members, children)))
}

/// The HTML-like label of `block`: a table of one cell, the header and one
/// line per instruction.
fn block_label(func: &Function, module: Option<&Module>, block: Block) -> String {
    let mut header = block.to_string();
    let params = func.dfg.block_params(block);
    if !params.is_empty() {
        let ps: Vec<String> = params
            .iter()
            .map(|&p| format!("{p}: {}", func.dfg.value_type(p)))
            .collect();
        let _ = write!(header, "({})", ps.join(", "));
    }
    let (mut pushes, mut pops) = (false, false);
    let mut lines = format!("<b>{}:</b><br align=\"left\"/>", html(&header));
    for &inst in func.layout.block_insts(block) {
        let mut text = String::new();
        let _ = write_inst(&mut text, func, inst, module);
        let color = match func.dfg.inst(inst).opcode() {
            Opcode::Push => {
                pushes = true;
                Some("#1f4fbf")
            }
            Opcode::Pop => {
                pops = true;
                Some("#bf1f1f")
            }
            _ => None,
        };
        match color {
            Some(c) => {
                let _ = write!(
                    lines,
                    "<font color=\"{c}\">  {}</font><br align=\"left\"/>",
                    html(&text)
                );
            }
            None => {
                let _ = write!(lines, "  {}<br align=\"left\"/>", html(&text));
            }
        }
    }
    let fill = match (pushes, pops) {
        (true, true) => "#e8dcf4",
        (true, false) => "#dce6f8",
        (false, true) => "#f8dcdc",
        (false, false) => "white",
    };
    format!(
        "<table border=\"1\" cellborder=\"0\" cellpadding=\"4\" bgcolor=\"{fill}\"><tr><td align=\"left\" balign=\"left\">{lines}</td></tr></table>"
    )
}

/// Escapes text for an HTML-like label.
fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a quoted `dot` string.
fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_module;

    const SRC: &str = "function @f(x: f64) -> f64 {
    inlined0: @g blocks(block1)
block0(v0: f64):
    v1 = fconst 1.0
    v2 = fcmp lt v0, v1
    brif v2, block1, block2(v0)
block1:
    push 0, v0
    v3 = fmul v0, v0
    jump block2(v3)
block2(v4: f64):
    return v4
}
";

    #[test]
    fn blocks_edges_clusters_and_tape_traffic() {
        let m = parse_module(SRC).unwrap();
        let dot = module_to_dot(&m, None);
        assert!(dot.starts_with("digraph \"f\" {\n"), "{dot}");
        assert!(
            dot.contains("\"block0\" -> \"block1\" [label=\"T\"];"),
            "{dot}"
        );
        assert!(
            dot.contains("\"block0\" -> \"block2\" [label=\"F(v0)\"];"),
            "{dot}"
        );
        assert!(
            dot.contains("\"block1\" -> \"block2\" [label=\"(v3)\"];"),
            "{dot}"
        );
        assert!(dot.contains("subgraph \"cluster_inlined0\" {"), "{dot}");
        assert!(dot.contains("label=\"inlined @g\""), "{dot}");
        assert!(
            dot.contains("<font color=\"#1f4fbf\">  push 0, v0</font>"),
            "{dot}"
        );
        // `<` of `fcmp lt` is a word; the block parameters' `:` stays.
        assert!(dot.contains("<b>block2(v4: f64):</b>"), "{dot}");
        assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    }

    /// An inlined entry without blocks (here `inlined1`, nested in
    /// `inlined0`) draws no (empty) cluster.
    #[test]
    fn inlined_code_without_blocks_draws_no_cluster() {
        let src = SRC.replace(
            "    inlined0: @g blocks(block1)\n",
            "    inlined0: @g blocks(block1)\n    inlined1: @h blocks() parent(inlined0)\n",
        );
        let m = parse_module(&src).unwrap();
        let dot = module_to_dot(&m, None);
        assert!(dot.contains("subgraph \"cluster_inlined0\" {"), "{dot}");
        assert!(!dot.contains("cluster_inlined1"), "{dot}");
        assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(
            html("a < b & \"c\" > d"),
            "a &lt; b &amp; &quot;c&quot; &gt; d"
        );
        assert_eq!(quote("a\"b\\"), "a\\\"b\\\\");
    }
}
