//! Argument values in files and on standard input (`--arg NAME=@PATH`,
//! `--args FILE`), and arrays written to files (`--save NAME=PATH`).
//!
//! The format of `@PATH` follows its name: `.json` is JSON (a number, a
//! bool, a string `"NaN"`, `"inf"` or `"-inf"`, or an array of numbers and
//! those strings), `.npy` is NumPy's format (f64 or i64, any shape, read in
//! C order; [`crate::npy`]), any other name is text: whitespace-separated
//! numbers (or one `true`/`false`). Whatever the name (and for `@-`,
//! standard input), contents that start with NumPy's magic string are read
//! as `.npy`, and contents whose first non-blank character is `[`, `{` or
//! `"` as JSON. Every value is then converted to the declared type of the
//! parameter it is for, as a value on the command line is
//! ([`crate::args::parse_value`]), and exactly: an i64 element for an f64
//! array must be exactly an f64 (|n| ≤ 2^53, or a multiple of a power of
//! two beyond), an f64 for an i64 parameter a whole number in range.
//!
//! Large arrays never go through a generic JSON tree: text and flat JSON
//! arrays are read a chunk at a time and parsed in place, other JSON is
//! decoded straight into a `Vec<f64>`, and a `.npy` file's data is copied
//! (10^7 elements: about a second from text or JSON, a fifth of that
//! from `.npy`, on the shared development machine; docs/cli.md).

use crate::args::{parse_f64, parse_value};
use crate::npy;
use adze_ir::{Type, Val};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A value read from JSON, before it meets the type of its parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// A negative integer.
    Int(i64),
    /// A non-negative integer.
    UInt(u64),
    /// A number with a fraction or an exponent (or too large an integer).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string: `"NaN"`, `"inf"`, `"-inf"`; in `--args`, any VALUE text
    /// (`"@x.npy"`).
    Str(String),
    /// An array of numbers (and of the strings for non-finite numbers).
    Array(Vec<f64>),
    /// `null`.
    Null,
    /// An object (never a value of a parameter).
    Object,
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Int(_) | Json::UInt(_) | Json::Float(_) => "a number",
            Json::Bool(_) => "a bool",
            Json::Str(_) => "a string",
            Json::Array(_) => "an array",
            Json::Null => "null",
            Json::Object => "an object",
        }
    }
}

/// Decodes one JSON value (a number, a bool, a string, an array of
/// numbers).
pub fn parse_json(bytes: &[u8]) -> Result<Json, String> {
    if let Some(xs) = flat_json_array(bytes) {
        return Ok(Json::Array(xs));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = de::Deserialize::deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(value)
}

/// Decodes a JSON object of values, `{"x": [1, 2], "n": 3}`, in the order
/// written; a name given twice is an error.
pub fn parse_json_object(bytes: &[u8]) -> Result<Vec<(String, Json)>, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let entries = de.deserialize_any(ObjectVisitor).map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(entries)
}

/// The common case of a large value, read fast: a flat JSON array of
/// numbers (and `"NaN"`, `"inf"`, `"-inf"`), scanned in one pass. `None`
/// for anything else, which serde_json then reads, or words the error
/// about.
fn flat_json_array(bytes: &[u8]) -> Option<Vec<f64>> {
    let mut flat = FlatJson::default();
    flat.feed(std::str::from_utf8(bytes).ok()?, true)?;
    Some(flat.out)
}

/// A scanner of a flat JSON array that is fed its text in pieces, each
/// (but the last) ending just after a comma.
#[derive(Default)]
struct FlatJson {
    /// Whether the `[` has been read.
    opened: bool,
    out: Vec<f64>,
}

