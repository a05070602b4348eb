//! What the names of generated functions and arrays mean, in the user's
//! terms.
//!
//! The AD passes name what they create after what it is derived from
//! (`docs/ad.md`, `docs/ad-reverse.md`): `f.fwd.dual_const` is the forward
//! derivative of the user's function `f`, `f.aug.dup.fwd.dup` the forward
//! derivative of the augmented primal of `f`'s reverse derivative. User
//! identifiers cannot contain `.`, so a name with a `.` is always generated,
//! and its first segment is the user's function (or `adze`, for the helpers
//! of reverse mode). [`parse`] reads such a name back into a [`Derived`];
//! [`describe`] turns it into a phrase for error messages:
//!
//! ```
//! use adze_ir::names::describe;
//!
//! assert_eq!(
//!     describe("shifted.aug.dup_const").as_deref(),
//!     Some("the augmented primal of the reverse derivative of `shifted`")
//! );
//! assert_eq!(describe("shifted"), None); // the user's own function
//! ```
//!
//! The grammar, one step per `.`-separated group (what is in brackets is
//! optional; `<acts>` is `noargs` or activities joined by `_`):
//!
//! | name | step |
//! |---|---|
//! | `X.fwd.<acts>[.noret][.xN]` | forward derivative (vector mode: width N) |
//! | `X.rev.<acts>[.noret]` | reverse derivative |
//! | `X.aug.<acts>[.noret][.nrK_..][.uK_..][.tL]` | augmented primal of a reverse derivative |
//! | `X.adj.<acts>[.noret][.nrK_..][.uK_..][.tL]` | adjoint of a reverse derivative |
//! | `X.rule.forward`, `X.rule.reverse` | a custom rule (named by the front end) |
//! | `X.revrule[.tL]` | the reverse rule made for a function with only a forward rule |
//! | `X.apply.tL.<mask>` | the adjoint code that applies the reverse rule `X` |
//! | `adze.tape.save.L`, `adze.tape.restore.L`, `adze.copy` | helpers (bases, not steps) |

use std::fmt::Write as _;

/// One step of a derived name, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `.fwd.<acts>`: a forward derivative with `width` tangents per value.
    Forward { width: usize },
    /// `.rev.<acts>`: a reverse derivative (augmented primal, then adjoint).
    Reverse,
    /// `.aug.<acts>`: the augmented primal of a reverse derivative.
    Augmented,
    /// `.adj.<acts>`: the adjoint of a reverse derivative.
    Adjoint,
    /// `.rule.forward` / `.rule.reverse`: a custom rule.
    Rule { reverse: bool },
    /// `.revrule`: the reverse rule of a function that has only a forward
    /// rule, made from its own derivative.
    MadeRule,
    /// `.apply.tL.<mask>`: the adjoint code that applies a reverse rule.
    Apply,
}

/// A generated name, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived<'a> {
    /// The user's function it derives from, or the helper's full name
    /// (`adze.tape.save.0`) when `helper` is set.
    pub base: &'a str,
    pub helper: bool,
    /// The derivation steps, innermost (closest to `base`) first.
    pub steps: Vec<Step>,
}

