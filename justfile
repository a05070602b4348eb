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
