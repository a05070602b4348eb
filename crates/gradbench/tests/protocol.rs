//! Drives the `adze-gradbench` binary over GradBench's protocol (define,
//! evaluate) with small inputs for every eval, and checks the outputs
//! against values computed here independently: plain Rust versions of the
//! primal functions, central finite differences of those for the
//! derivatives, and known results. No Python, no network.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// One running tool.
struct Tool {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: i64,
}

impl Tool {
    fn start() -> Tool {
        let mut child = Command::new(env!("CARGO_BIN_EXE_adze-gradbench"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the tool starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut tool = Tool {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let started = tool.send(json!({"kind": "start", "eval": "test"}));
        assert_eq!(started["tool"], "adze");
        tool
    }

    /// Sends a raw line, returns the response.
    fn line(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut out = String::new();
        self.stdout.read_line(&mut out).unwrap();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad response {out:?}: {e}"))
    }

    fn send(&mut self, mut message: Value) -> Value {
        self.id += 1;
        message["id"] = json!(self.id);
        let response = self.line(&message.to_string());
        assert_eq!(response["id"], json!(self.id), "{response}");
        response
    }

    /// Starts a tool with module `name` defined.
    fn with(name: &str) -> Tool {
        let mut tool = Tool::start();
        let r = tool.send(json!({"kind": "define", "module": name}));
        assert_eq!(r["success"], true, "define {name}: {r}");
        assert_eq!(r["timings"][0]["name"], "compile");
        tool
    }

    /// Evaluates `function` once on `input`; returns the output.
    fn eval(&mut self, module: &str, function: &str, mut input: Value) -> Value {
        if input.is_object() {
            input["min_runs"] = json!(1);
            input["min_seconds"] = json!(0);
        }
        let r = self.send(
            json!({"kind": "evaluate", "module": module, "function": function, "input": input}),
        );
        assert_eq!(r["success"], true, "{module}::{function}: {r}");
        let timings = r["timings"].as_array().unwrap();
        assert!(timings.iter().any(|t| t["name"] == "evaluate"), "{r}");
        r["output"].clone()
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn fs(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(f).collect()
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        other => vec![f(other)],
    }
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    let scale = got.abs().max(want.abs()).max(1.0);
    assert!(
        (got - want).abs() <= tol * scale,
        "{what}: got {got}, want {want}"
    );
}

fn all_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        close(*g, *w, tol, &format!("{what}[{i}]"));
    }
}

/// The gradient of `f` at `x` by central differences.
fn fd_gradient(x: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut x = x.to_vec();
    (0..x.len())
        .map(|i| {
            let h = 1e-6 * x[i].abs().max(1.0);
            let x0 = x[i];
            x[i] = x0 + h;
            let up = f(&x);
            x[i] = x0 - h;
            let down = f(&x);
            x[i] = x0;
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// Deterministic pseudo-random numbers in [0, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
    fn normal_vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| 2.0 * self.next() - 1.0).collect()
    }
}

fn rows(data: &[f64], cols: usize) -> Value {
    json!(data.chunks(cols).collect::<Vec<_>>())
}

// ------------------------------------------------------------ protocol

#[test]
fn the_protocol_answers_every_message_and_reports_errors_as_responses() {
    let mut t = Tool::start();
    let r = t.send(json!({"kind": "define", "module": "nonesuch"}));
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().contains("nonesuch"), "{r}");
    let r =
        t.send(json!({"kind": "evaluate", "module": "hello", "function": "square", "input": 2.0}));
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().contains("not defined"), "{r}");
    let r = t.send(json!({"kind": "define", "module": "hello"}));
    assert_eq!(r["success"], true);
    let r =
        t.send(json!({"kind": "evaluate", "module": "hello", "function": "cube", "input": 2.0}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"].as_str().unwrap().contains("square, double"),
        "{r}"
    );
    let r = t
        .send(json!({"kind": "evaluate", "module": "hello", "function": "square", "input": "two"}));
    assert_eq!(r["success"], false);
    let r = t.send(json!({"kind": "analysis", "of": 3, "valid": true}));
    assert_eq!(r, json!({"id": t.id}));
    let r = t.line("{ not json");
    assert_eq!(r["success"], false);
    // A run-time error of the kernel (lse of an array with a string) and
    // a bad shape are errors too, and the tool goes on.
    t.send(json!({"kind": "define", "module": "ba"}));
    let r = t.send(json!({"kind": "evaluate", "module": "ba", "function": "objective",
        "input": {"n": 1, "m": 1, "p": 20, "cam": [1.0], "x": [0.0, 0.0, 1.0], "w": 1.0, "feat": [0.0, 0.0]}}));
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().contains("11, 3 and 2"), "{r}");
    let r =
        t.send(json!({"kind": "evaluate", "module": "hello", "function": "square", "input": 3.0}));
    assert_eq!(r["output"], json!(9.0));
}

