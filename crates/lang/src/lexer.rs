//! The lexer: source text to [`Token`]s.
//!
//! Tokens carry a kind and a byte [`Span`]; the parser reads identifier and
//! number text back from the source. `//` comments and whitespace are
//! skipped. Every malformed token (a stray character, `/*`, an
//! integer literal that does not fit in i64, a float literal that overflows)
//! becomes a diagnostic; lexing goes on so that all of them are reported.

use crate::diagnostic::{Diagnostic, Span};

/// The kinds of token. Identifiers include the contextual words of the
/// language (`f64`, `forward`, `dual`, ...); only the words below are
/// reserved keywords.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    Ident,
    Int,
    Float,
    // Keywords.
    Fn,
    Rule,
    Let,
    Var,
    If,
    Else,
    For,
    In,
    While,
    Break,
    Continue,
    Return,
    True,
    False,
    Mut,
    // Punctuation.
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Semi,
    Colon,
    Arrow,
    Assign,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    Bang,
    AndAnd,
    OrOr,
    /// `&`, bitwise and.
    Amp,
    /// `|`, bitwise or.
    Pipe,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    DotDot,
    Hash,
    Eof,
}

impl TokenKind {
    /// How the token is named in "expected ..., found ..." messages.
    pub fn describe(self) -> &'static str {
        use TokenKind::*;
        match self {
            Ident => "an identifier",
            Int => "an integer literal",
            Float => "a float literal",
            Fn => "`fn`",
            Rule => "`rule`",
            Let => "`let`",
            Var => "`var`",
            If => "`if`",
            Else => "`else`",
            For => "`for`",
            In => "`in`",
            While => "`while`",
            Break => "`break`",
            Continue => "`continue`",
            Return => "`return`",
            True => "`true`",
            False => "`false`",
            Mut => "`mut`",
            LParen => "`(`",
            RParen => "`)`",
            LBrace => "`{`",
            RBrace => "`}`",
            LBracket => "`[`",
            RBracket => "`]`",
            Comma => "`,`",
            Semi => "`;`",
            Colon => "`:`",
            Arrow => "`->`",
            Assign => "`=`",
            EqEq => "`==`",
            NotEq => "`!=`",
            Lt => "`<`",
            Le => "`<=`",
            Gt => "`>`",
            Ge => "`>=`",
            Plus => "`+`",
            Minus => "`-`",
            Star => "`*`",
            Slash => "`/`",
            Percent => "`%`",
            Caret => "`^`",
            Bang => "`!`",
            AndAnd => "`&&`",
            OrOr => "`||`",
            Amp => "`&`",
            Pipe => "`|`",
            Shl => "`<<`",
            Shr => "`>>`",
            DotDot => "`..`",
            Hash => "`#`",
            Eof => "the end of the file",
        }
    }
}

/// A token: its kind and where it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

fn keyword(word: &str) -> Option<TokenKind> {
    use TokenKind::*;
    Some(match word {
        "fn" => Fn,
        "rule" => Rule,
        "let" => Let,
        "var" => Var,
        "if" => If,
        "else" => Else,
        "for" => For,
        "in" => In,
        "while" => While,
        "break" => Break,
        "continue" => Continue,
        "return" => Return,
        "true" => True,
        "false" => False,
        "mut" => Mut,
        _ => return None,
    })
}

