//! The `zkelect` command: everything is in the library half (`zkelect_cli`),
//! whose command-line parsing can then be tested and fuzzed on its own.

fn main() -> std::process::ExitCode {
    zkelect_cli::main()
}