#[test]
fn evaluate_repeats_the_kernel_as_min_runs_asks() {
    let mut t = Tool::with("lse");
    let r = t.send(
        json!({"kind": "evaluate", "module": "lse", "function": "primal",
        "input": {"x": [1.0, 2.0], "min_runs": 5, "min_seconds": 0}}),
    );
    let timings = r["timings"].as_array().unwrap();
    assert_eq!(
        timings.iter().filter(|t| t["name"] == "evaluate").count(),
        5
    );
    assert_eq!(timings.iter().filter(|t| t["name"] == "prepare").count(), 1);
}

// ------------------------------------------------------------ the evals

#[test]
fn hello() {
    let mut t = Tool::with("hello");
    assert_eq!(t.eval("hello", "square", json!(3.0)), json!(9.0));
    assert_eq!(t.eval("hello", "double", json!(3.0)), json!(6.0));
}

#[test]
fn lse() {
    let mut t = Tool::with("lse");
    let x = [0.5, -1.0, 3.0, 2.5];
    let lse = |x: &[f64]| x.iter().map(|v| v.exp()).sum::<f64>().ln();
    close(
        f(&t.eval("lse", "primal", json!({"x": x}))),
        lse(&x),
        1e-14,
        "lse",
    );
    let g = fs(&t.eval("lse", "gradient", json!({"x": x})));
    let softmax: Vec<f64> = x.iter().map(|v| (v - lse(&x)).exp()).collect();
    all_close(&g, &softmax, 1e-14, "softmax");
}

fn llsq_primal(x: &[f64], n: usize) -> f64 {
    (0..n)
        .map(|i| {
            let t = -1.0 + 2.0 * i as f64 / (n as f64 - 1.0);
            let fit: f64 = x
                .iter()
                .enumerate()
                .map(|(j, c)| c * t.powi(j as i32))
                .sum();
            let r = if t > 0.0 {
                1.0
            } else if t < 0.0 {
                -1.0
            } else {
                0.0
            } - fit;
            r * r
        })
        .sum::<f64>()
        / 2.0
}

#[test]
fn llsq() {
    let mut t = Tool::with("llsq");
    let x = [0.3, -0.2, 0.7, 0.1, -0.4];
    let n = 9;
    close(
        f(&t.eval("llsq", "primal", json!({"x": x, "n": n}))),
        llsq_primal(&x, n),
        1e-12,
        "llsq",
    );
    let g = fs(&t.eval("llsq", "gradient", json!({"x": x, "n": n})));
    all_close(
        &g,
        &fd_gradient(&x, |x| llsq_primal(x, n)),
        1e-7,
        "llsq gradient",
    );
}

