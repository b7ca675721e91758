//! The deterministic simulation harness for `lock-core`.

fn main() {
    println!("sim: {} scripts", lock_core::scripts::ALL.len());
}
