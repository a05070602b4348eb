//! What the names of generated arrays mean, in the user's terms.
//!
//! The AD passes name the arrays they create after the user's: `a.d` is
//! the shadow of `a` (in vector mode, lane N's is `a.dN`), `a.copy` a copy
//! of it. User identifiers cannot contain `.`, so a name with a `.` is
//! generated; [`describe_array`] turns it into a phrase for run-time
//! errors, which name arrays by these names (an array has no other record
//! of where it comes from).
//!
//! Generated *functions* are described from data instead: the module
//! records what each is made from ([`crate::derivation`],
//! [`crate::Module::describe_function`]); their names are for display only.
//!
//! ```
//! use adze_ir::names::describe_array;
//!
//! assert_eq!(describe_array("x.d").as_deref(), Some("the shadow of `x`"));
//! assert_eq!(describe_array("x"), None); // the user's own array
//! ```

use std::fmt::Write as _;

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
/// `` `raw` (what it is) `` for generated ones, `what` being
/// [`describe_array`].
pub fn annotate(name: &str, what: fn(&str) -> Option<String>) -> String {
    let mut out = format!("`{name}`");
    if let Some(d) = what(name) {
        let _ = write!(out, " ({d})");
    }
    out
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
    }
}
