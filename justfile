# Recipes for common tasks; every one is a plain cargo command underneath.

# Plain `just` lists the recipes.
default:
    @just --list

# Run the whole test suite (what CI runs).
test:
    cargo test --workspace

# Accept new expected output (expected files and filetests; docs/testing.md),
# printing a diff of each rewrite.
bless:
    ADZE_BLESS=1 cargo test --workspace

# Benchmarks (criterion): both benches, `jit` and `workloads`; see
# docs/performance.md.
bench:
    cargo bench --bench jit --bench workloads

# A Python venv with JAX (CPU) for the JAX table of `cargo bench --bench
# workloads`, in the target directory where the bench looks for it:
# $CARGO_TARGET_DIR/jax-venv, or target/jax-venv (docs/performance.md).
jax-venv:
    python3 -m venv "${CARGO_TARGET_DIR:-target}/jax-venv"
    "${CARGO_TARGET_DIR:-target}/jax-venv/bin/pip" install --upgrade pip 'jax[cpu]' numpy
    "${CARGO_TARGET_DIR:-target}/jax-venv/bin/python" -c 'import jax, sys; print("jax", jax.__version__, "in", sys.prefix)'

# Compile time per stage against program size (docs/performance.md).
scaling:
    cargo build --release && python3 benches/scaling.py

fmt:
    cargo fmt --all

lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Print the IR of FILE after every stage.
dump FILE:
    cargo run --release -- dump {{FILE}} --stage all

# The README's example.
example:
    cargo run --release -- run ir-examples/seed.adz --fn g_custom --arg 'x=[2.0]'

# The differential fuzzer of derivatives (docs/robustness.md).
fuzz-diff COUNT="1000":
    cargo run --release -p adze-fuzz-diff -- --seed 0 --count {{COUNT}} --order-max 3 --reduce
