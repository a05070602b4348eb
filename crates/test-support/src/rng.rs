//! The random source of the program generators: a tiny deterministic
//! xorshift64*, so that a seed (from proptest) names one program that a
//! failure can print and a human rerun.

/// xorshift64*; never zero.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// The source for `seed` (any seed; the low bit is set, as xorshift
    /// must not start at zero).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The source for `seed` mixed by splitmix64 first, so that nearby
    /// seeds (1, 2, 3, ..) start far apart: the differential fuzzer's
    /// seeding (a seed names one of its programs; do not change it).
    pub fn splitmix(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(z | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `xs` (not empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}