impl FlatJson {
    /// Reads the next piece; `None` if the text is not (the start of) a
    /// flat array of numbers.
    fn feed(&mut self, text: &str, last: bool) -> Option<()> {
        let b = text.as_bytes();
        let blank = |mut i: usize| {
            while b
                .get(i)
                .is_some_and(|c| matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
            {
                i += 1;
            }
            i
        };
        let mut i = blank(0);
        if !self.opened {
            if b.get(i) != Some(&b'[') {
                return None;
            }
            self.opened = true;
            i = blank(i + 1);
            if b.get(i) == Some(&b']') {
                return (last && blank(i + 1) == b.len()).then_some(());
            }
        }
        loop {
            if i == b.len() && !last {
                return Some(()); // the piece ended after a comma
            }
            let rest = &b[i..];
            let (x, len) = if rest.starts_with(b"\"NaN\"") {
                (f64::NAN, 5)
            } else if rest.starts_with(b"\"inf\"") {
                (f64::INFINITY, 5)
            } else if rest.starts_with(b"\"-inf\"") {
                (f64::NEG_INFINITY, 6)
            } else {
                let len = json_number_len(rest)?;
                // A number is ASCII: its ends are char boundaries.
                let x: f64 = text.get(i..i + len)?.parse().ok()?;
                if x.is_infinite() {
                    return None; // too large: serde_json says so
                }
                (x, len)
            };
            self.out.push(x);
            i = blank(i + len);
            match b.get(i) {
                Some(b',') => i = blank(i + 1),
                Some(b']') if last => return (blank(i + 1) == b.len()).then_some(()),
                _ => return None,
            }
        }
    }
}

/// The length of the JSON number at the start of `b`,
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; `None` if there is
/// none.
fn json_number_len(b: &[u8]) -> Option<usize> {
    let digits = |mut i: usize| {
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > start).then_some(i)
    };
    let mut i = usize::from(b.first() == Some(&b'-'));
    let int = digits(i)?;
    if b[i] == b'0' && int > i + 1 {
        return None; // a leading zero
    }
    i = int;
    if b.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(i)?;
    }
    Some(i)
}

fn json_error(e: serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("invalid JSON: {e}")
        }
        // Valid JSON, but not a value adze reads.
        _ => e.to_string(),
    }
}

impl<'de> de::Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, a bool or an array of numbers")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::UInt(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Str(v.to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(x) = seq.next_element_seed(Element { index: out.len() })? {
            out.push(x);
        }
        Ok(Json::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Json::Object)
    }
}

/// An element of a JSON array, at `index`: a number, or `"NaN"`, `"inf"`,
/// `"-inf"`. Its errors say where it is (syntax errors are serde_json's).
#[derive(Copy, Clone)]
struct Element {
    index: usize,
}

impl Element {
    fn not_a_number<E: de::Error>(self, got: fmt::Arguments<'_>) -> E {
        E::custom(format_args!(
            "at index {} of the array: expected a number, got {got}",
            self.index
        ))
    }
}

impl<'de> de::DeserializeSeed<'de> for Element {
    type Value = f64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Element {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a number or \"NaN\", \"inf\", \"-inf\" at index {} of the array",
            self.index
        )
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        // The nearest f64, as the decimal text would give.
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        // A non-finite number, spelled as on the command line.
        match parse_f64(v) {
            Ok(x) if !x.is_finite() => Ok(x),
            _ => Err(self.not_a_number(format_args!("the string \"{v}\""))),
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<f64, E> {
        Err(self.not_a_number(format_args!("`{v}`")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
        Err(self.not_a_number(format_args!("null")))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<f64, A::Error> {
        Err(self.not_a_number(format_args!("an object")))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<f64, A::Error> {
        Err(de::Error::custom(format_args!(
            "at index {} of the array: nested arrays are not read: give a flat array \
             (or a .npy file of any shape)",
            self.index
        )))
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Vec<(String, Json)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of arguments, {\"NAME\": VALUE, ..}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: Vec<(String, Json)> = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if out.iter().any(|(n, _)| *n == name) {
                return Err(de::Error::custom(format_args!("`{name}` is given twice")));
            }
            let value = map
                .next_value::<Json>()
                .map_err(|e| de::Error::custom(format_args!("`{name}`: {e}")))?;
            out.push((name, value));
        }
        Ok(out)
    }
}

/// Converts a JSON value to the type `ty` (a string as VALUE text, which
/// is how `"NaN"`, `"inf"` and `"-inf"` read back).
pub fn json_to_val(json: Json, ty: Type) -> Result<Val, String> {
    let wrong = |j: &Json| format!("expected {}, got {}", type_phrase(ty), j.kind());
    match (ty, json) {
        (_, Json::Str(s)) => parse_value(&s, ty),
        (Type::F64, Json::Float(x)) => Ok(Val::F64(x)),
        (Type::F64, Json::Int(n)) => Ok(Val::F64(n as f64)),
        (Type::F64, Json::UInt(n)) => Ok(Val::F64(n as f64)),
        (Type::I64, Json::Int(n)) => Ok(Val::I64(n)),
        (Type::I64, Json::UInt(n)) => i64::try_from(n)
            .map(Val::I64)
            .map_err(|_| format!("{n} is out of the range of an i64")),
        (Type::I64, Json::Float(x)) => Err(format!("expected an integer, got {x:?}")),
        (Type::Bool, Json::Bool(b)) => Ok(Val::Bool(b)),
        (Type::Array, Json::Array(xs)) => Ok(Val::Array(xs)),
        (Type::IArray, Json::Array(xs)) => xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                exact_i64(x)
                    .ok_or_else(|| format!("the element {x:?} at index {i} is not an integer"))
            })
            .collect::<Result<Vec<i64>, String>>()
            .map(Val::IArray),
        (_, j) => Err(wrong(&j)),
    }
}

fn type_phrase(ty: Type) -> &'static str {
    match ty {
        Type::F64 => "a number",
        Type::I64 => "an integer",
        Type::Bool => "`true` or `false`",
        Type::Array => "an array",
        Type::IArray => "an array of integers",
        Type::F64x2 => "two f64 lanes",
    }
}

/// Standard input, which one value at most reads (`@-`).
#[derive(Debug, Default)]
pub struct Stdin {
    read_by: Option<String>,
}

impl Stdin {
    /// All of standard input, for `who` (what the error names if a second
    /// value asks for it).
    pub fn read(&mut self, who: &str) -> Result<Vec<u8>, String> {
        self.claim(who)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(bytes)
    }
}

impl Stdin {
    /// Takes standard input for `who`: an error if another value has.
    fn claim(&mut self, who: &str) -> Result<(), String> {
        if let Some(first) = &self.read_by {
            return Err(format!(
                "standard input is read once, and {first} reads it already"
            ));
        }
        self.read_by = Some(who.to_string());
        Ok(())
    }
}

/// How a file's bytes are read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Npy,
    Text,
}

