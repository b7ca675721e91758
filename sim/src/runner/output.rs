//! Standard output, written so that a reader that leaves early (`| head`)
//! ends it quietly. A leaf: it imports nothing of the crate.

/// Writes `text` to stdout. A reader that closed early (`sim replay
/// --history | head`, `sim run | head`) is no error; any other failure is
/// said on stderr. Every command's stdout goes through it.
pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: writing the output: {error}");
    }
}
