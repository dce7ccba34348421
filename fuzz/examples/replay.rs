//! Runs one target over files, on the stable toolchain without the engine:
//! `cargo run -p zkelect-fuzz --example replay -- TARGET FILE...` (a finding
//! from `sim/fuzz/artifacts/<target>/`, say). With `ZKELECT_FUZZ_TRACE=1`, the
//! `candidate` and `observer` targets print every input they feed.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: replay TARGET FILE...");
        return ExitCode::from(2);
    };
    let Some(run) = zkelect_fuzz::target(&name) else {
        let names: Vec<&str> = zkelect_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("no target {name:?}; the targets: {}", names.join(", "));
        return ExitCode::from(2);
    };
    for file in args {
        match std::fs::read(&file) {
            Ok(bytes) => {
                run(&bytes);
                println!("{file}: ok");
            }
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
