#![forbid(unsafe_code)]

use aromba_warden::cli::{self, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match cli::parse_os(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aromba-warden: {e}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Help => {
            print!("{}", cli::HELP);
            ExitCode::SUCCESS
        }
        Command::Version => {
            println!("aromba-warden {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::PolicyRender => {
            print!("{}", aromba_warden::policy::render());
            ExitCode::SUCCESS
        }
        Command::PolicyCheck { cmd, args } => {
            match aromba_warden::policy::check(aromba_warden::policy::Table::Allow, &cmd, &args) {
                Ok(allowed) => {
                    println!(
                        "allowed by {}: {cmd} {}",
                        allowed.rule_name(),
                        allowed.args.join(" ")
                    );
                    ExitCode::SUCCESS
                }
                Err(refused) => {
                    println!("refused: {}", refused.reason);
                    if let Some(signal) = refused.signal {
                        println!("ladder signal: {signal}");
                    }
                    ExitCode::from(1)
                }
            }
        }
        Command::Redact | Command::RedactCut => {
            let cut = command == Command::RedactCut;
            let result = aromba_warden::redact_cmd::run(
                std::io::stdin().lock(),
                std::io::stdout().lock(),
                std::io::stderr().lock(),
                cut,
            );
            match result {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("aromba-warden: redact could not copy stdin to stdout: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