/// Reads a generated function name; `None` for a name without `.` (the
/// user's own function) and for a name that does not follow the grammar of
/// the module doc.
pub fn parse(name: &str) -> Option<Derived<'_>> {
    let segs: Vec<&str> = name.split('.').collect();
    let first = *segs.first()?;
    if segs.len() < 2 || !is_ident(first) {
        return None;
    }
    // Helpers of reverse mode: `adze.tape.save.L`, `adze.tape.restore.L`,
    // `adze.copy`. (A user function named `adze` has derivatives too.)
    let (base_segs, helper) = match (first, segs.get(1).copied(), segs.get(2).copied()) {
        ("adze", Some("tape"), Some("save" | "restore"))
            if segs.get(3).is_some_and(|s| is_number(s)) =>
        {
            (4, true)
        }
        ("adze", Some("copy"), _) => (2, true),
        _ => (1, false),
    };
    let base_len = segs[..base_segs].iter().map(|s| s.len()).sum::<usize>() + base_segs - 1;
    let base = &name[..base_len];
    let mut rest = &segs[base_segs..];
    let mut steps = Vec::new();
    while let Some((&kind, tail)) = rest.split_first() {
        rest = tail;
        let step = match kind {
            "fwd" => {
                take_acts(&mut rest)?;
                take_if(&mut rest, |s| s == "noret");
                let width = match rest.first().and_then(|s| s.strip_prefix('x')) {
                    Some(n) if is_number(n) => {
                        rest = &rest[1..];
                        n.parse().ok()?
                    }
                    _ => 1,
                };
                Step::Forward { width }
            }
            "rev" | "aug" | "adj" => {
                take_acts(&mut rest)?;
                take_if(&mut rest, |s| s == "noret");
                take_if(&mut rest, |s| {
                    s.strip_prefix("nr")
                        .is_some_and(|u| u.split('_').all(is_number))
                });
                take_if(&mut rest, |s| {
                    s.strip_prefix('u')
                        .is_some_and(|u| u.split('_').all(is_number))
                });
                take_if(&mut rest, is_tape);
                match kind {
                    "rev" => Step::Reverse,
                    "aug" => Step::Augmented,
                    _ => Step::Adjoint,
                }
            }
            "rule" => {
                let (&mode, tail) = rest.split_first()?;
                rest = tail;
                match mode {
                    "forward" => Step::Rule { reverse: false },
                    "reverse" => Step::Rule { reverse: true },
                    _ => return None,
                }
            }
            "revrule" => {
                take_if(&mut rest, is_tape);
                Step::MadeRule
            }
            "apply" => {
                if !take_if(&mut rest, is_tape) {
                    return None;
                }
                let is_mask = |s: &str| !s.is_empty() && s.chars().all(|c| "dcs".contains(c));
                if !take_if(&mut rest, is_mask) {
                    return None;
                }
                Step::Apply
            }
            _ => return None,
        };
        steps.push(step);
    }
    if !helper && steps.is_empty() {
        return None;
    }
    Some(Derived {
        base,
        helper,
        steps,
    })
}

/// The user's function a generated name derives from (`f` for
/// `f.aug.dup.fwd.dup`); `None` for a helper, a name that does not parse,
/// and a name without `.`.
pub fn user_function(name: &str) -> Option<&str> {
    parse(name).filter(|d| !d.helper).map(|d| d.base)
}

/// What a generated function is, in the user's terms: "the forward
/// derivative of the augmented primal of the reverse derivative of `f`".
/// `None` for the user's own functions (no `.`) and for names that do not
/// follow the grammar (then the raw name is all there is to say).
pub fn describe(name: &str) -> Option<String> {
    let d = parse(name)?;
    let mut out = if d.helper {
        format!("the reverse-mode helper `{}`", d.base)
    } else {
        format!("`{}`", d.base)
    };
    let mut i = 0;
    while i < d.steps.len() {
        let step = d.steps[i];
        out = match step {
            Step::Forward { width: 1 } => {
                // Forward over forward over ..: one phrase, by order.
                let run = d.steps[i..]
                    .iter()
                    .take_while(|&&s| s == Step::Forward { width: 1 })
                    .count();
                i += run - 1;
                if run == 1 {
                    format!("the forward derivative of {out}")
                } else {
                    format!("the forward derivative of order {run} of {out}")
                }
            }
            Step::Forward { width } => {
                format!("the forward derivative (vector mode, width {width}) of {out}")
            }
            Step::Reverse => format!("the reverse derivative of {out}"),
            Step::Augmented => format!("the augmented primal of the reverse derivative of {out}"),
            Step::Adjoint => format!("the adjoint of the reverse derivative of {out}"),
            Step::Rule { reverse } => {
                let mode = if reverse { "reverse" } else { "forward" };
                format!("the {mode} rule of {out}")
            }
            Step::MadeRule => format!("the reverse rule made from the derivative of {out}"),
            Step::Apply => format!("the adjoint code applying {out}"),
        };
        i += 1;
    }
    Some(out)
}

/// What a generated array name is: the shadow (`a.d`; in vector mode lane
/// N's, `a.dN`) or the copy (`a.copy`) of the user's array `a`, or a shadow
/// of one of those (`a.d.d`). `None` for the user's own arrays and for names
/// that do not follow this grammar.
pub fn describe_array(name: &str) -> Option<String> {
    let mut segs = name.split('.');
    let base = segs.next()?;
    if !is_ident(base) {
        return None;
    }
    let mut out = format!("`{base}`");
    let mut any = false;
    for seg in segs {
        any = true;
        out = match seg {
            "d" => format!("the shadow of {out}"),
            "copy" => format!("a copy of {out}"),
            _ => match seg.strip_prefix('d') {
                Some(n) if is_number(n) => format!("the shadow of {out} in lane {n}"),
                _ => return None,
            },
        };
    }
    any.then_some(out)
}