/// The format of `bytes` read from `path` (`None`: standard input).
fn format_of(path: Option<&Path>, bytes: &[u8]) -> Format {
    let ext = path
        .and_then(Path::extension)
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("json") => Format::Json,
        Some("npy") => Format::Npy,
        _ if bytes.starts_with(npy::MAGIC) => Format::Npy,
        _ => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[' | b'{' | b'"') => Format::Json,
            _ => Format::Text,
        },
    }
}

/// `PATH` of `@PATH`, resolved: `-` is standard input; a relative path is
/// taken from `base` (the directory of an `--args` file) when there is
/// one.
pub fn source(path: &str, base: Option<&Path>) -> Result<Option<PathBuf>, String> {
    if path == "-" {
        return Ok(None);
    }
    if path.is_empty() {
        return Err("expected a file name after `@` (or `@-` for standard input)".into());
    }
    let p = Path::new(path);
    Ok(Some(match base {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    }))
}

/// Reads the bytes of `path` (`None`: standard input, for `who`).
pub fn read_bytes(path: Option<&Path>, stdin: &mut Stdin, who: &str) -> Result<Vec<u8>, String> {
    match path {
        Some(p) => std::fs::read(p)
            .map_err(|e| format!("cannot read `{}`: {}", p.display(), io_reason(&e))),
        None => stdin.read(who),
    }
}

