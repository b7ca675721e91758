//! The `sim` command line: runs scenario files.

fn main() {
    println!("sim: {} scripts", lock_core::scripts::ALL.len());
}
