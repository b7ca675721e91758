//! Computes the SHA1 of the Lua script at build time, so that the `EVALSHA`
//! digest is a constant that can never drift from the script text.

use std::{env, fs, path::Path};

fn main() {
    let out_dir = env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let path = "src/scripts/lock.lua";
    println!("cargo::rerun-if-changed={path}");
    let source = fs::read_to_string(path).expect("the Lua script ships with the crate");
    let digest = sha1_smol::Sha1::from(source.as_bytes())
        .digest()
        .to_string();
    let generated = format!(
        "/// SHA1 of `lock.lua`, as `EVALSHA` expects it.\npub(crate) const LOCK_SHA1: &str = \"{digest}\";\n"
    );
    fs::write(Path::new(&out_dir).join("script_sha1.rs"), generated).expect("OUT_DIR is writable");
}