/// An I/O error without Rust's `(os error N)`.
pub fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The value `@PATH` names (`path` as [`source`] resolved it; `None`:
/// standard input, for `who`), as type `ty`. The error names the file.
pub fn load(path: Option<&Path>, ty: Type, stdin: &mut Stdin, who: &str) -> Result<Val, String> {
    let (name, loaded) = match path {
        Some(p) => {
            let file = std::fs::File::open(p)
                .map_err(|e| format!("cannot read `{}`: {}", p.display(), io_reason(&e)))?;
            let loaded = match load_from(file, path, ty, true) {
                // Not a flat array of numbers: read again, whole, by serde.
                Err(Failure::NotFlat) => std::fs::read(p)
                    .map_err(Failure::Io)
                    .and_then(|bytes| decode(path, &bytes, ty).map_err(Failure::Data)),
                loaded => loaded,
            };
            (format!("`{}`", p.display()), loaded)
        }
        None => {
            stdin.claim(who)?;
            let input = std::io::stdin().lock();
            let loaded = load_from(input, None, ty, false);
            ("standard input".to_string(), loaded)
        }
    };
    loaded.map_err(|failure| match failure {
        Failure::Io(e) => format!("cannot read {name}: {}", io_reason(&e)),
        Failure::Data(why) => format!("{name}: {why}"),
        Failure::NotFlat => format!("{name}: not a flat JSON array"),
    })
}

/// Why a value could not be loaded.
enum Failure {
    /// Reading failed.
    Io(std::io::Error),
    /// The contents are not a value of the type.
    Data(String),
    /// A JSON file read a chunk at a time is not a flat array of numbers:
    /// it is to be read again whole.
    NotFlat,
}

/// How much of a file is read at a time.
const CHUNK: u64 = 1 << 20;

/// Reads a value of type `ty` from `reader` (what `path` names): an array
/// a chunk at a time from text, and from JSON when it can be read again
/// (`rereadable`: JSON that is not a flat array of numbers is then
/// [`Failure::NotFlat`]); anything else whole.
fn load_from(
    mut reader: impl Read,
    path: Option<&Path>,
    ty: Type,
    rereadable: bool,
) -> Result<Val, Failure> {
    let mut head = Vec::new();
    (&mut reader)
        .take(CHUNK)
        .read_to_end(&mut head)
        .map_err(Failure::Io)?;
    match format_of(path, &head) {
        Format::Text if ty == Type::Array => {
            let mut out = Vec::with_capacity(head.len() / 8);
            let blank = |b: &[u8]| b.iter().rposition(u8::is_ascii_whitespace);
            by_chunks(head, reader, blank, |text, _| {
                for word in words(text) {
                    let number = parse_f64(word)
                        .map_err(|why| Failure::Data(format!("number {}: {why}", out.len() + 1)))?;
                    out.push(number);
                }
                Ok(())
            })?;
            Ok(Val::Array(out))
        }
        Format::Json if ty == Type::Array && rereadable => {
            let mut flat = FlatJson::default();
            let comma = |b: &[u8]| b.iter().rposition(|&c| c == b',');
            by_chunks(head, reader, comma, |text, last| {
                flat.feed(text, last).ok_or(Failure::NotFlat)
            })?;
            Ok(Val::Array(flat.out))
        }
        _ => {
            reader.read_to_end(&mut head).map_err(Failure::Io)?;
            decode(path, &head, ty).map_err(Failure::Data)
        }
    }
}

/// Reads `reader` a chunk at a time after the bytes `head` already read
/// from it, and gives `each` the text up to and including the last
/// separator (`cut` finds it) of what it has, then, with `true`, the rest:
/// 10^7 numbers never sit in memory as 200 MB of text.
fn by_chunks(
    head: Vec<u8>,
    mut reader: impl Read,
    cut: impl Fn(&[u8]) -> Option<usize>,
    mut each: impl FnMut(&str, bool) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut buf = head;
    let mut eof = false;
    loop {
        let whole = match eof {
            true => buf.len(),
            false => cut(&buf).map_or(0, |i| i + 1),
        };
        if whole > 0 || eof {
            // The cut is at an ASCII byte: whole UTF-8 if the text is.
            let text = std::str::from_utf8(&buf[..whole])
                .map_err(|_| Failure::Data("neither text (UTF-8) nor a .npy file".into()))?;
            each(text, eof)?;
        }
        if eof {
            return Ok(());
        }
        buf.drain(..whole);
        let before = buf.len();
        (&mut reader)
            .take(CHUNK)
            .read_to_end(&mut buf)
            .map_err(Failure::Io)?;
        eof = buf.len() == before;
    }
}

/// Decodes the bytes of a value file as type `ty`.
pub fn decode(path: Option<&Path>, bytes: &[u8], ty: Type) -> Result<Val, String> {
    match format_of(path, bytes) {
        Format::Json => json_to_val(parse_json(bytes)?, ty),
        Format::Npy => npy_to_val(npy::read(bytes)?, ty),
        Format::Text => text_to_val(bytes, ty),
    }
}

/// Whitespace-separated numbers (an array), or one value of a scalar type.
fn text_to_val(bytes: &[u8], ty: Type) -> Result<Val, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "neither text (UTF-8) nor a .npy file".to_string())?;
    let mut words = words(text);
    if ty == Type::IArray {
        let mut out = Vec::new();
        for (i, w) in words.enumerate() {
            out.push(
                w.parse::<i64>()
                    .map_err(|_| format!("number {}: expected an integer, got `{w}`", i + 1))?,
            );
        }
        return Ok(Val::IArray(out));
    }
    if ty == Type::Array {
        let mut out = Vec::with_capacity(bytes.len() / 8);
        for (i, w) in words.enumerate() {
            out.push(parse_f64(w).map_err(|why| format!("number {}: {why}", i + 1))?);
        }
        return Ok(Val::Array(out));
    }
    match (words.next(), words.next()) {
        (Some(w), None) => parse_value(w, ty),
        (None, _) => Err(format!("expected {}, got nothing", type_phrase(ty))),
        (Some(_), Some(_)) => Err(format!(
            "expected one value ({}), got several",
            type_phrase(ty)
        )),
    }
}

