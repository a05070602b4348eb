//! NumPy's `.npy` format, the part adze needs: reading f64 and i64 arrays
//! of any shape (C or Fortran order, either byte order), and writing f64
//! and i64 arrays.
//!
//! A file is the magic `\x93NUMPY`, a major and a minor version byte, the
//! length of the header (2 bytes little-endian in version 1, 4 in versions
//! 2 and 3), the header — a Python dict literal such as
//! `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`, padded
//! with spaces and a newline so that the data starts at a multiple of 64 —
//! and then the elements, `shape`'s product of them, each `descr`'s size.
//! (The format: NumPy's `numpy/lib/format.py`, "NEP 1".)
//!
//! Hand-written rather than a crate: the subset is a hundred lines, it
//! reads straight into the `Vec<f64>` adze runs on, and its errors are
//! worded for the command line (docs/dependencies.md).

/// The magic string at the start of every `.npy` file.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// The elements of an array read from a `.npy` file, in C order.
#[derive(Clone, Debug, PartialEq)]
pub enum Elements {
    /// `descr` `<f8` or `>f8`.
    F64(Vec<f64>),
    /// `descr` `<i8` or `>i8`.
    I64(Vec<i64>),
}

/// An array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Its shape (`[]` for a 0-d array, which has one element).
    pub shape: Vec<usize>,
    /// Its elements in C order (a Fortran-ordered file is reordered).
    pub elements: Elements,
}

impl Array {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.elements {
            Elements::F64(v) => v.len(),
            Elements::I64(v) => v.len(),
        }
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape as Python writes it: `()`, `(3,)`, `(2, 3)`.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// Reads a `.npy` file's bytes. The error says what is wrong, without the
/// file's name.
pub fn read(bytes: &[u8]) -> Result<Array, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a .npy file (it does not start with \\x93NUMPY)")?;
    let (major, rest) = match rest {
        [major, _minor, rest @ ..] => (*major, rest),
        _ => return Err("the .npy header is cut short".into()),
    };
    let (header_len, rest) = match (major, rest) {
        (1, [a, b, rest @ ..]) => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        (2 | 3, [a, b, c, d, rest @ ..]) => {
            let len = u32::from_le_bytes([*a, *b, *c, *d]);
            (
                usize::try_from(len).map_err(|_| "the .npy header is too long")?,
                rest,
            )
        }
        (1..=3, _) => return Err("the .npy header is cut short".into()),
        _ => {
            return Err(format!(
                ".npy format version {major} is not supported (1 to 3 are)"
            ))
        }
    };
    if rest.len() < header_len {
        return Err("the .npy header is cut short".into());
    }
    let (header, data) = rest.split_at(header_len);
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let header = Header::parse(header)?;
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|n| n.checked_mul(8).is_some())
        .ok_or_else(|| format!("the .npy shape {} is too large", shape_text(&header.shape)))?;
    if data.len() != count * 8 {
        return Err(format!(
            "the .npy header's shape {} needs {} bytes of data, but the file has {}",
            shape_text(&header.shape),
            count * 8,
            data.len()
        ));
    }
    let words = data.chunks_exact(8).map(|c| {
        let bytes: [u8; 8] = c.try_into().unwrap_or([0; 8]);
        if header.little_endian {
            u64::from_le_bytes(bytes)
        } else {
            u64::from_be_bytes(bytes)
        }
    });
    let words: Vec<u64> = if header.fortran_order && header.shape.len() > 1 {
        let words: Vec<u64> = words.collect();
        c_order(&words, &header.shape)
    } else {
        words.collect()
    };
    let elements = match header.kind {
        Kind::F64 => Elements::F64(words.into_iter().map(f64::from_bits).collect()),
        // Two's complement: the bits of the u64 are those of the i64.
        Kind::I64 => Elements::I64(words.into_iter().map(|w| w as i64).collect()),
    };
    Ok(Array {
        shape: header.shape,
        elements,
    })
}

