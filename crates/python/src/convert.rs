//! Python values to adze arguments and adze results to Python values.
//!
//! Arrays are never copied when they can be borrowed: a contiguous
//! float64 (int64) NumPy array is lent to the compiled code as a slice of
//! its own buffer. A read-only parameter takes any array-like, converted
//! once to a contiguous array of the element type when it is not one; a
//! `mut` parameter takes only a writable, contiguous, 1-D NumPy array of
//! the element type, since the function's writes must land in the
//! caller's array (a silent copy would lose them). The borrows are
//! rust-numpy's: they are checked against every other borrow held in the
//! process (the same array passed twice where one is written, or written
//! by another thread's call at the same time, is an error) and held until
//! the call returns, while the GIL is released.

use crate::error;
use adze::adze_ir::{Param, Type, Val};
use adze::Arg;
use numpy::{
    BorrowError, Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyTuple};

/// A value held for the length of a call: a scalar, a borrow of a NumPy
/// array, or a buffer of the call's own (a tangent not given).
pub enum Held<'py> {
    /// An `f64`.
    F64(f64),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// A float64 array the function reads.
    Ro(PyReadonlyArray1<'py, f64>),
    /// A float64 array the function may write.
    Rw(PyReadwriteArray1<'py, f64>),
    /// An int64 array the function reads.
    IRo(PyReadonlyArray1<'py, i64>),
    /// An int64 array the function may write.
    IRw(PyReadwriteArray1<'py, i64>),
    /// Zeros of the call's own.
    Owned(Vec<f64>),
}

impl<'py> Held<'py> {
    /// The length of an array (`None` for a scalar).
    pub fn array_len(&self) -> Option<usize> {
        match self {
            Held::F64(_) | Held::I64(_) | Held::Bool(_) => None,
            Held::Ro(a) => Some(a.len()),
            Held::Rw(a) => Some(a.len()),
            Held::IRo(a) => Some(a.len()),
            Held::IRw(a) => Some(a.len()),
            Held::Owned(v) => Some(v.len()),
        }
    }

    /// The argument that lends this value to the compiled code.
    pub fn arg(&mut self) -> PyResult<Arg<'_>> {
        // Every array held was checked to be contiguous when it was taken.
        let not_contiguous = |_| error("internal error: an array is not contiguous".into());
        Ok(match self {
            Held::F64(x) => Arg::F64(*x),
            Held::I64(x) => Arg::I64(*x),
            Held::Bool(x) => Arg::Bool(*x),
            Held::Ro(a) => Arg::Array(a.as_slice().map_err(not_contiguous)?),
            Held::Rw(a) => Arg::ArrayMut(a.as_slice_mut().map_err(not_contiguous)?),
            Held::IRo(a) => Arg::IArray(a.as_slice().map_err(not_contiguous)?),
            Held::IRw(a) => Arg::IArrayMut(a.as_slice_mut().map_err(not_contiguous)?),
            Held::Owned(v) => Arg::ArrayMut(v),
        })
    }
}

/// The value `obj` for parameter `p` (described as `what` in messages).
pub fn take<'py>(obj: &Bound<'py, PyAny>, p: &Param, what: &str) -> PyResult<Held<'py>> {
    let scalar = |expected: &str| {
        error(format!(
            "{what} is {}: expected {expected}, got {}",
            crate::plan::describe(p),
            type_name(obj)
        ))
    };
    Ok(match (p.ty, p.mutable) {
        (Type::F64, _) if is_str(obj) => return Err(scalar("a float")),
        (Type::F64, _) => Held::F64(obj.extract::<f64>().map_err(|_| scalar("a float"))?),
        (Type::I64, _) => Held::I64(obj.extract::<i64>().map_err(|_| {
            if obj.is_instance_of::<pyo3::types::PyInt>() {
                error(format!(
                    "{what} is {}: {obj} is out of its range",
                    crate::plan::describe(p)
                ))
            } else {
                scalar("an int")
            }
        })?),
        (Type::Bool, _) => Held::Bool(obj.extract::<bool>().map_err(|_| scalar("a bool"))?),
        (Type::Array, false) => Held::Ro(readonly(obj, p, what, "fiub")?),
        (Type::Array, true) => Held::Rw(readwrite(obj, p, what)?),
        (Type::IArray, false) => Held::IRo(readonly(obj, p, what, "iub")?),
        (Type::IArray, true) => Held::IRw(readwrite(obj, p, what)?),
        (Type::F64x2, _) => return Err(error(format!("{what}: no parameter is an f64x2"))),
    })
}

/// A fresh float64 array of `len` zeros, borrowed for writing: an adjoint
/// that the call returns.
pub fn zeros<'py>(py: Python<'py>, len: usize) -> PyResult<(Bound<'py, PyArray1<f64>>, Held<'py>)> {
    let array = PyArray1::<f64>::zeros(py, len, false);
    let held = array
        .try_readwrite()
        .map_err(|e| error(format!("internal error: a new array: {e}")))?;
    Ok((array, Held::Rw(held)))
}

fn is_str(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>()
}