/// Formats `name` for a message: `` `name` `` for the user's own names,
/// `` `raw` (what it is) `` for generated ones, `what` being [`describe`] or
/// [`describe_array`].
pub fn annotate(name: &str, what: fn(&str) -> Option<String>) -> String {
    let mut out = format!("`{name}`");
    if let Some(d) = what(name) {
        let _ = write!(out, " ({d})");
    }
    out
}

/// `<acts>`: `noargs`, or activity names joined by `_`.
fn take_acts(rest: &mut &[&str]) -> Option<()> {
    let ok = |s: &str| {
        s == "noargs"
            || s.split('_')
                .all(|a| matches!(a, "const" | "dual" | "active" | "dup"))
    };
    take_if(rest, ok).then_some(())
}

/// Consumes the first segment of `rest` if it satisfies `pred`.
fn take_if(rest: &mut &[&str], pred: impl Fn(&str) -> bool) -> bool {
    match rest.split_first() {
        Some((s, tail)) if pred(s) => {
            *rest = tail;
            true
        }
        _ => false,
    }
}

/// `tL`: a tape number.
fn is_tape(s: &str) -> bool {
    s.strip_prefix('t').is_some_and(is_number)
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// An adze identifier: ASCII letters, digits and `_`, not starting with a
/// digit (`crates/lang/src/lexer.rs`).
fn is_ident(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str) -> String {
        describe(name).unwrap_or_else(|| panic!("`{name}` does not parse"))
    }

    #[test]
    fn user_functions_are_not_described() {
        for name in ["f", "read_at", "_x1", "adze", "fwd", "aug"] {
            assert_eq!(describe(name), None, "{name}");
            assert_eq!(parse(name), None, "{name}");
            assert_eq!(user_function(name), None, "{name}");
        }
    }

    #[test]
    fn forward_derivatives() {
        assert_eq!(d("f.fwd.dual"), "the forward derivative of `f`");
        assert_eq!(d("f.fwd.dual_const_dup"), "the forward derivative of `f`");
        assert_eq!(d("f.fwd.noargs"), "the forward derivative of `f`");
        assert_eq!(d("f.fwd.dual.noret"), "the forward derivative of `f`");
        assert_eq!(
            d("f.fwd.dual.noret.x4"),
            "the forward derivative (vector mode, width 4) of `f`"
        );
        assert_eq!(
            d("f.fwd.dup.x2"),
            "the forward derivative (vector mode, width 2) of `f`"
        );
        assert_eq!(
            parse("cube.fwd.dual.fwd.dual_const"),
            Some(Derived {
                base: "cube",
                helper: false,
                steps: vec![Step::Forward { width: 1 }, Step::Forward { width: 1 }],
            })
        );
        assert_eq!(
            d("cube.fwd.dual.fwd.dual_const"),
            "the forward derivative of order 2 of `cube`"
        );
        assert_eq!(
            d("f0.fwd.dual.fwd.dual_const.fwd.dual_const_const"),
            "the forward derivative of order 3 of `f0`"
        );
    }

    #[test]
    fn reverse_derivatives_and_their_halves() {
        assert_eq!(d("f.rev.active_dup"), "the reverse derivative of `f`");
        assert_eq!(d("f.rev.noargs.noret"), "the reverse derivative of `f`");
        assert_eq!(
            d("shifted.aug.dup_const"),
            "the augmented primal of the reverse derivative of `shifted`"
        );
        assert_eq!(
            d("shifted.adj.dup_const"),
            "the adjoint of the reverse derivative of `shifted`"
        );
        // Tape suffixes and untaken parameters.
        assert_eq!(
            d("p1.aug.active.t1"),
            "the augmented primal of the reverse derivative of `p1`"
        );
        assert_eq!(
            d("g.adj.active_dup.noret.u0_2.t3"),
            "the adjoint of the reverse derivative of `g`"
        );
        assert_eq!(
            d("g.adj.active_dup.nr1_2.u0_2.t3"),
            "the adjoint of the reverse derivative of `g`"
        );
        assert_eq!(
            d("g.aug.dup.u1"),
            "the augmented primal of the reverse derivative of `g`"
        );
    }

    #[test]
    fn rules_and_rule_application() {
        assert_eq!(d("sqr.rule.reverse"), "the reverse rule of `sqr`");
        assert_eq!(d("cube.rule.forward"), "the forward rule of `cube`");
        assert_eq!(
            d("f_custom.rule.reverse.apply.t0.d"),
            "the adjoint code applying the reverse rule of `f_custom`"
        );
        assert_eq!(
            d("h.rule.reverse.apply.t2.dcs"),
            "the adjoint code applying the reverse rule of `h`"
        );
        assert_eq!(
            d("h.revrule"),
            "the reverse rule made from the derivative of `h`"
        );
        assert_eq!(
            d("h.revrule.t1"),
            "the reverse rule made from the derivative of `h`"
        );
        assert_eq!(
            d("h.revrule.t1.apply.t1.s"),
            "the adjoint code applying the reverse rule made from the derivative of `h`"
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(
            d("adze.tape.save.0"),
            "the reverse-mode helper `adze.tape.save.0`"
        );
        assert_eq!(
            d("adze.tape.restore.12"),
            "the reverse-mode helper `adze.tape.restore.12`"
        );
        assert_eq!(d("adze.copy"), "the reverse-mode helper `adze.copy`");
        assert_eq!(
            d("adze.tape.save.0.fwd.dup.noret"),
            "the forward derivative of the reverse-mode helper `adze.tape.save.0`"
        );
        assert_eq!(user_function("adze.tape.save.0"), None);
        // A user function that happens to be called `adze`.
        assert_eq!(d("adze.fwd.dual"), "the forward derivative of `adze`");
        assert_eq!(user_function("adze.fwd.dual"), Some("adze"));
    }

    #[test]
    fn nested_chains() {
        assert_eq!(
            d("g_custom.aug.dup.fwd.dup"),
            "the forward derivative of the augmented primal of the reverse derivative of `g_custom`"
        );
        assert_eq!(
            d("f_custom.rule.reverse.apply.t0.d.fwd.dup_dual.noret"),
            "the forward derivative of the adjoint code applying the reverse rule of `f_custom`"
        );
        assert_eq!(
            d("f_custom.rule.reverse.fwd.dup_dup_dual.noret"),
            "the forward derivative of the reverse rule of `f_custom`"
        );
        assert_eq!(
            d("h.adj.active.adj.active"),
            "the adjoint of the reverse derivative of the adjoint of the reverse derivative of `h`"
        );
        assert_eq!(
            d("f.fwd.dual.aug.active_active.fwd.dual_const.fwd.dual_const_const"),
            "the forward derivative of order 2 of the augmented primal of the reverse \
             derivative of the forward derivative of `f`"
        );
        assert_eq!(
            d("f.fwd.dual.x2.fwd.dual_const_const"),
            "the forward derivative of the forward derivative (vector mode, width 2) of `f`"
        );
        assert_eq!(user_function("g_custom.aug.dup.fwd.dup"), Some("g_custom"));
        let long = format!("f0{}", ".fwd.dual".repeat(18));
        assert_eq!(d(&long), "the forward derivative of order 18 of `f0`");
    }

    #[test]
    fn malformed_names_are_not_described() {
        for name in [
            "",
            ".",
            "f.",
            ".fwd.dual",
            "f.fwd",
            "f.fwd.bogus",
            "f.fwd.dual_bogus",
            "f.aug",
            "f.rule",
            "f.rule.sideways",
            "f.apply.t0",
            "f.apply.d",
            "f.apply.t0.q",
            "f.fwd.dual.t1",
            "f.something",
            "1f.fwd.dual",
            "f-g.fwd.dual",
            "adze.tape.save",
            "f.fwd.dual.",
        ] {
            assert_eq!(describe(name), None, "{name:?}");
        }
    }

    #[test]
    fn arrays() {
        assert_eq!(describe_array("a"), None);
        assert_eq!(describe_array("a.d").as_deref(), Some("the shadow of `a`"));
        assert_eq!(
            describe_array("a.d2").as_deref(),
            Some("the shadow of `a` in lane 2")
        );
        assert_eq!(describe_array("x.copy").as_deref(), Some("a copy of `x`"));
        assert_eq!(
            describe_array("x.d.d").as_deref(),
            Some("the shadow of the shadow of `x`")
        );
        assert_eq!(describe_array("x.q"), None);
        assert_eq!(describe_array("x."), None);
        assert_eq!(describe_array(""), None);
    }

    #[test]
    fn annotate_keeps_the_raw_name() {
        assert_eq!(annotate("x", describe_array), "`x`");
        assert_eq!(annotate("x.d", describe_array), "`x.d` (the shadow of `x`)");
        assert_eq!(
            annotate("f.fwd.dual", describe),
            "`f.fwd.dual` (the forward derivative of `f`)"
        );
    }
}
