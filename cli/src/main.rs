//! The `zkelect` command.

mod args;
mod exit;
mod lease;
mod queue_view;
mod supervise;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let _ = (&cli, exit::Code::Other);
    ExitCode::SUCCESS
}