/// Splits `src` into tokens, ending with one [`TokenKind::Eof`]. Returns every
/// lexical error if there is any.
pub fn lex(src: &str) -> Result<Vec<Token>, Vec<Diagnostic>> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut errors = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        let punct = |kind: TokenKind, len: usize| (kind, len);
        let simple = match (c, next) {
            (b' ' | b'\t' | b'\n' | b'\r', _) => {
                i += 1;
                continue;
            }
            (b'/', Some(b'/')) => {
                i = src[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            (b'/', Some(b'*')) => {
                errors.push(
                    Diagnostic::new(
                        Span::new(i, i + 2),
                        "block comments are not supported",
                        "comment each line with `//`",
                    )
                    .label("`/*` starts a block comment"),
                );
                i += 2;
                continue;
            }
            (b'(', _) => punct(TokenKind::LParen, 1),
            (b')', _) => punct(TokenKind::RParen, 1),
            (b'{', _) => punct(TokenKind::LBrace, 1),
            (b'}', _) => punct(TokenKind::RBrace, 1),
            (b'[', _) => punct(TokenKind::LBracket, 1),
            (b']', _) => punct(TokenKind::RBracket, 1),
            (b',', _) => punct(TokenKind::Comma, 1),
            (b';', _) => punct(TokenKind::Semi, 1),
            (b':', _) => punct(TokenKind::Colon, 1),
            (b'-', Some(b'>')) => punct(TokenKind::Arrow, 2),
            (b'=', Some(b'=')) => punct(TokenKind::EqEq, 2),
            (b'!', Some(b'=')) => punct(TokenKind::NotEq, 2),
            (b'<', Some(b'=')) => punct(TokenKind::Le, 2),
            (b'>', Some(b'=')) => punct(TokenKind::Ge, 2),
            (b'&', Some(b'&')) => punct(TokenKind::AndAnd, 2),
            (b'|', Some(b'|')) => punct(TokenKind::OrOr, 2),
            (b'<', Some(b'<')) => punct(TokenKind::Shl, 2),
            (b'>', Some(b'>')) => punct(TokenKind::Shr, 2),
            (b'&', _) => punct(TokenKind::Amp, 1),
            (b'|', _) => punct(TokenKind::Pipe, 1),
            (b'.', Some(b'.')) => punct(TokenKind::DotDot, 2),
            (b'=', _) => punct(TokenKind::Assign, 1),
            (b'<', _) => punct(TokenKind::Lt, 1),
            (b'>', _) => punct(TokenKind::Gt, 1),
            (b'+', _) => punct(TokenKind::Plus, 1),
            (b'-', _) => punct(TokenKind::Minus, 1),
            (b'*', _) => punct(TokenKind::Star, 1),
            (b'/', _) => punct(TokenKind::Slash, 1),
            (b'%', _) => punct(TokenKind::Percent, 1),
            (b'^', _) => punct(TokenKind::Caret, 1),
            (b'!', _) => punct(TokenKind::Bang, 1),
            (b'#', _) => punct(TokenKind::Hash, 1),
            _ => (TokenKind::Eof, 0),
        };
        if simple.1 > 0 {
            i += simple.1;
            tokens.push(Token {
                kind: simple.0,
                span: Span::new(start, i),
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let kind = keyword(&src[start..i]).unwrap_or(TokenKind::Ident);
            tokens.push(Token {
                kind,
                span: Span::new(start, i),
            });
        } else if c.is_ascii_digit() {
            let (kind, end) = scan_number(bytes, i);
            i = end;
            let span = Span::new(start, i);
            if let Some(err) = check_number(kind, &src[start..i], span) {
                errors.push(err);
            }
            tokens.push(Token { kind, span });
        } else {
            // A character that starts no token; skip it whole (it may be
            // several bytes long).
            let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
            i += ch.len_utf8();
            errors.push(stray_char(ch, Span::new(start, i)));
        }
    }
    tokens.push(Token {
        kind: TokenKind::Eof,
        span: Span::new(bytes.len(), bytes.len()),
    });
    if errors.is_empty() {
        Ok(tokens)
    } else {
        Err(errors)
    }
}

/// Scans `digits [. digits] [(e|E) [+|-] digits]` from `i`.
fn scan_number(bytes: &[u8], mut i: usize) -> (TokenKind, usize) {
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let is_digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let mut kind = TokenKind::Int;
    i = digits(i);
    if bytes.get(i) == Some(&b'.') && is_digit(i + 1) {
        kind = TokenKind::Float;
        i = digits(i + 1);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
        if is_digit(i + 1 + sign) {
            kind = TokenKind::Float;
            i = digits(i + 1 + sign);
        }
    }
    (kind, i)
}

fn check_number(kind: TokenKind, text: &str, span: Span) -> Option<Diagnostic> {
    match kind {
        TokenKind::Int if text.parse::<i64>().is_err() => Some(
            Diagnostic::new(
                span,
                "integer literal is too large for i64",
                "the largest i64 is 9223372036854775807; for a large f64 write a float literal such as `1e20`",
            )
            .label("does not fit in i64"),
        ),
        TokenKind::Float if !text.parse::<f64>().is_ok_and(f64::is_finite) => Some(
            Diagnostic::new(
                span,
                "float literal is out of range for f64",
                "the largest finite f64 is about 1.8e308; write a smaller literal",
            )
            .label("overflows to infinity"),
        ),
        _ => None,
    }
}

fn stray_char(ch: char, span: Span) -> Diagnostic {
    let help = match ch {
        '.' => "ranges are written `lo..hi`; floats need a digit before and after the point, as in `2.0`".to_string(),
        '"' | '\'' => "the language has no strings or characters".to_string(),
        _ => "remove it; identifiers are ASCII letters, digits and `_`".to_string(),
    };
    Diagnostic::new(
        span,
        if ch.is_ascii_graphic() || (!ch.is_control() && !ch.is_whitespace()) {
            format!("unexpected character `{ch}`")
        } else {
            format!("unexpected character `{}`", ch.escape_debug())
        },
        help,
    )
    .label("not part of any token")
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenKind::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn punctuation_and_keywords() {
        assert_eq!(
            kinds("fn f(x: mut [f64]) -> f64 { x[0] ^ -2 } // c"),
            vec![
                Fn, Ident, LParen, Ident, Colon, Mut, LBracket, Ident, RBracket, RParen, Arrow,
                Ident, LBrace, Ident, LBracket, Int, RBracket, Caret, Minus, Int, RBrace, Eof
            ]
        );
        assert_eq!(
            kinds("== != <= >= < > && || .. = ! % #"),
            vec![
                EqEq, NotEq, Le, Ge, Lt, Gt, AndAnd, OrOr, DotDot, Assign, Bang, Percent, Hash, Eof
            ]
        );
        assert_eq!(
            kinds("& | << >> &&& <<= >>="),
            vec![Amp, Pipe, Shl, Shr, AndAnd, Amp, Shl, Assign, Shr, Assign, Eof]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("2 2.0 1e-3 1.5E+10 0..n"),
            vec![Int, Float, Float, Float, Int, DotDot, Ident, Eof]
        );
        assert_eq!(kinds("9223372036854775807"), vec![Int, Eof]);
        let errs = lex("9223372036854775808 1e999").unwrap_err();
        assert_eq!(errs.len(), 2);
        assert!(errs[0].message.contains("too large for i64"));
        assert!(errs[1].message.contains("out of range"));
    }

    #[test]
    fn stray_characters_are_all_reported() {
        let errs = lex("fn f() { a ~ b; $ /* é */ }").unwrap_err();
        let msgs: Vec<_> = errs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "unexpected character `~`",
                "unexpected character `$`",
                "block comments are not supported",
                "unexpected character `é`",
            ]
        );
        assert_eq!(errs[3].span, Span::new(21, 23));
    }
}
