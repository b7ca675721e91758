//! Builds the chaos mode's preload libraries (`shim/lazy_aof.c`,
//! `shim/fake_clock.c`) with the C compiler cc finds, as shared objects in
//! OUT_DIR that `chaos::lazy_aof` and `chaos::fake_clock` embed. A C
//! compiler is already needed to build sim (mlua builds its Lua from C).

use std::{env, path::PathBuf, process::Command};

fn main() {
    let out_dir =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    let compiler = cc::Build::new().get_compiler();
    for name in ["lazy_aof", "fake_clock"] {
        let source = format!("shim/{name}.c");
        println!("cargo::rerun-if-changed={source}");
        let out = out_dir.join(format!("lib{name}.so"));
        let status = Command::new(compiler.path())
            .args([
                "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
            ])
            .arg(&out)
            .arg(&source)
            .args(["-ldl", "-lpthread"])
            .status()
            .unwrap_or_else(|error| {
                panic!("running the C compiler {:?}: {error}", compiler.path())
            });
        assert!(status.success(), "the C compiler failed on {source}");
    }
}