/// The words of `text` between ASCII whitespace (what
/// `split_ascii_whitespace` gives, a good deal faster on 10^7 numbers).
fn words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        let start = i;
        while bytes.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
            i += 1;
        }
        // Both ends are at ASCII bytes or the end: char boundaries.
        text.get(start..i).filter(|w| !w.is_empty())
    })
}

/// An f64 that is exactly the i64 `n`.
fn exact_f64(n: i64) -> Option<f64> {
    let x = n as f64;
    (x as i128 == i128::from(n)).then_some(x)
}

/// An i64 that is exactly the f64 `x`.
fn exact_i64(x: f64) -> Option<i64> {
    // -2^63 <= x < 2^63, whole.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (x.fract() == 0.0 && (-TWO_63..TWO_63).contains(&x)).then_some(x as i64)
}

/// The elements of a `.npy` array as type `ty`: an array of any shape, or
/// the one element of a scalar's.
fn npy_to_val(a: npy::Array, ty: Type) -> Result<Val, String> {
    if !ty.is_array() && a.len() != 1 {
        return Err(format!(
            "expected one number ({}), got an array of shape {}",
            type_phrase(ty),
            a.shape_text()
        ));
    }
    let not_exact = |i: usize, what: String, to: &str| {
        let at = if ty.is_array() {
            format!(" at index {i}")
        } else {
            String::new()
        };
        format!("the element {what}{at} is not exactly {to}")
    };
    match (ty, a.elements) {
        (Type::Array, npy::Elements::F64(xs)) => Ok(Val::Array(xs)),
        (Type::Array, npy::Elements::I64(ns)) => ns
            .iter()
            .enumerate()
            .map(|(i, &n)| exact_f64(n).ok_or_else(|| not_exact(i, n.to_string(), "an f64")))
            .collect::<Result<Vec<f64>, String>>()
            .map(Val::Array),
        (Type::F64, npy::Elements::F64(xs)) => Ok(Val::F64(xs[0])),
        (Type::F64, npy::Elements::I64(ns)) => exact_f64(ns[0])
            .map(Val::F64)
            .ok_or_else(|| not_exact(0, ns[0].to_string(), "an f64")),
        (Type::I64, npy::Elements::I64(ns)) => Ok(Val::I64(ns[0])),
        (Type::I64, npy::Elements::F64(xs)) => exact_i64(xs[0])
            .map(Val::I64)
            .ok_or_else(|| not_exact(0, format!("{:?}", xs[0]), "an i64")),
        (Type::IArray, npy::Elements::I64(ns)) => Ok(Val::IArray(ns)),
        (Type::IArray, npy::Elements::F64(xs)) => xs
            .iter()
            .enumerate()
            .map(|(i, &x)| exact_i64(x).ok_or_else(|| not_exact(i, format!("{x:?}"), "an i64")))
            .collect::<Result<Vec<i64>, String>>()
            .map(Val::IArray),
        (Type::Bool, _) => Err("a .npy file holds numbers, not a bool".into()),
        (Type::F64x2, _) => Err("no parameter is an f64x2".into()),
    }
}

