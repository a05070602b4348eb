//! Reading an eval's JSON input into flat buffers, and writing outputs.
//!
//! Every reader names the field it was reading in its error, which becomes
//! the `error` of a failed `evaluate` response.

use serde_json::Value;

/// A problem with an input, as the message of a protocol error.
pub type InputError = String;

/// Field `name` of the object `v`.
pub fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value, InputError> {
    v.get(name)
        .ok_or_else(|| format!("the input has no field `{name}`"))
}

/// A number.
pub fn f64_of(v: &Value, what: &str) -> Result<f64, InputError> {
    v.as_f64()
        .ok_or_else(|| format!("`{what}` must be a number, not {}", kind(v)))
}

/// An integer (a JSON number with no fraction).
pub fn i64_of(v: &Value, what: &str) -> Result<i64, InputError> {
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Ok(x as i64),
        _ => Err(format!("`{what}` must be an integer, not {}", kind(v))),
    }
}

/// A non-negative integer that sizes something.
pub fn count_of(v: &Value, what: &str) -> Result<usize, InputError> {
    let i = i64_of(v, what)?;
    usize::try_from(i).map_err(|_| format!("`{what}` must not be negative (it is {i})"))
}

/// A boolean.
pub fn bool_of(v: &Value, what: &str) -> Result<bool, InputError> {
    v.as_bool()
        .ok_or_else(|| format!("`{what}` must be true or false, not {}", kind(v)))
}

fn array_of<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, InputError> {
    v.as_array()
        .ok_or_else(|| format!("`{what}` must be an array, not {}", kind(v)))
}

/// An array of numbers.
pub fn vec_f64(v: &Value, what: &str) -> Result<Vec<f64>, InputError> {
    array_of(v, what)?
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .ok_or_else(|| format!("`{what}[{i}]` must be a number, not {}", kind(x)))
        })
        .collect()
}

/// An array of integers.
pub fn vec_i64(v: &Value, what: &str) -> Result<Vec<i64>, InputError> {
    array_of(v, what)?
        .iter()
        .enumerate()
        .map(|(i, x)| i64_of(x, &format!("{what}[{i}]")))
        .collect()
}

/// A rectangular nested array of numbers of any depth (a matrix, a list of
/// matrices), flattened in row-major order; `shape` is its size along each
/// dimension (an empty outer array has shape `[0]`).
pub struct Tensor<T> {
    /// The elements, row-major.
    pub data: Vec<T>,
    /// The size of each dimension, outermost first.
    pub shape: Vec<usize>,
}

impl<T> Tensor<T> {
    /// The size of dimension `i` (0 when the tensor has fewer dimensions).
    pub fn dim(&self, i: usize) -> usize {
        self.shape.get(i).copied().unwrap_or(0)
    }

    /// Checks the shape against `want` (`None` accepts any size).
    pub fn expect(&self, what: &str, want: &[Option<usize>]) -> Result<(), InputError> {
        let fits = self.shape.len() == want.len()
            || (self.data.is_empty() && self.shape.len() < want.len());
        let sizes_fit = self
            .shape
            .iter()
            .zip(want)
            .all(|(have, want)| want.is_none_or(|w| w == *have));
        if fits && sizes_fit {
            Ok(())
        } else {
            let want: Vec<String> = want
                .iter()
                .map(|w| w.map_or("_".to_string(), |w| w.to_string()))
                .collect();
            Err(format!(
                "`{what}` has shape {:?}, expected [{}]",
                self.shape,
                want.join(", ")
            ))
        }
    }
}

fn tensor<T>(
    v: &Value,
    what: &str,
    leaf: &dyn Fn(&Value, &str) -> Result<T, InputError>,
) -> Result<Tensor<T>, InputError> {
    let mut shape = Vec::new();
    let mut probe = v;
    while let Some(a) = probe.as_array() {
        shape.push(a.len());
        match a.first() {
            Some(first) => probe = first,
            None => break,
        }
    }
    if shape.is_empty() {
        return Err(format!("`{what}` must be an array, not {}", kind(v)));
    }
    let mut data = Vec::with_capacity(shape.iter().product());
    flatten(v, what, &shape, &mut data, leaf)?;
    Ok(Tensor { data, shape })
}

fn flatten<T>(
    v: &Value,
    what: &str,
    shape: &[usize],
    out: &mut Vec<T>,
    leaf: &dyn Fn(&Value, &str) -> Result<T, InputError>,
) -> Result<(), InputError> {
    match shape.split_first() {
        None => {
            out.push(leaf(v, what)?);
            Ok(())
        }
        Some((&n, rest)) => {
            let a = array_of(v, what)?;
            if a.len() != n {
                return Err(format!(
                    "`{what}` has {} elements where its siblings have {n} (the array must be rectangular)",
                    a.len()
                ));
            }
            for (i, x) in a.iter().enumerate() {
                flatten(x, &format!("{what}[{i}]"), rest, out, leaf)?;
            }
            Ok(())
        }
    }
}

/// A rectangular nested array of numbers, flattened (row-major).
pub fn tensor_f64(v: &Value, what: &str) -> Result<Tensor<f64>, InputError> {
    tensor(v, what, &f64_of)
}

/// A rectangular nested array of integers, flattened (row-major).
pub fn tensor_i64(v: &Value, what: &str) -> Result<Tensor<i64>, InputError> {
    tensor(v, what, &i64_of)
}

/// `rows` rows of `cols` numbers from a flat row-major buffer.
pub fn rows_json(data: &[f64], cols: usize) -> Value {
    if cols == 0 {
        return Value::Array(Vec::new());
    }
    Value::Array(data.chunks(cols).map(|row| row.into()).collect())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tensors_flatten_row_major_and_check_their_shape() {
        let t = tensor_f64(&json!([[[1, 2], [3, 4]], [[5, 6], [7, 8]]]), "m").unwrap();
        assert_eq!(t.shape, [2, 2, 2]);
        assert_eq!(t.data, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        t.expect("m", &[Some(2), None, Some(2)]).unwrap();
        assert!(t.expect("m", &[Some(2), Some(2)]).is_err());
        let ragged = tensor_f64(&json!([[1, 2], [3]]), "m").err().unwrap();
        assert!(ragged.contains("`m[1]` has 1 elements"), "{ragged}");
        let empty = tensor_f64(&json!([]), "us").unwrap();
        empty.expect("us", &[Some(0), Some(2)]).unwrap();
    }

    #[test]
    fn scalars_name_the_field_in_their_errors() {
        assert_eq!(i64_of(&json!(3.0), "n"), Ok(3));
        assert!(i64_of(&json!(3.5), "n")
            .unwrap_err()
            .contains("`n` must be an integer"));
        assert!(count_of(&json!(-1), "n").is_err());
        assert!(vec_f64(&json!([1, "a"]), "x")
            .unwrap_err()
            .contains("`x[1]`"));
        assert_eq!(
            rows_json(&[1.0, 2.0, 3.0, 4.0], 2),
            json!([[1.0, 2.0], [3.0, 4.0]])
        );
    }
}
