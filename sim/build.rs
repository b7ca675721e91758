//! Builds the chaos mode's `lazy_aof` preload library (`shim/lazy_aof.c`)
//! with the C compiler cc finds, as a shared object in OUT_DIR that
//! `chaos::lazy_aof` embeds. A C compiler is already needed to build sim
//! (mlua builds its Lua from C).

use std::{env, path::PathBuf, process::Command};

fn main() {
    let source = "shim/lazy_aof.c";
    println!("cargo::rerun-if-changed={source}");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"))
        .join("liblazy_aof.so");
    let compiler = cc::Build::new().get_compiler();
    let status = Command::new(compiler.path())
        .args([
            "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
        ])
        .arg(&out)
        .arg(source)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|error| panic!("running the C compiler {:?}: {error}", compiler.path()));
    assert!(status.success(), "the C compiler failed on {source}");
}