/// `float`, `list`, `numpy.ndarray` (int64, 2-D), ..: what a message says
/// a value is.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return format!("a {}-D numpy array of {}", a.ndim(), dtype_name(a));
    }
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_string())
}

fn dtype_name(a: &Bound<'_, PyUntypedArray>) -> String {
    a.dtype()
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "unknown dtype".to_string())
}

/// The NumPy name of `T`'s dtype (`float64`, `int64`).
fn element_name<T: Element>(py: Python<'_>) -> String {
    T::get_dtype(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "the element type".to_string())
}

fn borrow_error(what: &str, e: BorrowError) -> PyErr {
    error(match e {
        BorrowError::NotWriteable => {
            format!("{what} is written in place, but the array given is read-only")
        }
        BorrowError::AlreadyBorrowed => format!(
            "{what}: the array is in use: it (or an array sharing its memory) is passed \
             for another argument of this call, one of them written, or a call running \
             in another thread is using it"
        ),
        other => format!("{what}: {other}"),
    })
}

/// An array parameter the function only reads: a contiguous NumPy array
/// of `T` as it is, anything else (a list, another dtype of one of the
/// `kinds`, a strided view) converted once.
fn readonly<'py, T: Element>(
    obj: &Bound<'py, PyAny>,
    p: &Param,
    what: &str,
    kinds: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    if let Ok(a) = obj.cast::<PyArray1<T>>() {
        if a.is_contiguous() {
            return a.try_readonly().map_err(|e| borrow_error(what, e));
        }
    }
    let py = obj.py();
    let elem = element_name::<T>(py);
    let expected = || {
        format!(
            "{what} is {}: expected a 1-D array of {elem} (a numpy array or a sequence of numbers)",
            crate::plan::describe(p)
        )
    };
    let np = py.import("numpy")?;
    let array = np
        .call_method1("asarray", (obj,))
        .map_err(|e| error(format!("{}, got {}: {e}", expected(), type_name(obj))))?;
    let array = array
        .cast_into::<PyUntypedArray>()
        .map_err(|_| error(format!("{}, got {}", expected(), type_name(obj))))?;
    if array.ndim() != 1 {
        let got = if obj.cast::<PyUntypedArray>().is_ok() {
            type_name(obj)
        } else if array.ndim() == 0 {
            format!("a scalar ({})", type_name(obj))
        } else {
            format!("a {}-D {}", array.ndim(), type_name(obj))
        };
        return Err(error(format!(
            "{}, got {got} (adze arrays are 1-D: flatten with .ravel())",
            expected()
        )));
    }
    let kind: String = array.dtype().getattr("kind")?.extract()?;
    if array.len() > 0 && !kinds.contains(kind.as_str()) {
        return Err(error(format!(
            "{}, got an array of {}",
            expected(),
            dtype_name(&array)
        )));
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", T::get_dtype(py))?;
    let converted = np
        .call_method("ascontiguousarray", (array,), Some(&kwargs))
        .map_err(|e| error(format!("{}: {e}", expected())))?;
    let converted = converted
        .cast_into::<PyArray1<T>>()
        .map_err(|_| error(format!("{}: the conversion failed", expected())))?;
    converted.try_readonly().map_err(|e| borrow_error(what, e))
}

/// An array parameter the function writes: the caller's own NumPy array,
/// never a copy.
fn readwrite<'py, T: Element>(
    obj: &Bound<'py, PyAny>,
    p: &Param,
    what: &str,
) -> PyResult<PyReadwriteArray1<'py, T>> {
    let elem = element_name::<T>(obj.py());
    let Ok(a) = obj.cast::<PyArray1<T>>() else {
        return Err(error(format!(
            "{what} is {}, written in place: it takes a writable 1-D numpy array of {elem}, \
             not {} (convert it once with np.asarray(.., dtype=np.{elem}) and pass that)",
            crate::plan::describe(p),
            type_name(obj)
        )));
    };
    if !a.is_contiguous() {
        return Err(error(format!(
            "{what} is {}, written in place: the array given is not contiguous (a strided view); \
             pass a contiguous array (np.ascontiguousarray) and copy the result back",
            crate::plan::describe(p)
        )));
    }
    a.try_readwrite().map_err(|e| borrow_error(what, e))
}

/// A result as a Python value: float, int, bool, or a NumPy array that
/// owns the result's buffer (no copy).
pub fn value<'py>(py: Python<'py>, v: Val) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Val::F64(x) => PyFloat::new(py, x).into_any(),
        Val::I64(x) => x.into_pyobject(py)?.into_any(),
        Val::Bool(x) => PyBool::new(py, x).to_owned().into_any(),
        Val::Array(xs) => PyArray1::from_vec(py, xs).into_any(),
        Val::IArray(xs) => PyArray1::from_vec(py, xs).into_any(),
    })
}

/// Results as a Python value: none → `None`, one → that value, several →
/// a tuple.
pub fn results<'py>(py: Python<'py>, vals: Vec<Val>) -> PyResult<Bound<'py, PyAny>> {
    match vals.len() {
        0 => Ok(py.None().into_bound(py)),
        1 => value(py, vals.into_iter().next().expect("one value")),
        _ => {
            let items = vals
                .into_iter()
                .map(|v| value(py, v))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
    }
}
