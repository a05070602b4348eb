//! Prints the IR of a `.adz` file, or its diagnostics: `cargo run -p adze-lang --example adzc -- FILE`.
fn main() {
    let path = std::env::args().nth(1).expect("usage: adzc FILE");
    let bytes = std::fs::read(&path).expect("cannot read the file");
    match adze_lang::compile_bytes(&path, &bytes) {
        Ok(m) => {
            print!("{m}");
            if let Err(e) = adze_ir::verify::verify_module(&m) {
                eprintln!("VERIFIER: {e}");
            }
        }
        Err(d) => eprint!("{}", d.render()),
    }
}
