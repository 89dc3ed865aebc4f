//! placeholder, being written

pub(crate) fn run(_args: &[String]) -> std::process::ExitCode {
    eprintln!("not yet built");
    std::process::ExitCode::from(2)
}