/// The elements of a Fortran-ordered array of `shape` in C order.
fn c_order(fortran: &[u64], shape: &[usize]) -> Vec<u64> {
    // Fortran strides: the first index varies fastest.
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1;
    for &d in shape {
        strides.push(stride);
        stride *= d;
    }
    let mut out = Vec::with_capacity(fortran.len());
    let mut index = vec![0usize; shape.len()];
    let mut offset = 0usize;
    for _ in 0..fortran.len() {
        out.push(fortran[offset]);
        // The next index in C order: the last index varies fastest.
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
    out
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    F64,
    I64,
}

/// What the header says.
#[derive(Debug)]
struct Header {
    kind: Kind,
    little_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// A value of the header's Python literal.
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(usize),
    Tuple(Vec<Lit>),
    Other,
}

impl Header {
    fn parse(text: &str) -> Result<Header, String> {
        let bad = || {
            format!(
                "the .npy header is not a dict NumPy writes: {}",
                text.trim()
            )
        };
        let mut p = LitParser {
            s: text.as_bytes(),
            i: 0,
        };
        let entries = p.dict().ok_or_else(bad)?;
        let get = |key: &str| {
            entries
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .ok_or_else(|| format!("the .npy header has no '{key}'"))
        };
        let descr = match get("descr")? {
            Lit::Str(s) => s.clone(),
            _ => {
                return Err(
                    "the .npy file holds a structured array; adze reads f64 ('<f8') or i64 ('<i8') arrays"
                        .into(),
                )
            }
        };
        let (little_endian, kind) = match descr.as_str() {
            "<f8" => (true, Kind::F64),
            ">f8" => (false, Kind::F64),
            "<i8" => (true, Kind::I64),
            ">i8" => (false, Kind::I64),
            "=f8" => (cfg!(target_endian = "little"), Kind::F64),
            "=i8" => (cfg!(target_endian = "little"), Kind::I64),
            other => {
                return Err(format!(
                    "the .npy file holds dtype '{other}'{}; adze reads f64 ('<f8') or i64 ('<i8') arrays",
                    dtype_name(other).map(|n| format!(" ({n})")).unwrap_or_default()
                ))
            }
        };
        let fortran_order = match get("fortran_order")? {
            Lit::Bool(b) => *b,
            _ => return Err(bad()),
        };
        let shape = match get("shape")? {
            Lit::Tuple(dims) => dims
                .iter()
                .map(|d| match d {
                    Lit::Int(n) => Ok(*n),
                    _ => Err(bad()),
                })
                .collect::<Result<Vec<usize>, String>>()?,
            _ => return Err(bad()),
        };
        Ok(Header {
            kind,
            little_endian,
            fortran_order,
            shape,
        })
    }
}

/// A readable name for a NumPy type code, for the error.
fn dtype_name(descr: &str) -> Option<&'static str> {
    let code = descr.trim_start_matches(['<', '>', '=', '|']);
    Some(match code {
        "f2" => "float16",
        "f4" => "float32",
        "f16" => "float128",
        "i1" => "int8",
        "i2" => "int16",
        "i4" => "int32",
        "u1" => "uint8",
        "u2" => "uint16",
        "u4" => "uint32",
        "u8" => "uint64",
        "b1" => "bool",
        "c8" => "complex64",
        "c16" => "complex128",
        _ if code.starts_with('U') || code.starts_with('S') => "strings",
        _ if code.starts_with('O') => "Python objects",
        _ => return None,
    })
}

/// A parser of the Python literals of a header: a dict of string keys
/// whose values are strings, `True`/`False`, integers (`3`, or `3L` as
/// Python 2 wrote them) and tuples or lists of them.
struct LitParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl LitParser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn dict(&mut self) -> Option<Vec<(String, Lit)>> {
        if !self.eat(b'{') {
            return None;
        }
        let mut entries = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let Lit::Str(key) = self.value()? else {
                return None;
            };
            if !self.eat(b':') {
                return None;
            }
            let value = self.value()?;
            entries.push((key, value));
            if !self.eat(b',') {
                if !self.eat(b'}') {
                    return None;
                }
                break;
            }
        }
        self.skip_ws();
        (self.i == self.s.len()).then_some(entries)
    }

    fn value(&mut self) -> Option<Lit> {
        self.skip_ws();
        let c = *self.s.get(self.i)?;
        match c {
            b'\'' | b'"' => {
                let start = self.i + 1;
                let len = self.s[start..].iter().position(|&b| b == c)?;
                self.i = start + len + 1;
                Some(Lit::Str(
                    String::from_utf8_lossy(&self.s[start..start + len]).into_owned(),
                ))
            }
            b'(' | b'[' => {
                self.i += 1;
                let close = if c == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.value()?);
                    if !self.eat(b',') {
                        if !self.eat(close) {
                            return None;
                        }
                        break;
                    }
                }
                Some(Lit::Tuple(items))
            }
            b'0'..=b'9' => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                    self.i += 1;
                }
                let n = std::str::from_utf8(&self.s[start..self.i])
                    .ok()?
                    .parse()
                    .ok()?;
                if self.s.get(self.i) == Some(&b'L') {
                    self.i += 1;
                }
                Some(Lit::Int(n))
            }
            _ => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Some(Lit::Bool(true)),
                    b"False" => Some(Lit::Bool(false)),
                    b"" => None,
                    _ => Some(Lit::Other),
                }
            }
        }
    }
}

