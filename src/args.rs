//! Command-line argument values: `--arg NAME=VALUE`, where VALUE is a
//! number (`2.0`, `3`, `-1e-3`, `nan`, `inf`, `-inf`), `true`/`false`, an
//! array `[2.0, 1.5]`, or `@PATH`, a value read from a file or, for `@-`,
//! standard input ([`crate::data`]); and `--args FILE`, a JSON object of
//! arguments. A value is converted to the declared type of the parameter
//! it names: `3` is an i64 for an `i64` parameter and 3.0 for an `f64`
//! one; `2.5` for an `i64` parameter is an error, and so is a number too
//! large for an f64 (`1e999`: write `inf` for infinity).

use crate::data::{self, Json, Stdin};
use crate::Error;
use adze_ir::{FuncId, Module, Type, Val};
use std::path::{Path, PathBuf};

/// Splits `NAME=VALUE`.
pub fn split_assignment(text: &str) -> Result<(&str, &str), Error> {
    text.split_once('=')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| {
            Error::Argument(format!("`--arg {}`: expected NAME=VALUE", abbreviate(text)))
        })
}

/// Where the value of an argument comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Given {
    /// `--arg NAME=VALUE`: a literal, or `@PATH`.
    Text(String),
    /// A value of the object of `--args FILE` (a string is VALUE text;
    /// a relative `@PATH` in it is taken from the file's directory).
    Json {
        /// The value.
        value: Json,
        /// The `--args` file, as given.
        file: PathBuf,
    },
}

/// The arguments given: each with its name, in the order given.
pub type Arguments = Vec<(String, Given)>;

/// The value of a parameter not given, by its number and the values of
/// those given ([`bind`]).
pub type Fill<'a> = &'a dyn Fn(usize, &[Option<Val>]) -> Option<Val>;

/// The entries of the JSON object of `--args FILE` (`-`: standard input).
pub fn args_file(file: &Path, stdin: &mut Stdin) -> Result<Arguments, Error> {
    let shown = format!("`--args {}`", file.display());
    let path = (file != Path::new("-")).then_some(file);
    let bytes = data::read_bytes(path, stdin, &shown)
        .map_err(|why| Error::Argument(format!("{shown}: {why}")))?;
    let entries = data::parse_json_object(&bytes)
        .map_err(|why| Error::Argument(format!("{shown}: {why}")))?;
    Ok(entries
        .into_iter()
        .map(|(name, value)| {
            let given = Given::Json {
                value,
                file: file.to_path_buf(),
            };
            (name, given)
        })
        .collect())
}

/// Builds the argument list of the function `func` of `module` from
/// `NAME=VALUE` pairs: every parameter must be given exactly once, and
/// nothing else.
pub fn bind_args(
    module: &Module,
    func: FuncId,
    pairs: &[(String, String)],
) -> Result<Vec<Val>, Error> {
    let given: Arguments = pairs
        .iter()
        .map(|(n, v)| (n.clone(), Given::Text(v.clone())))
        .collect();
    bind(module, func, &given, &mut Stdin::default(), &|_, _| None)
}