/// Writes `value` (an array, or an f64 or i64) to `path`: `.npy` for a
/// `.npy` name, a JSON array for `.json` (non-finite numbers as the strings
/// `"NaN"`, `"inf"`, `"-inf"`), else one number a line; every one reads
/// back as the same bits.
pub fn save(path: &Path, value: &Val) -> Result<(), String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let (shape, elements): (Vec<usize>, npy::Elements) = match value {
        Val::Array(xs) => (vec![xs.len()], npy::Elements::F64(xs.clone())),
        Val::IArray(ns) => (vec![ns.len()], npy::Elements::I64(ns.clone())),
        Val::F64(x) => (vec![], npy::Elements::F64(vec![*x])),
        Val::I64(n) => (vec![], npy::Elements::I64(vec![*n])),
        Val::Bool(_) => return Err("a bool cannot be saved".into()),
    };
    let bytes = match ext.as_deref() {
        Some("npy") => npy::write(&shape, &elements),
        json_or_text => {
            let words: Vec<String> = match &elements {
                npy::Elements::F64(xs) => xs
                    .iter()
                    .map(|x| match (x.is_finite(), json_or_text) {
                        (false, Some("json")) => format!("\"{x}\""),
                        _ => format!("{x:?}"),
                    })
                    .collect(),
                npy::Elements::I64(ns) => ns.iter().map(i64::to_string).collect(),
            };
            let text = match (json_or_text, value) {
                (Some("json"), Val::Array(_) | Val::IArray(_)) => {
                    format!("[{}]\n", words.join(", "))
                }
                _ => {
                    let mut t = words.join("\n");
                    t.push('\n');
                    t
                }
            };
            text.into_bytes()
        }
    };
    std::fs::write(path, bytes)
        .map_err(|e| format!("cannot write `{}`: {}", path.display(), io_reason(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(v: Val) -> Vec<u64> {
        match v {
            Val::Array(xs) => xs.into_iter().map(f64::to_bits).collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn json_values_meet_their_types() {
        let j = |s: &str, ty| parse_json(s.as_bytes()).and_then(|j| json_to_val(j, ty));
        assert_eq!(j("2.5", Type::F64), Ok(Val::F64(2.5)));
        assert_eq!(j("3", Type::F64), Ok(Val::F64(3.0)));
        assert_eq!(j("-3", Type::I64), Ok(Val::I64(-3)));
        assert!(j("3.5", Type::I64)
            .unwrap_err()
            .contains("expected an integer"));
        assert_eq!(j("\"inf\"", Type::F64), Ok(Val::F64(f64::INFINITY)));
        assert_eq!(j("true", Type::Bool), Ok(Val::Bool(true)));
        let nan = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.0, 0.1];
        assert_eq!(
            floats(j(r#"["NaN", "inf", "-inf", 1, 0.1]"#, Type::Array).unwrap()),
            nan.map(f64::to_bits)
        );
        assert!(j("[1, [2]]", Type::Array)
            .unwrap_err()
            .contains("nested arrays"));
        assert!(j("[1, true]", Type::Array)
            .unwrap_err()
            .contains("at index 1 of the array: expected a number, got `true`"));
        assert!(j("[1, 2", Type::Array)
            .unwrap_err()
            .starts_with("invalid JSON"));
        assert!(j("1e999", Type::F64).is_err());
        assert!(j("[1, 1e999]", Type::Array)
            .unwrap_err()
            .contains("out of range"));
        for (text, fast) in [
            ("[0, -0.5, 1e3, 2E-2, 3.25e+1]", true),
            (" [ ] ", true),
            ("[01]", false),
            ("[1.]", false),
            ("[.5]", false),
            ("[+1]", false),
            ("[1e]", false),
            ("[\"a,b\"]", false),
            ("[[1]]", false),
        ] {
            assert_eq!(flat_json_array(text.as_bytes()).is_some(), fast, "{text}");
        }
        assert_eq!(
            words(" a\tbb \n c ").collect::<Vec<_>>(),
            vec!["a", "bb", "c"]
        );
        assert!(j("[1]", Type::F64)
            .unwrap_err()
            .contains("expected a number, got an array"));
        let obj = parse_json_object(br#"{"x": [1, 2], "n": 3}"#).unwrap();
        assert_eq!(obj[0], ("x".to_string(), Json::Array(vec![1.0, 2.0])));
        assert_eq!(obj[1], ("n".to_string(), Json::UInt(3)));
        assert!(parse_json_object(br#"{"x": 1, "x": 2}"#)
            .unwrap_err()
            .contains("`x` is given twice"));
        assert!(parse_json_object(b"[1]").is_err());
    }

    #[test]
    fn json_floats_round_trip_exactly() {
        // Numbers serde_json's default (fast) parser reads 1 ulp off.
        for x in [
            0.1 + 0.2,
            1.0 / 3.0,
            2.2250738585072014e-308,
            9007199254740993.0,
            1.7976931348623157e308,
            5e-324,
            0.30000000000000004,
            123456.789e-200,
        ] {
            let text = serde_json::to_string(&x).unwrap();
            let back = json_to_val(parse_json(text.as_bytes()).unwrap(), Type::F64).unwrap();
            assert_eq!(back, Val::F64(x), "{text}");
        }
    }

    #[test]
    fn text_is_read_a_chunk_at_a_time() {
        // 3.5 MB of numbers: words straddle the chunk boundaries.
        let n = 500_000;
        let text: String = (0..n).map(|i| format!("{i}.5\t")).collect();
        let all = load_from(text.as_bytes(), None, Type::Array, false)
            .ok()
            .unwrap();
        let Val::Array(xs) = all else {
            panic!("not an array")
        };
        assert_eq!(xs.len(), n);
        assert!(xs.iter().enumerate().all(|(i, &x)| x == i as f64 + 0.5));
        let bad = format!("{text}1 x");
        match load_from(bad.as_bytes(), None, Type::Array, false) {
            Err(Failure::Data(why)) => assert!(why.starts_with("number 500002: "), "{why}"),
            _ => panic!("not an error"),
        }
    }

    #[test]
    fn json_is_read_a_chunk_at_a_time() {
        let n = 300_000;
        let items: Vec<String> = (0..n).map(|i| format!("{i}.25")).collect();
        let json = format!(" [ {}, \"inf\" ]\n", items.join(" ,\n"));
        let all = load_from(json.as_bytes(), None, Type::Array, true)
            .ok()
            .unwrap();
        let Val::Array(xs) = all else {
            panic!("not an array")
        };
        assert_eq!(xs.len(), n + 1);
        assert!(xs[..n]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as f64 + 0.25));
        assert_eq!(xs[n], f64::INFINITY);
        for small in ["[1.5]", "[]", "[1, 2]"] {
            assert!(load_from(small.as_bytes(), None, Type::Array, true).is_ok());
        }
        for other in [
            "[1, [2]]",
            "[1,]",
            "[1] 2",
            "{\"x\": 1}",
            &format!("{json}]"),
        ] {
            let failed = load_from(other.as_bytes(), None, Type::Array, true);
            assert!(matches!(failed, Err(Failure::NotFlat)), "{other:.20}");
        }
    }

    #[test]
    fn text_and_npy_values() {
        let t = |s: &str, ty| decode(Some(Path::new("x.txt")), s.as_bytes(), ty);
        assert_eq!(
            t(" 1 2.5\n-3\tinf ", Type::Array).map(floats),
            Ok(vec![
                1f64.to_bits(),
                2.5f64.to_bits(),
                (-3f64).to_bits(),
                f64::INFINITY.to_bits()
            ])
        );
        assert_eq!(t("7\n", Type::I64), Ok(Val::I64(7)));
        assert!(t("1 2", Type::F64).unwrap_err().contains("got several"));
        assert!(t("1 x 3", Type::Array)
            .unwrap_err()
            .starts_with("number 2:"));
        // Sniffed: JSON and .npy whatever the name.
        assert_eq!(t("[1, 2]", Type::Array), Ok(Val::Array(vec![1.0, 2.0])));
        let ints = npy::write(&[3], &npy::Elements::I64(vec![1, -2, 1 << 53]));
        let val = decode(None, &ints, Type::Array).unwrap();
        assert_eq!(val, Val::Array(vec![1.0, -2.0, 9007199254740992.0]));
        let inexact = npy::write(&[2], &npy::Elements::I64(vec![1, (1 << 53) + 1]));
        assert_eq!(
            decode(None, &inexact, Type::Array).unwrap_err(),
            "the element 9007199254740993 at index 1 is not exactly an f64"
        );
        let one = npy::write(&[1, 1], &npy::Elements::F64(vec![4.0]));
        assert_eq!(decode(None, &one, Type::I64), Ok(Val::I64(4)));
        let many = npy::write(&[2], &npy::Elements::F64(vec![4.0, 5.0]));
        assert!(decode(None, &many, Type::F64)
            .unwrap_err()
            .contains("shape (2,)"));
        assert_eq!(exact_i64(-(2f64.powi(63))), Some(i64::MIN));
        assert_eq!(exact_i64(2f64.powi(63)), None);
        assert_eq!(exact_f64(i64::MAX), None);
    }
}
