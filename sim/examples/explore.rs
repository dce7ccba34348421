//! Exhaustive small scopes from the command line (`zkelect_sim::explore`):
//!
//! `cargo run -p zkelect-sim --release --example explore -- --candidates 3 --faults 2 --depth 4`
//! `cargo run -p zkelect-sim --release --example explore -- --candidates 2 --faults 1 --deviations 1`
//!
//! Prints the runs, distinct executions, fault plans and states checked, and
//! the wall time; exits 1 with the failing run's report if a checker fails.

use std::time::Instant;

use zkelect_sim::canary::Canary;
use zkelect_sim::explore::{explore, Scope, Search};

fn main() {
    let mut scope = Scope {
        candidates: 2,
        faults: 1,
        search: Search::Windows { depth: 4 },
        canary: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        let number = || {
            value.parse::<usize>().unwrap_or_else(|_| {
                eprintln!("{flag} wants a number, got {value:?}");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--candidates" => scope.candidates = number(),
            "--faults" => scope.faults = number(),
            "--depth" => scope.search = Search::Windows { depth: number() },
            "--deviations" => scope.search = Search::Deviations { max: number() },
            "--canary" => {
                scope.canary = Some(Canary::from_flag(&value).unwrap_or_else(|| {
                    eprintln!("no canary {value:?}");
                    std::process::exit(2)
                }))
            }
            _ => {
                eprintln!(
                    "usage: explore [--candidates N] [--faults N] [--depth N | --deviations N] [--canary FLAG]"
                );
                std::process::exit(2)
            }
        }
    }
    // The search's own wall time, for the report; the simulator has no clock.
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let out = explore(scope);
    println!("{scope:?}: {out}");
    println!("wall time {:.1}s", started.elapsed().as_secs_f64());
    if out.failure.is_some() {
        std::process::exit(1);
    }
}
