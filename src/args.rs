//! Command-line argument values: `--arg NAME=VALUE`, where VALUE is a number
//! (`2.0`, `3`, `-1e-3`), `true`/`false`, or an array `[2.0, 1.5]`. A value is
//! converted to the declared type of the parameter it names: `3` is an i64
//! for an `i64` parameter and 3.0 for an `f64` one; `2.5` for an `i64`
//! parameter is an error.

use crate::Error;
use adze_ir::{FuncId, Module, Type, Val};

/// Splits `NAME=VALUE`.
pub fn split_assignment(text: &str) -> Result<(&str, &str), Error> {
    text.split_once('=')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| Error::Argument(format!("`--arg {text}`: expected NAME=VALUE")))
}

/// Builds the argument list of the function `func` of `module` from
/// `NAME=VALUE` pairs: every parameter must be given exactly once, and
/// nothing else.
pub fn bind_args(
    module: &Module,
    func: FuncId,
    pairs: &[(String, String)],
) -> Result<Vec<Val>, Error> {
    let sig = &module.func(func).sig;
    for (i, (name, _)) in pairs.iter().enumerate() {
        if !sig.params.iter().any(|p| &p.name == name) {
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
        }
        if pairs[..i].iter().any(|(n, _)| n == name) {
            return Err(Error::Argument(format!("`--arg {name}=..` is given twice")));
        }
    }
    sig.params
        .iter()
        .map(|p| {
            let (_, text) = pairs.iter().find(|(n, _)| n == &p.name).ok_or_else(|| {
                Error::Argument(format!(
                    "missing `--arg {}=VALUE` ({} parameter of {})",
                    p.name,
                    describe(p.ty),
                    display(module, func)
                ))
            })?;
            parse_value(text, p.ty)
                .map_err(|why| Error::Argument(format!("`--arg {}={text}`: {why}", p.name)))
        })
        .collect()
}

/// A function as messages name it: the user's function in backquotes, a
/// derivative in the user's terms ("the forward derivative of `f`", from
/// the module's records of what it made each function from).
fn display(module: &Module, func: FuncId) -> String {
    module
        .describe_function(func)
        .unwrap_or_else(|| format!("`{}`", module.func(func).name))
}

fn describe(ty: Type) -> &'static str {
    match ty {
        Type::F64 => "an f64",
        Type::I64 => "an i64",
        Type::Bool => "a bool",
        Type::Array => "an array",
        Type::IArray => "an i64 array",
    }
}

/// Parses one value as type `ty`.
pub fn parse_value(text: &str, ty: Type) -> Result<Val, String> {
    let text = text.trim();
    match ty {
        Type::F64 => parse_f64(text).map(Val::F64),
        Type::I64 => text
            .parse::<i64>()
            .map(Val::I64)
            .map_err(|_| format!("expected an integer, got `{text}`")),
        Type::Bool => match text {
            "true" => Ok(Val::Bool(true)),
            "false" => Ok(Val::Bool(false)),
            _ => Err(format!("expected `true` or `false`, got `{text}`")),
        },
        Type::Array => {
            let inner = text
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .ok_or_else(|| format!("expected an array like `[1.0, 2.5]`, got `{text}`"))?;
            if inner.trim().is_empty() {
                return Ok(Val::Array(Vec::new()));
            }
            inner
                .split(',')
                .map(|x| parse_f64(x.trim()))
                .collect::<Result<Vec<f64>, String>>()
                .map(Val::Array)
        }
        Type::IArray => {
            let inner = text
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .ok_or_else(|| format!("expected an i64 array like `[0, 2]`, got `{text}`"))?;
            if inner.trim().is_empty() {
                return Ok(Val::IArray(Vec::new()));
            }
            inner
                .split(',')
                .map(|x| {
                    let x = x.trim();
                    x.parse::<i64>()
                        .map_err(|_| format!("expected an integer, got `{x}`"))
                })
                .collect::<Result<Vec<i64>, String>>()
                .map(Val::IArray)
        }
    }
}

fn parse_f64(text: &str) -> Result<f64, String> {
    let ok = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
    match text.parse::<f64>() {
        Ok(x) if ok => Ok(x),
        _ => Err(format!("expected a number, got `{text}`")),
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
        assert!(parse_value("inf", Type::F64).is_err());
        assert!(parse_value("", Type::F64).is_err());
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
