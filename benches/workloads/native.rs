//! Hand-written Rust versions of the benchmark workloads, compiled by rustc
//! with the bench profile (`-O`): the primal of each workload written the
//! way the `.adz` source is (same loops, same order of operations, scratch
//! arrays allocated once per call), and its gradient written by hand.

// Index loops on purpose: the same loops as the `.adz` sources.
#![allow(clippy::needless_range_loop)]

/// Seed: `cos(sum x[i]^2)`.
pub fn seed(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for &xi in x {
        s += xi * xi;
    }
    s.cos()
}

/// Gradient of [`seed`] into `dx`.
pub fn seed_grad(x: &[f64], dx: &mut [f64]) {
    let mut s = 0.0;
    for &xi in x {
        s += xi * xi;
    }
    let c = -s.sin() * 2.0;
    for (d, &xi) in dx.iter_mut().zip(x) {
        *d = c * xi;
    }
}

/// The extended Rosenbrock function.
pub fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len().saturating_sub(1) {
        let a = 1.0 - x[i];
        let b = x[i + 1] - x[i] * x[i];
        s = s + a * a + 100.0 * b * b;
    }
    s
}

/// Gradient of [`rosenbrock`] into `g` (the `rosenbrock_grad` of the example).
pub fn rosenbrock_grad(x: &[f64], g: &mut [f64]) {
    g.fill(0.0);
    for i in 0..x.len().saturating_sub(1) {
        let b = x[i + 1] - x[i] * x[i];
        g[i] = g[i] - 2.0 * (1.0 - x[i]) - 400.0 * x[i] * b;
        g[i + 1] += 200.0 * b;
    }
}

fn logsumexp(v: &[f64]) -> f64 {
    let mut mx = v[0];
    for &vi in &v[1..] {
        mx = mx.max(vi);
    }
    let mut s = 0.0;
    for &vi in v {
        s += (vi - mx).exp();
    }
    s.ln() + mx
}

/// The GMM problem: sizes and data.
pub struct Gmm {
    pub d: usize,
    pub k: usize,
    pub n: usize,
    pub alphas: Vec<f64>,
    pub means: Vec<f64>,
    pub icf: Vec<f64>,
    pub x: Vec<f64>,
    pub gamma: f64,
    pub m: i64,
}

/// The GMM objective, term by term as `ir-examples/gmm.adz`.
pub fn gmm(p: &Gmm) -> f64 {
    let (d, k, n) = (p.d, p.k, p.n);
    let (alphas, means, icf, x) = (&p.alphas, &p.means, &p.icf, &p.x);
    let icf_sz = d * (d + 1) / 2;
    let constant = -((n * d) as f64) * 0.5 * (2.0 * std::f64::consts::PI).ln();
    let mut sum_qs = vec![0.0; k];
    for ik in 0..k {
        sum_qs[ik] = icf[ik * icf_sz..ik * icf_sz + d].iter().sum();
    }
    let mut main_term = vec![0.0; k];
    let mut xc = vec![0.0; d];
    let mut qx = vec![0.0; d];
    let mut slse = 0.0;
    for ix in 0..n {
        for ik in 0..k {
            for id in 0..d {
                xc[id] = x[ix * d + id] - means[ik * d + id];
            }
            for id in 0..d {
                qx[id] = icf[ik * icf_sz + id].exp() * xc[id];
            }
            let mut li = ik * icf_sz + d;
            for i in 0..d {
                for j in i + 1..d {
                    qx[j] += icf[li] * xc[i];
                    li += 1;
                }
            }
            let mut sq = 0.0;
            for &q in &qx {
                sq += q * q;
            }
            main_term[ik] = alphas[ik] + sum_qs[ik] - 0.5 * sq;
        }
        slse += logsumexp(&main_term);
    }
    let nw = (d as i64 + p.m + 1) as f64;
    let mut prior = 0.0;
    for ik in 0..k {
        let mut frob = 0.0;
        for id in 0..d {
            let q = icf[ik * icf_sz + id].exp();
            frob += q * q;
        }
        for j in d..icf_sz {
            frob += icf[ik * icf_sz + j] * icf[ik * icf_sz + j];
        }
        prior = prior + 0.5 * p.gamma * p.gamma * frob - p.m as f64 * sum_qs[ik];
    }
    let c = nw * d as f64 * (p.gamma.ln() - 0.5 * 2f64.ln());
    prior -= k as f64 * c;
    constant + slse - n as f64 * logsumexp(alphas) + prior
}