/// The GMM log posterior straight from the README's definitions: a dense
/// Q_k, the Gaussian densities and the Wishart prior, no simplification
/// shared with the .adz program.
#[allow(clippy::too_many_arguments)] // the eval's parameters, as named there
fn gmm_objective(
    d: usize,
    k: usize,
    alpha: &[f64],
    mu: &[f64],
    q: &[f64],
    l: &[f64],
    x: &[f64],
    gamma: f64,
    m: usize,
) -> f64 {
    let n = x.len() / d;
    let lsz = d * (d - 1) / 2;
    // Q_k as a dense lower-triangular matrix, l filled column by column.
    let qmat = |c: usize| {
        let mut qm = vec![vec![0.0; d]; d];
        let mut idx = 0;
        for j in 0..d {
            qm[j][j] = q[c * d + j].exp();
            for row in qm.iter_mut().skip(j + 1) {
                row[j] = l[c * lsz + idx];
                idx += 1;
            }
        }
        qm
    };
    let sum_alpha: f64 = alpha.iter().map(|a| a.exp()).sum();
    let mut loglik = 0.0;
    for i in 0..n {
        let mut s = 0.0;
        for c in 0..k {
            let qm = qmat(c);
            let mut norm2 = 0.0;
            for row in &qm {
                let v: f64 = (0..d)
                    .map(|j| row[j] * (x[i * d + j] - mu[c * d + j]))
                    .sum();
                norm2 += v * v;
            }
            let logdet: f64 = (0..d).map(|j| q[c * d + j]).sum();
            let phi = alpha[c].exp() / sum_alpha;
            s += phi * (-0.5 * norm2 + logdet).exp()
                / (2.0 * std::f64::consts::PI).powf(d as f64 / 2.0);
        }
        loglik += s.ln();
    }
    // log Wishart(Q^T Q | V = I/gamma², n = d + m + 1) for each component.
    let nw = (d + m + 1) as f64;
    let lgamma = |z: f64| -> f64 {
        // Lanczos (g = 7), ample for a test.
        let c = [
            0.999_999_999_999_809_9,
            676.520_368_121_885_1,
            -1_259.139_216_722_402_8,
            771.323_428_777_653_1,
            -176.615_029_162_140_6,
            12.507_343_278_686_905,
            -0.138_571_095_265_720_12,
            9.984_369_578_019_572e-6,
            1.505_632_735_149_311_6e-7,
        ];
        let z = z - 1.0;
        let mut a = c[0];
        let t = z + 7.5;
        for (i, ci) in c.iter().enumerate().skip(1) {
            a += ci / (z + i as f64);
        }
        0.5 * (2.0 * std::f64::consts::PI).ln() + (z + 0.5) * t.ln() - t + a.ln()
    };
    let log_multigamma = |a: f64, p: usize| -> f64 {
        0.25 * (p * (p - 1)) as f64 * std::f64::consts::PI.ln()
            + (1..=p)
                .map(|j| lgamma(a + 0.5 * (1.0 - j as f64)))
                .sum::<f64>()
    };
    let mut prior = 0.0;
    for c in 0..k {
        let qm = qmat(c);
        let frob: f64 = qm.iter().flatten().map(|v| v * v).sum();
        let logdet_sigma_inv = 2.0 * (0..d).map(|j| q[c * d + j]).sum::<f64>();
        prior += (nw - d as f64 - 1.0) / 2.0 * logdet_sigma_inv
            - 0.5 * gamma * gamma * frob
            - (nw * d as f64 / 2.0) * 2f64.ln()
            + nw / 2.0 * (d as f64) * (gamma * gamma).ln()
            - log_multigamma(nw / 2.0, d);
    }
    loglik + prior
}

#[test]
fn gmm() {
    let mut t = Tool::with("gmm");
    let (d, k, n, m, gamma) = (3, 2, 4, 1, 0.8);
    let mut rng = Rng(7);
    let alpha = rng.normal_vec(k);
    let mu = rng.vec(k * d);
    let q = rng.normal_vec(k * d);
    let l = rng.normal_vec(k * d * (d - 1) / 2);
    let x = rng.normal_vec(n * d);
    let input = json!({"d": d, "k": k, "n": n, "m": m, "gamma": gamma, "alpha": alpha,
        "mu": rows(&mu, d), "q": rows(&q, d), "l": rows(&l, d * (d - 1) / 2), "x": rows(&x, d)});
    let want = gmm_objective(d, k, &alpha, &mu, &q, &l, &x, gamma, m);
    close(
        f(&t.eval("gmm", "objective", input.clone())),
        want,
        1e-10,
        "gmm objective",
    );
    let j = t.eval("gmm", "jacobian", input);
    let fd = |which: usize| {
        let params = [&alpha, &mu, &q, &l];
        fd_gradient(params[which], |v| {
            let mut p: Vec<Vec<f64>> = params.iter().map(|p| p.to_vec()).collect();
            p[which] = v.to_vec();
            gmm_objective(d, k, &p[0], &p[1], &p[2], &p[3], &x, gamma, m)
        })
    };
    all_close(&fs(&j["alpha"]), &fd(0), 1e-6, "d/dalpha");
    all_close(&flat(&j["mu"]), &fd(1), 1e-6, "d/dmu");
    all_close(&flat(&j["q"]), &fd(2), 1e-6, "d/dq");
    all_close(&flat(&j["l"]), &fd(3), 1e-6, "d/dl");
}