/// Builds the argument list of the function `func` of `module` from the
/// values `given` (a `--arg` given after an `--args` entry of the same
/// name replaces it; two `--arg`s of one name are an error), reading the
/// files they name. A parameter not given gets `fill(k, values)`, where
/// `values` holds what the parameters given have; without one it is an
/// error.
pub fn bind(
    module: &Module,
    func: FuncId,
    given: &Arguments,
    stdin: &mut Stdin,
    fill: Fill<'_>,
) -> Result<Vec<Val>, Error> {
    let sig = &module.func(func).sig;
    let mut chosen: Vec<Option<&Given>> = vec![None; sig.params.len()];
    for (name, g) in given {
        let Some(k) = sig.params.iter().position(|p| &p.name == name) else {
            let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
            return Err(Error::Argument(format!(
                "{} has no parameter `{name}` (its parameters: {})",
                display(module, func),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if let (Some(Given::Text(_)), Given::Text(_)) = (chosen[k], g) {
            return Err(Error::Argument(format!("`--arg {name}=..` is given twice")));
        }
        chosen[k] = Some(g);
    }
    let mut values: Vec<Option<Val>> = Vec::with_capacity(sig.params.len());
    for (p, g) in sig.params.iter().zip(&chosen) {
        values.push(match g {
            Some(g) => Some(load(&p.name, g, p.ty, stdin).map_err(Error::Argument)?),
            None => None,
        });
    }
    for k in 0..values.len() {
        if values[k].is_none() {
            let v = fill(k, &values);
            values[k] = v;
        }
    }
    sig.params
        .iter()
        .zip(values)
        .map(|(p, v)| {
            v.ok_or_else(|| {
                Error::Argument(format!(
                    "missing `--arg {}=VALUE` ({} parameter of {})",
                    p.name,
                    p.ty.a(),
                    display(module, func)
                ))
            })
        })
        .collect()
}

/// The value of the argument `name` of type `ty`; the error names where it
/// was given.
fn load(name: &str, given: &Given, ty: Type, stdin: &mut Stdin) -> Result<Val, String> {
    let (what, result) = match given {
        Given::Text(text) => {
            let what = format!("`--arg {name}={}`", abbreviate(text));
            let result = match text.strip_prefix('@') {
                Some(path) => data::source(path, None)
                    .and_then(|path| data::load(path.as_deref(), ty, stdin, &what)),
                None => parse_value(text, ty),
            };
            (what, result)
        }
        Given::Json { value, file } => {
            let what = format!("`{name}` in `--args {}`", file.display());
            let result = match value {
                Json::Str(s) if s.starts_with('@') => {
                    let base = file.parent().filter(|d| !d.as_os_str().is_empty());
                    data::source(&s[1..], base)
                        .and_then(|path| data::load(path.as_deref(), ty, stdin, &what))
                }
                value => data::json_to_val(value.clone(), ty),
            };
            (what, result)
        }
    };
    result.map_err(|why| format!("{what}: {why}"))
}

/// `text`, or its start and an ellipsis when it is long (an array of
/// thousands of numbers in a message).
fn abbreviate(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}..", &text[..i]),
        None => text.to_string(),
    }
}

/// A function as messages name it: the user's function in backquotes, a
/// derivative in the user's terms ("the forward derivative of `f`", from
/// the module's records of what it made each function from).
fn display(module: &Module, func: FuncId) -> String {
    module
        .describe_function(func)
        .unwrap_or_else(|| format!("`{}`", module.func(func).name))
}

/// Parses one value as type `ty`.
pub fn parse_value(text: &str, ty: Type) -> Result<Val, String> {
    let text = text.trim();
    match ty {
        Type::F64 => parse_f64(text).map(Val::F64),
        Type::I64 => text
            .parse::<i64>()
            .map(Val::I64)
            .map_err(|_| format!("expected an integer, got `{}`", abbreviate(text))),
        Type::Bool => match text {
            "true" => Ok(Val::Bool(true)),
            "false" => Ok(Val::Bool(false)),
            _ => Err(format!(
                "expected `true` or `false`, got `{}`",
                abbreviate(text)
            )),
        },
        Type::Array => bracketed(text, "an array like `[1.0, 2.5]`", parse_f64).map(Val::Array),
        Type::IArray => bracketed(text, "an i64 array like `[0, 2]`", |x| {
            x.parse::<i64>()
                .map_err(|_| format!("expected an integer, got `{}`", abbreviate(x)))
        })
        .map(Val::IArray),
        Type::F64x2 => Err("no parameter is an f64x2".into()),
    }
}

/// `[a, b, ..]` (or `[]`), each element read by `one`; `what` names the
/// expected form in the error.
fn bracketed<T>(
    text: &str,
    what: &str,
    one: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| format!("expected {what} or `@FILE`, got `{}`", abbreviate(text)))?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner.split(',').map(|x| one(x.trim())).collect()
}

/// Parses an f64: a decimal number (`2`, `-1.5e-3`), or `nan`, `inf`,
/// `-inf` (any case; `infinity` too), as adze prints them (`NaN`, `inf`,
/// `-inf`). A number too large for an f64 (`1e999`) is an error, not
/// infinity; one too small rounds to zero or a subnormal, as in Rust.
pub fn parse_f64(text: &str) -> Result<f64, String> {
    // The common case first: Rust's parser, which reads decimal text (and
    // the words, whose spellings are checked below) correctly rounded.
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => return Ok(x),
        Ok(_) => {}
        Err(_) => return Err(format!("expected a number, got `{}`", abbreviate(text))),
    }
    let word = text.strip_prefix('+').unwrap_or(text);
    let (negative, word) = match word.strip_prefix('-') {
        Some(w) => (true, w),
        None => (false, word),
    };
    if word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity") {
        Ok(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })
    } else if word.eq_ignore_ascii_case("nan") {
        if negative || text.starts_with('+') {
            Err(format!("expected a number, got `{text}` (write `nan`)"))
        } else {
            Ok(f64::NAN)
        }
    } else {
        Err(format!(
            "`{}` is too large for an f64 (write `inf` or `-inf` for infinity)",
            abbreviate(text)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adze_ir::{Param, Signature};

    #[test]
    fn values_follow_the_parameter_type() {
        assert_eq!(parse_value("3", Type::F64), Ok(Val::F64(3.0)));
        assert_eq!(parse_value("3", Type::I64), Ok(Val::I64(3)));
        assert!(parse_value("2.5", Type::I64).is_err());
        assert_eq!(parse_value("true", Type::Bool), Ok(Val::Bool(true)));
        assert_eq!(
            parse_value("[2.0, 1.5]", Type::Array),
            Ok(Val::Array(vec![2.0, 1.5]))
        );
        assert_eq!(parse_value("[]", Type::Array), Ok(Val::Array(vec![])));
        assert!(parse_value("[1.0, x]", Type::Array).is_err());
        assert!(parse_value("", Type::F64).is_err());
        assert!(parse_value("infx", Type::F64).is_err());
        assert!(parse_value("-nan", Type::F64).is_err());
        for (text, want) in [
            ("nan", f64::NAN),
            ("NaN", f64::NAN),
            ("inf", f64::INFINITY),
            ("+inf", f64::INFINITY),
            ("-inf", f64::NEG_INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("1e-400", 0.0),
            ("1.7976931348623157e308", f64::MAX),
        ] {
            let got = parse_f64(text).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{text}");
        }
        for big in ["1e999", "-1e309", "1.8e308"] {
            let err = parse_f64(big).unwrap_err();
            assert!(err.contains("too large for an f64"), "{big}: {err}");
        }
        assert_eq!(
            parse_value("[nan, -inf]", Type::Array).map(|v| v.to_string()),
            Ok("[NaN, -inf]".to_string())
        );
    }

    #[test]
    fn binding_checks_names() {
        let sig = Signature {
            params: vec![Param::new("x", Type::F64), Param::new("n", Type::I64)],
            results: vec![Type::F64],
        };
        let mut module = Module::new();
        let f = module.declare("f", sig).unwrap();
        let bind_args = |pairs: &[(String, String)]| super::bind_args(&module, f, pairs);
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            bind_args(&pairs(&[("n", "2"), ("x", "1.5")])).unwrap(),
            vec![Val::F64(1.5), Val::I64(2)]
        );
        let err = bind_args(&pairs(&[("x", "1")])).unwrap_err();
        assert!(err.to_string().contains("missing `--arg n=VALUE`"), "{err}");
        let err = bind_args(&pairs(&[("x", "1"), ("n", "1"), ("y", "2")])).unwrap_err();
        assert!(err.to_string().contains("no parameter `y`"), "{err}");
        let err = bind_args(&pairs(&[("x", "1"), ("x", "1"), ("n", "1")])).unwrap_err();
        assert!(err.to_string().contains("given twice"), "{err}");
    }
}