/// Gradient of [`gmm`] with respect to alphas, means and icf (by hand:
/// softmax weights per point, then the chain rule through `Q_k (x - mu_k)`).
pub fn gmm_grad(p: &Gmm, da: &mut [f64], dm: &mut [f64], di: &mut [f64]) {
    let (d, k, n) = (p.d, p.k, p.n);
    let (alphas, means, icf, x) = (&p.alphas, &p.means, &p.icf, &p.x);
    let icf_sz = d * (d + 1) / 2;
    da.fill(0.0);
    dm.fill(0.0);
    di.fill(0.0);
    let mut sum_qs = vec![0.0; k];
    for ik in 0..k {
        sum_qs[ik] = icf[ik * icf_sz..ik * icf_sz + d].iter().sum();
    }
    let mut qdiag = vec![0.0; k * d];
    for (q, &l) in qdiag
        .iter_mut()
        .zip(icf.chunks(icf_sz).flat_map(|c| &c[..d]))
    {
        *q = l.exp();
    }
    let mut main_term = vec![0.0; k];
    let mut xcs = vec![0.0; k * d];
    let mut qxs = vec![0.0; k * d];
    let mut g = vec![0.0; d];
    for ix in 0..n {
        let xi = &x[ix * d..(ix + 1) * d];
        for ik in 0..k {
            let xc = &mut xcs[ik * d..(ik + 1) * d];
            let qx = &mut qxs[ik * d..(ik + 1) * d];
            for id in 0..d {
                xc[id] = xi[id] - means[ik * d + id];
                qx[id] = qdiag[ik * d + id] * xc[id];
            }
            let mut li = ik * icf_sz + d;
            for i in 0..d {
                for j in i + 1..d {
                    qx[j] += icf[li] * xc[i];
                    li += 1;
                }
            }
            let sq: f64 = qx.iter().map(|q| q * q).sum();
            main_term[ik] = alphas[ik] + sum_qs[ik] - 0.5 * sq;
        }
        let mx = main_term.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        let mut s = 0.0;
        for t in main_term.iter_mut() {
            *t = (*t - mx).exp();
            s += *t;
        }
        for ik in 0..k {
            let w = main_term[ik] / s;
            da[ik] += w;
            let xc = &xcs[ik * d..(ik + 1) * d];
            let qx = &qxs[ik * d..(ik + 1) * d];
            let base = ik * icf_sz;
            // d main / d qx = -qx, scaled by the softmax weight.
            for id in 0..d {
                g[id] = -w * qx[id];
                di[base + id] += w + g[id] * qdiag[ik * d + id] * xc[id];
                // d/d xc through the diagonal; the triangle is added below.
                dm[ik * d + id] -= g[id] * qdiag[ik * d + id];
            }
            let mut li = base + d;
            for i in 0..d {
                let mut dxc = 0.0;
                for j in i + 1..d {
                    di[li] += g[j] * xc[i];
                    dxc += g[j] * icf[li];
                    li += 1;
                }
                dm[ik * d + i] -= dxc;
            }
        }
    }
    // -n * logsumexp(alphas)
    let mx = alphas.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    let s: f64 = alphas.iter().map(|a| (a - mx).exp()).sum();
    for ik in 0..k {
        da[ik] -= n as f64 * (alphas[ik] - mx).exp() / s;
    }
    // The Wishart prior.
    let g2 = p.gamma * p.gamma;
    for ik in 0..k {
        let base = ik * icf_sz;
        for id in 0..d {
            let q = qdiag[ik * d + id];
            di[base + id] += g2 * q * q - p.m as f64;
        }
        for j in d..icf_sz {
            di[base + j] += g2 * icf[base + j];
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One step of the LSTM-style recurrence: `(h', c')`.
fn lstm_step(w: &[f64], x: f64, h: f64, c: f64) -> (f64, f64) {
    let f = sigmoid(w[0] * x + w[1] * h + w[2]);
    let i = sigmoid(w[3] * x + w[4] * h + w[5]);
    let o = sigmoid(w[6] * x + w[7] * h + w[8]);
    let g = (w[9] * x + w[10] * h + w[11]).tanh();
    let c2 = f * c + i * g;
    (o * c2.tanh(), c2)
}

/// The LSTM loss: mean squared error of the hidden state against `ys`.
pub fn lstm_loss(w: &[f64], xs: &[f64], ys: &[f64]) -> f64 {
    let (mut h, mut c, mut loss) = (0.0, 0.0, 0.0);
    for t in 0..xs.len() {
        let (h2, c2) = lstm_step(w, xs[t], h, c);
        h = h2;
        c = c2;
        let d = h - ys[t];
        loss += d * d;
    }
    loss / xs.len() as f64
}

/// Gradient of [`lstm_loss`] with respect to `w`, by back-propagation
/// through time (the forward pass stores 7 values per step).
pub fn lstm_grad(w: &[f64], xs: &[f64], ys: &[f64], dw: &mut [f64], store: &mut Vec<[f64; 7]>) {
    let nt = xs.len();
    store.clear();
    let (mut h, mut c) = (0.0, 0.0);
    for &x in xs {
        let f = sigmoid(w[0] * x + w[1] * h + w[2]);
        let i = sigmoid(w[3] * x + w[4] * h + w[5]);
        let o = sigmoid(w[6] * x + w[7] * h + w[8]);
        let g = (w[9] * x + w[10] * h + w[11]).tanh();
        let c2 = f * c + i * g;
        let tc = c2.tanh();
        store.push([h, c, f, i, o, g, tc]);
        h = o * tc;
        c = c2;
    }
    dw.fill(0.0);
    let scale = 2.0 / nt as f64;
    let (mut dh, mut dc) = (0.0, 0.0);
    for t in (0..nt).rev() {
        let [hp, cp, f, i, o, g, tc] = store[t];
        let x = xs[t];
        dh += scale * (o * tc - ys[t]);
        let dzo = dh * tc * o * (1.0 - o);
        let dc2 = dc + dh * o * (1.0 - tc * tc);
        let dzf = dc2 * cp * f * (1.0 - f);
        let dzi = dc2 * g * i * (1.0 - i);
        let dzg = dc2 * i * (1.0 - g * g);
        dc = dc2 * f;
        for (k, dz) in [dzf, dzi, dzo, dzg].into_iter().enumerate() {
            dw[3 * k] += dz * x;
            dw[3 * k + 1] += dz * hp;
            dw[3 * k + 2] += dz;
        }
        dh = dzf * w[1] + dzi * w[4] + dzo * w[7] + dzg * w[10];
    }
}

/// The logistic map's `n`-th iterate.
pub fn logistic(r: f64, x0: f64, n: i64) -> f64 {
    let mut x = x0;
    for _ in 0..n {
        x = r * x * (1.0 - x);
    }
    x
}

/// `(d/dr, d/dx0)` of [`logistic`], accumulated alongside the iteration.
pub fn logistic_grad(r: f64, x0: f64, n: i64) -> (f64, f64) {
    let (mut x, mut dr, mut dx0) = (x0, 0.0, 1.0);
    for _ in 0..n {
        let s = r * (1.0 - 2.0 * x);
        dr = x * (1.0 - x) + s * dr;
        dx0 *= s;
        x = r * x * (1.0 - x);
    }
    (dr, dx0)
}

// ---------------------------------------------------------------------
// The second style (issue #19): the same functions written as
// `ir-examples/rosenbrock_style2.adz` and `ir-examples/gmm_style2.adz` are
// (helper functions, a `while` loop, a dense Q per component), so that
// "adze / rustc -O" compares like with like.

/// One pair's Rosenbrock term, as `term` in `rosenbrock_style2.adz`.
fn term(a: f64, b: f64) -> f64 {
    let u = 1.0 - a;
    let v = b - a.powi(2);
    u.powi(2) + 100.0 * v.powi(2)
}

/// The extended Rosenbrock function as a sum over pairs (`rosenbrock_pairs`).
pub fn rosenbrock2(x: &[f64]) -> f64 {
    let n = x.len();
    let mut total = 0.0;
    let mut i = 1;
    while i < n {
        total += term(x[i - 1], x[i]);
        i += 1;
    }
    total
}

/// `(d/da, d/db)` of [`term`].
fn term_grad(a: f64, b: f64) -> (f64, f64) {
    let u = 1.0 - a;
    let v = b - a.powi(2);
    (-2.0 * u - 400.0 * a * v, 200.0 * v)
}

/// Gradient of [`rosenbrock2`] into `g`, pair by pair.
pub fn rosenbrock2_grad(x: &[f64], g: &mut [f64]) {
    g.fill(0.0);
    let mut i = 1;
    while i < x.len() {
        let (da, db) = term_grad(x[i - 1], x[i]);
        g[i - 1] += da;
        g[i] += db;
        i += 1;
    }
}

/// `logsumexp` of `gmm_style2.adz`: the largest element found with `if`.
fn logsumexp2(v: &[f64]) -> f64 {
    let mut biggest = v[0];
    for &vi in &v[1..] {
        if vi > biggest {
            biggest = vi;
        }
    }
    let mut total = 0.0;
    for &vi in v {
        total += (vi - biggest).exp();
    }
    biggest + total.ln()
}

/// One component's dense Q (d×d, row-major) from its parameters.
fn build_q(params: &[f64], d: usize, q: &mut [f64]) {
    for row in 0..d {
        for col in 0..d {
            q[row * d + col] = if col == row {
                params[row].exp()
            } else if col < row {
                params[d + col * (2 * d - col - 1) / 2 + (row - col - 1)]
            } else {
                0.0
            };
        }
    }
}

/// `‖Q (x - mu)‖²` for a lower-triangular Q.
fn mahalanobis(q: &[f64], x: &[f64], mu: &[f64]) -> f64 {
    let d = x.len();
    let mut total = 0.0;
    for row in 0..d {
        let mut dot = 0.0;
        for col in 0..row + 1 {
            dot += q[row * d + col] * (x[col] - mu[col]);
        }
        total += dot * dot;
    }
    total
}

fn frobenius_sq(q: &[f64]) -> f64 {
    let mut s = 0.0;
    for &v in q {
        s += v * v;
    }
    s
}

fn log_wishart_prior(qs: &[f64], log_dets: &[f64], d: usize, gamma: f64, m: i64) -> f64 {
    let k = log_dets.len();
    let dof = d as i64 + m + 1;
    let c = (dof * d as i64) as f64 * (gamma.ln() - 0.5 * 2f64.ln());
    let mut out = 0.0;
    for comp in 0..k {
        let q = &qs[comp * d * d..(comp + 1) * d * d];
        out = out + 0.5 * gamma * gamma * frobenius_sq(q) - m as f64 * log_dets[comp];
    }
    out - k as f64 * c
}

/// The dense Qs and their log-determinants, as `gmm_loss` builds them.
fn gmm2_qs(p: &Gmm) -> (Vec<f64>, Vec<f64>) {
    let (d, k) = (p.d, p.k);
    let icf_sz = d * (d + 1) / 2;
    let dd = d * d;
    let mut qs = vec![0.0; k * dd];
    let mut log_dets = vec![0.0; k];
    for comp in 0..k {
        let params = &p.icf[comp * icf_sz..(comp + 1) * icf_sz];
        build_q(params, d, &mut qs[comp * dd..(comp + 1) * dd]);
        log_dets[comp] = params[..d].iter().sum();
    }
    (qs, log_dets)
}

/// The GMM objective as `gmm_loss` in `gmm_style2.adz`.
/// Each component's log-likelihood of the point `xi` (before the
/// log-sum-exp), into `scores`.
fn gmm2_scores(p: &Gmm, qs: &[f64], log_dets: &[f64], xi: &[f64], scores: &mut [f64]) {
    let (d, dd) = (p.d, p.d * p.d);
    for (comp, score) in scores.iter_mut().enumerate() {
        let maha = mahalanobis(
            &qs[comp * dd..(comp + 1) * dd],
            xi,
            &p.means[comp * d..(comp + 1) * d],
        );
        *score = p.alphas[comp] + log_dets[comp] - 0.5 * maha;
    }
}

pub fn gmm2(p: &Gmm) -> f64 {
    let (d, k, n) = (p.d, p.k, p.n);
    let (qs, log_dets) = gmm2_qs(p);
    let mut scores = vec![0.0; k];
    let mut loglik = 0.0;
    for i in 0..n {
        let xi = &p.x[i * d..(i + 1) * d];
        gmm2_scores(p, &qs, &log_dets, xi, &mut scores);
        loglik += logsumexp2(&scores);
    }
    let constant = -0.5 * (n * d) as f64 * (2.0 * std::f64::consts::PI).ln();
    constant + loglik - n as f64 * logsumexp2(&p.alphas)
        + log_wishart_prior(&qs, &log_dets, d, p.gamma, p.m)
}

/// Adds `scale ×` the gradient of [`mahalanobis`] with respect to `q` and
/// `mu` into `dq` and `dmu`.
fn mahalanobis_grad(q: &[f64], x: &[f64], mu: &[f64], scale: f64, dq: &mut [f64], dmu: &mut [f64]) {
    let d = x.len();
    for row in 0..d {
        let mut dot = 0.0;
        for col in 0..row + 1 {
            dot += q[row * d + col] * (x[col] - mu[col]);
        }
        let g = scale * 2.0 * dot;
        for col in 0..row + 1 {
            dq[row * d + col] += g * (x[col] - mu[col]);
            dmu[col] -= g * q[row * d + col];
        }
    }
}

/// Gradient of [`gmm2`] with respect to alphas, means and icf, by hand in
/// the same style: softmax weights per point, the gradient with respect to
/// each dense Q, then back to the parameters through [`build_q`].
pub fn gmm2_grad(p: &Gmm, da: &mut [f64], dm: &mut [f64], di: &mut [f64]) {
    let (d, k, n) = (p.d, p.k, p.n);
    let icf_sz = d * (d + 1) / 2;
    let dd = d * d;
    da.fill(0.0);
    dm.fill(0.0);
    di.fill(0.0);
    let (qs, log_dets) = gmm2_qs(p);
    let mut dqs = vec![0.0; k * dd];
    let mut dlog = vec![0.0; k];
    let mut scores = vec![0.0; k];
    for i in 0..n {
        let xi = &p.x[i * d..(i + 1) * d];
        gmm2_scores(p, &qs, &log_dets, xi, &mut scores);
        let lse = logsumexp2(&scores);
        for comp in 0..k {
            let w = (scores[comp] - lse).exp();
            da[comp] += w;
            dlog[comp] += w;
            mahalanobis_grad(
                &qs[comp * dd..(comp + 1) * dd],
                xi,
                &p.means[comp * d..(comp + 1) * d],
                -0.5 * w,
                &mut dqs[comp * dd..(comp + 1) * dd],
                &mut dm[comp * d..(comp + 1) * d],
            );
        }
    }
    // -n * logsumexp(alphas)
    let lse = logsumexp2(&p.alphas);
    for comp in 0..k {
        da[comp] -= n as f64 * (p.alphas[comp] - lse).exp();
    }
    // The prior: 0.5 gamma^2 ‖Q‖² - m log det Q, per component.
    let g2 = p.gamma * p.gamma;
    for (dq, q) in dqs.iter_mut().zip(&qs) {
        *dq += g2 * q;
    }
    for dl in dlog.iter_mut() {
        *dl -= p.m as f64;
    }
    // Back through build_q and the log-determinants.
    for comp in 0..k {
        let dq = &dqs[comp * dd..(comp + 1) * dd];
        let q = &qs[comp * dd..(comp + 1) * dd];
        let dparams = &mut di[comp * icf_sz..(comp + 1) * icf_sz];
        for row in 0..d {
            dparams[row] += dlog[comp] + dq[row * d + row] * q[row * d + row];
            for col in 0..row {
                dparams[d + col * (2 * d - col - 1) / 2 + (row - col - 1)] += dq[row * d + col];
            }
        }
    }
}