/// The bytes of a version 1.0 (2.0 if the header needs it) `.npy` file
/// holding `elements` with `shape` in C order.
pub fn write(shape: &[usize], elements: &Elements) -> Vec<u8> {
    let descr = match elements {
        Elements::F64(_) => "<f8",
        Elements::I64(_) => "<i8",
    };
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}",
        shape_text(shape)
    );
    // Magic, version, length, header and its newline: a multiple of 64.
    let v1 = header.len() + 1 + MAGIC.len() + 4 <= u16::MAX as usize;
    let prefix = MAGIC.len() + 2 + if v1 { 2 } else { 4 };
    let padding = (64 - (prefix + header.len() + 1) % 64) % 64;
    header.extend(std::iter::repeat_n(' ', padding));
    header.push('\n');
    let count = match elements {
        Elements::F64(v) => v.len(),
        Elements::I64(v) => v.len(),
    };
    let mut out = Vec::with_capacity(prefix + header.len() + 8 * count);
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    match elements {
        Elements::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Elements::I64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back() {
        let xs = vec![
            1.5,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-310,
        ];
        let bytes = write(&[6], &Elements::F64(xs.clone()));
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(bytes.len(), 128 + 48); // the header, padded, then the data
        let back = read(&bytes).unwrap();
        assert_eq!(back.shape, vec![6]);
        let Elements::F64(ys) = back.elements else {
            panic!("not f64")
        };
        assert!(xs.iter().zip(&ys).all(|(a, b)| a.to_bits() == b.to_bits()));
        let ints = write(&[2, 2], &Elements::I64(vec![1, -2, i64::MAX, i64::MIN]));
        let back = read(&ints).unwrap();
        assert_eq!(back.shape, vec![2, 2]);
        assert_eq!(
            back.elements,
            Elements::I64(vec![1, -2, i64::MAX, i64::MIN])
        );
        let scalar = read(&write(&[], &Elements::F64(vec![2.5]))).unwrap();
        assert_eq!((scalar.shape_text(), scalar.len()), ("()".to_string(), 1));
    }

    /// `np.save` of `np.arange(6.0).reshape(2, 3).T` (a Fortran-ordered
    /// view), as NumPy 1.26 writes it, big-endian for good measure.
    #[test]
    fn fortran_order_is_read_in_c_order() {
        let header = "{'descr': '>f8', 'fortran_order': True, 'shape': (3, 2), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let padded = format!("{header:<117}\n");
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        // In memory (Fortran order) the transpose of [[0,1,2],[3,4,5]] is
        // 0 1 2 3 4 5; in C order it is [[0,3],[1,4],[2,5]].
        for x in 0..6 {
            bytes.extend_from_slice(&f64::from(x).to_be_bytes());
        }
        let a = read(&bytes).unwrap();
        assert_eq!(a.shape, vec![3, 2]);
        assert_eq!(
            a.elements,
            Elements::F64(vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0])
        );
    }

    #[test]
    fn bad_files_say_why() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
        let mut f32s = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        f32s.extend_from_slice(format!("{header:<117}\n").as_bytes());
        f32s.extend_from_slice(&1f32.to_le_bytes());
        assert!(read(&f32s).unwrap_err().contains("dtype '<f4' (float32)"));
        let short = &write(&[3], &Elements::F64(vec![1.0, 2.0, 3.0]))[..128 + 16];
        assert_eq!(
            read(short).unwrap_err(),
            "the .npy header's shape (3,) needs 24 bytes of data, but the file has 16"
        );
        assert!(read(b"hello").unwrap_err().contains("not a .npy file"));
        assert!(read(b"\x93NUMPY\x01").unwrap_err().contains("cut short"));
        assert!(read(b"\x93NUMPY\x09\x00")
            .unwrap_err()
            .contains("version 9"));
        let odd = b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f8'}";
        assert!(read(odd).unwrap_err().contains("no 'fortran_order'"));
    }
}
