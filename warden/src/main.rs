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