#[test]
fn kmeans() {
    let mut t = Tool::with("kmeans");
    let (n, k, d) = (12, 3, 2);
    let points = Rng(3).vec(n * d);
    let centroids = points[(n - k) * d..].to_vec();
    let input = json!({"points": rows(&points, d), "centroids": rows(&centroids, d)});
    let closest = |i: usize| {
        (0..k)
            .map(|j| {
                let dist: f64 = (0..d)
                    .map(|l| (points[i * d + l] - centroids[j * d + l]).powi(2))
                    .sum();
                (dist, j)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap()
    };
    let cost: f64 = (0..n).map(|i| closest(i).0).sum();
    close(
        f(&t.eval("kmeans", "cost", input.clone())),
        cost,
        1e-14,
        "cost",
    );
    // The Newton step moves each centroid to the mean of its cluster.
    let mut sums = vec![0.0; k * d];
    let mut counts = vec![0.0; k];
    for i in 0..n {
        let j = closest(i).1;
        counts[j] += 1.0;
        for l in 0..d {
            sums[j * d + l] += points[i * d + l];
        }
    }
    let want: Vec<f64> = (0..k * d)
        .map(|e| centroids[e] - sums[e] / counts[e / d])
        .collect();
    all_close(&flat(&t.eval("kmeans", "dir", input)), &want, 1e-12, "dir");
}

fn ode_primal(x: &[f64], s: usize) -> Vec<f64> {
    let n = x.len();
    let h = 2.0 / s as f64;
    let f = |y: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|i| if i == 0 { x[0] } else { x[i] * y[i - 1] })
            .collect()
    };
    let mut y = vec![0.0; n];
    for _ in 0..s {
        let k1 = f(&y);
        let k2 = f(&(0..n).map(|i| y[i] + h * k1[i] / 2.0).collect::<Vec<_>>());
        let k3 = f(&(0..n).map(|i| y[i] + h * k2[i] / 2.0).collect::<Vec<_>>());
        let k4 = f(&(0..n).map(|i| y[i] + h * k3[i]).collect::<Vec<_>>());
        for i in 0..n {
            y[i] += h * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) / 6.0;
        }
    }
    y
}

#[test]
fn ode() {
    let mut t = Tool::with("ode");
    let x = [0.4, 1.3, 0.7, 0.9, 1.1];
    let s = 3;
    let input = json!({"x": x, "s": s});
    all_close(
        &fs(&t.eval("ode", "primal", input.clone())),
        &ode_primal(&x, s),
        1e-14,
        "y(2)",
    );
    let g = fs(&t.eval("ode", "gradient", input));
    all_close(
        &g,
        &fd_gradient(&x, |x| ode_primal(x, s)[x.len() - 1]),
        1e-7,
        "gradient",
    );
}

/// The determinant by Gaussian elimination with partial pivoting.
fn det_lu(a: &[f64], n: usize) -> f64 {
    let mut a = a.to_vec();
    let mut det = 1.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
            .unwrap();
        if p != c {
            for j in 0..n {
                a.swap(c * n + j, p * n + j);
            }
            det = -det;
        }
        det *= a[c * n + c];
        for r in c + 1..n {
            let factor = a[r * n + c] / a[c * n + c];
            for j in c..n {
                a[r * n + j] -= factor * a[c * n + j];
            }
        }
    }
    det
}

#[test]
fn det() {
    let mut t = Tool::with("det");
    for ell in [1, 2, 3, 4] {
        let a = Rng(ell as u64).vec(ell * ell);
        let input = json!({"A": a, "ell": ell});
        close(
            f(&t.eval("det", "primal", input.clone())),
            det_lu(&a, ell),
            1e-12,
            "det",
        );
        let g = fs(&t.eval("det", "gradient", input));
        all_close(&g, &fd_gradient(&a, |a| det_lu(a, ell)), 1e-7, "d det / dA");
    }
}

