//! The `ssdwatch` binary: everything it does is in `ssdwatch::cli`.

fn main() -> std::process::ExitCode {
    ssdwatch::cli::main()
}