fn lstm_objective(
    main: &[f64],
    extra: &[f64],
    state: &[f64],
    seq: &[f64],
    l: usize,
    b: usize,
) -> f64 {
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    let c = seq.len() / b;
    let mut st = state.to_vec();
    let mut total = 0.0;
    for t in 0..c - 1 {
        let mut input: Vec<f64> = (0..b).map(|i| seq[t * b + i] * extra[i]).collect();
        for layer in 0..l {
            let (w, bias) = (&main[8 * b * layer..], &main[8 * b * layer + 4 * b..]);
            let (h, cell) = (2 * b * layer, 2 * b * layer + b);
            for i in 0..b {
                let forget = sigmoid(input[i] * w[i] + bias[i]);
                let ingate = sigmoid(st[h + i] * w[b + i] + bias[b + i]);
                let outgate = sigmoid(input[i] * w[2 * b + i] + bias[2 * b + i]);
                let change = (st[h + i] * w[3 * b + i] + bias[3 * b + i]).tanh();
                st[cell + i] = st[cell + i] * forget + ingate * change;
                st[h + i] = outgate * st[cell + i].tanh();
            }
            input = st[h..h + b].to_vec();
        }
        let ypred: Vec<f64> = (0..b)
            .map(|i| input[i] * extra[b + i] + extra[2 * b + i])
            .collect();
        let lse = (ypred.iter().map(|y| y.exp()).sum::<f64>() + 2.0).ln();
        total += (0..b)
            .map(|i| seq[(t + 1) * b + i] * (ypred[i] - lse))
            .sum::<f64>();
    }
    -total / ((c - 1) * b) as f64
}

#[test]
fn lstm() {
    let mut t = Tool::with("lstm");
    let (l, b, c) = (2, 3, 5);
    let mut rng = Rng(11);
    let main = rng.vec(2 * l * 4 * b);
    let extra = rng.vec(3 * b);
    let state = rng.vec(2 * l * b);
    let seq: Vec<f64> = rng.vec(c * b).iter().map(|v| v.round()).collect();
    let input = json!({"main_params": rows(&main, 4 * b), "extra_params": rows(&extra, b),
        "state": rows(&state, b), "sequence": rows(&seq, b)});
    let want = lstm_objective(&main, &extra, &state, &seq, l, b);
    close(
        f(&t.eval("lstm", "objective", input.clone())),
        want,
        1e-13,
        "loss",
    );
    let mut params = main.clone();
    params.extend(&extra);
    let fd = fd_gradient(&params, |p| {
        lstm_objective(&p[..main.len()], &p[main.len()..], &state, &seq, l, b)
    });
    all_close(
        &fs(&t.eval("lstm", "jacobian", input)),
        &fd,
        1e-7,
        "gradient",
    );
}

/// BA's reprojection error of one observation; `v` = [cam(11), x(3), w].
fn ba_reproj(v: &[f64], feat: [f64; 2]) -> [f64; 2] {
    let (rot, c, x) = (&v[0..3], &v[3..6], &v[11..14]);
    let p = [x[0] - c[0], x[1] - c[1], x[2] - c[2]];
    let theta = (rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2]).sqrt();
    let k = [rot[0] / theta, rot[1] / theta, rot[2] / theta];
    let cross = [
        k[1] * p[2] - k[2] * p[1],
        k[2] * p[0] - k[0] * p[2],
        k[0] * p[1] - k[1] * p[0],
    ];
    let dot = k[0] * p[0] + k[1] * p[1] + k[2] * p[2];
    let r: Vec<f64> = (0..3)
        .map(|i| p[i] * theta.cos() + cross[i] * theta.sin() + k[i] * dot * (1.0 - theta.cos()))
        .collect();
    let proj = [r[0] / r[2], r[1] / r[2]];
    let rsq = proj[0] * proj[0] + proj[1] * proj[1];
    let dist = 1.0 + v[9] * rsq + v[10] * rsq * rsq;
    [
        v[14] * (proj[0] * dist * v[6] + v[7] - feat[0]),
        v[14] * (proj[1] * dist * v[6] + v[8] - feat[1]),
    ]
}

#[test]
fn ba() {
    let mut t = Tool::with("ba");
    let cam = [0.1, -0.2, 0.3, 0.5, 0.2, -0.1, 400.0, 2.0, 3.0, 1e-3, 2e-4];
    let x = [1.0, 2.0, 10.0];
    let (w, feat) = (0.8, [30.0, -20.0]);
    let (n, m, p) = (3, 4, 20);
    let input = json!({"n": n, "m": m, "p": p, "cam": cam, "x": x, "w": w, "feat": feat});
    let mut v: Vec<f64> = cam.to_vec();
    v.extend(x);
    v.push(w);
    let e = ba_reproj(&v, feat);
    let out = t.eval("ba", "objective", input.clone());
    all_close(
        &fs(&out["reproj_error"]["elements"]),
        &e,
        1e-12,
        "reproj_error",
    );
    assert_eq!(out["reproj_error"]["repeated"], json!(p));
    close(f(&out["w_err"]["element"]), 1.0 - w * w, 1e-15, "w_err");
    assert_eq!(out["w_err"]["repeated"], json!(p));

    let j = t.eval("ba", "jacobian", input);
    // Rows: 15 nonzeros in each of the first 2p rows, then 1.
    let rows: Vec<i64> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    let mut want_rows: Vec<i64> = (0..30).map(|r| 15 * r).collect();
    want_rows.push(31 * p as i64);
    assert_eq!(rows, want_rows);
    // Observation 0 (camera 0, point 0): its two rows, then observation
    // 1's first row's first 11 - 1 entries start at camera 1.
    let cols: Vec<i64> = j["cols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_i64().unwrap())
        .collect();
    let (cam_cols, pt_cols, w_col) = (11 * n as i64, 3 * m as i64, 11 * n as i64 + 3 * m as i64);
    let mut want_cols: Vec<i64> = Vec::new();
    for _row in 0..2 {
        want_cols.extend(0..11);
        want_cols.extend(cam_cols..cam_cols + 3);
        want_cols.push(cam_cols + pt_cols);
    }
    want_cols.truncate(30);
    want_cols.push(w_col + p as i64 - 1);
    assert_eq!(cols, want_cols);
    let vals = fs(&j["vals"]);
    for (row, first) in [(0, 0), (1, 15)] {
        let fd = fd_gradient(&v, |v| ba_reproj(v, feat)[row]);
        let got = &vals[first..(first + 15).min(30)];
        all_close(got, &fd[..got.len()], 1e-6, &format!("J row {row}"));
    }
    close(vals[30], -2.0 * w, 1e-15, "d w_err / dw");
}

/// A small hand model for `ht`: 22 bones in a chain, a few vertices.
fn ht_input(theta: &[f64], identity: bool, us: bool) -> Value {
    let nb = 22;
    let nv = 6;
    let mut rng = Rng(5);
    let matrix = |rng: &mut Rng| -> Vec<Vec<f64>> {
        (0..4)
            .map(|r| {
                (0..4)
                    .map(|c| {
                        if r == 3 {
                            if c == 3 {
                                1.0
                            } else {
                                0.0
                            }
                        } else if identity {
                            if r == c {
                                1.0
                            } else {
                                0.0
                            }
                        } else {
                            (if r == c { 1.0 } else { 0.0 }) + 0.3 * (rng.next() - 0.5)
                        }
                    })
                    .collect()
            })
            .collect()
    };
    let base_relatives: Vec<_> = (0..nb).map(|_| matrix(&mut rng)).collect();
    let inverse_base_absolutes: Vec<_> = (0..nb).map(|_| matrix(&mut rng)).collect();
    let base_positions: Vec<Vec<f64>> = (0..nv)
        .map(|_| vec![rng.next(), rng.next(), rng.next(), 1.0])
        .collect();
    // Weights of each vertex over 3 bones, summing to 1.
    let weights: Vec<Vec<f64>> = (0..nv)
        .map(|v| {
            let mut w = vec![0.0; nb];
            w[v % nb] = 0.5;
            w[(3 * v + 7) % nb] += 0.3;
            w[(5 * v + 11) % nb] += 0.2;
            w
        })
        .collect();
    let parents: Vec<i64> = (0..nb as i64).map(|b| b - 1).collect();
    let triangles = json!([[0, 1, 2], [3, 4, 5], [1, 3, 5]]);
    let corr: Vec<i64> = if us {
        vec![0, 2, 1, 2]
    } else {
        vec![0, 5, 3, 1]
    };
    let points: Vec<Vec<f64>> = (0..corr.len())
        .map(|_| vec![rng.next(), rng.next(), rng.next()])
        .collect();
    let us: Vec<Vec<f64>> = if us {
        (0..corr.len())
            .map(|_| vec![0.3 * rng.next(), 0.3 * rng.next()])
            .collect()
    } else {
        Vec::new()
    };
    json!({
        "theta": theta,
        "us": us,
        "data": {
            "model": {
                "bone_count": nb,
                "bone_names": (0..nb).map(|b| format!("bone{b}")).collect::<Vec<_>>(),
                "parents": parents,
                "base_relatives": base_relatives,
                "inverse_base_absolutes": inverse_base_absolutes,
                "base_positions": base_positions,
                "weights": weights,
                "triangles": triangles,
                "is_mirrored": false,
            },
            "correspondences": corr,
            "points": points,
        },
    })
}

#[test]
fn ht() {
    let mut t = Tool::with("ht");
    // Identity bones and no rotation: each vertex stays where it is, then
    // the global translation theta[3..6] moves it.
    let mut theta = vec![0.0; 26];
    theta[3..6].copy_from_slice(&[0.5, -1.0, 2.0]);
    let input = ht_input(&theta, true, false);
    let base = flat(&input["data"]["model"]["base_positions"]);
    let points = flat(&input["data"]["points"]);
    let corr = [0, 5, 3, 1];
    let want: Vec<f64> = (0..12)
        .map(|e| points[e] - base[4 * corr[e / 3] + e % 3] - theta[3 + e % 3])
        .collect();
    all_close(&fs(&t.eval("ht", "objective", input)), &want, 1e-14, "err");

    // The Jacobian against finite differences of the tool's own objective,
    // on a posed, non-trivial model, in both variants.
    let theta: Vec<f64> = Rng(9).normal_vec(26).iter().map(|v| 0.4 * v).collect();
    for complicated in [false, true] {
        let input = ht_input(&theta, false, complicated);
        let jac = t.eval("ht", "jacobian", input.clone());
        let jac: Vec<Vec<f64>> = jac.as_array().unwrap().iter().map(fs).collect();
        assert_eq!(jac.len(), 12);
        let mut objective = |theta: &[f64], us: &Value| {
            let mut input = input.clone();
            input["theta"] = json!(theta);
            input["us"] = us.clone();
            fs(&t.eval("ht", "objective", input))
        };
        let us = input["us"].clone();
        let offset = if complicated { 2 } else { 0 };
        for k in 0..26 {
            let h = 1e-6;
            let mut up = theta.clone();
            up[k] += h;
            let mut down = theta.clone();
            down[k] -= h;
            let (eu, ed) = (objective(&up, &us), objective(&down, &us));
            for r in 0..12 {
                close(
                    jac[r][offset + k],
                    (eu[r] - ed[r]) / (2.0 * h),
                    1e-6,
                    &format!("J[{r}][theta {k}]"),
                );
            }
        }
        if complicated {
            // Columns 0 and 1: each residual in its own correspondence's u0, u1.
            for (col, which) in [(0, 0), (1, 1)] {
                let h = 1e-6;
                let shift = |sign: f64| {
                    let us: Vec<Vec<f64>> = us
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|u| {
                            let mut u = fs(u);
                            u[which] += sign * h;
                            u
                        })
                        .collect();
                    json!(us)
                };
                let (eu, ed) = (
                    objective(&theta, &shift(1.0)),
                    objective(&theta, &shift(-1.0)),
                );
                for r in 0..12 {
                    close(
                        jac[r][col],
                        (eu[r] - ed[r]) / (2.0 * h),
                        1e-6,
                        &format!("J[{r}][u{which}]"),
                    );
                }
            }
        }
    }
}

#[test]
fn saddle() {
    let mut t = Tool::with("saddle");
    // GradBench's expected result for start (1, 1).
    let want = [8.246324826140356e-6; 4];
    for function in ["rr", "rf", "fr", "ff"] {
        let out = fs(&t.eval("saddle", function, json!({"start": [1.0, 1.0]})));
        all_close(&out, &want, 1e-9, function);
    }
}

#[test]
fn particle() {
    let mut t = Tool::with("particle");
    // GradBench's expected result for w = 0.
    for function in ["rr", "rf", "fr", "ff"] {
        let out = f(&t.eval("particle", function, json!({"w": 0.0})));
        close(out, 0.2071918746486116, 1e-12, function);
    }
}
